"""Day two on the real node (#29): the previous release → HEAD → the previous release, under traffic.

The anchor is the Prometheus Operator's upgrade-path e2e: install the previous release, upgrade to
the current one, check that everything still works; and here also roll back. The previous release
is rebuilt from its commit in git (`hack/release.sh --rebuild`, the newest entry of
hack/releases.txt): its chart and its six images, tagged with its version. Then, with two chat
streams and a memory writer running through the gateway Service:

1. `helm install` of the previous release; a Brain, keys and a note;
2. HEAD's CRDs applied (as docs/operations.md tells an upgrader), `helm upgrade` to HEAD: the
   operator, the gateways, the embedder and the jobs roll to HEAD's images;
3. `helm rollback` to the previous release: they roll back.

After each step every pod runs the step's images and is Ready, every acknowledged write is read
back, the keys still work, and the Brain's children are the same set, plus after the upgrade what
HEAD renders that the previous release did not (HEAD_ADDS): the operator's hand-over made no
duplicates, and the rollback copies nothing (the previous operator may prune what only HEAD
renders). At the end: 0 failed chats (a chat answered without memory during a roll counts as
answered, and is counted).

Opt-in (`make e2e-upgrade`, BRAIN_E2E_UPGRADE=1): rebuilding the previous release's images adds a
build that the fresh-machine budget of `make test` has no room for (docs/performance.md).
"""

from __future__ import annotations

import base64
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from tests.kit.client import GatewayClient
from tests.kit.migration_compat import previous_release
from tests.kit.poll import wait_for

from .conftest import RealNode
from .ha_pods import NOTE, Outcome, Stream
from .story_pods import (
    REG,
    ROOT,
    TAG,
    brain_manifest,
    helm_values,
    helpers_manifest,
    pods_ready,
    service_url,
)

NS = "upgrade"
OPERATOR_NS = "brain-upgrade"
RELEASE = "brain-operator"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.environ.get("BRAIN_E2E_UPGRADE") != "1",
        reason="opt-in: make e2e-upgrade (BRAIN_E2E_UPGRADE=1; rebuilds the previous release's images)",
    ),
]


@dataclass
class Upgrade:
    node: RealNode
    previous: str  # its version, e.g. 0.1.0 (also its image tag)
    chart: Path  # its chart, from its commit

    def k(self, *args: str, check: bool = True) -> str:
        return self.node.kubectl(*args, check=check)

    def children(self) -> list[str]:
        """The Brain's children by kind and name: a second copy of a part would show as a new name."""
        out = self.k("get", "deploy,statefulset,cronjob,service,configmap,secret,networkpolicy", "-n", NS,
                     "-l", "brain.dev/brain=team", "-o", "name")  # fmt: skip
        return sorted(out.split())


# What HEAD renders for the test's Brain that v0.1.0 did not: #29's backup job's NetworkPolicy and
# its database role's Secret (render/policy.py JOBS, render/names.py db_role).
HEAD_ADDS = {"networkpolicy.networking.k8s.io/team-backup", "secret/team-db-role-backup"}


class GatewayLogs:
    """Every gateway pod's log from the moment it appears, to a file each: a roll deletes the pods
    whose log would say why a chat failed. Followed by `kubectl logs -f`, polled every second."""

    def __init__(self, u: Upgrade, folder: Path) -> None:
        self.u, self.folder = u, folder
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> GatewayLogs:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for proc in self.procs.values():
            proc.terminate()

    def _run(self) -> None:
        while not self._stop.wait(1):
            out = self.u.k("get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=gateway", "-o", "name",
                           check=False)  # fmt: skip
            for pod in out.split():
                if pod not in self.procs:
                    with open(self.folder / f"{pod.split('/')[-1]}.log", "wb") as f:
                        self.procs[pod] = subprocess.Popen(
                            ["kubectl", "logs", "-f", "-n", NS, pod, "-c", "gateway", "--pod-running-timeout=60s"],
                            stdout=f, stderr=subprocess.STDOUT, env=self.u.node.env,
                        )  # fmt: skip

    def errors(self) -> str:
        """The lines around each logged error, per pod."""
        out = []
        for path in sorted(self.folder.glob("*.log")):
            lines = path.read_text(errors="replace").splitlines()
            for i, line in enumerate(lines):
                if "Traceback" in line or "ERROR" in line or "unhandled" in line:
                    out.append(f"--- {path.stem}:{i}\n" + "\n".join(lines[max(0, i - 3) : i + 30]))
        return "\n".join(out[:8])


def _same_children_but_head_adds(what: str, now: list[str], before: list[str]) -> None:
    """After a step, the children that were there before it, no second copy of any, and nothing new.
    The previous operator may remove what only HEAD renders: 0.1.0 prunes the NetworkPolicies it does
    not render (the backup Job's, on the second run of this test) and leaves the Secrets alone."""
    assert set(now) <= set(before) and set(before) - set(now) <= HEAD_ADDS, (
        what, sorted(set(now) ^ set(before)))  # fmt: skip


@pytest.fixture(scope="module")
def upgrade(real_node: RealNode) -> Iterator[Upgrade]:
    tag, _ = previous_release()
    # make e2e-upgrade rebuilt it before node-up (its images had to be imported); this only finds it
    built = subprocess.run(
        ["bash", str(ROOT / "hack" / "release.sh"), "--rebuild", tag], capture_output=True, text=True,
        timeout=2400, env={**os.environ, "IMAGES": "0"},
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    tree = Path(built.stdout.strip().splitlines()[-1])
    for ns in (OPERATOR_NS, NS):
        real_node.kubectl(
            "apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"
        )
    yield Upgrade(real_node, tag[1:], tree / "charts" / "brain-operator")
    if os.environ.get("BRAIN_NODE_KEEP") != "1":
        real_node.helm("uninstall", RELEASE, "-n", OPERATOR_NS, "--wait", "--timeout", "3m")
        real_node.kubectl("delete", "namespace", NS, "--wait=false", check=False)


COMPONENTS = {
    "operator": (OPERATOR_NS, "app.kubernetes.io/name=brain-operator"),
    "gateway": (NS, "app.kubernetes.io/component=gateway"),
    "embedder": (NS, "app.kubernetes.io/component=embedder"),
}


def _runs(u: Upgrade, tag: str, components: tuple[str, ...] = tuple(COMPONENTS)) -> bool:
    """Every pod of these components runs `tag`'s image and is Ready, and none of another tag is
    left (a finished roll)."""
    for component in components:
        ns, selector = COMPONENTS[component]
        pods = u.node.json("get", "pods", "-n", ns, "-l", selector)["items"]
        if not pods or not pods_ready(u.node, ns, selector)[0]:
            return False
        for p in pods:
            [image] = [c["image"] for c in p["spec"]["containers"] if c["name"] == component]
            if p["metadata"].get("deletionTimestamp") or image != f"{REG}/{component}:{tag}":
                return False
    return True


def _read_back(gw: GatewayClient, outcomes: list[Outcome]) -> tuple[int, list[str]]:
    acked = [o for o in outcomes if o.kind == "write" and o.status == 201 and o.memory_id]
    lost = []
    for o in acked:
        r = gw.rest("GET", f"/memories/{o.memory_id}", "owner")
        if r.status_code != 200 or r.json()["memory"]["body"] != o.body:
            lost.append(f"{o.memory_id}: {r.status_code}")
    return len(acked), lost


@pytest.mark.timeout(3600)
def test_previous_release_to_head_and_back_under_traffic(upgrade: Upgrade, tmp_path: Path) -> None:
    u, figures = upgrade, []
    proc = u.node.helm("upgrade", "--install", RELEASE, str(u.chart), "-n", OPERATOR_NS, *helm_values(NS, tag=u.previous),
                       "--wait", "--timeout", "10m", timeout=660)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    u.node.kubectl("apply", "-n", NS, "-f", "-", input=helpers_manifest(NS, {"README.md": "# upgrade\n"}))
    u.node.kubectl("apply", "-n", NS, "-f", "-", input=brain_manifest(NS))
    u.node.kubectl("wait", "brain/team", "-n", NS, "--for=condition=Ready", "--timeout=600s", timeout=620)
    u.k("rollout", "status", "deploy/fake-llm", "-n", NS, "--timeout=180s")
    wait_for(f"the previous release {u.previous} running", lambda: _runs(u, u.previous), timeout=300)
    master = u.k("get", "secret", "team-master-key", "-n", NS, "-o", "jsonpath={.data.masterKey}")
    gw = GatewayClient(service_url(u.node, NS, "team-gateway", 4000), base64.b64decode(master).decode())
    for name, role in (("agent", "agent"), ("owner", "owner")):
        gw.make_key(name, role)
    gw.mcp_tool("agent", "brain_note", {"body": NOTE, "title": "Staging DB port", "kind": "fact"})
    wait_for("the note served", lambda: "6543" in gw.chat("Which port does the staging database use?").text,
             timeout=120)  # fmt: skip
    children = u.children()
    # A release whose gateways do not pause in preStop (render/gateway.py DRAIN_SECONDS, since 0.2.0)
    # has its chats refused in the second its pods leave the Service: counted against the step that
    # terminates them (the upgrade, for such a previous release), never against HEAD's.
    drains = {"previous": _drains(u)}
    logs = GatewayLogs(u, tmp_path).__enter__()
    stream = Stream(gw, chats=2, writers=1).start()
    time.sleep(5)

    steps = (
        ("helm upgrade to HEAD", TAG, ["upgrade", RELEASE, str(ROOT / "charts" / "brain-operator"),
                                       "-n", OPERATOR_NS, *helm_values(NS)]),
        (f"helm rollback to {u.previous}", u.previous, ["rollback", RELEASE, "1", "-n", OPERATOR_NS]),
    )  # fmt: skip
    windows: dict[str, tuple[float, float, str]] = {}
    for what, tag, args in steps:
        # Helm never touches CRDs (docs/operations.md, "Rolling back"): the upgrader applies HEAD's
        # before the upgrade, and the previous release's before the rollback. Left at HEAD's, the
        # API server defaults HEAD's new fields into every Brain it serves (standoutRatio: 0.55), and
        # the previous operator, which refuses fields it does not know, reconciles nothing: the
        # first run of this test timed out there. With the previous CRDs back the API server
        # prunes those fields from what it serves.
        crds = ROOT / "charts" / "brain-operator" / "crds" if args[0] == "upgrade" else u.chart / "crds"
        u.k("apply", "--server-side", "--force-conflicts", "-f", str(crds))
        t0 = time.monotonic()
        refusing = args[0] == "rollback" and not _reads_newer_schemas(u)
        # Helm's --wait would wait for gateways that never start (below); the checks that follow wait.
        proc = u.node.helm(*args, *([] if refusing else ["--wait"]), "--timeout", "10m", timeout=660)
        assert proc.returncode == 0, (what, proc.stderr)
        if refusing:
            figures.append(_refuses_newer_schema(u, tag))
            windows[what] = (t0, time.monotonic(), "head")
            time.sleep(5)
            acked, lost = _read_back(gw, stream.snapshot())
            assert not lost, (what, lost[:5])
            keys = gw.chat("Which port does the staging database use?", key="agent")
            assert keys.status_code == 200 and "6543" in keys.text, (what, keys.status_code, keys.text[:300])
            _same_children_but_head_adds(what, u.children(), children)
            figures.append(f"{what}: {acked} acknowledged writes read back; keys work")
            continue
        try:
            wait_for(f"{what}: every pod on {tag}", partial(_runs, u, tag), timeout=600, every=2)
        except AssertionError:
            print(u.k("get", "pods", "-A", "-o", "wide", check=False))
            print(
                u.k(
                    "logs",
                    "-n",
                    OPERATOR_NS,
                    "-l",
                    "app.kubernetes.io/name=brain-operator",
                    "--tail=40",
                    check=False,
                )
            )
            raise
        rolled_s = time.monotonic() - t0
        windows[what] = (t0, time.monotonic(), "previous" if args[0] == "upgrade" else "head")
        if args[0] == "upgrade":
            drains["head"] = _drains(u)
        wait_for(f"{what}: the Brain Ready", lambda: _ready(u), timeout=300)
        time.sleep(5)  # traffic on the rolled pods too
        acked, lost = _read_back(gw, stream.snapshot())
        assert not lost, (what, lost[:5])
        keys = gw.chat("Which port does the staging database use?", key="agent")
        assert keys.status_code == 200 and "6543" in keys.text, (what, keys.status_code, keys.text[:300])
        now = u.children()
        if args[0] == "upgrade":
            # HEAD renders these for every Brain, spec.backup or not, so that enabling backups
            # later restarts nothing. Nothing else is new.
            assert set(now) - set(children) <= HEAD_ADDS and set(children) <= set(now), (
                what, sorted(set(now) ^ set(children)))  # fmt: skip
            children = now
        _same_children_but_head_adds(what, now, children)
        figures.append(
            f"{what}: rolled in {rolled_s:.0f} s; {acked} acknowledged writes read back; keys work"
        )

    outcomes = stream.stop()
    logs.__exit__()
    chats = [o for o in outcomes if o.kind == "chat"]
    broken = [o for o in chats if o.status != 200]
    writes = [o for o in outcomes if o.kind == "write"]
    acked, lost = _read_back(gw, outcomes)
    figures.append(
        f"traffic: {len(chats)} chats ({len(broken)} failed, {sum(1 for o in chats if o.status == 200 and not o.memory)}"
        f" answered without memory), {len(writes)} writes ({acked} acknowledged, all read back: {not lost}; "
        f"{sorted({str(o.status) for o in writes if o.status != 201})} otherwise)"
    )
    for what, (t0, t1, leaving) in windows.items():
        n = sum(1 for o in broken if t0 <= o.started <= t1)
        figures.append(f"{what}: {n} chats failed while the {leaving} release's gateways left (they "
                       f"{'pause' if drains[leaving] else 'do not pause'} in preStop)")  # fmt: skip
    print("\n" + "\n".join(figures))
    assert drains["head"], "HEAD's gateway pods do not pause in preStop"
    excused = [
        o
        for o in broken
        for t0, t1, leaving in windows.values()
        if t0 <= o.started <= t1 and not drains[leaving]
    ]
    if len(broken) != len(excused):
        print("gateway errors:\n" + logs.errors())
    assert chats and len(broken) == len(excused), (figures, [(o.status, o.started) for o in broken[:5]])
    assert acked and not lost, lost[:5]


def _reads_newer_schemas(u: Upgrade) -> bool:
    """Whether the previous release's gateways start on a newer schema (expand/contract, 0.2.0 on:
    brain_meta.oldest_reader). v0.1.0's do not: its migrate refuses any schema newer than it knows."""
    return "oldest_reader" in (u.chart.parents[1] / "operator" / "brain" / "store" / "migrate.py").read_text()


def _refuses_newer_schema(u: Upgrade, tag: str) -> str:
    """A rollback to a release from before expand/contract, onto HEAD's newer schema: the operator
    and the embedder roll back; the previous gateways' migrate init container refuses the schema,
    naming both versions, and never writes (nothing of the schema changes), so those pods never turn
    Ready and the Deployment keeps HEAD's gateways serving (maxUnavailable 0). No chat fails; the
    rollback is finished by restoring the pre-upgrade backup or by rolling forward
    (docs/operations.md, "Rolling back")."""
    selector = "app.kubernetes.io/component=gateway"

    def refused() -> str | None:
        for p in u.node.json("get", "pods", "-n", NS, "-l", selector)["items"]:
            if _image(p) != f"{REG}/gateway:{tag}":
                continue
            for st in (p.get("status") or {}).get("initContainerStatuses") or []:
                last = (st.get("lastState") or {}).get("terminated") or (st.get("state") or {}).get(
                    "terminated"
                )
                if st["name"] == "migrate" and last and last.get("exitCode"):
                    log = u.k(
                        "logs", "-n", NS, p["metadata"]["name"], "-c", "migrate", "--previous", check=False
                    )
                    log = log or u.k("logs", "-n", NS, p["metadata"]["name"], "-c", "migrate", check=False)
                    if "knows only up to" in log:
                        return next(ln for ln in log.splitlines() if "knows only up to" in ln)
        return None

    message = wait_for(f"the {tag} gateways refuse the newer schema", refused, timeout=600, every=3)
    wait_for(
        f"the operator and the embedder on {tag}",
        partial(_runs, u, tag, ("operator", "embedder")),
        timeout=600,
        every=2,
    )
    serving = [
        p
        for p in u.node.json("get", "pods", "-n", NS, "-l", selector)["items"]
        if _image(p) == f"{REG}/gateway:{TAG}"
        and not p["metadata"].get("deletionTimestamp")
        and all(c.get("ready") for c in (p.get("status") or {}).get("containerStatuses") or [{}])
    ]
    assert serving, "no HEAD gateway left serving while the previous ones refuse"
    return f"rollback to {tag}: its gateways refuse HEAD's schema ({message.strip()}); {len(serving)} HEAD gateways serve on"


def _image(pod: dict[str, Any]) -> str:
    return str(next(c["image"] for c in pod["spec"]["containers"] if c["name"] == "gateway"))


def _ready(u: Upgrade) -> bool:
    conditions = {
        c["type"]: c["status"]
        for c in (u.node.json("get", "brain", "team", "-n", NS).get("status") or {}).get("conditions") or []
    }
    return conditions.get("Ready") == "True"


def _drains(u: Upgrade) -> bool:
    """Whether the running gateway pods pause in preStop before they stop listening."""
    pods = u.node.json("get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=gateway")["items"]
    containers = [c for p in pods for c in p["spec"]["containers"] if c["name"] == "gateway"]
    return bool(containers) and all((c.get("lifecycle") or {}).get("preStop") for c in containers)
