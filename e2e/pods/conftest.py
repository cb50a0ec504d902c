"""The real node (hack/node-up.sh) as a fixture for the user story on real pods.

``real_node`` builds the images (hack/images.sh: cached, seconds when nothing changed), starts a
control plane with one real node (containerd, kubelet, kube-proxy, CoreDNS; its own state folder
and ports, beside the kwok-only cluster other suites use), and always runs hack/node-down.sh
afterwards, pass or fail, so the machine is left clean: no pods, shims, mounts, netns, veths or
kubepods cgroups. A Docker engine this fixture started is stopped again (images stay cached).
It is package-scoped: under ``make test``'s two workers the node's tests run first on one worker
(tests/kit/workers.py), and the node goes down when they are done, not at that worker's end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.kit.cluster import parse_exports, run_tool

ROOT = Path(__file__).resolve().parents[2]
HACK = ROOT / "hack"


@dataclass(frozen=True)
class RealNode:
    env: dict[str, str]

    def kubectl(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120) -> str:
        return run_tool("kubectl", *args, env=self.env, input=input, check=check, timeout=timeout).stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json"))

    def helm(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["helm", *args], capture_output=True, text=True, env=self.env, timeout=timeout)


def _docker_answers() -> bool:
    proc = subprocess.run(["docker", "version"], capture_output=True, timeout=30, check=False)
    return proc.returncode == 0


@pytest.fixture(scope="package")  # node-down as soon as e2e/pods is done, not at the session's end
def real_node() -> Iterator[RealNode]:
    reuse = os.environ.get("BRAIN_NODE_KUBECONFIG")  # a node you started (make node-up): used, not stopped
    if reuse:
        bin_dir = str(Path(reuse).resolve().parent / "bin")
        yield RealNode(
            {**os.environ, "KUBECONFIG": reuse, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
        )
        return
    if os.geteuid() != 0:
        pytest.skip(
            "the real node needs root (containerd, kubelet, network namespaces): run make e2e-pods as root"
        )
    docker_was_up = _docker_answers()
    t0 = time.monotonic()
    built = subprocess.run(["bash", str(HACK / "images.sh")], capture_output=True, text=True, timeout=2400)
    if built.returncode:
        pytest.fail(f"hack/images.sh failed:\n{built.stderr[-3000:]}")
    t1 = time.monotonic()
    try:
        up = subprocess.run(["bash", str(HACK / "node-up.sh")], capture_output=True, text=True, timeout=1500)
        sys.stderr.write(up.stderr[-4000:])
        if up.returncode:
            pytest.fail(f"hack/node-up.sh failed ({up.returncode}):\n{up.stderr[-4000:]}")
        print(f"\nreal node: images {t1 - t0:.0f} s, node-up {time.monotonic() - t1:.0f} s", file=sys.stderr)
        kubeconfig, bin_dir = parse_exports(up.stdout)
        env = {**os.environ, "KUBECONFIG": kubeconfig, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
        yield RealNode(env)
    finally:
        if os.environ.get("BRAIN_NODE_KEEP") != "1":
            down = subprocess.run(
                ["bash", str(HACK / "node-down.sh")], capture_output=True, text=True, timeout=300
            )
            sys.stderr.write(down.stderr[-2000:])
            if not docker_was_up:
                subprocess.run(["bash", str(HACK / "docker-down.sh")], capture_output=True, timeout=60)
            assert down.returncode == 0, f"hack/node-down.sh left something behind:\n{down.stderr}"
