"""The real node's volume provisioner: binds every pending PVC of StorageClass `hostpath` to a
fresh directory under the node's state folder, and removes the directory once the claim is gone.

Why not the controller-manager's `--enable-hostpath-provisioner`: it creates each volume as a
root-owned 0750 directory, and hostPath volumes get no fsGroup, so a non-root database pod (the
managed Postgres runs as uid 999) cannot write its data directory. Here each directory is 0777.
It polls (one list per second) through kubectl: no client library, system Python only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

PROVISIONER = "brain.dev/node-hostpath"


def kubectl(kubectl_bin: str, kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(
        [kubectl_bin, "--kubeconfig", kubeconfig, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
    )
    if proc.returncode:
        raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def pv_for(claim: dict, root: Path, storage_class: str) -> tuple[dict, Path]:
    meta = claim["metadata"]
    path = root / f"{meta['namespace']}-{meta['name']}-{meta['uid'][:8]}"
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{meta['uid']}",
            "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": claim["spec"]["resources"]["requests"]["storage"]},
            "accessModes": claim["spec"].get("accessModes") or ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": storage_class,
            "claimRef": {"namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]},
            "hostPath": {"path": str(path), "type": "Directory"},
        },
    }
    return pv, path


def sync(kc: tuple[str, str], root: Path, storage_class: str) -> None:
    claims = json.loads(kubectl(*kc, "get", "pvc", "-A", "-o", "json"))["items"]
    pvs = json.loads(kubectl(*kc, "get", "pv", "-o", "json"))["items"]
    have = {pv["metadata"]["name"] for pv in pvs}
    for claim in claims:
        if claim["spec"].get("storageClassName") != storage_class or claim["spec"].get("volumeName"):
            continue
        pv, path = pv_for(claim, root, storage_class)
        if pv["metadata"]["name"] in have:
            continue
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o777)
        kubectl(*kc, "create", "-f", "-", stdin=json.dumps(pv))
        print(f"provisioned {pv['metadata']['name']} at {path}", flush=True)
    for pv in pvs:
        ours = pv["metadata"].get("annotations", {}).get("pv.kubernetes.io/provisioned-by") == PROVISIONER
        if ours and pv.get("status", {}).get("phase") in ("Released", "Failed"):
            path = Path(pv["spec"]["hostPath"]["path"])
            if root in path.parents:
                shutil.rmtree(path, ignore_errors=True)
            kubectl(*kc, "delete", "pv", pv["metadata"]["name"], "--wait=false")
            print(f"deleted {pv['metadata']['name']}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--kubectl", required=True)
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--root", type=Path, required=True)
    p.add_argument("--storage-class", default="hostpath")
    a = p.parse_args()
    a.root.mkdir(parents=True, exist_ok=True)
    while True:
        try:
            sync((a.kubectl, a.kubeconfig), a.root, a.storage_class)
        except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
            print(f"provisioner: {e}", file=sys.stderr, flush=True)
        time.sleep(1)


if __name__ == "__main__":
    main()
