"""Before an upgrade: would every stored Brain, MemorySource and RoutingPolicy be valid under the
new release's CRDs?

A CRD that tightens a rule (a MemorySource name at most 63 characters, no `os.environ/` value) does
not touch objects already stored, and the API server's validation ratcheting lets them be updated
as long as the offending field is unchanged, so nothing fails at the upgrade itself. It fails later,
when the new operator reads an object its models refuse, or when someone edits it. This check finds
those objects first (#29), with the API server's own validation (OpenAPI schema and CEL rules) rather
than a copy of it: the new CRDs are installed under a throwaway group
(`preflight-<random>.brain.dev`), each stored object is sent to them as a server-side dry-run
create, and the throwaway CRDs are deleted again. Nothing of the live group is written.

    python -m brain_operator.preflight charts/brain-operator/crds    # from the new release

Needs `kubectl` on PATH, pointing at the cluster, with the rights to create and delete CRDs (which
an upgrader applying CRDs has anyway) and to list the brain.dev objects. Exit 0: every object is
valid; 1: some are not, each named with the API server's message; 2: the check could not run.
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LIVE_GROUP = "brain.dev"


@dataclass(frozen=True)
class Finding:
    """One stored object the new CRDs refuse."""

    kind: str
    namespace: str
    name: str
    message: str

    def line(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}: {self.message}"


def rename_crd(crd: dict[str, Any], group: str) -> dict[str, Any]:
    """The CRD with its group (and so its name) replaced; schema, rules and versions unchanged."""
    out = json.loads(json.dumps(crd))
    plural = out["spec"]["names"]["plural"]
    out["metadata"] = {"name": f"{plural}.{group}"}
    out["spec"]["group"] = group
    out["spec"].pop("conversion", None)  # a webhook of the live group would not serve this one
    return out


def as_candidate(obj: dict[str, Any], group: str, version: str) -> dict[str, Any]:
    """A stored object as a create request to the throwaway group: its spec, name and labels; the
    server's fields (status, uid, resourceVersion, managedFields) left behind."""
    meta = obj.get("metadata", {})
    return {
        "apiVersion": f"{group}/{version}",
        "kind": obj["kind"],
        "metadata": {k: v for k, v in meta.items() if k in ("name", "namespace", "labels", "annotations")},
        **({"spec": obj["spec"]} if "spec" in obj else {}),
    }


def brain_crds(crds: list[dict[str, Any]], live_group: str) -> list[dict[str, Any]]:
    return [
        c for c in crds if c.get("kind") == "CustomResourceDefinition" and c["spec"]["group"] == live_group
    ]


def served_version(crd: dict[str, Any]) -> str:
    return next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))


class Kubectl:
    """The cluster as `kubectl` sees it; every call is bounded in time."""

    def __init__(self, binary: str = "kubectl") -> None:
        self.binary = binary

    def __call__(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, *args], input=input, capture_output=True, text=True, timeout=120, check=False
        )

    def json(self, *args: str) -> dict[str, Any]:
        proc = self(*args, "-o", "json")
        if proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return dict(json.loads(proc.stdout))


def read_crds(kubectl: Kubectl, path: Path) -> list[dict[str, Any]]:
    """The CRD files as the API server would read them (kubectl parses the YAML)."""
    proc = kubectl("create", "--dry-run=client", "-f", str(path), "-o", "json")
    if proc.returncode != 0:
        raise RuntimeError(f"reading {path}: {proc.stderr.strip()}")
    docs: list[dict[str, Any]] = []
    text, at = proc.stdout, 0
    decoder = json.JSONDecoder()
    while text[at:].strip():  # one JSON document per object, one after another
        at += len(text[at:]) - len(text[at:].lstrip())
        doc, at = decoder.raw_decode(text, at)
        docs.extend(doc.get("items", [doc]) if doc.get("kind") == "List" else [doc])
    return docs


def check(kubectl: Kubectl, crds_path: Path, live_group: str = LIVE_GROUP) -> tuple[list[Finding], int]:
    """The stored objects of `live_group` the brain.dev CRDs at `crds_path` refuse, and how many were
    checked. `live_group` is brain.dev but for a test, which stores its objects under a group of
    its own so as not to replace the cluster's CRDs."""
    crds = brain_crds(read_crds(kubectl, crds_path), LIVE_GROUP)
    if not crds:
        raise RuntimeError(f"{crds_path}: no CustomResourceDefinition of group {LIVE_GROUP}")
    group = f"preflight-{secrets.token_hex(4)}.{live_group}"
    renamed = [rename_crd(c, group) for c in crds]
    findings: list[Finding] = []
    checked = 0
    try:
        proc = kubectl(
            "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": renamed})
        )
        if proc.returncode != 0:
            raise RuntimeError(f"installing the throwaway CRDs of {group}: {proc.stderr.strip()}")
        for c in renamed:
            wait = kubectl(
                "wait", "--for=condition=Established", "--timeout=60s", f"crd/{c['metadata']['name']}"
            )
            if wait.returncode != 0:
                raise RuntimeError(f"crd/{c['metadata']['name']} never Established: {wait.stderr.strip()}")
        time.sleep(1)  # discovery catches up with the new group
        for crd in crds:
            plural, version = crd["spec"]["names"]["plural"], served_version(crd)
            stored = kubectl.json("get", f"{plural}.{live_group}", "-A")
            for obj in stored.get("items", []):
                meta = obj["metadata"]
                if meta.get("deletionTimestamp"):
                    continue  # on its way out: the new CRDs will never serve it
                checked += 1
                sent = kubectl(
                    "create", "--dry-run=server", "-f", "-",
                    input=json.dumps(as_candidate(obj, group, version)),
                )  # fmt: skip
                if sent.returncode != 0 and "because it is being terminated" in sent.stderr:
                    checked -= 1  # its namespace is being deleted, and the object with it
                elif sent.returncode != 0:
                    message = sent.stderr.strip().replace(group, live_group)
                    findings.append(Finding(obj["kind"], meta.get("namespace", ""), meta["name"], message))
    finally:
        for c in renamed:
            kubectl("delete", "crd", c["metadata"]["name"], "--ignore-not-found", "--wait=false")
    return findings, checked


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m brain_operator.preflight",
        description=__doc__.split("\n\n")[0].replace("\n", " ") if __doc__ else None,
        epilog="Run it before `kubectl apply` of the new CRDs and `helm upgrade` (docs/operations.md, "
        '"Upgrading"). Exit 0: all valid; 1: some object is refused (each named); 2: the check could not run.',
    )
    p.add_argument(
        "crds", type=Path, help="the new release's CRD directory or file (charts/brain-operator/crds)"
    )
    p.add_argument("--kubectl", default="kubectl", help="kubectl binary [%(default)s]")
    p.add_argument(
        "--group", default=LIVE_GROUP, help="the API group whose stored objects are checked [%(default)s]"
    )
    args = p.parse_args(argv)
    try:
        findings, checked = check(Kubectl(args.kubectl), args.crds, args.group)
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
        print(f"preflight: could not check: {e}", file=sys.stderr)
        return 2
    for f in findings:
        print(f.line())
    print(
        f"preflight: {checked - len(findings)} of {checked} stored {args.group} objects valid under {args.crds}",
        file=sys.stderr,
    )
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
