"""The operator on the real control plane (kwok nodes make pods Running): samples become a Ready
stack; changes touch only what they affect; drift is restored; deletion garbage-collects; a killed
operator converges without duplicates; index health flows into status and metrics."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from brain.core.contract import DB_ROLES
from tests.kit.poll import wait_for

from .conftest import Kubectl, Operator
from .helpers import deep_set, sample

pytestmark = pytest.mark.cluster

CHILD_KINDS = (
    "secrets,configmaps,services,statefulsets,deployments,cronjobs,poddisruptionbudgets,networkpolicies"
)
EXPECTED = {
    ("Secret", "team-db-credentials"),
    *(
        ("Secret", f"team-db-role-{r}")
        for r in ("owner", "gateway", "ingest", "distill", "digest", "reindex", "backup")
    ),
    ("Secret", "team-master-key"),
    ("StatefulSet", "team-db"),
    ("Service", "team-db"),
    ("Deployment", "team-embedder"),
    ("Service", "team-embedder"),
    ("ConfigMap", "team-gateway-config"),
    ("Deployment", "team-gateway"),
    ("Service", "team-gateway"),
    ("CronJob", "team-distill"),
    ("CronJob", "team-digest"),
    ("ConfigMap", "team-source-team-memories"),
    ("CronJob", "team-ingest-team-memories"),
    ("PodDisruptionBudget", "team-gateway"),
    *(
        ("NetworkPolicy", f"team-{c}")
        for c in ("gateway", "embedder", "database", "ingest", "distill", "digest", "reindex", "backup")
    ),
}


def children(kc: Kubectl) -> dict[tuple[str, str], dict[str, Any]]:
    items = kc.get(CHILD_KINDS, selector="brain.dev/brain=team")["items"]
    return {(o["kind"], o["metadata"]["name"]): o for o in items}


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def apply_samples(kc: Kubectl) -> None:
    kc.provide_volume("data-team-db-0")
    for name in ("brain.yaml", "routingpolicy.yaml", "memorysource-git.yaml"):
        kc.apply(sample(name))


def wait_ready(kc: Kubectl, generation: int | None = None, timeout: float = 90) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        brain = kc.get("brain", "team")
        cond = conditions(brain).get("Ready", {})
        gen = generation or brain["metadata"]["generation"]
        ok = cond.get("status") == "True" and brain["status"].get("observedGeneration") == gen
        return brain if ok else None

    brain: dict[str, Any] = wait_for("Brain team Ready", ready, timeout=timeout)
    return brain


def versions(kc: Kubectl) -> dict[tuple[str, str], str]:
    """What changes when we write: generation where the kind has one, else resourceVersion."""
    return {
        key: str(o["metadata"].get("generation") or o["metadata"]["resourceVersion"])
        for key, o in children(kc).items()
    }


def test_samples_become_a_ready_stack(kc: Kubectl, operator: Operator) -> None:
    apply_samples(kc)
    got = wait_for("every child", lambda: set(children(kc)) >= EXPECTED, timeout=60)
    assert got
    brain = kc.get("brain", "team")
    uid = brain["metadata"]["uid"]
    for key, obj in children(kc).items():
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "brain-operator", key
        assert labels["app.kubernetes.io/part-of"] == "brain-operator", key
        assert labels["app.kubernetes.io/instance"] == "team", key
        (ref,) = obj["metadata"]["ownerReferences"]
        assert ref["uid"] == uid and ref["controller"] is True and ref["kind"] == "Brain", key
        managers = {
            m["manager"] for m in obj["metadata"].get("managedFields", []) if m["operation"] == "Apply"
        }
        assert managers == {"brain-operator"}, key
    brain = wait_ready(kc)
    conds = conditions(brain)
    for ctype in ("Ready", "DatabaseReady", "EmbedderReady", "GatewayReady"):
        assert conds[ctype]["status"] == "True", conds[ctype]
        assert conds[ctype]["observedGeneration"] == brain["metadata"]["generation"]
        assert conds[ctype]["lastTransitionTime"]
    assert brain["status"]["phase"] == "Ready"
    assert brain["status"]["endpoints"]["gateway"] == f"http://team-gateway.{kc.ns}.svc:4000"
    pods = kc.get("pods", selector="app.kubernetes.io/component in (gateway,embedder,database)")["items"]
    assert len(pods) == 4 and all(p["status"]["phase"] == "Running" for p in pods)  # 2 gateways, embedder, db
    rp = wait_for("policy applied", lambda: conditions(kc.get("rpol", "smart-router")).get("Applied"))
    assert rp["status"] == "True"
    assert kc.get("rpol", "smart-router")["status"]["configHash"] == brain["status"]["configHash"]
    jobs = kc.get("jobs", selector="brain.dev/memorysource=team-memories")["items"]
    assert len(jobs) == 1  # the immediate import
    src = kc.get("msrc", "team-memories")
    assert src["status"]["lastJob"] == jobs[0]["metadata"]["name"]
    assert kc.cluster.kubectl("get", "brain", "-n", kc.ns).stdout.split("\n")[0].split() == [
        "NAME",
        "READY",
        "PHASE",
        "ENTRIES",
        "GATEWAY",
        "AGE",
    ]


def test_spec_changes_touch_only_what_they_affect(kc: Kubectl, operator: Operator) -> None:
    apply_samples(kc)
    wait_ready(kc)
    before = versions(kc)
    gateway_hash = kc.get("deployment", "team-gateway")["spec"]["template"]["metadata"]["annotations"]
    kc("patch", "brain", "team", "--type=merge", "-p", '{"spec":{"embedding":{"replicas":2}}}')
    wait_ready(kc)
    after = versions(kc)
    changed = {k for k in after if before.get(k) != after[k]} | (after.keys() ^ before.keys())
    assert changed == {("Deployment", "team-embedder"), ("PodDisruptionBudget", "team-embedder")}
    # a routing change rewrites the config and rolls the gateway, nothing else
    kc(
        "patch",
        "rpol",
        "smart-router",
        "--type=merge",
        "-p",
        '{"spec":{"tierBoundaries":{"simpleMedium":0.1}}}',
    )
    wait_for(
        "gateway rolled",
        lambda: (
            kc.get("deployment", "team-gateway")["spec"]["template"]["metadata"]["annotations"]
            != gateway_hash
        ),
    )
    wait_ready(kc)
    final = versions(kc)
    changed = {k for k in final if after.get(k) != final[k]}
    assert changed == {("ConfigMap", "team-gateway-config"), ("Deployment", "team-gateway")}


@pytest.mark.operator_args("--resync-seconds", "2")  # the same resyncs counted, in less time
def test_spec_backup_makes_its_volume_and_cronjob_and_removing_it_prunes_them(
    kc: Kubectl, operator: Operator
) -> None:
    """On the real API server: the PersistentVolumeClaim and the CronJob pass its validation and
    server-side apply, are the Brain's children, and go when spec.backup goes (the StatefulSet's
    own claim, not the Brain's child, stays)."""
    apply_samples(kc)
    wait_for("the distill CronJob", lambda: kc.get("cronjob", "team-distill"), timeout=60)
    kc.apply(deep_set(sample("brain.yaml"), "spec.backup", {"keep": 3, "storage": {"size": "2Gi"}}))
    cron = wait_for("the backup CronJob", lambda: kc.get("cronjob", "team-backup"), timeout=60)
    pvc = wait_for("the backups volume", lambda: kc.get("pvc", "team-backups"), timeout=60)
    uid = kc.get("brain", "team")["metadata"]["uid"]
    for obj in (cron, pvc):
        (ref,) = obj["metadata"]["ownerReferences"]
        assert ref["uid"] == uid and ref["kind"] == "Brain"
    assert pvc["spec"]["resources"]["requests"]["storage"] == "2Gi"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["volumes"][-1]["persistentVolumeClaim"]["claimName"] == "team-backups"
    assert {"name": "BACKUP_KEEP", "value": "3"} in pod["containers"][0]["env"]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    kc.apply(sample("brain.yaml"))
    wait_for("the backup CronJob pruned", lambda: kc.get("cronjob", "team-backup") is None, timeout=60)
    wait_for(
        "the backups volume pruned",
        lambda: (
            (kc.get("pvc", "team-backups") or {}).get("metadata", {}).get("deletionTimestamp")
            or kc.get("pvc", "team-backups") is None
        ),
        timeout=60,
    )
    assert kc.get("pvc", "data-team-db-0") is not None


def test_a_steady_state_makes_no_writes(kc: Kubectl, operator: Operator) -> None:
    apply_samples(kc)
    wait_ready(kc)
    # The first import finishing is a real change (MemorySource.status.lastSync); steady state is after it.
    wait_for(
        "first import recorded",
        lambda: (kc.get("memorysource", "team-memories").get("status") or {}).get("lastSync"),
        timeout=60,
    )
    # Quiet is two resyncs that wrote nothing *after* that import: the noops counted before it (the
    # counter is cumulative) said nothing about the writes it causes (the Brain's status follows its
    # sources), which could land after the snapshot below and be taken for a steady-state write.
    seen = operator.metric("brain_operator_reconcile_total", result="noop")
    wait_for(
        "quiet",
        lambda: operator.metric("brain_operator_reconcile_total", result="noop") >= seen + 2,
        timeout=30,
    )
    writes = operator.samples("brain_operator_api_writes_total")
    assert sum(writes.values()) > 0, "the Brain's children were applied: the counter must show it"
    noops = operator.metric("brain_operator_reconcile_total", result="noop")
    wait_for(
        "two more resyncs",
        lambda: operator.metric("brain_operator_reconcile_total", result="noop") >= noops + 2,
        timeout=30,
    )
    after = operator.samples("brain_operator_api_writes_total")
    # by verb and kind, with the log: CI once saw one write here (41 against 40) and nothing to say which
    assert after == writes, ({k: after.get(k, 0) - writes.get(k, 0) for k in after}, operator.log())


def test_drift_is_restored(kc: Kubectl, operator: Operator) -> None:
    apply_samples(kc)
    wait_ready(kc)
    svc_uid = kc.get("service", "team-gateway")["metadata"]["uid"]
    kc("delete", "service", "team-gateway")
    kc("scale", "deployment", "team-embedder", "--replicas=5")
    kc(
        "patch",
        "configmap",
        "team-gateway-config",
        "--type=merge",
        "-p",
        '{"data":{"litellm.yaml":"tampered"}}',
    )
    wait_for(
        "service restored",
        lambda: (
            (kc.get("service", "team-gateway") or {}).get("metadata", {}).get("uid") not in (None, svc_uid)
        ),
    )
    wait_for("replicas restored", lambda: kc.get("deployment", "team-embedder")["spec"]["replicas"] == 1)
    wait_for(
        "config restored",
        lambda: kc.get("configmap", "team-gateway-config")["data"]["litellm.yaml"] != "tampered",
    )


def test_deleting_the_brain_collects_its_stack(kc: Kubectl, operator: Operator) -> None:
    apply_samples(kc)
    wait_for("children", lambda: set(children(kc)) >= EXPECTED, timeout=60)
    kc("delete", "brain", "team", "--wait=false")
    wait_for("Brain gone", lambda: kc.get("brain", "team") is None, timeout=60)
    wait_for("stack collected", lambda: not children(kc), timeout=90)
    wait_for(
        "policy reports its Brain missing",
        lambda: conditions(kc.get("rpol", "smart-router"))["Applied"]["reason"] == "BrainNotFound",
    )


def test_killed_operator_converges_without_duplicates(
    kc: Kubectl, operator: Operator, tmp_path: Path
) -> None:
    operator.stop()
    second = Operator(kc.cluster, kc.ns, tmp_path / "op2.log").start()
    try:
        apply_samples(kc)
        wait_for("first children", lambda: children(kc), timeout=30, every=0.05)
        second.kill()  # mid-reconcile
        third = Operator(kc.cluster, kc.ns, tmp_path / "op3.log").start()
        try:
            wait_ready(kc)
            assert set(children(kc)) >= EXPECTED
            jobs = kc.get("jobs", selector="brain.dev/memorysource=team-memories")["items"]
            assert len(jobs) == 1, [j["metadata"]["name"] for j in jobs]
            deployments = kc.get("deployments", selector="brain.dev/brain=team")["items"]
            assert sorted(d["metadata"]["name"] for d in deployments) == ["team-embedder", "team-gateway"]
            secrets = kc.get("secrets", selector="brain.dev/brain=team")["items"]
            assert sorted(x["metadata"]["name"] for x in secrets) == sorted(
                ["team-db-credentials", "team-master-key", *(f"team-db-role-{r}" for r in DB_ROLES)]
            )
        finally:
            third.stop()
    finally:
        second.stop()


HEALTH = {
    "status": "ok",
    "database": "ok",
    "embedder": "ok",
    "index": {
        "entriesByKind": {"note": 3, "skill": 1},
        "entriesByNamespace": {"shared": 4},
        "embeddedRatio": 1.0,
        "staleEntries": 2,
        "pendingProposals": 1,
        "lastIngest": "2026-01-01T00:00:00Z",
        "lastDistill": None,
        "lastDigest": None,
        "embeddingModel": "sentence-transformers/all-MiniLM-L6-v2",
        "embeddingDim": 384,
    },
}


AUTH_SEEN: list[str] = []


@pytest.fixture
def health_server() -> Iterator[tuple[str, dict[str, Any]]]:
    doc = json.loads(json.dumps(HEALTH))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            AUTH_SEEN.append(self.headers.get("authorization") or "")
            time.sleep(float(doc.get("_delay", 0)))
            body = json.dumps(doc).encode()
            self.send_response(200 if self.path == "/brain/v1/health" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/brain/v1/health", doc
    finally:
        server.shutdown()


@pytest.mark.operator_args("--allow-health-url-override")
def test_index_health_flows_into_status_and_metrics(
    kc: Kubectl, operator: Operator, health_server: tuple[str, dict[str, Any]]
) -> None:
    url, doc = health_server
    brain = sample("brain.yaml")
    brain["metadata"]["annotations"] = {"brain.dev/health-url": url}
    kc.apply(brain)
    status = wait_for("index status", lambda: (kc.get("brain", "team").get("status") or {}).get("index"))
    assert status["entriesByKind"] == {"note": 3, "skill": 1} and status["totalEntries"] == 4
    assert status["staleEntries"] == 2 and status["embeddingDim"] == 384
    assert conditions(kc.get("brain", "team"))["IndexHealthy"]["status"] == "True"
    # An annotated URL is not the operator-rendered gateway Service: it never gets the master key.
    master = base64.b64decode(kc.get("secret", "team-master-key")["data"]["masterKey"]).decode()
    assert not any(master in a for a in AUTH_SEEN)
    label = f"{kc.ns}/team"
    assert operator.metric("brain_index_entries", brain=label, kind="note") == 3
    assert operator.metric("brain_index_stale_entries", brain=label) == 2
    assert kc.cluster.kubectl("get", "brain", "team", "-n", kc.ns, "--no-headers").stdout.split()[3] == "4"
    doc["status"], doc["embedder"] = "degraded", "down"
    wait_for(
        "IndexHealthy False",
        lambda: conditions(kc.get("brain", "team"))["IndexHealthy"]["status"] == "False",
    )
    wait_for(
        "an IndexDegraded event",
        lambda: any(e["reason"] == "IndexDegraded" for e in kc.get("events")["items"]),
    )


@pytest.mark.operator_args("--allow-health-url-override")
def test_deleting_a_brain_while_its_health_poll_hangs_does_not_wait_a_minute(
    kc: Kubectl, operator: Operator, health_server: tuple[str, dict[str, Any]]
) -> None:
    """A slow gateway keeps the health timer busy; kopf must re-check it promptly, not after its
    default 60 s, before it drops the finalizer."""
    url, doc = health_server
    brain = sample("brain.yaml")
    brain["metadata"]["annotations"] = {"brain.dev/health-url": url}
    kc.apply(brain)
    wait_for("index status", lambda: (kc.get("brain", "team").get("status") or {}).get("index"))
    doc["_delay"] = 2.5  # every poll now hangs until just before the operator's 3 s timeout
    polls = len(AUTH_SEEN)  # any request after this reads the delay
    # delete while one of those polls hangs: waited for (its request has arrived), not slept for
    wait_for("a hanging health poll", lambda: len(AUTH_SEEN) > polls, timeout=30)
    kc("delete", "brain", "team", "--wait=false")
    wait_for("Brain gone", lambda: kc.get("brain", "team") is None, timeout=30)
