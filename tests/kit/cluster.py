"""Pytest plugin: the local Kubernetes control plane (hack/cluster-up.sh) as fixtures.

Register it once, in tests/conftest.py:

    pytest_plugins = ["tests.kit.cluster"]

Fixtures
- ``kube_cluster`` (session): brings the cluster up once (builds the binaries the first time on
  a machine), sets ``os.environ["KUBECONFIG"]`` and puts kubectl/helm/kind first on ``PATH``;
  returns a :class:`KubeCluster`. A cluster this session started is stopped at the end unless
  ``BRAIN_KUBE_KEEP=1``; one that was already running (``make cluster-up``) is left running.
- ``kube_namespace`` (function): a fresh namespace (its ``default`` service account exists),
  deleted afterwards.

The one-time build and the start run in ``pytest_collection_modifyitems`` when a collected test
uses the cluster, so neither is charged to any test's pytest-timeout (a start killed by that
timeout left a half cluster that every later cluster test of the session errored on).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
HACK = ROOT / "hack"
_FIXTURES = {"kube_cluster", "kube_namespace"}
#: cluster-up's result when collection started the cluster (the kube_cluster fixture takes it over)
_STARTED = pytest.StashKey[subprocess.CompletedProcess[str]]()


def run_tool(
    binary: str,
    *args: str,
    env: dict[str, str],
    input: str | None = None,
    check: bool = True,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """kubectl (or helm, kind) against the cluster `env` names: the one place the suite, the e2e
    stories and the benches run it, so a failure always says the command, its exit and its output."""
    proc = subprocess.run(
        [binary, *args], input=input, capture_output=True, text=True, env=env, timeout=timeout
    )
    if check and proc.returncode != 0:
        name = Path(binary).name
        raise AssertionError(
            f"{name} {' '.join(args)} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc


@dataclass(frozen=True)
class KubeCluster:
    kubeconfig: str
    bin_dir: str
    started_here: bool

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["KUBECONFIG"] = self.kubeconfig
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        return env

    def tool(self, name: str) -> str:
        return str(Path(self.bin_dir) / name)

    def run(
        self,
        tool: str,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl/helm/kind from the cluster's bin folder against this cluster."""
        return run_tool(self.tool(tool), *args, env=self.env, input=input, check=check, timeout=timeout)

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return self.run("kubectl", *args, input=input, check=check, timeout=timeout)

    def apply(self, manifest: str, namespace: str | None = None) -> None:
        ns = ["-n", namespace] if namespace else []
        self.kubectl("apply", *ns, "-f", "-", input=manifest)

    def ensure_crds(self) -> None:
        """The chart's CRDs, created if missing and never replaced: other suites share the cluster,
        and a test that needs them must not depend on one that ran before it."""
        for path in sorted((ROOT / "charts" / "brain-operator" / "crds").glob("*.yaml")):
            name = yaml.safe_load(path.read_text())["metadata"]["name"]
            if self.kubectl("get", "crd", name, check=False).returncode != 0:
                proc = self.kubectl("create", "-f", str(path), check=False)
                assert proc.returncode == 0 or "AlreadyExists" in proc.stderr, proc.stderr
            self.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")


def parse_exports(stdout: str) -> tuple[str, str]:
    """(kubeconfig, bin_dir) from hack/cluster-up.sh's two `export` lines."""
    kubeconfig = bin_dir = None
    for line in stdout.splitlines():
        if not line.startswith("export "):
            continue
        (assignment,) = shlex.split(line[len("export ") :], posix=True)
        key, _, value = assignment.partition("=")
        if key == "KUBECONFIG":
            kubeconfig = value
        elif key == "PATH":
            bin_dir = value.removesuffix(":$PATH")
    if not kubeconfig or not bin_dir:
        raise RuntimeError(f"cluster-up.sh printed no exports: {stdout!r}")
    return kubeconfig, bin_dir


def _uses_cluster(item: pytest.Item) -> bool:
    return item.get_closest_marker("cluster") is not None or bool(
        _FIXTURES & set(getattr(item, "fixturenames", ()))
    )


@pytest.hookimpl(trylast=True)  # after `-m`/`-k` deselection
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    # Build (first run on a machine: minutes) before any test starts its timeout clock.
    if config.option.collectonly or not any(_uses_cluster(i) for i in items):
        return
    if os.environ.get("BRAIN_KUBE_SKIP_BUILD") == "1":
        return
    proc = subprocess.run(["bash", str(HACK / "kube-build.sh")], stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise pytest.UsageError("hack/kube-build.sh failed (see its output above)")
    # The start too, for the same reason: a session fixture's setup counts against the first test
    # that asks for it, and on a loaded machine (two workers) cluster-up plus that test's own
    # module fixtures can pass the 300 s. Killed mid-start (pytest-timeout), cluster-up cannot
    # clean up, and every later cluster test of the session errors on the half-started one.
    config.stash[_STARTED] = _cluster_up()


def _cluster_up() -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["bash", str(HACK / "cluster-up.sh")], capture_output=True, text=True, timeout=900
        )
    except BaseException:  # interrupted: stop what it had started, or the next start meets it
        subprocess.run(["bash", str(HACK / "cluster-down.sh")], check=False, timeout=120)
        raise


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A cluster started at collection that no test ended up using (e.g. ``-x``) is stopped too."""
    proc = session.config.stash.get(_STARTED, None)
    started = proc is not None and proc.returncode == 0 and "already running" not in proc.stderr
    if started and os.environ.get("BRAIN_KUBE_KEEP") != "1":
        subprocess.run(["bash", str(HACK / "cluster-down.sh")], check=False, timeout=120)


@pytest.fixture(scope="session")
def kube_cluster(request: pytest.FixtureRequest) -> Iterator[KubeCluster]:
    if shutil.which("openssl") is None or shutil.which("curl") is None:
        pytest.fail("the local control plane needs openssl and curl")
    proc = request.config.stash.get(_STARTED, None)
    if proc is None:
        proc = _cluster_up()
    else:
        del request.config.stash[_STARTED]  # this fixture owns it now (and stops it at its end)
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        pytest.fail(f"hack/cluster-up.sh failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    kubeconfig, bin_dir = parse_exports(proc.stdout)
    cluster = KubeCluster(kubeconfig, bin_dir, started_here="already running" not in proc.stderr)

    saved = {k: os.environ.get(k) for k in ("KUBECONFIG", "PATH")}
    os.environ.update(KUBECONFIG=kubeconfig, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    try:
        yield cluster
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if cluster.started_here and os.environ.get("BRAIN_KUBE_KEEP") != "1":
            subprocess.run(["bash", str(HACK / "cluster-down.sh")], check=False, timeout=120)


@pytest.fixture
def kube_namespace(kube_cluster: KubeCluster) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    kube_cluster.kubectl("create", "namespace", name)
    deadline = time.monotonic() + 60
    while kube_cluster.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode:
        if time.monotonic() > deadline:
            raise AssertionError(f"no default service account in namespace {name} after 60 s")
        time.sleep(0.2)
    try:
        yield name
    finally:
        kube_cluster.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


@pytest.fixture(scope="module")
def foreign_crds(kube_cluster: KubeCluster) -> Iterator[KubeCluster]:
    """The real CloudNativePG ``Cluster`` and prometheus-operator ``ServiceMonitor``/``PrometheusRule``
    CRDs (hack/foreign-crds.sh), installed for one module and removed afterwards, so every other
    suite still sees a cluster without them (the common case the operator must also handle)."""
    proc = subprocess.run(
        ["bash", str(HACK / "foreign-crds.sh")], capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        pytest.fail(f"hack/foreign-crds.sh failed:\n{proc.stderr[-2000:]}")
    folder = proc.stdout.strip()
    kube_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", folder)
    kube_cluster.kubectl("wait", "--for=condition=Established", "-f", folder, "--timeout=60s")
    try:
        yield kube_cluster
    finally:
        kube_cluster.kubectl(
            "delete", "-f", folder, "--ignore-not-found", "--wait=true", check=False, timeout=180
        )
