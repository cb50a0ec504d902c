"""The real node's CoreDNS shares the control plane's Go modules, so a fresh machine compiles them once.

A CoreDNS or hack/kube bump that leaves a shared module behind still builds, and only costs a fresh
machine minutes of `make test` (#12): this is where that regression shows.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "node" / "coredns-align.py"


def _align():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("coredns_align", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_module_shared_with_the_control_plane_is_older_in_coredns() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, f"run python3 hack/node/coredns-align.py; behind:\n{result.stdout}"


def test_a_module_behind_is_named_pseudo_versions_and_replaces_included() -> None:
    align = _align()
    kube = align.module_versions(
        "require (\n\tk8s.io/client-go v0.37.2\n\tk8s.io/utils v0.0.0-20260626114624-be93311217bd // indirect\n)\n"
        "replace k8s.io/api => k8s.io/api v0.37.2\n"
    )
    coredns = align.module_versions(
        "require github.com/coredns/coredns v1.14.7\nrequire (\n\tk8s.io/api v0.35.4 // indirect\n"
        "\tk8s.io/client-go v0.37.2 // indirect\n\tk8s.io/utils v0.0.0-20251002143259-bc988d571ff4 // indirect\n)\n"
    )
    assert align.behind(coredns, kube) == {
        "k8s.io/api": "v0.37.2",
        "k8s.io/utils": "v0.0.0-20260626114624-be93311217bd",
    }
    assert align.semver_key("v1.36.12-0.20260120151049-f2248ac996af") < align.semver_key("v1.36.12")
