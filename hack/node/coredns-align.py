#!/usr/bin/env python3
"""Raise hack/node/coredns's shared Go modules to the control plane's versions (hack/kube/go.mod).

Why: CoreDNS's kubernetes plugin pulls in client-go and its graph. At CoreDNS's own versions
(client-go v0.35) none of those packages are the ones hack/kube-build.sh just compiled, so a fresh
machine compiles that graph twice. At the control plane's versions the compiled packages are
already in GOCACHE: docs/performance.md (#12) has the package counts. Only upgrades are applied;
where CoreDNS needs a newer version than the control plane, Go's minimal version selection keeps
CoreDNS's. Run it after changing hack/kube/go.mod or CoreDNS's version, then commit go.mod/go.sum:

    python3 hack/node/coredns-align.py            # rewrites hack/node/coredns/go.{mod,sum}
    python3 hack/node/coredns-align.py --check    # exit 1 and list what is behind (the tests)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KUBE_MOD = ROOT / "hack" / "kube" / "go.mod"
COREDNS_DIR = ROOT / "hack" / "node" / "coredns"
_REQUIRE = re.compile(r"^\s*(?:require\s+)?([\w./~-]+)\s+(v[\w.+-]+)(?:\s*//.*)?$", re.M)
_REPLACE = re.compile(r"^\s*(?:replace\s+)?([\w./~-]+)\s*=>\s*[\w./~-]+\s+(v[\w.+-]+)", re.M)


def module_versions(go_mod: str) -> dict[str, str]:
    """The version each module resolves to in one go.mod (a replace wins over its require)."""
    versions = {m.group(1): m.group(2) for m in _REQUIRE.finditer(go_mod)}
    versions.update({m.group(1): m.group(2) for m in _REPLACE.finditer(go_mod)})
    return versions


def semver_key(version: str) -> tuple[tuple[int, ...], int, str]:
    """Orders Go module versions, pseudo-versions included (a pre-release sorts before its release)."""
    core, _, pre = version.removeprefix("v").partition("-")
    numbers = tuple(int(part) for part in core.split("+")[0].split("."))
    return numbers, 0 if pre else 1, pre


def behind(coredns: dict[str, str], kube: dict[str, str]) -> dict[str, str]:
    """Modules CoreDNS resolves older than the control plane: module → the control plane's version."""
    return {
        module: kube[module]
        for module, version in coredns.items()
        if module in kube and semver_key(kube[module]) > semver_key(version)
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="only report modules behind; exit 1 if any")
    args = parser.parse_args()
    coredns = module_versions((COREDNS_DIR / "go.mod").read_text())
    lagging = behind(coredns, module_versions(KUBE_MOD.read_text()))
    for module, version in sorted(lagging.items()):
        print(f"{module} {coredns[module]} -> {version}")
    if args.check or not lagging:
        return 1 if lagging else 0
    go = os.environ.get("GO", "go")
    env = {**os.environ, "GOFLAGS": "-buildvcs=false", "GOTOOLCHAIN": "local"}
    pinned = f"github.com/coredns/coredns@{coredns['github.com/coredns/coredns']}"
    subprocess.run(
        [go, "get", pinned, *(f"{m}@{v}" for m, v in lagging.items())], cwd=COREDNS_DIR, env=env, check=True
    )
    subprocess.run([go, "mod", "tidy"], cwd=COREDNS_DIR, env=env, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
