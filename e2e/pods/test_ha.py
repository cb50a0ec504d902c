"""High availability on real pods (a real node, like test_pods_story.py), as an operator of the
platform meets it:

1. the CloudNativePG operator (built here from its Go module source, hack/cnpg-build.sh) runs, and a
   Brain with `cloudNativePG: {instances: 2}` turns Ready on a real 2-instance Cluster whose
   gateway and jobs use the `-rw` Service through the Secret CNPG generated;
2. the primary is deleted under a bounded stream of chats and memory writes: chats in the gap are
   answered without memory (none broken), writes in the gap are a clear 503 (never a false
   success), and every acknowledged write is there afterwards; the window without memory and the
   time to the first write after failover are printed (and saved for hack/bench/ha.py);
3. the gateway's PodDisruptionBudget is honoured by the eviction API, under a stream, and a revoked
   key is refused by every replica within the documented bound;
4. two operator replicas in the chart's Deployment, with liveness probed every second: neither is
   restarted while idle (the probe reads "alive", not "recently reconciled"); killing the active
   pod hands over with no duplicate children, and only the active replica exports the Brain's gauges.

Opt-in (`make e2e-ha`, BRAIN_E2E_HA=1): it needs the two CNPG images (a Go build on first use).
Only the LLM provider is fake (brain.local.fakeupstream in a pod).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from tests.kit.client import FakeUpstream, GatewayClient
from tests.kit.poll import wait_for

from .conftest import RealNode
from .ha_pods import (
    ASK,
    CNPG_POSTGRES_IMAGE,
    NOTE,
    Stream,
    cluster,
    cluster_healthy,
    cnpg_brain_manifest,
    failover_figures,
    install_cnpg,
    psql,
    save_figures,
)
from .story_pods import (
    CHART,
    OPERATOR_NS,
    RELEASE,
    brain_manifest,
    helm_values,
    helpers_manifest,
    kill_active_operator,
    pods_ready,
    run_job,
    scale_gateway,
    service_url,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.environ.get("BRAIN_E2E_HA") != "1",
        reason="opt-in: make e2e-ha (BRAIN_E2E_HA=1; builds the CloudNativePG images on first use)",
    ),
]

NS = "ha"
#: where test_pg_dump_into_a_new_managed_brain_and_pg_restore restores into (watched from the install on)
RESTORE_NS = "ha-restore"
#: docs/security.md: "Revocation reaches every replica within 30 s" (the key cache's TTL).
REVOCATION_BOUND_S = 30
#: kopf forgets a peer that stopped touching the peering object after its lifetime (60 s), then
#: the standby resumes; docs/operations.md gives the bound.
HANDOVER_BOUND_S = 150


@dataclass
class HA:
    node: RealNode
    gw: GatewayClient
    upstream: FakeUpstream
    note_id: str

    def k(self, *args: str, check: bool = True) -> str:
        return self.node.kubectl(*args, check=check)

    def pods(self, selector: str, ns: str = NS) -> list[dict[str, Any]]:
        items = self.node.json("get", "pods", "-n", ns, "-l", selector)["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def _fast_operator_liveness(node: RealNode) -> None:
    """The chart probes liveness every 20 s, 3 failures; here every second, one failure restarts.
    Any "recently reconciled" rule would restart an idle replica within seconds."""
    patch = [
        {"op": "replace", "path": "/spec/template/spec/containers/0/livenessProbe/periodSeconds", "value": 1},
        {
            "op": "replace",
            "path": "/spec/template/spec/containers/0/livenessProbe/failureThreshold",
            "value": 1,
        },
        {
            "op": "replace",
            "path": "/spec/template/spec/containers/0/livenessProbe/initialDelaySeconds",
            "value": 0,
        },
    ]
    node.kubectl("patch", "deploy", RELEASE, "-n", OPERATOR_NS, "--type=json", "-p", json.dumps(patch))
    node.kubectl("rollout", "status", f"deploy/{RELEASE}", "-n", OPERATOR_NS, "--timeout=600s", timeout=620)


def _operator_tag() -> list[str]:
    """BRAIN_HA_OPERATOR_TAG: an operator image built under another tag (a worktree's own, so a
    shared Docker store's :dev is left alone); the data-plane images stay :dev."""
    tag = os.environ.get("BRAIN_HA_OPERATOR_TAG")
    return ["--set", f"image.tag={tag}"] if tag else []


@pytest.fixture(scope="module")
def ha(real_node: RealNode) -> Iterator[HA]:
    node = real_node
    t0 = time.monotonic()
    cnpg_s = install_cnpg(node)
    for ns in (OPERATOR_NS, NS, RESTORE_NS):
        node.kubectl("apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n")
    proc = node.helm(
        "upgrade", "--install", RELEASE, str(CHART), "-n", OPERATOR_NS, *helm_values(NS, RESTORE_NS),
        "--set", f"dataPlaneImages.cnpg={CNPG_POSTGRES_IMAGE}", *_operator_tag(),
        "--wait", "--timeout", "10m", timeout=660,
    )  # fmt: skip
    assert proc.returncode == 0, f"helm install failed:\n{proc.stderr}"
    _fast_operator_liveness(node)
    node.kubectl("apply", "-n", NS, "-f", "-", input=helpers_manifest(NS, {"README.md": "# ha\n"}))
    node.kubectl("apply", "-n", NS, "-f", "-", input=cnpg_brain_manifest(NS))
    try:
        node.kubectl("wait", "brain/team", "-n", NS, "--for=condition=Ready", "--timeout=900s", timeout=920)
    except AssertionError:
        print(
            node.kubectl("get", "pods,pvc,brain,clusters.postgresql.cnpg.io", "-A", "-o", "wide", check=False)
        )
        print(node.kubectl("get", "events", "-n", NS, "--sort-by=.lastTimestamp", check=False)[-4000:])
        print(
            node.kubectl(
                "logs", "-n", "cnpg-system", "deploy/cnpg-controller-manager", "--tail=60", check=False
            )
        )
        raise
    print(
        f"\nCNPG installed in {cnpg_s:.0f} s; helm install -> CNPG Brain Ready in {time.monotonic() - t0:.0f} s"
    )
    node.kubectl("rollout", "status", "deploy/fake-llm", "-n", NS, "--timeout=180s", timeout=200)
    master = node.kubectl("get", "secret", "team-master-key", "-n", NS, "-o", "jsonpath={.data.masterKey}")
    gw = GatewayClient(service_url(node, NS, "team-gateway", 4000), base64.b64decode(master).decode())
    wait_for("the gateway answers with its database", lambda: gw.health_ok("database"), timeout=300)
    for name, role in (("agent", "agent"), ("owner", "owner")):
        gw.make_key(name, role)
    noted = gw.mcp_tool("agent", "brain_note", {"body": NOTE, "title": "Staging DB port", "kind": "fact"})
    yield HA(node, gw, FakeUpstream(service_url(node, NS, "fake-llm", 4001)), str(noted["id"]))
    if os.environ.get("BRAIN_NODE_KEEP") != "1":
        node.kubectl("delete", "namespace", NS, "--wait=false", check=False)


# --------------------------------------------------------------------------- 1. CNPG, Ready, -rw


@pytest.mark.timeout(3600)  # the first test also pays for node-up, CNPG and the Cluster's initdb
def test_brain_is_ready_on_a_real_two_instance_cluster(ha: HA) -> None:
    st = cluster(ha.node, NS)["status"]
    assert st["instances"] == 2 and st["readyInstances"] == 2, st
    instances = ha.pods("cnpg.io/cluster=team-db")
    roles = sorted(p["metadata"]["labels"].get("cnpg.io/instanceRole") for p in instances)
    assert roles == ["primary", "replica"], roles
    ok, summary = pods_ready(ha.node, NS, "cnpg.io/cluster=team-db")
    assert ok, summary
    # The gateway and every job connect as their own login (issue #26): CNPG's managed roles, whose
    # DSN names the -rw Service; CNPG's application owner is the migration step's alone.
    gateway = ha.node.json("get", "deploy", "team-gateway", "-n", NS)["spec"]["template"]["spec"]
    env = {e["name"]: e for e in gateway["containers"][0]["env"]}
    assert env["BRAIN_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "team-db-role-gateway",
        "key": "dsn",
    }
    uri = base64.b64decode(
        ha.k("get", "secret", "team-db-role-gateway", "-n", NS, "-o", "jsonpath={.data.dsn}")
    ).decode()
    assert uri.startswith("postgresql://brain_gateway:") and "@team-db-rw.ha.svc:5432/brain" in uri
    reconciled = (st.get("managedRolesStatus") or {}).get("byStatus", {}).get("reconciled", [])
    assert {f"brain_{r}" for r in ("gateway", "ingest", "distill", "digest", "reindex")} <= set(reconciled), (
        st
    )
    assert (
        psql(
            ha.node, NS, st["currentPrimary"], "select rolsuper from pg_roles where rolname = 'brain_gateway'"
        )
        == "f"
    )
    # An acknowledged commit waits for the standby (what makes the failover test's promise hold).
    primary = st["currentPrimary"]
    assert psql(ha.node, NS, primary, "select sync_state from pg_stat_replication") == "quorum"

    # A chat through the gateway Service gets the note from the Cluster.
    def served() -> bool:
        r = ha.gw.chat(ASK)
        assert r.status_code == 200, r.text
        return "6543" in r.text

    wait_for("a chat served the note", served, timeout=120, every=2)
    # A job (digest) runs against the same Secret and Service.
    digest, log = run_job(ha.node, NS, "team-digest")
    assert digest, f"the digest Job printed no summary:\n{log[-2000:]}"


# --------------------------------------------------------------------------- 2. failover


@pytest.mark.timeout(1200)
def test_primary_deleted_under_traffic(ha: HA) -> None:
    """Force-deleted (the kill a lost node or an OOM gives). A graceful delete first waits for
    Postgres's smart shutdown, which the gateways' idle pooled sessions hold open; CNPG promotes
    only once the old primary is down (docs/operations.md, "Failover figures")."""
    wait_for("the Cluster healthy", lambda: cluster_healthy(ha.node, NS), timeout=600, every=2)
    old = cluster(ha.node, NS)["status"]["currentPrimary"]
    stream = Stream(ha.gw, chats=2, writers=1).start()
    time.sleep(5)
    t_delete = time.monotonic()
    ha.k("delete", "pod", old, "-n", NS, "--grace-period=0", "--force")

    def promoted() -> str | None:
        cur = (cluster(ha.node, NS).get("status") or {}).get("currentPrimary")
        return cur if cur and cur != old else None

    new = wait_for("a replica promoted", promoted, timeout=300, every=0.5)
    t_promoted = time.monotonic()

    def writes_back() -> bool:
        return any(
            o.kind == "write" and o.status == 201 and o.started > t_promoted for o in stream.snapshot()
        )

    def memory_back() -> bool:
        return any(o.kind == "chat" and o.memory and o.started > t_promoted for o in stream.snapshot())

    wait_for("a write acknowledged by the new primary", writes_back, timeout=240)
    wait_for("a chat served memory again", memory_back, timeout=240)
    time.sleep(3)
    outcomes = stream.stop()
    figures = failover_figures(outcomes, t_delete, t_promoted)
    print(f"\nprimary {old} deleted, {new} promoted: {figures.line()}")
    save_figures("failover", {**figures.__dict__, "old_primary": old, "new_primary": new})

    broken = [o for o in outcomes if o.kind == "chat" and o.status != 200]
    assert not broken, f"chats broken by the failover: {[(o.status, o.body) for o in broken[:5]]}"
    writes = [o for o in outcomes if o.kind == "write"]
    odd = [o for o in writes if o.status not in (201, 503)]
    assert not odd, f"writes neither acknowledged nor a clear 503: {[(o.status, o.body) for o in odd[:5]]}"
    for o in writes:
        if o.status == 503:
            assert "not reachable" in o.body, o.body
    # Every acknowledged write is there, read back through the gateway from the new primary.
    acked = [o for o in writes if o.status == 201]
    assert acked and figures.writes_acknowledged == len(acked)
    missing = []
    for o in acked:
        r = ha.gw.rest("GET", f"/memories/{o.memory_id}", "agent")
        if r.status_code != 200 or r.json()["memory"]["body"] != o.body:
            missing.append((o.memory_id, r.status_code))
    assert not missing, f"{len(missing)}/{len(acked)} acknowledged writes lost: {missing[:5]}"
    # The old primary comes back as a replica.
    wait_for(
        "the Cluster healthy with 2 instances again",
        lambda: cluster_healthy(ha.node, NS),
        timeout=600,
        every=2,
    )


# --------------------------------------------------------------------------- 3. gateway replicas


def _evict(ha: HA, pod: str) -> tuple[bool, str]:
    """The eviction API (what `kubectl drain` calls): (allowed, the API server's answer)."""
    body = json.dumps(
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": NS}}
    )
    proc = subprocess.run(
        ["kubectl", "create", "--raw", f"/api/v1/namespaces/{NS}/pods/{pod}/eviction", "-f", "-"],
        input=body, capture_output=True, text=True, env=ha.node.env, timeout=60,
    )  # fmt: skip
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


@pytest.mark.timeout(900)
def test_gateway_pdb_honoured_on_eviction_and_revocation_reaches_every_replica(ha: HA) -> None:
    sel = "app.kubernetes.io/component=gateway"
    wait_for(
        "2 gateway pods Ready",
        lambda: pods_ready(ha.node, NS, sel)[0] and len(ha.pods(sel)) == 2,
        timeout=300,
    )
    pdb = ha.node.json("get", "pdb", "team-gateway", "-n", NS)
    assert pdb["status"]["disruptionsAllowed"] == 1, pdb["status"]
    stream = Stream(ha.gw, chats=2, writers=0).start()
    first, second = sorted(p["metadata"]["name"] for p in ha.pods(sel))
    allowed, answer = _evict(ha, first)
    assert allowed, f"the first eviction ({first}) was refused with the budget at 1: {answer}"
    allowed, answer = _evict(ha, second)
    assert not allowed, f"the second eviction ({second}) was allowed while {first} was being replaced"
    assert "disruption budget" in answer, (
        answer
    )  # 429: "Cannot evict pod as it would violate the pod's disruption budget."
    wait_for(
        "a replacement gateway Ready",
        lambda: pods_ready(ha.node, NS, sel)[0] and len(ha.pods(sel)) == 2 and first not in str(ha.pods(sel)),
        timeout=300,
    )
    time.sleep(2)
    outcomes = stream.stop()
    broken = [o for o in outcomes if o.status != 200]
    print(
        f"\ngateway {first} evicted under 2 streams: {len(outcomes)} chats, {len(broken)} broken; {second} refused (PDB)"
    )
    assert outcomes and not broken, [(o.status, o.body) for o in broken[:5]]

    # Revocation: a key used on every replica (each at its pod IP), revoked once, refused by each.
    key = ha.gw.make_key("revokee", "agent")
    ips = [p["status"]["podIP"] for p in ha.pods(sel)]
    body = {"model": "echo", "messages": [{"role": "user", "content": "hello"}]}

    def status_at(ip: str) -> int:
        r = httpx.post(
            f"http://{ip}:4000/v1/chat/completions",
            json=body,
            headers={"authorization": f"Bearer {key}"},
            timeout=30,
        )
        return r.status_code

    assert [status_at(ip) for ip in ips] == [200] * len(ips)  # cached as valid on every replica
    name = next(n for n in _key_names(ha) if n.startswith("revokee-"))  # make_key's run-unique name
    revoked = ha.gw.rest("DELETE", f"/keys/{name}", "owner")
    assert revoked.status_code == 200, revoked.text
    t = time.monotonic()
    for ip in ips:

        def refused(ip: str = ip) -> bool:
            return status_at(ip) == 401

        wait_for(f"the revoked key refused at {ip}", refused, timeout=REVOCATION_BOUND_S + 5, every=1)
    print(
        f"revoked key refused by {len(ips)} replicas after {time.monotonic() - t:.0f} s (bound {REVOCATION_BOUND_S} s)"
    )


def _key_names(ha: HA) -> list[str]:
    r = ha.gw.rest("GET", "/keys", "owner")
    return [k["name"] for k in r.json()["keys"]]


# --------------------------------------------------------------------------- 4. operator hand-over


def _operator_pods(ha: HA) -> list[dict[str, Any]]:
    return ha.pods("app.kubernetes.io/name=brain-operator", ns=OPERATOR_NS)


def _exports_brain(ip: str) -> bool | None:
    try:
        body = httpx.get(f"http://{ip}:8080/metrics", timeout=5).text
    except httpx.HTTPError:
        return None
    return 'brain="ha/team"' in body


def _children(ha: HA) -> list[str]:
    out = ha.k("get", "deploy,statefulset,cronjob,service,configmap,secret,clusters.postgresql.cnpg.io",
               "-n", NS, "-l", "brain.dev/brain=team", "-o", "name")  # fmt: skip
    return sorted(out.split())


@pytest.mark.timeout(900)
def test_operator_replicas_stay_live_while_idle_and_hand_over(ha: HA) -> None:
    pods = _operator_pods(ha)
    assert len(pods) == 2
    probe = pods[0]["spec"]["containers"][0]["livenessProbe"]
    assert (probe["periodSeconds"], probe["failureThreshold"]) == (1, 1), probe
    restarts = {p["metadata"]["name"]: p["status"]["containerStatuses"][0]["restartCount"] for p in pods}
    idle_s = 75
    time.sleep(idle_s)  # idle: no spec changes; the standby reconciles nothing at all
    ages = {}
    for p in _operator_pods(ha):
        name = p["metadata"]["name"]
        assert p["status"]["containerStatuses"][0]["restartCount"] == restarts[name], (
            f"{name} was restarted while idle"
        )
        health = httpx.get(f"http://{p['status']['podIP']}:8080/healthz", timeout=5).json()
        assert health["status"] == "ok", health
        ages[name] = health["lastReconcileAgeSeconds"]
    print(f"\n{idle_s} s idle with liveness every 1 s: no restarts; last reconcile ages {ages}")
    # The standby never reconciled (None) or not for longer than any staleness window would allow.
    assert any(a is None or a > 30 for a in ages.values()), ages

    children = _children(ha)
    active, handover_s = kill_active_operator(ha.node, NS, replicas=3, timeout=HANDOVER_BOUND_S)
    assert _children(ha) == children, "children changed (duplicates?) after the hand-over"
    # Exactly one replica exports the Brain's series: the replacement pod, whatever its priority,
    # is either active (and the one that paused dropped them) or paused with none.
    wait_for(
        "2 operator pods Ready",
        lambda: pods_ready(ha.node, OPERATOR_NS)[0] and len(_operator_pods(ha)) == 2,
        timeout=300,
    )

    def one_exporter() -> bool:
        seen = [_exports_brain(p["status"]["podIP"]) for p in _operator_pods(ha)]
        return None not in seen and seen.count(True) == 1

    wait_for("exactly one operator replica exporting the Brain's gauges", one_exporter, timeout=120, every=2)
    print(f"active operator {active} killed: hand-over in {handover_s:.0f} s, no duplicate children")
    save_figures("handover", {"handover_s": handover_s, "idle_s": idle_s})
    scale_gateway(ha.node, NS, 2)


# --------------------------------------------------------------------------- 5. backup and restore


def _exec_bytes(
    ha: HA, ns: str, pod: str, container: str, args: list[str], stdin: bytes | None = None
) -> bytes:
    flags = ["-i"] if stdin is not None else []
    proc = subprocess.run(
        ["kubectl", "exec", *flags, pod, "-n", ns, "-c", container, "--", *args],
        input=stdin, capture_output=True, env=ha.node.env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, f"{' '.join(args)} in {pod}: {proc.stderr.decode(errors='replace')[-2000:]}"
    return proc.stdout


@pytest.mark.timeout(1500)
def test_pg_dump_into_a_new_managed_brain_and_pg_restore(ha: HA) -> None:
    """docs/operations.md "Database backups": the CNPG Brain's database dumped with pg_dump,
    restored into a new Brain with the managed StatefulSet, whose gateway then serves the memories
    (and honours the keys, which live in the same database)."""
    ns = RESTORE_NS
    ha.node.kubectl("apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n")
    ha.node.kubectl("apply", "-n", ns, "-f", "-", input=helpers_manifest(ns, {"README.md": "# restore\n"}))
    ha.node.kubectl("apply", "-n", ns, "-f", "-", input=brain_manifest(ns, replicas=1))
    ha.node.kubectl("wait", "brain/team", "-n", ns, "--for=condition=Ready", "--timeout=900s", timeout=920)
    primary = cluster(ha.node, NS)["status"]["currentPrimary"]
    dump = _exec_bytes(ha, NS, primary, "postgres", ["pg_dump", "-Fc", "-d", "brain"])
    assert dump[:5] == b"PGDMP", dump[:20]
    _exec_bytes(
        ha, ns, "team-db-0", "postgres",
        ["pg_restore", "-U", "brain", "-d", "brain", "--clean", "--if-exists", "--no-owner", "--single-transaction"],
        stdin=dump,
    )  # fmt: skip
    # The restore made its tables as the superuser (--no-owner); the gateway's migration step hands
    # them to the owner login and grants the job logins again (docs/operations.md): roll it.
    ha.node.kubectl("rollout", "restart", "deploy/team-gateway", "-n", ns)
    ha.node.kubectl("rollout", "status", "deploy/team-gateway", "-n", ns, "--timeout=600s", timeout=620)
    master = ha.node.kubectl("get", "secret", "team-master-key", "-n", ns, "-o", "jsonpath={.data.masterKey}")
    restored = GatewayClient(
        service_url(ha.node, ns, "team-gateway", 4000), base64.b64decode(master).decode()
    )
    restored.keys["agent"] = ha.gw.keys["agent"]  # restored with the database
    wait_for(
        "the restored gateway answers with its database", lambda: restored.health_ok("database"), timeout=300
    )

    def served() -> bool:
        r = restored.chat(ASK)
        return r.status_code == 200 and "6543" in r.text

    wait_for("a chat on the restored Brain served the note", served, timeout=120, every=3)
    got = restored.rest("GET", f"/memories/{ha.note_id}", "agent")
    assert got.status_code == 200 and got.json()["memory"]["body"] == NOTE, got.text
    ha.node.kubectl("delete", "namespace", ns, "--wait=false", check=False)
