"""An in-memory stand-in for the API server, just faithful enough for reconciler unit tests.

It stores applied objects, adds server-side fields (uid, generation, defaults) the way a real API
server does, bumps generation on spec changes and records every write, so tests can assert
"a no-op reconcile writes nothing" without a cluster. The real thing is exercised by the
cluster tests.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from brain_operator.kube import KindInfo, KubeError

_uid = itertools.count(1)


def _matches(obj: dict[str, Any], selector: str | None) -> bool:
    if not selector:
        return True
    labels = obj["metadata"].get("labels") or {}
    for term in selector.split(","):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


def _server_defaults(obj: dict[str, Any]) -> None:
    """A few of the defaults a real API server adds (the diff must tolerate them)."""
    spec = obj.get("spec")
    if obj["kind"] in ("Deployment", "StatefulSet") and spec:
        spec.setdefault("revisionHistoryLimit", 10)
        spec["template"]["spec"].setdefault("dnsPolicy", "ClusterFirst")
        for c in spec["template"]["spec"]["containers"]:
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("imagePullPolicy", "IfNotPresent")
    if obj["kind"] == "Service" and spec:
        spec.setdefault("clusterIP", "10.0.0.1")
        for p in spec["ports"]:
            p.setdefault("protocol", "TCP")


class FakeKube:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.writes: list[str] = []
        self.apis = {"postgresql.cnpg.io/v1": False, "monitoring.coreos.com/v1": False}
        self.logs: dict[str, str] = {}

    # helpers for tests
    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        meta.setdefault("uid", f"uid-{next(_uid)}")
        meta.setdefault("generation", 1)
        meta.setdefault("namespace", "team-ns")
        self.objects[(obj["kind"], meta["namespace"], meta["name"])] = obj
        return obj

    def obj(self, kind: str, name: str, ns: str = "team-ns") -> dict[str, Any]:
        return self.objects[(kind, ns, name)]

    def reset_writes(self) -> None:
        self.writes.clear()

    # the Kube interface
    def get(self, kind: KindInfo, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.objects.get((kind.kind, namespace, name))
        return copy.deepcopy(found) if found else None

    def list(self, kind: KindInfo, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(o)
            for (k, ns, _), o in sorted(self.objects.items())
            if k == kind.kind and ns == namespace and _matches(o, selector)
        ]

    def has_resource(self, api_version: str, plural: str, ttl: float = 60.0) -> bool:
        return self.apis.get(api_version, True)

    def pod_log_tail(self, namespace: str, pod: str, lines: int = 20) -> str:
        return self.logs.get(pod, "")

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(f"apply {obj['kind']}/{obj['metadata']['name']}")
        key = (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        old = self.objects.get(key)
        new = copy.deepcopy(obj)
        _server_defaults(new)
        meta = new["metadata"]
        if old:
            meta["uid"] = old["metadata"]["uid"]
            gen = old["metadata"]["generation"]
            meta["generation"] = gen + 1 if old.get("spec") != new.get("spec") else gen
            if "status" in old:
                new["status"] = old["status"]
        else:
            meta["uid"] = f"uid-{next(_uid)}"
            meta["generation"] = 1
        self.objects[key] = new
        return copy.deepcopy(new)

    def create(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        self.writes.append(f"create {obj['kind']}/{obj['metadata']['name']}")
        key = (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        if key in self.objects:
            return None
        return self.put(obj)

    def delete(self, kind: KindInfo, namespace: str, name: str) -> None:
        self.writes.append(f"delete {kind.kind}/{name}")
        self.objects.pop((kind.kind, namespace, name), None)

    def patch_status(self, kind: KindInfo, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.writes.append(f"status {kind.kind}/{name}")
        obj = self.objects.get((kind.kind, namespace, name))
        if obj is None:
            raise KubeError(404, "NotFound", "{}")
        current = obj.setdefault("status", {})
        for key, value in status.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = copy.deepcopy(value)
