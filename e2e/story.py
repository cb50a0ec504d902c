"""Helpers for the local user story (e2e/test_user_story.py): the operator installed with helm, the data
plane started the way `make up` starts it, and the operator's CronJobs run as local processes.

Nothing here fakes a part of the product: the helpers start the real CLI, gateway, embedder and jobs,
and read what the cluster rendered. The LLM provider is the product's own echo upstream
(`brain.local.fakeupstream`, started by `brainctl up`), scripted over its loopback control endpoints.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.parse
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml
from tests.kit.client import FakeUpstream, GatewayClient
from tests.kit.gateway import metric
from tests.kit.poll import wait_for

from brain.embedder.model import DEFAULT_MODEL as OFFLINE_MODEL
from brain.local.devdb import free_port

from .conftest import E2ECluster

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "brain-operator"
SAMPLES = ROOT / "samples"

T = TypeVar("T")


def scrape(url: str) -> str:
    try:
        return httpx.get(url, timeout=5).text
    except httpx.HTTPError:
        return ""


# ---------------------------------------------------------------------- the operator, helm-installed


@dataclass
class InstalledOperator:
    release: str
    metrics_url: str
    log: Path

    def metric(self, name: str, **labels: str) -> float:
        return metric(scrape(self.metrics_url), name, **labels)


@contextmanager
def helm_installed_operator(
    cluster: E2ECluster, namespace: str, log_dir: Path, *sets: str
) -> Iterator[InstalledOperator]:
    """`helm install` the chart (namespaced), then run the operator as a local process with the
    arguments of the Deployment the chart rendered (pods are fake on this cluster)."""
    env = cluster.kubectl_env
    rel = f"e2e-{uuid.uuid4().hex[:6]}"
    set_args = [a for s in ("watch.scope=namespaced", *sets) for a in ("--set", s)]
    proc = subprocess.run(
        ["helm", "install", rel, str(CHART), "-n", namespace, *set_args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, f"helm install failed:\n{proc.stderr}"
    dep = json.loads(cluster.kubectl("get", "deploy", f"{rel}-brain-operator", "-n", namespace, "-o", "json"))
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    port = free_port()
    args = [a for a in args if not a.startswith("--metrics-port")] + [f"--metrics-port={port}"]
    log = log_dir / "operator.log"
    out = open(log, "w")  # noqa: SIM115 - the child's for its lifetime
    op = subprocess.Popen([sys.executable, "-m", "brain_operator", *args], env=env, stdout=out, stderr=out)
    try:
        yield InstalledOperator(rel, f"http://127.0.0.1:{port}/metrics", log)
    finally:
        op.terminate()
        try:
            op.wait(timeout=30)
        except subprocess.TimeoutExpired:
            op.kill()
            op.wait(5)
        out.close()
        # kopf's finalizers stay on Brains once the operator is gone: drop them so the namespace can go.
        for kind in ("brains", "memorysources", "routingpolicies"):
            names = cluster.kubectl("get", kind, "-n", namespace, "-o", "name", check=False).split()
            for name in names:
                cluster.kubectl(
                    "patch", name, "-n", namespace, "--type=merge", "-p", '{"metadata":{"finalizers":null}}',
                    check=False,
                )  # fmt: skip
        subprocess.run(["helm", "uninstall", rel, "-n", namespace], env=env, capture_output=True, timeout=120)


# ---------------------------------------------------------------------- the data plane, `make up` style


@dataclass(kw_only=True)
class LocalStack(GatewayClient):
    """`brainctl up` (embedded Postgres, echo upstream, gateway with the offline model) plus an embedder
    service for the jobs (in a cluster the jobs reach the embedder Deployment)."""

    state: Path
    fake_url: str
    embedder_url: str
    manifest: Path = Path()
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    dsn: str = ""

    def logs(self) -> str:
        parts = []
        for p in sorted(self.state.glob("*.log")):
            parts.append(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)

    @property
    def upstream(self) -> FakeUpstream:
        return FakeUpstream(self.fake_url)

    def brainctl(self, *args: str) -> str:
        env = {**os.environ, "BRAIN_DATABASE_URL": self.dsn}
        proc = subprocess.run([brainctl_bin(), *args], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"brainctl {' '.join(args)}: {proc.stderr}"
        return proc.stdout


def brainctl_bin() -> str:
    found = Path(sys.executable).parent / "brainctl"
    return str(found) if found.exists() else shutil.which("brainctl") or "brainctl"


def local_manifest(dest: Path, upstream_port: int) -> Path:
    """samples/brain.yaml with its loopback echo model moved to a free port (the sample's :4001 may be
    taken by another `brainctl up` on this machine) and the embedding model this machine holds, which
    `brainctl up` embeds with whatever the manifest says. The story applies this file to the cluster
    too: a Brain naming another model than its gateway reports is a model change, and the operator
    would start a migration Job nobody asked for."""
    brain = yaml.safe_load((SAMPLES / "brain.yaml").read_text())
    brain["spec"]["embedding"]["model"] = OFFLINE_MODEL
    for m in brain["spec"]["gateway"]["models"]:
        base = urllib.parse.urlparse(m["apiBase"])
        if base.hostname in ("127.0.0.1", "localhost"):
            m["apiBase"] = base._replace(netloc=f"127.0.0.1:{upstream_port}").geturl()
    dest.write_text(yaml.safe_dump(brain, sort_keys=False))
    return dest


def _spawn(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    out = open(log, "ab")  # noqa: SIM115 - the child's for its lifetime
    return subprocess.Popen(args, env=env or dict(os.environ), stdout=out, stderr=subprocess.STDOUT)


@contextmanager
def local_stack() -> Iterator[LocalStack]:
    """Start `brainctl up -f samples/brain.yaml -f samples/routingpolicy.yaml` (what `make up` runs) and an
    embedder; yield at once (the gateway takes a while: call `ready()`), stop everything afterwards."""
    # Postgres runs as `nobody` when we are root, and must be able to enter the state directory.
    state = Path(tempfile.mkdtemp(prefix="brain-story-", dir="/tmp"))
    state.chmod(0o755)
    up_port, fake_port, emb_port = free_port(), free_port(), free_port()
    manifest = local_manifest(state / "brain.yaml", fake_port)
    stack = LocalStack(
        state=state,
        url=f"http://127.0.0.1:{up_port}",
        fake_url=f"http://127.0.0.1:{fake_port}",
        embedder_url=f"http://127.0.0.1:{emb_port}",
        manifest=manifest,
    )
    up = _spawn(
        [
            brainctl_bin(), "up", "-f", str(manifest), "-f", str(SAMPLES / "routingpolicy.yaml"),
            "--state-dir", str(state), "--port", str(up_port),
        ],
        state / "brainctl-up.log",
    )  # fmt: skip
    emb = _spawn(
        [sys.executable, "-m", "brain.embedder", "--port", str(emb_port), "--threads", "1"],
        state / "embedder.log",
    )
    stack.procs = [up, emb]
    try:
        yield stack
    finally:
        for p in stack.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in stack.procs:
            try:
                p.wait(timeout=40)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        shutil.rmtree(state, ignore_errors=True)


def ready(stack: LocalStack, timeout: float = 300) -> None:
    """Wait for `brainctl up`'s banner and the embedder, then read what a person would read from the state
    directory and banner: the keys (`keys.json`), the master key, and the database URL."""
    up, emb = stack.procs

    def up_and_serving() -> bool:
        if up.poll() is not None or emb.poll() is not None:
            raise AssertionError(f"a local component exited early\n{stack.logs()}")
        if "brain is up" not in (stack.state / "brainctl-up.log").read_text(errors="replace"):
            return False
        try:
            return httpx.get(f"{stack.embedder_url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for("`brainctl up` and the embedder", up_and_serving, timeout=timeout, every=1.0)
    except AssertionError:
        print(stack.logs())
        raise
    stack.keys = json.loads((stack.state / "keys.json").read_text())
    stack.master = (stack.state / "master.key").read_text().strip()
    banner = (stack.state / "brainctl-up.log").read_text(errors="replace")
    stack.dsn = re.search(r"^  database +(\S+)", banner, re.M).group(1)  # type: ignore[union-attr]


# ---------------------------------------------------------------------- CronJobs, run as local processes


@dataclass
class JobRun:
    returncode: int
    summary: dict[str, Any]
    stdout: str
    stderr: str


def run_cronjob(
    cluster: E2ECluster, namespace: str, cronjob: str, local: Mapping[str, str | None], workdir: Path
) -> JobRun:
    """Run what a CronJob's pod would run, here: its container command and environment as the operator
    rendered them, with ConfigMap volumes written to `workdir` (and paths in the command pointed there),
    and every variable in `local` replaced (cluster addresses and secrets → this machine's; None: unset).
    A variable read from a Secret that `local` does not name fails the run: the test must say what it is."""
    workdir.mkdir(parents=True, exist_ok=True)
    cj = json.loads(cluster.kubectl("get", "cronjob", cronjob, "-n", namespace, "-o", "json"))
    pod = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    command = [*container.get("command", []), *container.get("args", [])]
    for mount in container.get("volumeMounts") or []:
        vol = volumes[mount["name"]]
        if "configMap" not in vol:
            continue
        cm = json.loads(
            cluster.kubectl("get", "configmap", vol["configMap"]["name"], "-n", namespace, "-o", "json")
        )
        folder = workdir / mount["name"]
        folder.mkdir(parents=True, exist_ok=True)
        for key, text in (cm.get("data") or {}).items():
            (folder / key).write_text(text)
        command = [a.replace(mount["mountPath"], str(folder)) for a in command]
    if command[0] == "python":
        command[0] = sys.executable
    env = dict(os.environ)
    for var in container.get("env") or []:
        name = var["name"]
        if name in local:
            value = local[name]
        elif "value" in var:
            value = var["value"]
        else:
            raise AssertionError(
                f"{cronjob}: {name} comes from {var.get('valueFrom')}; say what it is locally"
            )
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=workdir)
    lines = proc.stdout.strip().splitlines()
    try:
        summary = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        summary = {}
    return JobRun(proc.returncode, summary, proc.stdout, proc.stderr)
