"""`make bench` part: the real node (hack/node-up.sh) and `helm install` → Brain Ready on it, as Markdown.

Starts the node (root only; the images of hack/images.sh, cached), installs the chart with the local
images, applies the sample Brain (pointed at an in-cluster fake upstream), and times each step until
the Brain's Ready condition is True with every pod Running and Ready; then node-down. Run alone:
`python -m hack.bench.pods`. Not root: the section says so and measures nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from e2e.pods.conftest import RealNode
from e2e.pods.story_pods import CHART, brain_manifest, helm_values, helpers_manifest, pods_ready
from hack.bench import on_the_real_node, parser, results
from tests.kit.cluster import parse_exports


def timed(args: list[str], timeout: float) -> tuple[float, subprocess.CompletedProcess[str]]:
    t = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    return time.monotonic() - t, proc


def main() -> None:
    parser(__spec__.name, __doc__).parse_args()
    if not on_the_real_node("Real node"):
        return
    head = ["## Real node", ""]
    build_s, build = timed(["bash", "hack/node-build.sh"], 3600)
    if build.returncode:
        sys.exit(f"hack/node-build.sh failed:\n{build.stderr[-2000:]}")
    subprocess.run(["bash", "hack/images.sh"], capture_output=True, check=True, timeout=3600)
    up_s, up = timed(["bash", "hack/node-up.sh"], 1500)
    try:
        if up.returncode:
            sys.exit(f"hack/node-up.sh failed:\n{up.stderr[-3000:]}")
        kubeconfig, bin_dir = parse_exports(up.stdout)
        node = RealNode({**os.environ, "KUBECONFIG": kubeconfig, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
        node.kubectl("create", "namespace", "brain-system")
        node.kubectl("create", "namespace", "team")
        node.kubectl("apply", "-n", "team", "-f", "-", input=helpers_manifest("team", {"README.md": "x\n"}))
        t0 = time.monotonic()
        helm = node.helm(
            "install", "brain-operator", str(CHART), "-n", "brain-system", *helm_values("team"), "--wait"
        )
        if helm.returncode:
            sys.exit(f"helm install failed:\n{helm.stderr}")
        helm_s = time.monotonic() - t0
        node.kubectl("apply", "-n", "team", "-f", "-", input=brain_manifest("team"))
        node.kubectl(
            "wait", "brain/team", "-n", "team", "--for=condition=Ready", "--timeout=900s", timeout=920
        )
        ready_s = time.monotonic() - t0
        while not pods_ready(node, "team")[0] and time.monotonic() - t0 < 900:
            time.sleep(1)
        pods_s = time.monotonic() - t0
    finally:
        down_s, _ = timed(["bash", "hack/node-down.sh"], 300)
    rows = [
        "| step | seconds |",
        "| --- | --- |",
        f"| hack/node-build.sh (cached here; cold: see docs/control-plane.md) | {build_s:.1f} |",
        f"| hack/node-up.sh (control plane, containerd, image import, kubelet, kube-proxy, CoreDNS) | {up_s:.0f} |",
        f"| `helm install --wait` (2 operator replicas Ready) | {helm_s:.0f} |",
        f"| `helm install` → Brain Ready (sample Brain applied after the install) | {ready_s:.0f} |",
        f"| `helm install` → every pod Running and Ready | {pods_s:.0f} |",
        f"| hack/node-down.sh | {down_s:.0f} |",
    ]
    text = "\n".join([*head, *rows, ""])
    results.emit("pods", {}, markdown=text)
    print(text)


if __name__ == "__main__":
    main()
