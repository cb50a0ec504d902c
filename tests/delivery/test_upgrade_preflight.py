"""Before an upgrade, the preflight names every stored object the new CRDs would refuse (#29).

Real kube-apiserver. The "stored" objects are created under v0.1.0's CRDs (read from git at
hack/releases.txt's commit) installed under a group of the test's own, so the cluster's live
brain.dev CRDs, which other tests use at the same time, are never replaced. Two objects were valid
in v0.1.0 and are not in HEAD (#26 tightened both rules; v0.2.0 already holds them, so v0.1.0 is
the release that can still store such objects); a third is valid in both.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import yaml

from brain_operator.preflight import rename_crd
from tests.kit.migration_compat import releases

ROOT = Path(__file__).resolve().parents[2]
HEAD_CRDS = ROOT / "charts" / "brain-operator" / "crds"


def _old_crds(group: str) -> list[dict[str, Any]]:
    commit = releases()["v0.1.0"]  # the last release before #26's rules
    out = []
    for kind in ("brains", "memorysources", "routingpolicies"):
        text = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{commit}:charts/brain-operator/crds/brain.dev_{kind}.yaml"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout  # fmt: skip
        out.append(rename_crd(yaml.safe_load(text), group))
    return out


def _brain(name: str, model_name: str) -> dict[str, Any]:
    return {
        "kind": "Brain",
        "metadata": {"name": name},
        "spec": {"gateway": {"models": [{"name": model_name, "model": "openai/echo"}]}},
    }


def _preflight(kube_cluster: Any, group: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "brain_operator.preflight", str(HEAD_CRDS), "--group", group,
         "--kubectl", kube_cluster.tool("kubectl")],
        capture_output=True, text=True, env=kube_cluster.env, timeout=300,
    )  # fmt: skip


def test_preflight_names_the_objects_the_new_crds_refuse(kube_cluster: Any, kube_namespace: str) -> None:
    group = f"old-{uuid.uuid4().hex[:8]}.brain.dev"
    crds = _old_crds(group)
    kube_cluster.kubectl(
        "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": crds})
    )
    try:
        for c in crds:
            kube_cluster.kubectl(
                "wait", "--for=condition=Established", "--timeout=60s", f"crd/{c['metadata']['name']}"
            )
        long_name = "m" * 64
        objects = [
            _brain("team", "echo"),
            _brain("leaky", "os.environ/BRAIN_MASTER_KEY"),
            {
                "kind": "MemorySource",
                "metadata": {"name": long_name},
                "spec": {
                    "brainRef": {"name": "team"},
                    "namespace": "shared",
                    "schedule": "0 * * * *",
                    "git": {"url": "https://github.com/example/m.git", "ref": "main"},
                },
            },
        ]
        for obj in objects:
            obj["apiVersion"] = f"{group}/v1alpha1"
            created = kube_cluster.kubectl(
                "create", "-n", kube_namespace, "-f", "-", input=json.dumps(obj), check=False
            )
            assert created.returncode == 0, (obj["metadata"]["name"], created.stderr)  # valid in v0.1.0

        proc = _preflight(kube_cluster, group)
        assert proc.returncode == 1, (proc.stdout, proc.stderr)
        lines = proc.stdout.splitlines()
        assert len(lines) == 2, (proc.stdout, proc.stderr)
        leaky = next(x for x in lines if f"Brain {kube_namespace}/leaky:" in x)
        assert "os.environ/" in leaky and "spec.gateway.models[0].name" in leaky, leaky
        source = next(x for x in lines if f"MemorySource {kube_namespace}/{long_name}:" in x)
        assert "63" in source, source
        assert "team" not in " ".join(x.split(":")[0] for x in lines)  # the valid Brain is not named
        assert "1 of 3 stored" in proc.stderr, proc.stderr
        assert group in proc.stderr

        # nothing of the throwaway group is left behind, and nothing of the checked one changed
        crd_names = kube_cluster.kubectl("get", "crd", "-o", "name").stdout
        leftover = [n for n in crd_names.split() if ".preflight-" in n]
        for n in leftover:  # deleted without waiting: at most terminating
            state = kube_cluster.kubectl(
                "get", n, "-o", "jsonpath={.metadata.deletionTimestamp}", check=False
            )
            assert state.returncode != 0 or state.stdout, n
        names = kube_cluster.kubectl(
            "get", f"brains.{group}", "-n", kube_namespace, "-o", "name"
        ).stdout.split()
        assert len(names) == 2

        # fixed, the same check passes
        kube_cluster.kubectl("delete", f"brains.{group}", "leaky", "-n", kube_namespace)
        kube_cluster.kubectl("delete", f"memorysources.{group}", long_name, "-n", kube_namespace)
        ok = _preflight(kube_cluster, group)
        assert ok.returncode == 0 and ok.stdout == "" and "1 of 1 stored" in ok.stderr, (ok.stdout, ok.stderr)
    finally:
        for c in crds:
            kube_cluster.kubectl("delete", "crd", c["metadata"]["name"], "--wait=false", check=False)


def test_preflight_that_cannot_reach_the_crds_says_so(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "brain_operator.preflight", str(tmp_path / "missing"), "--kubectl", "/bin/false"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "could not check" in proc.stderr, proc.stderr
