"""A tenant who may write Brains and MemorySources, and nothing else, cannot make the operator send
a Secret anywhere (issue #26).

The operator reads Secrets with its own rights; a tenant in this test has none (the real
kube-apiserver checks it: every write goes through impersonation, ``kubectl --as``, as a user whose
only Role is create/update on Brains and MemorySources in one namespace). The tenant names an
unlabelled Secret through every field that takes a Secret — a model's ``apiKeySecretRef`` with an
``apiBase`` of the test's listener, ``masterKeySecretRef``, the tunnel token, an external database,
a MemorySource's ``credentialsSecretRef`` with a git URL of the listener — and points the
``brain.dev/health-url`` annotation at the listener. Each is refused or ignored: nothing the
operator renders names that Secret, the listener hears nothing, and the Secret's value is in no
status, Event or operator log line. The refusals say which Secret lacks which label; a labelled
Secret (and the Brain's own generated master key) keeps working, so the check is not vacuous.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.kit.poll import wait_for

from .conftest import Kubectl, Operator
from .helpers import sample
from .tenancy import grant

pytestmark = pytest.mark.cluster

CANARY = f"canary-{uuid.uuid4().hex}"
STOLEN = "crown-jewels"  # the Secret the tenant must not reach (no brain.dev/secret-use label)
LABELLED = "llm-key"  # a Secret its owner labelled for model keys


class Listener:
    """An HTTP server of the test's, recording every request (line, headers, body) it receives."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        seen = self.seen

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode(errors="replace") if length else ""
                seen.append(f"{self.command} {self.path}\n{self.headers}\n{body}")
                payload = json.dumps({"status": "ok", "database": "ok", "embedder": "ok"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _record

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def on(self, path: str) -> list[str]:
        return [r for r in self.seen if r.split(" ", 2)[1].startswith(path)]


@pytest.fixture
def listener() -> Iterator[Listener]:
    ears = Listener()
    try:
        yield ears
    finally:
        ears.server.shutdown()


@pytest.fixture
def tenant(kc: Kubectl) -> str:
    """A user whose only rights are create and update on Brains and MemorySources in kc's namespace."""
    tenant = grant(kc, f"tenant-{kc.ns}", role="brain-writer")
    assert tenant.can("update", "memorysources.brain.dev")
    assert not any(tenant.can(v, "secrets") for v in ("get", "list", "create", "update"))  # no Secret rights
    assert not tenant.can("create", "pods")
    return tenant.user


@pytest.fixture
def operator_polling(kc: Kubectl, tmp_path: Path, listener: Listener) -> Iterator[Operator]:
    """The operator with its defaults (no --allow-health-url-override), its health template aimed at
    the listener's /gateway/<namespace>/<name>: the operator-rendered URL, the one the key may reach."""
    template = listener.url + "/gateway/{namespace}/{name}"
    op = Operator(kc.cluster, kc.ns, tmp_path / "operator.log", "--health-url-template", template).start()
    try:
        yield op
    finally:
        op.stop()
        for brain in (kc.get("brains") or {}).get("items", []):
            kc("patch", "brain", brain["metadata"]["name"], "--type=merge", "-p",
               '{"metadata":{"finalizers":null}}', check=False)  # fmt: skip


def secret(name: str, use: str | None, **data: str) -> dict[str, Any]:
    labels = {"brain.dev/secret-use": use} if use else {}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "labels": labels},
            "stringData": data}  # fmt: skip


def as_tenant(kc: Kubectl, user: str, verb: str, doc: dict[str, Any]) -> None:
    proc = kc(verb, "--as", user, "-f", "-", input=json.dumps(doc), check=False)
    assert proc.returncode == 0, f"the tenant's {verb} was refused: {proc.stderr}"


def tenant_update(
    kc: Kubectl, user: str, kind: str, name: str, change: Callable[[dict[str, Any]], None]
) -> None:
    """A read-modify-update as the tenant (the read as admin: the tenant's Role has no get). The
    operator writes the object too (status, kopf's annotations): on a Conflict, read again."""
    for _ in range(20):
        doc = kc.get(kind, name)
        doc.pop("status", None)
        doc["metadata"].pop("managedFields", None)
        change(doc)
        proc = kc("replace", "--as", user, "-f", "-", input=json.dumps(doc), check=False)
        if proc.returncode == 0:
            return
        assert "Conflict" in proc.stderr, f"the tenant's update was refused: {proc.stderr}"
        time.sleep(0.2)
    raise AssertionError(f"{kind} {name}: 20 updates in a row met a Conflict")


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def rendered(kc: Kubectl) -> str:
    """Every workload and config the operator wrote in the namespace, as text."""
    kinds = "deployments,statefulsets,cronjobs,jobs,configmaps,services"
    return json.dumps(kc.get(kinds, selector="app.kubernetes.io/managed-by=brain-operator")["items"])


def test_a_tenant_cannot_send_an_unlabelled_secret_anywhere(
    kc: Kubectl, tenant: str, listener: Listener, operator_polling: Operator
) -> None:
    kc.provide_volume("data-team-db-0")
    kc.apply(
        secret(STOLEN, None, apiKey=CANARY, masterKey=CANARY, token=CANARY, dsn=f"postgresql://{CANARY}")
    )
    kc.apply(secret(LABELLED, "model-api-key", apiKey="sk-labelled"))

    # 1. A Brain that names only a labelled Secret: the model gets its key.
    brain = sample("brain.yaml")
    brain["spec"]["gateway"]["models"].append(
        {"name": "paid", "model": "openai/gpt-4o", "apiKeySecretRef": {"name": LABELLED, "key": "apiKey"}}
    )
    as_tenant(kc, tenant, "create", brain)
    wait_for("the gateway Deployment", lambda: kc.get("deployment", "team-gateway"))
    wait_for(
        "SecretsPermitted True",
        lambda: conditions(kc.get("brain", "team")).get("SecretsPermitted", {}).get("status") == "True",
    )

    # 2. The tenant updates it to name the unlabelled Secret everywhere, and aims the health
    #    annotation and a model's apiBase at the listener.
    def hostile(doc: dict[str, Any]) -> None:
        doc["metadata"].setdefault("annotations", {})["brain.dev/health-url"] = listener.url + "/annotation"
        gateway = doc["spec"]["gateway"]
        gateway["models"].append({"name": "exfil", "model": "openai/gpt-4o", "apiBase": listener.url + "/v1",
                                  "apiKeySecretRef": {"name": STOLEN, "key": "apiKey"}})  # fmt: skip
        gateway["auth"] = {"masterKeySecretRef": {"name": STOLEN, "key": "masterKey"}}
        doc["spec"]["tunnel"] = {
            "tokenSecretRef": {"name": STOLEN, "key": "token"},
            "hostname": "x.example.com",
        }

    tenant_update(kc, tenant, "brain", "team", hostile)

    external = sample("brain.yaml")
    external["metadata"]["name"] = "ext"
    external["spec"]["database"] = {"external": {"secretRef": {"name": STOLEN, "key": "dsn"}}}
    as_tenant(kc, tenant, "create", external)

    # The Brain's name picks the Secrets the operator generates: one already there is not taken over.
    kc.apply(secret("payments-master-key", None, masterKey=CANARY))
    payments = sample("brain.yaml")
    payments["metadata"]["name"] = "payments"
    as_tenant(kc, tenant, "create", payments)

    source = sample("memorysource-git.yaml")
    source["metadata"]["name"] = "private"
    # https: the operator refuses http:// sources by default (docs/security.md, "Git sources"); the
    # listener's address all the same, so a credential sent there would be heard
    source["spec"]["git"]["url"] = listener.url.replace("http://", "https://") + "/team.git"
    source["spec"]["git"]["credentialsSecretRef"] = {"name": STOLEN, "key": "token"}
    as_tenant(kc, tenant, "create", source)

    # Each refusal is a condition naming the field, the Secret and the label to add.
    def refused(kind: str, name: str) -> dict[str, Any] | None:
        cond = conditions(kc.get(kind, name)).get("SecretsPermitted") or {}
        return cond if cond.get("reason") == "SecretNotPermitted" else None

    team = wait_for("Brain team refuses three references", lambda: refused("brain", "team"), timeout=60)
    for field in (
        "spec.gateway.models[2].apiKeySecretRef",
        "spec.gateway.auth.masterKeySecretRef",
        "spec.tunnel.tokenSecretRef",
    ):
        assert f"{field}: Secret {STOLEN}" in team["message"], team["message"]
    assert f"kubectl label secret {STOLEN} brain.dev/secret-use=model-api-key" in team["message"]
    assert "brain.dev/secret-use=master-key" in team["message"]
    assert "brain.dev/secret-use=tunnel-token" in team["message"]
    assert "models[1]" not in team["message"]  # the labelled one is used

    ext = wait_for("Brain ext Failed", lambda: refused("brain", "ext"), timeout=60)
    assert "spec.database.external.secretRef" in ext["message"] and "database-url" in ext["message"]
    ext_ready = conditions(kc.get("brain", "ext"))["Ready"]
    assert (ext_ready["status"], ext_ready["reason"]) == ("False", "SecretNotPermitted")
    assert kc.get("brain", "ext")["status"]["phase"] == "Failed"

    taken = wait_for("Brain payments refused", lambda: refused("brain", "payments"), timeout=60)
    assert "Secret payments-master-key exists and was not generated for Brain payments" in taken["message"]
    kept = kc.get("secret", "payments-master-key")
    assert "ownerReferences" not in kept["metadata"] and "labels" not in kept["metadata"]
    assert kc.get("deployment", "payments-gateway") is None

    src = wait_for("MemorySource private refused", lambda: refused("msrc", "private"), timeout=60)
    assert "spec.git.credentialsSecretRef" in src["message"] and "git-credentials" in src["message"]
    assert conditions(kc.get("msrc", "private"))["Ready"]["reason"] == "SecretNotPermitted"

    def warned() -> set[str]:
        return {
            e["involvedObject"]["name"]
            for e in kc.get("events")["items"]
            if e["reason"] == "SecretNotPermitted" and e["type"] == "Warning" and STOLEN in e["message"]
        }

    wait_for("a Warning Event on each refusing object", lambda: warned() >= {"team", "ext", "private"})
    assert any(
        e["reason"] == "SecretNotPermitted" and e["involvedObject"]["name"] == "payments"
        for e in kc.get("events")["items"]
    )

    # What was rendered meanwhile: the refused model has no key, the gateway keeps the generated
    # master key, there is no tunnel, the external Brain has no children and the source no Job.
    def settled() -> bool:
        dep = kc.get("deployment", "team-gateway")
        return any(c["name"] == "gateway" for c in dep["spec"]["template"]["spec"]["containers"]) and (
            "exfil" in json.dumps(kc.get("configmap", "team-gateway-config"))
        )

    wait_for("the updated gateway config", settled, timeout=60)
    dep = kc.get("deployment", "team-gateway")
    containers = {c["name"]: c for c in dep["spec"]["template"]["spec"]["containers"]}
    assert "cloudflared" not in containers
    env = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in containers["gateway"]["env"]}
    assert env["BRAIN_MASTER_KEY"] == {"name": "team-master-key", "key": "masterKey"}
    assert {"name": LABELLED, "key": "apiKey"} in env.values()
    assert kc.get("deployment", "ext-gateway") is None
    assert kc.get("cronjobs", selector="brain.dev/memorysource=private")["items"] == []
    assert kc.get("jobs", selector="brain.dev/memorysource=private")["items"] == []
    assert STOLEN not in rendered(kc)

    # The health poll: the annotation is ignored (no request reaches it); the operator's own URL is
    # read with the Brain's generated master key, never the refused one.
    generated = base64.b64decode(kc.get("secret", "team-master-key")["data"]["masterKey"]).decode()
    polls = wait_for("a health poll of team", lambda: listener.on(f"/gateway/{kc.ns}/team"), timeout=30)
    assert any(f"Bearer {generated}" in p for p in polls), polls[-1]
    assert listener.on("/annotation") == []
    payments_polls = wait_for("a health poll of payments", lambda: listener.on(f"/gateway/{kc.ns}/payments"))
    assert not [p for p in payments_polls if "Authorization" in p]  # no key of its own, none taken
    assert listener.on("/v1") == [] and listener.on("/team.git") == []

    # The value is nowhere a tenant or an operator's reader looks.
    looked = {
        "listener": "\n".join(listener.seen),
        "operator log": operator_polling.log_path.read_text(errors="replace"),
        "statuses": json.dumps([kc.get(k)["items"] for k in ("brains", "memorysources")]),
        "events": json.dumps(kc.get("events")["items"]),
        "rendered": rendered(kc),
    }
    assert [where for where, text in looked.items() if CANARY in text] == []

    # Labelling the Secret is the owner's opt-in, and it is enough: the source is imported.
    kc("label", "secret", STOLEN, "brain.dev/secret-use=git-credentials")
    (job,) = wait_for(
        "the import Job once the Secret is labelled",
        lambda: kc.get("jobs", selector="brain.dev/memorysource=private")["items"],
        timeout=60,
    )
    assert STOLEN in json.dumps(job["spec"]["template"]["spec"]["containers"])
    assert conditions(kc.get("msrc", "private"))["SecretsPermitted"]["status"] == "True"
