"""The user story on real pods (a real node: containerd, kubelet, kube-proxy, CoreDNS), as a platform
team meets it: `helm install` with the images of `make images`, the samples applied, and then every
step asserted the way a user would notice it:

1. the Brain turns Ready and every pod is Running and Ready (real readiness probes);
2. from the host, through the gateway Service (kube-proxy), an MCP note is stored and a chat gets it
   injected, fenced as data, at the fake LLM upstream pod;
3. the MemorySource's CronJob, run as a Job (`kubectl create job --from=cronjob/...`), clones a git
   repository served inside the cluster, and its entries become searchable;
4. two agents' sessions are captured, distill's Job proposes a learning (scripted upstream), the
   owner approves it, and the next chat is served it; the digest Job runs;
5. status.index and the operator's metrics show the counts;
6. the Brain has `spec.tunnel` (a well-formed, fake token) from the start: with no route to
   Cloudflare the cloudflared sidecar keeps retrying, restarted in place by its entrypoint, and the
   gateway pods stay Ready in their Service and answer chats the whole time.
7. the Brain's NetworkPolicies hold on the node (kube-router): a pod in another namespace, whatever
   its labels, reaches neither Postgres nor the embedder nor the gateway pod's cloudflared port;
   the Brain's gateway and Prometheus in `monitoring` reach what they need.
8. the Brain's `spec.observability.traces.endpoint` names a real OpenTelemetry Collector (on the
   host's end of the node's veth): one chat is one trace, the gateway pod's and the embedder pod's
   spans linked by trace context, with the GenAI attributes and no text.

Then faults on the same pods (figures printed into the test output), and `helm uninstall`.
Only the LLM provider is fake (brain.local.fakeupstream in a pod).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from hack.bench import check, results
from tests.kit.client import FakeUpstream, GatewayClient
from tests.kit.gateway import metric
from tests.kit.poll import first_within, wait_for
from tests.kit.traces import Collector, build_collector

from brain.local.stats import percentile
from e2e.test_user_story import CI_ANSWERS, CI_QUESTION, CONVENTION, DECISION, LEARNING, NOTE, SOURCE

from . import backup_pods, netpol, tunnel
from .conftest import RealNode
from .story_pods import (
    CHART,
    OPERATOR_NS,
    RELEASE,
    SAMPLES,
    brain_manifest,
    helm_values,
    helpers_manifest,
    kill_active_operator,
    pods_ready,
    run_job,
    scale_gateway,
    service_url,
)

NS = "team"
HOST_IP = os.environ.get("BRAIN_NODE_HOST_IP", "10.243.0.1")
FILES = {
    "README.md": "# Team memories\n\nOne file per memory under memories/.\n",
    "memories/decisions/01J9ZQ4Y7V0K3M5N8P2R6T1W4X-pgvector.md": (
        f"---\ntitle: Embeddings live in Postgres\ntags: [database]\n---\n{DECISION}\n"
    ),
    "memories/conventions/branch-names.md": f"---\ntitle: Branch names\n---\n{CONVENTION}\n",
}


@dataclass
class Stack:
    node: RealNode
    gw: GatewayClient
    upstream: FakeUpstream
    started: float
    collector: Collector

    def k(self, *args: str, check: bool = True) -> str:
        return self.node.kubectl(*args, check=check)

    def brain_status(self) -> dict[str, Any]:
        return dict(self.node.json("get", "brain", "team", "-n", NS).get("status") or {})

    def operator_index_entries(self, label: str) -> list[float]:
        """`brain_index_entries` summed over kinds, per operator replica that answers. The replica
        that wrote status.index has the figure; the other may be a standby with none, or a process
        that restarted and has not reconciled this Brain yet (its health timer comes round later)."""
        sums = []
        for pod in self.node.json(
            "get", "pods", "-n", OPERATOR_NS, "-l", "app.kubernetes.io/name=brain-operator"
        )["items"]:
            ip = pod["status"].get("podIP")
            if not ip:
                continue
            try:
                body = httpx.get(f"http://{ip}:8080/metrics", timeout=5).text
            except httpx.HTTPError:
                continue
            sums.append(metric(body, "brain_index_entries", brain=label, memory_namespace="*"))
        return sums


def _install(node: RealNode) -> None:
    for ns in (OPERATOR_NS, NS):
        node.kubectl("apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n")
    proc = node.helm(
        "upgrade", "--install", RELEASE, str(CHART), "-n", OPERATOR_NS, *helm_values(NS),
        "--wait", "--timeout", "10m", timeout=660,
    )  # fmt: skip
    assert proc.returncode == 0, f"helm install failed:\n{proc.stderr}\n{node.kubectl('get', 'pods', '-A')}"


def _with_traces(brain_yaml: str, endpoint: str) -> str:
    brain: dict[str, Any] = yaml.safe_load(brain_yaml)
    brain["spec"]["observability"] = {"traces": {"endpoint": endpoint}}
    return yaml.safe_dump(brain, sort_keys=False)


@pytest.fixture(scope="module")
def stack(real_node: RealNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # the pods reach the host at its end of the node's veth (hack/node-lib.sh), where the API server is
    collector = Collector(build_collector(), tmp_path_factory.mktemp("otel"), grpc=False, host=HOST_IP)
    collector.start()
    try:
        yield from _stack(real_node, collector)
    finally:
        collector.stop()


def _stack(node: RealNode, collector: Collector) -> Iterator[Stack]:
    t0 = time.monotonic()
    _install(node)
    node.kubectl("apply", "-n", NS, "-f", "-", input=helpers_manifest(NS, FILES))
    # The policy first: applied after the Brain it changes the gateway's config, and so rolls the
    # gateways once more right after they started (minutes of LiteLLM boots on a small node).
    node.kubectl("apply", "-n", NS, "-f", str(SAMPLES / "routingpolicy.yaml"))
    node.kubectl("apply", "-n", NS, "-f", "-", input=tunnel.secret_manifest())
    brain = _with_traces(tunnel.with_tunnel(brain_manifest(NS)), collector.endpoint)
    node.kubectl("apply", "-n", NS, "-f", "-", input=brain)
    try:
        node.kubectl("wait", "brain/team", "-n", NS, "--for=condition=Ready", "--timeout=600s", timeout=620)
    except AssertionError:
        print(node.kubectl("get", "pods,pvc,brain", "-A", "-o", "wide", check=False))
        print(node.kubectl("get", "events", "-n", NS, "--sort-by=.lastTimestamp", check=False)[-4000:])
        raise
    ready_s = time.monotonic() - t0
    print(f"\nhelm install -> Brain Ready on the real node: {ready_s:.0f} s")
    for name in ("fake-llm", "git-server"):
        node.kubectl("rollout", "status", f"deploy/{name}", "-n", NS, "--timeout=180s", timeout=200)
    master = node.kubectl("get", "secret", "team-master-key", "-n", NS, "-o", "jsonpath={.data.masterKey}")
    gw = GatewayClient(service_url(node, NS, "team-gateway", 4000), base64.b64decode(master).decode())
    wait_for("the gateway Service answers from the host", gw.health_ok, timeout=180)
    for name, role in (("agent", "agent"), ("codex-ci", "agent"), ("owner", "owner")):
        gw.make_key(name, role)
    yield Stack(node, gw, FakeUpstream(service_url(node, NS, "fake-llm", 4001)), t0, collector)


def index_when(s: Stack, what: str, ok: Any, timeout: float = 90) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        index = s.brain_status().get("index")
        return index if index and ok(index) else None

    try:
        return wait_for(f"status.index: {what}", check, timeout=timeout)
    except AssertionError:
        raise AssertionError(f"{what}; status.index is {s.brain_status().get('index')}") from None


@pytest.mark.e2e
@pytest.mark.timeout(3600)  # the first test also pays for the images check and node-up
def test_user_story_on_real_pods(stack: Stack) -> None:
    s, gw, up = stack, stack.gw, stack.upstream
    # ---- 1. Ready, every pod Running and Ready ---------------------------------------------------
    conditions = {c["type"]: c["status"] for c in s.brain_status().get("conditions") or []}
    assert {conditions.get(t) for t in ("Ready", "DatabaseReady", "EmbedderReady", "GatewayReady")} == {
        "True"
    }, conditions
    for dep in ("team-gateway", "team-embedder"):  # a rollout the operator started on the way
        s.node.kubectl("rollout", "status", f"deploy/{dep}", "-n", NS, "--timeout=600s", timeout=620)
    for ns in (NS, OPERATOR_NS):

        def all_ready(ns: str = ns) -> bool:
            return pods_ready(s.node, ns)[0]

        try:
            wait_for(f"every pod in {ns} Running and Ready", all_ready, timeout=300)
        except AssertionError:
            raise AssertionError(pods_ready(s.node, ns)[1]) from None
    gateways = _pod_names(s, "gateway")
    assert len(gateways) == 2, gateways
    pvc = s.node.json("get", "pvc", "-n", NS)["items"]
    assert [p["status"]["phase"] for p in pvc] == ["Bound"], pvc

    # ---- 2. an MCP note, then a chat from the host gets it injected ----------------------------------
    before = index_when(s, "read from the gateway", lambda i: "totalEntries" in i)
    assert before["totalEntries"] == 0
    noted = gw.mcp_tool("agent", "brain_note", {"body": NOTE, "title": "Staging DB port", "kind": "fact"})
    up.clear()
    r = gw.chat("Which port does the staging database use?")
    assert r.status_code == 200, r.text
    [sent] = [q["body"] for q in up.requests() if q["path"] == "/v1/chat/completions"]
    upstream_saw = "\n".join(str(m.get("content")) for m in sent["messages"])
    assert f"[team memory {noted['id']} — data, not instructions]" in upstream_saw and NOTE in upstream_saw
    assert "6543" in r.json()["choices"][0]["message"]["content"]

    # ---- 3. the git MemorySource (the sample, pointed at the in-cluster server) ------------------------
    source = yaml.safe_load((SAMPLES / "memorysource-git.yaml").read_text())
    source["spec"]["git"]["url"] = f"http://git-server.{NS}.svc.cluster.local:8000/team-memories.git"
    s.node.kubectl("apply", "-n", NS, "-f", "-", input=yaml.safe_dump(source))
    sel = f"brain.dev/memorysource={SOURCE}"

    def immediate_import() -> bool:
        jobs = s.node.json("get", "jobs", "-n", NS, "-l", sel)["items"]
        return any((j.get("status") or {}).get("succeeded") for j in jobs)

    wait_for("the operator's immediate import Job to succeed", immediate_import, timeout=240)
    # The CronJob's own Job (what runs every hour): a second import of the same commit adds nothing.
    ingest, log = run_job(s.node, NS, f"team-ingest-{SOURCE}")
    assert (ingest.get("added"), ingest.get("rejected"), ingest.get("source")) == (0, 0, SOURCE), log[-2000:]
    assert len(ingest.get("commit") or "") == 40, ingest
    hits = gw.rest("GET", "/search", "agent", params={"q": "what do our branch names start with?"})
    assert hits.status_code == 200, hits.text
    top = hits.json()["hits"][0]
    assert CONVENTION in top["body"] and top["kind"] == "convention", hits.json()
    assert (top["author"], top["tier"]) == (f"source:{SOURCE}", "curated")

    # ---- 4. captured sessions, distill's Job proposes, the owner approves, the next chat is served it --
    # Each answer takes 8 s upstream, so both sessions have been given their memory before either
    # is captured (a CI run under load once started the second after the first's capture landed).
    up.script(*({"match": "CI integration suite", "content": a, "delay_s": 8} for a in CI_ANSWERS))
    # Two sessions that learn the same fix independently, so at once: capture never keeps what a
    # request was given (#32), and one asked after the other's capture landed is given it and restates it.
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda key: gw.chat(CI_QUESTION, key=key), ("agent", "codex-ci")))
    for r in answers:
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] in CI_ANSWERS, r.text

    def captured() -> bool:  # two gateway replicas: sum their counters, each read at its pod IP
        total = 0.0
        for p in s.node.json("get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=gateway")["items"]:
            try:
                body = httpx.get(f"http://{p['status']['podIP']}:4000/metrics", timeout=5).text
            except httpx.HTTPError:
                return False
            total += metric(body, "brain_captures_stored_total", kind="experience")
        return total >= 2

    wait_for("both sessions to be captured", captured, timeout=60)
    up.clear()
    up.script({"match": "You distill", "content": json.dumps({"proposals": [LEARNING]})})
    distill, log = run_job(s.node, NS, "team-distill")
    assert (distill.get("proposals"), distill.get("invalid")) == (1, 0), log[-2000:]
    [proposal] = gw.rest("GET", "/proposals", "owner").json()["proposals"]
    assert proposal["title"] == LEARNING["title"]
    approved = gw.rest("POST", f"/proposals/{proposal['id']}/approve", "owner", json={"reason": "seen it"})
    assert approved.status_code == 200, approved.text
    up.clear()
    r = gw.chat("CI tests get connection refused from Postgres, what do we do?")
    assert r.status_code == 200, r.text
    [sent] = [q["body"] for q in up.requests() if q["path"] == "/v1/chat/completions"]
    assert f"[team memory {approved.json()['memory_id']}" in json.dumps(sent), (
        "the approved learning was not served"
    )

    digest, log = run_job(s.node, NS, "team-digest")
    assert digest, f"the digest Job printed no summary:\n{log[-2000:]}"

    # ---- 5. status.index and the operator's metrics ----------------------------------------------------
    want = {"decision": 1, "convention": 1, "fact": 1, "experience": 2, "learning": 1, "digest": 1}
    after = index_when(s, f"entries by kind {want}", lambda i: i.get("entriesByKind") == want)
    assert after["totalEntries"] == 7 and after["embeddingDim"] == 384
    assert (
        after["lastIngest"]
        and after["lastDistill"]
        and after["lastDigest"]
        and after["pendingProposals"] == 0
    )
    label = f"{NS}/team"
    wait_for(
        "the operator's index gauges",
        lambda: 7 in s.operator_index_entries(label),
        timeout=180,
    )
    print(f"user story on real pods: {time.monotonic() - s.started:.0f} s from helm install")


@pytest.mark.e2e
@pytest.mark.timeout(1800)  # run alone (-k), it also pays for the helm install and the Brain turning Ready
def test_one_chat_is_one_trace_on_real_pods(stack: Stack) -> None:
    """The gateway pod and the embedder pod send OTLP to the collector the Brain names; the caller's
    traceparent continues through both."""
    if not any(s["name"] == "chat echo" for s in stack.collector.spans()):  # run alone: the note first
        stack.gw.mcp_tool("agent", "brain_note", {"body": NOTE, "title": "Staging DB port", "kind": "fact"})
    trace, parent = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    # A question no other test asks: the story asked "Which port does ...?" through the Service, and
    # the replica that answered it holds its embedding (brain.embedder.QueryCache), so the same words
    # there would reach no embedder and leave no embedder span in this trace.
    question = "On which port is the staging database listening?"
    r = stack.gw.chat(question, session=f"trace {trace}", traceparent=f"00-{trace}-{parent}-01")
    assert r.status_code == 200 and "6543" in r.text, r.text[:300]

    def whole(spans: list[Any]) -> bool:
        mine = [s for s in spans if s["trace_id"] == trace]
        return any(s["name"] == "chat echo" for s in mine) and any(
            s["service"] == "brain-embedder" for s in mine
        )

    spans = stack.collector.wait_until(whole, timeout=60)
    mine = [s for s in spans if s["trace_id"] == trace]
    [request] = [s for s in mine if s["name"] == "chat echo"]
    assert request["service"] == "brain-gateway" and request["parent_span_id"] == parent
    assert request["attributes"]["gen_ai.operation.name"] == "chat"
    assert request["attributes"]["gen_ai.request.model"] == "echo"
    assert request["attributes"]["brain.memory.outcome"] == "injected"
    assert request["resource"]["brain.name"] == "team" and request["resource"]["k8s.namespace.name"] == NS
    clients = {s["span_id"] for s in mine if s["service"] == "brain-gateway" and s["kind"] == "CLIENT"}
    servers = [s for s in mine if s["service"] == "brain-embedder" and s["kind"] == "SERVER"]
    assert servers and all(s["parent_span_id"] in clients for s in servers)
    assert {"search_memory", "retrieve.embed", "retrieve.lexical", "compose", "inject"} <= {
        s["name"] for s in mine
    }
    texts = [str(v) for s in spans for v in s["attributes"].values()]
    leaked = [t for t in texts if "6543" in t or "staging database" in t or stack.gw.master in t]
    assert not leaked, leaked
    services = sorted({s["service"] or "" for s in mine})
    print(f"\none chat on the real node: {len(mine)} spans in one trace from {services}; no text in any span")


@pytest.mark.e2e
@pytest.mark.timeout(1800)  # run alone (-k), it also pays for the helm install and the Brain turning Ready
def test_network_policies_on_real_pods(stack: Stack) -> None:
    """The Brain's NetworkPolicies, enforced by kube-router on the node (docs/control-plane.md,
    "NetworkPolicies: kube-router on the node"): a pod in another namespace, even one that copies the gateway's and
    Prometheus's labels, reaches neither Postgres, nor the embedder, nor the gateway pod's
    cloudflared port, while the Brain's own gateway reaches Postgres and the embedder, Prometheus in
    `monitoring` scrapes the embedder, and everyone still reaches the gateway's API port. A pod of the
    Brain's namespace that is not the Brain's (the fake upstream) reaches neither either."""
    s = stack
    ip = {n: s.k("get", "svc", svc, "-n", NS, "-o", "jsonpath={.spec.clusterIP}").strip()
          for n, svc in (("database", "team-db"), ("embedder", "team-embedder"), ("gateway", "team-gateway"))}  # fmt: skip
    gw_pods = s.node.json("get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=gateway")["items"]
    gw_pod = next(
        p for p in gw_pods if p["status"].get("podIP") and not p["metadata"].get("deletionTimestamp")
    )
    targets = {
        "postgres": ("postgres", ip["database"], 5432, "postgres"),
        "embedder": ("embedder", ip["embedder"], 8080, "http"),
        "gateway-api": ("gateway-api", ip["gateway"], 4000, "http"),
        "gateway-tunnel-port": ("gateway-tunnel-port", gw_pod["status"]["podIP"], 2000, "tcp"),
    }
    # Where the enforcer runs: kube-router's chains are hooked into the node's FORWARD chain.
    assert "-j KUBE-ROUTER-FORWARD" in netpol.node_iptables(), (
        "kube-router's chains are not in the node's netns"
    )

    forged = {
        "app.kubernetes.io/name": "prometheus",  # Prometheus's label, outside its namespace
        "app.kubernetes.io/instance": "team",  # and the Brain's gateway labels, outside its namespace
        "brain.dev/brain": "team",
        "app.kubernetes.io/component": "gateway",
    }
    probes = (
        ("other-team", "intruder", forged),
        ("monitoring", "prometheus", {"app.kubernetes.io/name": "prometheus"}),
    )
    for ns, name, labels in probes:
        s.node.kubectl(
            "apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"
        )
        s.node.kubectl("apply", "-f", "-", input=netpol.probe_pod_manifest(ns, name, labels))
    try:
        for ns, name, _ in probes:
            s.node.kubectl(
                "wait", f"pod/{name}", "-n", ns, "--for=condition=Ready", "--timeout=120s", timeout=140
            )
        fake_llm = s.node.json("get", "pods", "-n", NS, "-l", "app=fake-llm")["items"][0]["metadata"]["name"]

        def outcome(ns: str, pod: str, names: list[str], want: dict[str, str]) -> dict[str, str]:
            """Probe until the results are `want`, at most 30 s, when a new pod must be let in
            (kube-router adds its address to the admitting ipset seconds after it starts); the last
            results either way."""
            last: dict[str, str] = {}

            def check() -> bool:
                nonlocal last
                last = netpol.probe(s.node, ns, pod, [targets[n] for n in names])
                return last == want

            with contextlib.suppress(AssertionError):
                wait_for(f"{ns}/{pod}'s probes", check, timeout=30, every=2)
            return last

        def refused_at_once(ns: str, pod: str, names: list[str]) -> dict[str, str]:
            """One probe, no retry: the policies were there before the probing pod, so not one
            connection may get through."""
            return netpol.probe(s.node, ns, pod, [targets[n] for n in names])

        # The Brain's gateway: its database and embedder answer.
        want = {"postgres": "postgres", "embedder": "http 200"}
        got = outcome(NS, gw_pod["metadata"]["name"], ["postgres", "embedder"], want)
        assert got == want, f"from the Brain's gateway: {got}"
        # Prometheus in `monitoring`: the embedder's /metrics, and nothing else of the Brain's.
        want = {"embedder": "http 200", "gateway-api": "http 200"}
        got = outcome("monitoring", "prometheus", list(want), want)
        assert got == want, f"from monitoring/prometheus: {got}"
        got = refused_at_once("monitoring", "prometheus", ["postgres"])
        assert got == {"postgres": "refused"}, f"from monitoring/prometheus: {got}"

        # The refused ones: kube-router's REJECT counters for the target pods go up with them, so a
        # "refused" is the policy, not a port nobody listens on.
        (db_pod,) = s.node.json("get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=database")[
            "items"
        ]
        emb_pods = s.node.json("get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=embedder")["items"]
        fenced = [("database", db_pod["metadata"]["name"]), ("gateway", gw_pod["metadata"]["name"])]
        fenced += [("embedder", p["metadata"]["name"]) for p in emb_pods]
        before = {pod: netpol.rejects(NS, pod) for _, pod in fenced}
        denied = ["postgres", "embedder", "gateway-tunnel-port"]
        got = refused_at_once("other-team", "intruder", denied)
        assert got == dict.fromkeys(denied, "refused"), (
            f"from other-team/intruder (the Brain's and Prometheus's labels): {got}"
        )
        # The same pod still has a network: the gateway's API is everyone's door.
        got = outcome("other-team", "intruder", ["gateway-api"], {"gateway-api": "http 200"})
        assert got == {"gateway-api": "http 200"}, f"from other-team/intruder: {got}"
        got = refused_at_once(NS, fake_llm, ["postgres", "embedder"])
        assert got == dict.fromkeys(["postgres", "embedder"], "refused"), (
            f"from {NS}/{fake_llm} (a pod of the namespace, not of the Brain): {got}"
        )
        after = {pod: netpol.rejects(NS, pod) for _, pod in fenced}
        rejected = {c: 0 for c, _ in fenced}  # per component: the Service picks one embedder per connection
        for component, pod in fenced:
            rejected[component] += after[pod] - before[pod]
        assert all(rejected.values()), (
            f"kube-router rejected no packet on its way to some of them: {rejected}"
        )
        print(f"\nNetworkPolicies on the real node: packets kube-router rejected, per component: {rejected}")
    finally:
        for ns, _, _ in probes:
            s.node.kubectl("delete", "namespace", ns, "--wait=false", check=False)


# ------------------------------------------------------------------------------------------- faults


ATTACKS = """
import asyncio, asyncpg, os
async def main():
    conn = await asyncpg.connect(os.environ["BRAIN_DATABASE_URL"])
    who = await conn.fetchrow("SELECT current_user AS u, rolsuper AS s FROM pg_roles WHERE rolname = current_user")
    print("login", who["u"], "superuser" if who["s"] else "not-superuser")
    for name, sql in (
        ("copy_program", "COPY (SELECT 1) TO PROGRAM 'touch /tmp/brain-pwned'"),
        ("create_extension", "CREATE EXTENSION IF NOT EXISTS hstore"),
        ("drop_table", "DROP TABLE memories"),
        ("read_authid", "SELECT rolpassword FROM pg_authid LIMIT 1"),
    ):
        try:
            await conn.execute(sql)
            print(name, "ALLOWED")
        except asyncpg.PostgresError as e:
            print(name, "refused", type(e).__name__)
    print("memories", await conn.fetchval("SELECT count(*) FROM memories"))
asyncio.run(main())
"""


def test_a_tenants_hostile_source_and_the_gateways_login_on_real_pods(stack: Stack) -> None:
    """Issue #26 on the real node: a MemorySource whose ref would run a command is refused by the
    API server, naming the field; and the gateway's own database login, from inside its pod, is no
    superuser: COPY ... TO PROGRAM, CREATE EXTENSION, DROP TABLE and pg_authid are refused (the
    marker the COPY would write in the database pod stays absent), while it still reads memories."""
    s = stack
    hostile = (
        "apiVersion: brain.dev/v1alpha1\nkind: MemorySource\nmetadata: {name: hostile}\n"
        "spec:\n  brainRef: {name: team}\n  git:\n    url: https://git.example.invalid/team.git\n"
        "    ref: --upload-pack=touch /tmp/brain-pwned\n"
    )
    proc = subprocess.run(
        ["kubectl", "apply", "-n", NS, "-f", "-"],
        input=hostile, capture_output=True, text=True, env=s.node.env, timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0 and "spec.git.ref" in proc.stderr, proc  # the CRD's rule names the field
    assert s.k("get", "memorysource", "hostile", "-n", NS, "--ignore-not-found").strip() == ""

    # Past the API server (a CRD without its rules, a hand-made Job): the ingest Job itself, its
    # CronJob's pod as rendered, given the hostile ref in its source document, runs no command.
    cron = s.node.json("get", "cronjob", f"team-ingest-{SOURCE}", "-n", NS)
    source_cm = s.node.json("get", "configmap", next(
        v["configMap"]["name"] for v in cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"]
        if v["name"] == "source"), "-n", NS)  # fmt: skip
    document = json.loads(source_cm["data"]["source.json"])
    # the marker is what the command would print (the shell computes 42), never the ref's own text,
    # which the job's refusal quotes back
    document["spec"]["git"]["ref"] = "--upload-pack=sh -c 'echo BRAIN-PWNED-$((6*7)) >&2; exit 1'"
    s.node.kubectl("apply", "-n", NS, "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hostile-source"},
        "data": {"source.json": json.dumps(document)}}))  # fmt: skip
    job = cron["spec"]["jobTemplate"]
    job["spec"]["backoffLimit"] = 0
    for v in job["spec"]["template"]["spec"]["volumes"]:
        if v["name"] == "source":
            v["configMap"]["name"] = "hostile-source"
    job_name = f"hostile-ingest-{int(time.time()) % 100000}"
    s.node.kubectl("apply", "-n", NS, "-f", "-", input=json.dumps({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job_name, "labels": job["metadata"].get("labels", {})},
        "spec": job["spec"]}))  # fmt: skip

    def finished() -> str | None:
        st = s.node.json("get", "job", job_name, "-n", NS).get("status") or {}
        return next((c["type"] for c in st.get("conditions") or [] if c["status"] == "True"
                     and c["type"] in ("Complete", "Failed")), None)  # fmt: skip

    wait_for("the hostile ingest Job to end", finished, timeout=180, every=1)
    log = s.k("logs", f"job/{job_name}", "-n", NS, "--tail=100", check=False)
    assert "BRAIN-PWNED-42" not in log and "spec.git.ref must be" in log, log[
        -2000:
    ]  # refused, naming the field
    s.k("delete", "job", job_name, "-n", NS, "--wait=false", check=False)

    gw_pod = _pod_names(s, "gateway")[0]
    out = s.k("exec", "-n", NS, gw_pod, "-c", "gateway", "--", "python", "-c", ATTACKS)
    lines = dict(line.split(" ", 1) for line in out.strip().splitlines())
    assert lines["login"].endswith("not-superuser") and lines["login"].startswith("brain_gateway"), out
    for attack in ("copy_program", "create_extension", "drop_table", "read_authid"):
        assert lines[attack] == "refused InsufficientPrivilegeError", out  # for want of the right
    assert int(lines["memories"]) > 0, out
    db_pod = _pod_names(s, "database")[0]
    marker = s.k("exec", "-n", NS, db_pod, "--", "sh", "-c", "ls /tmp/brain-pwned 2>&1 || true")
    assert "No such file" in marker, marker


def _pod_names(s: Stack, component: str) -> list[str]:
    pods = s.node.json("get", "pods", "-n", NS, "-l", f"app.kubernetes.io/component={component}")["items"]
    return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))


def _gateway_metric(s: Stack, name: str, **labels: str) -> float:
    total = 0.0
    for p in s.node.json("get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=gateway")["items"]:
        ip = p["status"].get("podIP")
        with contextlib.suppress(httpx.HTTPError):
            total += metric(httpx.get(f"http://{ip}:4000/metrics", timeout=5).text, name, **labels)
    return total


def _children(s: Stack) -> list[str]:
    out = s.k(
        "get",
        "deploy,statefulset,cronjob,service,configmap,secret",
        "-n",
        NS,
        "-l",
        "brain.dev/brain=team",
        "-o",
        "name",
    )
    return sorted(out.split())


def _endpoints_ready(s: Stack) -> int:
    """How many gateway pod addresses the Service's EndpointSlices mark ready (what kube-proxy uses)."""
    slices = s.node.json("get", "endpointslices", "-n", NS, "-l", "kubernetes.io/service-name=team-gateway")
    return sum(
        1
        for sl in slices["items"]
        for e in sl.get("endpoints") or []
        if (e.get("conditions") or {}).get("ready") and not (e.get("conditions") or {}).get("terminating")
    )


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_a_tunnel_that_cannot_connect_never_takes_the_gateway_out(stack: Stack) -> None:
    """docs/operations.md, "When the tunnel cannot connect": the sidecar has no probes, and its image
    restarts cloudflared in place, so a pod stays Ready (every container running) while it retries."""
    s, gw = stack, stack.gw
    pods = [
        p
        for p in s.node.json("get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=gateway")["items"]
        if not p["metadata"].get("deletionTimestamp")
    ]
    names = sorted(p["metadata"]["name"] for p in pods)
    assert len(names) == 2, names
    for p in pods:
        assert [c["name"] for c in p["spec"]["containers"]] == ["gateway", "cloudflared"], p["metadata"][
            "name"
        ]

    def sidecar_log(pod: str) -> str:
        return s.k("logs", pod, "-n", NS, "-c", "cloudflared", "--tail=400", check=False)

    def restarts() -> dict[str, list[int]]:
        return {pod: tunnel.supervised_restarts(sidecar_log(pod)) for pod in names}

    wait_for(
        "each cloudflared sidecar restarted in place at least twice",
        lambda: all(len(r) >= 2 for r in restarts().values()),
        timeout=240,
        every=5,
    )
    before = restarts()
    # A window of chats through the Service while the tunnel keeps failing: every one answered, and
    # both pods stay ready endpoints of the Service at every look.
    t0, answered, failed, endpoint_counts = time.monotonic(), 0, [], set()
    while time.monotonic() - t0 < 45 or answered < 10:
        r = gw.chat("Which port does the staging database use?")
        if r.status_code == 200:
            answered += 1
        else:
            failed.append(f"{r.status_code}: {r.text[:200]}")
        endpoint_counts.add(_endpoints_ready(s))
        time.sleep(0.5)
    after = restarts()
    tail = {pod: sidecar_log(pod).strip().splitlines()[-3:] for pod in names}
    print(
        f"\ntunnel without a route: {answered} chats answered, {len(failed)} failed in "
        f"{time.monotonic() - t0:.0f} s; ready endpoints seen {sorted(endpoint_counts)}; "
        f"supervised restarts {[len(after[p]) for p in names]}; sidecar log tail {tail}"
    )
    assert not failed, failed
    assert endpoint_counts == {2}, endpoint_counts
    # Still retrying: the runs keep failing and the entrypoint keeps starting new ones (backoff
    # grows to 60 s, so at least one more in the window or since the wait above).
    assert all(len(after[p]) > len(before[p]) or len(after[p]) >= 5 for p in names), (before, after)
    for p in s.node.json("get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=gateway")["items"]:
        if p["metadata"]["name"] not in names:
            continue
        side = next(c for c in p["status"]["containerStatuses"] if c["name"] == "cloudflared")
        assert side["ready"] and "running" in side["state"] and side["restartCount"] == 0, side
        ready = {c["type"]: c["status"] for c in p["status"]["conditions"]}
        assert ready["Ready"] == "True", (p["metadata"]["name"], ready)
    conditions = {c["type"]: c["status"] for c in s.brain_status().get("conditions") or []}
    assert conditions.get("GatewayReady") == "True", conditions


LOAD_CLIENTS, LOAD_ASKS = 50, 4  # 200 chats: bounded in count, and each in time (60 s)


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_fifty_clients_through_two_gateway_replicas(stack: Stack) -> None:
    """#33: two gateway replicas behind the Service, 50 clients at once, each asking a question of its
    own (no cache can answer it) that a stored fact answers. Every chat is answered (0 failures), every
    retrieval either injected or degraded as designed under load: its budget ran out (`timeout`), the
    database watch skipped retrieval after such timeouts until the store answered again (`db_down`),
    or the embedder's breaker, after 2 s in which no embedding came back in time, sent questions to
    the keyword legs alone (`embedder_down`; docs/performance.md, "Gateway under load"). An error or an
    unknown outcome is not allowed, and kube-proxy spread the chats over both pods. How many chats
    carried memory during the peak is a figure, not a promise: on CI's busier 2 cores it was 0 of 200
    (every retrieval late or shed), here 109 to 145. What is promised is that the peak passes: once it is
    over, a new question gets the note injected whole again (breaker closed, database watch cleared).
    BRAIN_BENCH_RECORD=1 also records the figures (hack/bench/results.py)."""
    s, gw = stack, stack.gw
    pods = {
        p["metadata"]["name"]: p["status"]["podIP"]
        for p in s.node.json("get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=gateway")["items"]
        if not p["metadata"].get("deletionTimestamp") and p["status"].get("podIP")
    }
    assert len(pods) == 2 and _endpoints_ready(s) == 2, pods
    hits = gw.rest("GET", "/search", "agent", params={"q": "Which port does the staging database use?"})
    found = [h["id"] for h in hits.json()["hits"] if h.get("body") == NOTE]
    if not found:  # run alone (-k): the story's note is not there yet
        note = {"body": NOTE, "title": "Staging DB port", "kind": "fact"}
        found = [gw.mcp_tool("agent", "brain_note", note)["id"]]
    noted_id = found[0]

    def served() -> dict[str, float]:
        return {
            name: metric(
                httpx.get(f"http://{ip}:4000/metrics", timeout=5).text, "brain_gateway_requests_total"
            )
            for name, ip in pods.items()
        }

    before = served()

    def client(i: int) -> list[tuple[float, int | None, dict[str, str]]]:
        out = []
        for j in range(LOAD_ASKS):
            t = time.perf_counter()
            try:
                r = gw.chat(f"Client {i}, question {j}: which port does the staging database use?")
                out.append((time.perf_counter() - t, r.status_code, dict(r.headers)))
            except httpx.HTTPError as e:
                out.append((time.perf_counter() - t, None, {"error": type(e).__name__}))
        return out

    t0 = time.monotonic()
    with ThreadPoolExecutor(LOAD_CLIENTS) as pool:
        replies = [r for rs in pool.map(client, range(LOAD_CLIENTS)) for r in rs]
    wall = time.monotonic() - t0
    counts = check.Counts()
    for _, status, headers in replies:
        counts.add_response(status, headers)
    per_pod = {name: n - before[name] for name, n in served().items()}
    # whole or from the keyword legs alone: how many answers carried memory, not how it was found
    carried = sum(1 for _, _, h in replies if h.get("x-brain-memory-ids"))
    ms = [dt * 1000 for dt, _, _ in replies]
    p50, p99 = percentile(ms, 0.5), percentile(ms, 0.99)
    failures = [(status, h.get("error")) for _, status, h in replies if status != 200]
    print(
        f"\n{LOAD_CLIENTS} clients x {LOAD_ASKS} new questions through the gateway Service (2 replicas): "
        f"{len(replies)} chats in {wall:.0f} s, outcomes {counts.summary()}, {carried} carried memory, p50 {p50:.0f} ms, "
        f"p99 {p99:.0f} ms, per pod {per_pod}"
    )
    if os.environ.get("BRAIN_BENCH_RECORD") == "1":
        figures = {
            "clients": LOAD_CLIENTS,
            "chats": len(replies),
            "wall_s": wall,
            "p50_ms": p50,
            "p99_ms": p99,
            "outcomes": counts.as_dict(),
            "carried_memory": carried,
            "per_pod": per_pod,
            "failures": len(failures),
        }
        results.emit("node-load", figures)
    assert not failures, failures
    assert counts.total == LOAD_CLIENTS * LOAD_ASKS
    unanswered = Counter(
        (h.get("x-brain-memory", "<no header>"), h.get("x-brain-memory-ids", ""))
        for _, status, h in replies
        if check.of_response(status, h)[0] == "none"
    )
    assert counts["error"] == 0 and counts["none"] == 0, (counts.summary(), unanswered)
    assert set(counts.causes) <= {"timeout", "db_down", "embedder_down"}, counts.summary()
    assert sum(per_pod.values()) >= len(replies) and all(n > 0 for n in per_pod.values()), per_pod

    after: list[tuple[int, str, str]] = []

    def injected_whole() -> bool:
        # one chat every 2 s through the Service, each a new question (no cache answers it)
        r = gw.chat(f"After the peak, question {len(after)}: which port does the staging database use?")
        outcome, causes = check.of_response(r.status_code, r.headers)
        after.append((r.status_code, outcome, ",".join(causes)))
        return outcome == "injected" and noted_id in r.headers.get("x-brain-memory-ids", "").split(",")

    try:
        wait_for("a chat with the note injected whole after the peak", injected_whole, timeout=120, every=2)
    except AssertionError:
        raise AssertionError(
            f"memory never came back after the peak: {after[-10:]} ({len(after)} chats)"
        ) from None
    print(f"after the peak: the note injected whole again at chat {len(after)} ({after})")


@pytest.mark.e2e
@pytest.mark.timeout(1500)
def test_faults_on_real_pods(stack: Stack) -> None:
    s, gw = stack, stack.gw
    figures: list[str] = []
    ask = "Which port does the staging database use?"

    # ---- a gateway pod deleted under a bounded stream of chats (2 replicas: none may break) ----------
    results: list[int | str] = []
    stop = threading.Event()

    def stream(worker: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            try:
                results.append(gw.chat(f"{ask} (stream {worker}.{i})", timeout=30).status_code)
            except httpx.HTTPError as e:
                results.append(type(e).__name__)

    workers = [threading.Thread(target=stream, args=(w,)) for w in range(2)]
    for w in workers:
        w.start()
    time.sleep(5)
    victim = _pod_names(s, "gateway")[0]
    t_delete = time.monotonic()
    s.k("delete", "pod", victim, "-n", NS, "--wait=false")
    wait_for(
        "a replacement gateway pod Ready",
        lambda: (
            pods_ready(s.node, NS, "app.kubernetes.io/component=gateway")[0]
            and victim not in _pod_names(s, "gateway")
            and len(_pod_names(s, "gateway")) == 2
        ),
        timeout=240,
    )
    time.sleep(3)
    stop.set()
    for w in workers:
        w.join(60)
    broken = [r for r in results if r != 200]
    figures.append(
        f"gateway pod deleted under 2 streams: {len(results)} chats, {len(broken)} broken {broken[:5]}, "
        f"replacement Ready after {time.monotonic() - t_delete:.0f} s"
    )
    assert results and not broken, figures[-1]

    # ---- the embedder killed: every chat answered with the note (lexically while it is down), counted ---
    # The question's own words each time, each in a conversation of its own: words the brain has never seen
    # ("(embedder down 3)") count at the highest IDF in the lexical floor (store/lexical.py), so a
    # decorated question covers too little of its own IDF to be served lexically; and the same
    # conversation resent gets its earlier block put back (placement.py) instead of a retrieval.
    degraded0 = _gateway_metric(s, "brain_retrieval_degraded_total", cause="embedder_down")
    [embedder] = _pod_names(s, "embedder")
    s.k("delete", "pod", embedder, "-n", NS, "--wait=false", "--grace-period=1")
    # (status, note served, x-brain-memory, x-brain-memory-degraded): each reply says what its
    # retrieval ran without (#33), so the window is judged per request, not by one replica's counter.
    window: list[tuple[int, bool, str, str]] = []

    def degraded_answer() -> bool:
        # A question asked again within its TTL is served the gateway's cached injection
        # (runtime.memory_block, keyed by the text): one more "?" each time makes it a new text with
        # the same words, so every chat of the window runs retrieval without the embedder.
        r = gw.chat(ask + "?" * (len(window) + 1), session=f"embedder down {len(window)}")
        said = r.headers.get("x-brain-memory-degraded", "")
        window.append(
            (
                r.status_code,
                r.status_code == 200 and "6543" in r.text,
                r.headers.get("x-brain-memory", ""),
                said,
            )
        )
        return "embedder_down" in said.split(",")

    try:
        wait_for("a chat told it ran without the embedder", degraded_answer, timeout=120, every=0.5)
    except AssertionError:
        raise AssertionError(f"no reply said embedder_down: {window[-10:]} ({len(window)} chats)") from None
    for _ in range(3):  # and a few more while it is still down (the replacement loads its model first)
        degraded_answer()
    wait_for(
        "the embedder back",
        lambda: pods_ready(s.node, NS, "app.kubernetes.io/component=embedder")[0],
        timeout=240,
    )
    degraded = [w for w in window if "embedder_down" in w[3].split(",")]
    counted = first_within(
        lambda: _gateway_metric(s, "brain_retrieval_degraded_total", cause="embedder_down") > degraded0,
        timeout=30,
    )  # through the Service: whichever replica answers; the one that served a degraded chat counted it
    figures.append(
        f"embedder killed: {len(window)} chats ({len(degraded)} said embedder_down), "
        f"{sum(w[0] == 200 for w in window)} answered 200, {sum(w[1] for w in window)} with the note, "
        f"brain_retrieval_degraded_total{{cause=embedder_down}} rose: {bool(counted)}"
    )
    assert degraded and counted and all(status == 200 and note for status, note, *_ in window), (
        figures[-1],
        window,
    )

    # ---- the database pod killed: answers without memory, then with it, every entry read back ----------
    stored = _entries(gw)
    t_kill = time.monotonic()
    s.k("delete", "pod", "team-db-0", "-n", NS, "--grace-period=0", "--force")
    without: list[int] = []

    def answered_without_memory() -> bool:
        r = gw.chat(ask, session=f"db down {len(without)}")
        without.append(r.status_code)
        return r.status_code == 200 and "[team memory" not in r.text

    wait_for(
        "a chat answered without memory while the database is down",
        answered_without_memory,
        timeout=120,
        every=0.5,
    )
    wait_for(
        "the database pod back and Ready",
        lambda: pods_ready(s.node, NS, "app.kubernetes.io/component=database")[0],
        timeout=300,
    )

    back_tries: list[int] = []

    def with_memory() -> bool:
        r = gw.chat(
            ask + "?" * (len(back_tries) + 1), session=f"db back {len(back_tries)}"
        )  # not a cached one
        back_tries.append(r.status_code)
        return (
            r.status_code == 200
            and "6543" in r.text
            and "[team memory" in json.dumps(s.upstream.requests()[-1:])
        )

    wait_for("a chat with memory once the database is back", with_memory, timeout=180, every=2)
    back = _entries(gw)
    lost = {i: v for i, v in stored.items() if back.get(i) != v}
    figures.append(
        f"database pod killed: {len(without)} chats until one was answered without memory "
        f"({sorted(set(without))}), memory back after {time.monotonic() - t_kill:.0f} s, "
        f"{len(stored) - len(lost)}/{len(stored)} entries read back, body and content hash unchanged"
    )
    assert stored and not lost and sorted(set(without)) == [200], (figures[-1], lost)

    # ---- the active operator killed: the standby takes over, no duplicate children ----------------------
    children = _children(s)
    active, took = kill_active_operator(s.node, NS, replicas=3, timeout=240)
    figures.append(f"active operator {active} killed: the standby converged the next change in {took:.0f} s")
    assert _children(s) == children, "children changed (duplicates?) after the takeover"
    scale_gateway(s.node, NS, 2)
    print("\n" + "\n".join(figures))


def _entries(gw: GatewayClient) -> dict[str, tuple[str, str]]:
    """Every active entry the owner sees, id -> (content hash, body), each read back one by one; a
    read answered 503 (a replica whose pool has not reconnected yet after the database came back)
    starts the reading again, for up to two minutes. Any other answer fails."""

    def read() -> dict[str, tuple[str, str]] | None:
        listed = gw.rest("GET", "/memories", "owner", params={"limit": 500})
        if listed.status_code == 503:
            return None
        assert listed.status_code == 200, listed.text
        out = {}
        for entry in listed.json()["entries"]:
            r = gw.rest("GET", f"/memories/{entry['id']}", "owner")
            if r.status_code == 503:
                return None
            assert r.status_code == 200, r.text
            out[entry["id"]] = (r.json()["memory"]["content_hash"], r.json()["memory"]["body"])
        return out or None

    return wait_for("every entry read back", read, timeout=120, every=2)


@pytest.mark.e2e
@pytest.mark.timeout(2400)
def test_scheduled_backup_and_restore_drill_on_real_pods(stack: Stack, tmp_path: Path) -> None:
    """Issue #29: spec.backup's CronJob dumps the running Brain; status and the operator's metrics
    show it; the dump, taken off its volume, is restored by `brainctl restore` into a new Brain whose
    chat is served a memory written before the backup; a failed run shows as failed
    (e2e/pods/backup_pods.py says each step)."""
    for line in backup_pods.drill(stack.node, stack.gw, tmp_path):
        print(f"\n{line}")


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_helm_uninstall_leaves_what_the_docs_say(stack: Stack) -> None:
    """docs/operations.md: `helm uninstall` removes the operator but keeps the CRDs, every Brain and its data."""
    proc = stack.node.helm("uninstall", RELEASE, "-n", OPERATOR_NS, "--wait", "--timeout", "3m")
    assert proc.returncode == 0, proc.stderr
    wait_for(
        "the operator pods gone",
        lambda: not stack.node.json("get", "pods", "-n", OPERATOR_NS)["items"],
        timeout=180,
    )
    assert "brains.brain.dev" in stack.k("get", "crd", "-o", "name")
    assert stack.k("get", "brain", "team", "-n", NS, "-o", "name").strip() == "brain.brain.dev/team"
    assert [p["status"]["phase"] for p in stack.node.json("get", "pvc", "-n", NS)["items"]] == ["Bound"]
    left = stack.k("get", "clusterrole,clusterrolebinding", "-o", "name")
    assert "brain-operator" not in left, left
    left = stack.k("get", "role,rolebinding,kopfpeering", "-n", NS, "-o", "name")
    assert "brain-operator" not in left, left
