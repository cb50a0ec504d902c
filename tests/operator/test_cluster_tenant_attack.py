"""Session 14: issue #26's boundary attacked as the tenant with the fewest rights.

A user whose only Role is create/update on Brains and MemorySources in one namespace (impersonated
with ``kubectl --as`` on the real kube-apiserver) tries what the first round of tests did not:

- a gateway model whose ``model`` or ``name`` is ``os.environ/<VAR>``: LiteLLM resolves every such
  string of its config from the gateway's environment, so the model list (``GET /v1/models``, which
  any agent key reads) or an error would carry the master key, the database DSN or a model key;
- a Brain whose name makes a child's name that of an object the operator did not make (another
  team's Service, ConfigMap, CronJob): a forced server-side apply would take it over, and deleting
  the Brain would delete it;
- a MemorySource whose name is too long to be a label value: every apply of the Brain failed on it,
  NetworkPolicies (applied last) included.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.poll import wait_for

from .conftest import Kubectl, Operator
from .helpers import sample
from .tenancy import Tenant, grant

pytestmark = pytest.mark.cluster


@pytest.fixture
def tenant(kc: Kubectl) -> Tenant:
    tenant = grant(kc, f"tenant-{uuid.uuid4().hex[:6]}")
    for verb, resource in [("create", "services"), ("patch", "configmaps"), ("delete", "cronjobs")]:
        assert not tenant.can(verb, resource), f"the tenant may {verb} {resource}"
    return tenant


@pytest.fixture
def operator_(kc: Kubectl, tmp_path: Path) -> Iterator[Operator]:
    op = Operator(kc.cluster, kc.ns, tmp_path / "operator.log").start()
    try:
        yield op
    finally:
        op.stop()
        for b in (kc.get("brains") or {}).get("items", []):
            kc("patch", "brain", b["metadata"]["name"], "--type=merge", "-p",
               '{"metadata":{"finalizers":null}}', check=False)  # fmt: skip


def _brain(name: str, model: dict[str, str] | None = None) -> dict[str, Any]:
    doc = sample("brain.yaml")
    doc["metadata"]["name"] = name
    if model:
        doc["spec"]["gateway"]["models"].append(model)
    return doc


@pytest.mark.parametrize(
    ("field", "model"),
    [
        ("models[1].model", {"name": "leak", "model": "os.environ/BRAIN_MASTER_KEY"}),
        ("models[1].name", {"name": "os.environ/BRAIN_DATABASE_URL", "model": "openai/echo"}),
    ],
    ids=["model", "name"],
)
def test_a_model_that_names_an_environment_variable_is_refused(
    kc: Kubectl, tenant: Tenant, field: str, model: dict[str, str]
) -> None:
    proc = tenant.create(_brain(f"env-{uuid.uuid4().hex[:6]}", model))
    assert proc.returncode != 0, "the API server stored a model LiteLLM would resolve from the environment"
    assert "Forbidden" not in proc.stderr, proc.stderr
    assert f"spec.gateway.{field}: Invalid value" in proc.stderr, proc.stderr
    assert "os.environ/" in proc.stderr  # the message says what is refused
    assert kc("get", "brains", "-o", "name").stdout.strip() == ""


def test_a_brain_name_does_not_take_over_objects_the_operator_did_not_make(
    kc: Kubectl, tenant: Tenant, operator_: Operator
) -> None:
    # Another team's objects, whose names a Brain called `billing` would render.
    theirs: dict[str, dict[str, Any]] = {
        "configmap": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "billing-gateway-config"},
                      "data": {"litellm.yaml": "theirs"}},
        "service": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "billing-gateway"},
                    "spec": {"selector": {"app": "billing"}, "ports": [{"name": "http", "port": 4000}]}},
    }  # fmt: skip
    for doc in theirs.values():
        kc.apply(doc)
    before = {kind: kc.get(kind, doc["metadata"]["name"]) for kind, doc in theirs.items()}

    proc = tenant.create(_brain("billing"))
    assert proc.returncode == 0, proc.stderr

    def refused() -> dict[str, Any] | None:
        b = kc.get("brain", "billing")
        ready = {c["type"]: c for c in (b.get("status") or {}).get("conditions") or []}.get("Ready") or {}
        return ready if ready.get("reason") == "ChildNotOwned" else None

    ready = wait_for("Brain billing refuses to take over", refused, timeout=60)
    assert ready["status"] == "False"
    for name in ("ConfigMap/billing-gateway-config", "Service/billing-gateway"):
        assert name in ready["message"], ready["message"]
    assert kc.get("brain", "billing")["status"]["phase"] == "Failed"
    for kind, doc in theirs.items():
        now = kc.get(kind, doc["metadata"]["name"])
        assert "ownerReferences" not in now["metadata"], now["metadata"]
        assert now["metadata"]["resourceVersion"] == before[kind]["metadata"]["resourceVersion"], kind
    assert kc.get("configmap", "billing-gateway-config")["data"] == {"litellm.yaml": "theirs"}
    assert kc.get("service", "billing-gateway")["spec"]["selector"] == {"app": "billing"}
    events = [e for e in kc.get("events")["items"] if e["involvedObject"]["name"] == "billing"]
    assert any(e["reason"] == "ChildNotOwned" and e["type"] == "Warning" for e in events), events

    # Its owner removes them: the Brain is rendered in full on the next reconcile.
    kc("delete", "configmap", "billing-gateway-config")
    kc("delete", "service", "billing-gateway")
    wait_for(
        "the Brain's own gateway Service",
        lambda: (kc.get("service", "billing-gateway") or {}).get("metadata", {}).get("ownerReferences"),
        timeout=60,
    )


def test_a_memorysource_name_that_cannot_be_a_label_is_refused(kc: Kubectl, tenant: Tenant) -> None:
    doc = sample("memorysource-git.yaml")
    doc["metadata"]["name"] = "s" * 64  # a DNS subdomain, but not a label value
    proc = tenant.create(doc)
    assert proc.returncode != 0, "stored: every apply of its Brain would fail on the label"
    assert "Forbidden" not in proc.stderr, proc.stderr
    assert "metadata.name must be at most 63 characters" in proc.stderr, proc.stderr
    doc["metadata"]["name"] = "s" * 63
    assert tenant.create(doc).returncode == 0


def test_a_memorysource_cannot_keep_its_brain_unfenced(
    kc: Kubectl, tenant: Tenant, operator_: Operator
) -> None:
    """A request above the default limit (`resources.requests.memory: 4Gi`, limit 1Gi) made the
    ingest CronJob invalid: the Brain's apply stopped there, after the database's StatefulSet and
    before the NetworkPolicies that fence it. Now the fence is applied first, and a request alone
    raises the default limit to it."""
    kc.provide_volume("data-team-db-0")
    source = sample("memorysource-git.yaml")
    source["spec"]["resources"] = {"requests": {"memory": "4Gi", "cpu": "2"}}
    assert tenant.create(source).returncode == 0
    assert tenant.create(_brain("team")).returncode == 0

    def fenced() -> bool:  # the database's policy among them (they are applied one by one)
        items = kc.get("networkpolicies", selector="brain.dev/brain=team")["items"]
        return "team-database" in {p["metadata"]["name"] for p in items}

    wait_for("the Brain's database NetworkPolicy", fenced, timeout=60)
    cron = wait_for("the ingest CronJob", lambda: kc.get("cronjob", "team-ingest-team-memories"), timeout=60)
    (container,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"cpu": "2", "memory": "4Gi"}
    assert container["resources"]["requests"] == {"cpu": "2", "memory": "4Gi"}
