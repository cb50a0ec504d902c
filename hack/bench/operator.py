"""Operator benchmarks on the local control plane; prints the `## Operator` section of docs/benchmarks.md.

    .venv/bin/python -m hack.bench.operator [--runs 3] [--brains 50] [--resync-seconds 20] [--budget 900]

Measures, against the issue's goals:
- apply samples/ (Brain + RoutingPolicy + MemorySource) → the Brain is Ready at its generation
  (median of --runs, each in a fresh namespace; goal ≤ 15 s);
- --brains Brains (samples/brain.yaml) in as many namespaces, applied at once → all Ready (goal ≤ 90 s);
- the operator's resident memory with those Brains (/proc/<pid>/status VmRSS; goal ≤ 150 MB);
- a resync of the unchanged Brains (one --resync-seconds timer period for every Brain) makes zero
  write calls (`brain_operator_api_writes_total` from the operator's /metrics, before and after).

Starts its own control plane with hack/cluster-up.sh (state /tmp/brain-kube-bench, its own loopback
ports, all overridable through the BRAIN_KUBE_* variables) and stops it at the end (a cluster that
was already running there is left running, with the bench's namespaces deleted). The operator runs
as a subprocess (`python -m brain_operator --all-namespaces --standalone`), its health reads pointed at
a refused loopback port. Everything is on 127.0.0.1 and bounded by --budget seconds. Progress goes to
stderr, the Markdown to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from hack.bench import ROOT, parser, results
from tests.kit.cluster import parse_exports, run_tool
from tests.kit.poll import wait_for

HACK = ROOT / "hack"
SAMPLES = ROOT / "samples"
CLUSTER_ENV = {
    "BRAIN_KUBE_STATE": "/tmp/brain-kube-bench",
    "BRAIN_KUBE_ETCD_PORT": "23379",
    "BRAIN_KUBE_ETCD_PEER_PORT": "23380",
    "BRAIN_KUBE_APISERVER_PORT": "27443",
    "BRAIN_KUBE_SMOKE": "0",
    # Each Brain requests about one CPU (database, embedder, two gateways); a kwok node offers 32.
    "BRAIN_KUBE_NODES": "4",
}
GOALS = {"ready": 15.0, "many": 90.0, "rss": 150.0}
PREFIX = "bench-op"


def say(msg: str) -> None:
    print(f"bench_operator: {msg}", file=sys.stderr, flush=True)


class Budget:
    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self, want: float) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("bench budget spent")
        return min(want, left)


# ---------------------------------------------------------------------------------------- cluster
class Cluster:
    """hack/cluster-up.sh on the bench's own state folder and ports; kubectl bound to it."""

    def __init__(self) -> None:
        self.env = dict(os.environ)
        for key, value in CLUSTER_ENV.items():
            self.env.setdefault(key, value)
        self.kubeconfig = ""
        self.bin = ""
        self.started_here = False

    def up(self) -> None:
        say(f"starting the control plane in {self.env['BRAIN_KUBE_STATE']}")
        proc = subprocess.run(
            ["bash", str(HACK / "cluster-up.sh")], env=self.env, capture_output=True, text=True, timeout=900
        )
        if proc.returncode != 0:
            raise RuntimeError(f"hack/cluster-up.sh failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        self.kubeconfig, self.bin = parse_exports(proc.stdout)
        self.started_here = "already running" not in proc.stderr
        self.env["KUBECONFIG"] = self.kubeconfig
        self.env["PATH"] = f"{self.bin}{os.pathsep}{self.env.get('PATH', '')}"
        self.env["KUBECACHEDIR"] = tempfile.mkdtemp(prefix="bench-op-kubecache-")  # removed by run()

    def down(self) -> None:
        if self.started_here:
            say("stopping the control plane")
            subprocess.run(["bash", str(HACK / "cluster-down.sh")], env=self.env, timeout=180, check=False)

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return run_tool(
            str(Path(self.bin) / "kubectl"), *args, env=self.env, input=input, check=check, timeout=timeout
        )

    def apply(self, docs: list[dict[str, Any]]) -> None:
        self.kubectl(
            "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
        )

    def get_json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)


@contextlib.contextmanager
def node_leases(cluster: Cluster) -> Iterator[bool]:
    """Keep the fake nodes' Leases fresh when kwok does not (it runs without --node-lease-duration-seconds
    in some versions of hack/cluster-up.sh): otherwise the node-lifecycle controller marks the node
    NotReady every ~50 s and flips pods to not-ready, which would be measured as operator latency.
    Yields whether the bench had to do it (reported in the output)."""
    nodes = [n["metadata"]["name"] for n in cluster.get_json("nodes")["items"]]
    time.sleep(3)  # a kwok that manages leases creates them at once
    have = {
        lease["metadata"]["name"] for lease in cluster.get_json("leases", "-n", "kube-node-lease")["items"]
    }
    if set(nodes) <= have:
        yield False
        return
    say(f"kwok keeps no node Leases: renewing them from the bench for {', '.join(nodes)}")
    stop = threading.Event()

    def renew() -> None:
        while not stop.is_set():
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            docs = [
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": node, "namespace": "kube-node-lease"},
                    "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now},
                }
                for node in nodes
            ]
            with contextlib.suppress(Exception):
                cluster.kubectl(
                    "apply",
                    "--server-side",
                    "--force-conflicts",
                    "--field-manager=bench-operator",
                    "-f",
                    "-",
                    input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}),
                    timeout=30,
                )
            stop.wait(10)

    thread = threading.Thread(target=renew, daemon=True)
    thread.start()
    try:
        yield True
    finally:
        stop.set()
        thread.join(timeout=40)


# --------------------------------------------------------------------------------------- operator
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OperatorProcess:
    def __init__(self, cluster: Cluster, log: Path, resync: float) -> None:
        self.cluster = cluster
        self.log = log
        self.resync = resync
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = dict(self.cluster.env, PYTHONUNBUFFERED="1")
        args = [
            sys.executable,
            "-m",
            "brain_operator",
            "--all-namespaces",
            "--standalone",
            "--resync-seconds",
            str(self.resync),
            "--health-seconds",
            "300",
            "--health-url-template",
            "http://127.0.0.1:9/{namespace}/{name}",
            "--metrics-host",
            "127.0.0.1",
            "--metrics-port",
            str(self.port),
        ]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        wait_for("operator /healthz", self._healthy, timeout=60, every=0.25)
        say(f"operator running (pid {self.proc.pid}, metrics on 127.0.0.1:{self.port}, log {self.log})")

    def _healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"operator exited {self.proc.returncode}: {self.log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1) as rsp:
                return bool(rsp.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def metric(self, name: str, **labels: str) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as rsp:
            text = rsp.read().decode()
        total = 0.0
        for line in text.splitlines():
            if line.startswith((name + "{", name + " ")):
                head, _, value = line.rpartition(" ")
                if all(f'{k}="{v}"' in head for k, v in labels.items()):
                    total += float(value)
        return total

    def memory_mib(self) -> tuple[float, float]:
        """(VmRSS, VmHWM) of the operator process in MiB."""
        assert self.proc is not None
        fields = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024
        return fields["VmRSS"], fields["VmHWM"]


# ------------------------------------------------------------------------------------------ bench
def sample(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    return doc


def in_namespace(doc: dict[str, Any], ns: str) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    doc["metadata"]["namespace"] = ns
    return doc


def volume(ns: str, claim: str = "data-team-db-0") -> dict[str, Any]:
    """A PersistentVolume pre-bound to the database's claim: the local control plane has no provisioner."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"pv-{ns}-{claim}"[:63], "labels": {"brain-bench": PREFIX}},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": f"/tmp/brain-bench-pv/{ns}/{claim}"},
            "claimRef": {"namespace": ns, "name": claim},
        },
    }


def namespace(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": ns, "labels": {"brain-bench": PREFIX}},
    }


def ready_brains(cluster: Cluster, namespaces: set[str]) -> dict[str, dict[str, Any]]:
    """Brains (by namespace) in ``namespaces`` whose Ready is True at their current generation."""
    out = {}
    for b in cluster.get_json("brains", "-A")["items"]:
        ns = b["metadata"]["namespace"]
        if ns not in namespaces:
            continue
        status = b.get("status") or {}
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        if ready and status.get("observedGeneration") == b["metadata"]["generation"]:
            out[ns] = b
    return out


def apply_to_ready(cluster: Cluster, run: int, budget: Budget) -> float:
    ns = f"{PREFIX}-ready-{run}"
    cluster.apply([namespace(ns), volume(ns)])
    docs = [
        in_namespace(sample(n), ns) for n in ("brain.yaml", "routingpolicy.yaml", "memorysource-git.yaml")
    ]
    started = time.monotonic()
    cluster.apply(docs)
    wait_for(
        f"Brain Ready in {ns}", lambda: ready_brains(cluster, {ns}), timeout=budget.left(180), every=0.25
    )
    took = time.monotonic() - started
    say(f"run {run}: samples → Ready in {took:.1f} s")
    return took


def many_to_ready(cluster: Cluster, op: OperatorProcess, count: int, budget: Budget) -> tuple[float, float]:
    """(seconds until all Ready, peak VmRSS MiB seen meanwhile)."""
    names = [f"{PREFIX}-many-{i:03d}" for i in range(count)]
    cluster.apply([namespace(ns) for ns in names] + [volume(ns) for ns in names])
    brain = sample("brain.yaml")
    docs = [in_namespace(brain, ns) for ns in names]
    peak = 0.0
    started = time.monotonic()
    cluster.apply(docs)

    def all_ready() -> bool:
        nonlocal peak
        peak = max(peak, op.memory_mib()[0])
        return len(ready_brains(cluster, set(names))) == count

    wait_for(f"{count} Brains Ready", all_ready, timeout=budget.left(600), every=1.0)
    took = time.monotonic() - started
    say(f"{count} Brains Ready in {took:.1f} s")
    return took, peak


def quiet_resync(
    cluster: Cluster, op: OperatorProcess, count: int, budget: Budget
) -> tuple[float, float, int, int]:
    """(write calls during the window, reconciles during it, Brains whose resourceVersion changed,
    Brains checked). The window starts once writes have stopped and lasts until every Brain's
    resync timer has fired at least once more (reconcile count up by ``count``)."""
    writes = "brain_operator_api_writes_total"
    reconciles = "brain_operator_reconcile_total"
    settle = op.resync + 5
    for _ in range(4):  # let the last status writes of the burst land
        before = op.metric(writes)
        time.sleep(budget.left(settle))
        if op.metric(writes) == before:
            break
    names = {f"{PREFIX}-many-{i:03d}" for i in range(count)}

    def versions() -> dict[str, str]:
        return {
            b["metadata"]["namespace"]: b["metadata"]["resourceVersion"]
            for b in cluster.get_json("brains", "-A")["items"]
            if b["metadata"]["namespace"] in names
        }

    rv0 = versions()
    w0, r0 = op.metric(writes), op.metric(reconciles, kind="Brain")
    wait_for(
        f"{count} resyncs",
        lambda: op.metric(reconciles, kind="Brain") >= r0 + count,
        timeout=budget.left(3 * op.resync + 120),
        every=1.0,
    )
    time.sleep(budget.left(2.0))  # a write racing the last resync would show now
    w1, r1 = op.metric(writes), op.metric(reconciles, kind="Brain")
    rv1 = versions()
    changed = sum(1 for ns, rv in rv1.items() if rv0.get(ns) != rv)
    say(f"resync window: {r1 - r0:.0f} reconciles, {w1 - w0:.0f} writes, {changed} Brains changed")
    return w1 - w0, r1 - r0, changed, len(rv1)


def cleanup(cluster: Cluster) -> None:
    """For a cluster that keeps running: the bench's namespaces and volumes go (Brains unfinalized)."""
    for b in cluster.get_json("brains", "-A")["items"]:
        ns = b["metadata"]["namespace"]
        if ns.startswith(PREFIX):
            cluster.kubectl(
                "patch",
                "brain",
                b["metadata"]["name"],
                "-n",
                ns,
                "--type=merge",
                "-p",
                '{"metadata":{"finalizers":null}}',
                check=False,
            )
    cluster.kubectl("delete", "namespace", "-l", f"brain-bench={PREFIX}", "--wait=false", check=False)
    cluster.kubectl("delete", "pv", "-l", f"brain-bench={PREFIX}", "--wait=false", check=False)


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def report(a: argparse.Namespace, res: dict[str, Any]) -> str:
    cluster_nodes = res["nodes"]
    ready = res["ready"]
    med = statistics.median(ready)
    rss, hwm = res["rss"]
    writes, recs, changed, checked = res["resync"]
    n = a.brains
    runs = ", ".join(f"{x:.1f}" for x in ready)
    rows = [
        (
            f"apply samples/ → Brain Ready (median of {len(ready)}: {runs} s)",
            f"{med:.1f} s",
            f"≤ {GOALS['ready']:.0f} s",
            verdict(med <= GOALS["ready"]),
        ),
        (
            f"{n} Brains in {n} namespaces, applied at once → all Ready",
            f"{res['many']:.1f} s",
            f"≤ {GOALS['many']:.0f} s",
            verdict(res["many"] <= GOALS["many"]),
        ),
        (
            f"operator RSS with {n + len(ready)} Brains (VmRSS after the resync; peak VmHWM {hwm:.0f} MiB)",
            f"{rss:.0f} MiB",
            f"≤ {GOALS['rss']:.0f} MB",
            verdict(rss * 1.048576 <= GOALS["rss"]),
        ),
        (
            f"resync of {n} unchanged Brains: `brain_operator_api_writes_total` delta over {recs:.0f} "
            f"reconciles ({changed} of {checked} Brains' resourceVersion changed)",
            f"{writes:.0f} writes",
            "0",
            verdict(writes == 0),
        ),
    ]
    lines = [
        "## Operator",
        "",
        "Local control plane from `hack/cluster-up.sh` (etcd, kube-apiserver, controller-manager, "
        f"scheduler, {cluster_nodes} kwok fake nodes that run pods instantly; all on 127.0.0.1), "
        "the operator as a subprocess: "
        f"`python -m brain_operator --all-namespaces --standalone --resync-seconds {a.resync_seconds:g}`. "
        "Ready means the Brain's Ready condition is True at its current generation (database, embedder "
        "and gateway workloads all ready). Command: `python -m hack.bench.operator`"
        f" (`--runs {a.runs} --brains {n}`).",
        "",
        "| Measure | Result | Goal | |",
        "|---|---|---|---|",
        *(f"| {m} | {r} | {g} | {v} |" for m, r, g, v in rows),
    ]
    if res["leases"]:
        lines += [
            "",
            "kwok kept no node Leases in this cluster, so the bench renewed them itself (otherwise the "
            "fake node turns NotReady every ~50 s and pods flip to not-ready).",
        ]
    return "\n".join(lines) + "\n"


def run(a: argparse.Namespace) -> str:
    budget = Budget(a.budget)
    cluster = Cluster()
    op: OperatorProcess | None = None
    workdir = Path(tempfile.mkdtemp(prefix="bench-op-"))
    res: dict[str, Any] = {}
    try:
        cluster.up()
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
        cluster.kubectl("wait", "--for=condition=Established", "-f", str(ROOT / "crds"), "--timeout=60s")
        res["nodes"] = len(cluster.get_json("nodes")["items"])
        with node_leases(cluster) as leases:
            res["leases"] = leases
            op = OperatorProcess(cluster, workdir / "operator.log", a.resync_seconds)
            op.start()
            res["ready"] = [apply_to_ready(cluster, i, budget) for i in range(a.runs)]
            res["many"], _ = many_to_ready(cluster, op, a.brains, budget)
            res["resync"] = quiet_resync(cluster, op, a.brains, budget)
            res["rss"] = op.memory_mib()
        shutil.rmtree(workdir, ignore_errors=True)  # on failure the operator's log stays for diagnosis
    finally:
        if op is not None:
            op.stop()
        if cluster.kubeconfig:
            if not cluster.started_here:
                with contextlib.suppress(Exception):
                    cleanup(cluster)
            cluster.down()
        if cluster.env.get("KUBECACHEDIR", "").startswith(tempfile.gettempdir()):
            shutil.rmtree(cluster.env["KUBECACHEDIR"], ignore_errors=True)
    return report(a, res)


def main(argv: list[str] | None = None) -> int:
    p = parser(__spec__.name, __doc__)
    p.add_argument("--runs", type=int, default=3, help="apply → Ready runs (median) [%(default)s]")
    p.add_argument("--brains", type=int, default=50, help="Brains (one per namespace) [%(default)s]")
    p.add_argument("--resync-seconds", type=float, default=20.0, help="operator resync period [%(default)s]")
    p.add_argument(
        "--budget", type=float, default=900.0, help="give up after this many seconds [%(default)s]"
    )
    a = p.parse_args(argv)

    def interrupted(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)
    text = run(a)
    results.emit("operator", {}, markdown=text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
