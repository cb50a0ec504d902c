"""A small, typed Kubernetes client for the reconciler: server-side apply, list, delete, status.

Built on the official client's transport (kubeconfig, in-cluster config, TLS, token refresh) but
speaking raw JSON, so one code path handles built-in kinds and CRDs (ServiceMonitor, CNPG Cluster)
alike. Every write goes through :meth:`Kube.apply` / :meth:`create` / :meth:`delete` /
:meth:`patch_status` and is counted in ``brain_operator_api_writes_total``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from kubernetes import client, config

from brain_operator import FIELD_MANAGER
from brain_operator.metrics import API_WRITES


class KubeError(Exception):
    """A non-2xx answer from the API server."""

    def __init__(self, status: int, reason: str, body: str) -> None:
        self.status = status
        self.reason = reason
        self.body = body
        try:
            message = json.loads(body).get("message", body)
        except ValueError:
            message = body
        self.message = str(message)[:1000]
        super().__init__(f"{status} {reason}: {self.message}")


@dataclass(frozen=True)
class KindInfo:
    api_version: str
    kind: str
    plural: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def collection(self, namespace: str) -> str:
        root = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        return f"{root}/namespaces/{quote(namespace)}/{self.plural}"

    def path(self, namespace: str, name: str) -> str:
        return f"{self.collection(namespace)}/{quote(name)}"


#: Every kind the operator writes, in apply order.
CHILD_KINDS: tuple[KindInfo, ...] = (
    KindInfo("v1", "Secret", "secrets"),
    KindInfo("v1", "ConfigMap", "configmaps"),
    KindInfo("v1", "Service", "services"),
    KindInfo("v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    KindInfo("postgresql.cnpg.io/v1", "Cluster", "clusters"),
    KindInfo("apps/v1", "StatefulSet", "statefulsets"),
    KindInfo("apps/v1", "Deployment", "deployments"),
    KindInfo("batch/v1", "CronJob", "cronjobs"),
    KindInfo("batch/v1", "Job", "jobs"),
    KindInfo("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets"),
    KindInfo("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies"),
    KindInfo("monitoring.coreos.com/v1", "ServiceMonitor", "servicemonitors"),
)
POD = KindInfo("v1", "Pod", "pods")
SECRET = KindInfo("v1", "Secret", "secrets")
KINDS: dict[tuple[str, str], KindInfo] = {(k.api_version, k.kind): k for k in CHILD_KINDS}
BRAIN_KINDS = {
    "Brain": KindInfo("brain.dev/v1alpha1", "Brain", "brains"),
    "MemorySource": KindInfo("brain.dev/v1alpha1", "MemorySource", "memorysources"),
    "RoutingPolicy": KindInfo("brain.dev/v1alpha1", "RoutingPolicy", "routingpolicies"),
}


def kind_of(obj: dict[str, Any]) -> KindInfo:
    return KINDS[(obj["apiVersion"], obj["kind"])]


def load_api_client() -> client.ApiClient:
    """In-cluster config when running in a pod, else the kubeconfig ($KUBECONFIG)."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


class Kube:
    """Thread-safe (the transport pools connections); blocking: call it from a worker thread."""

    def __init__(self, api_client: client.ApiClient | None = None, timeout: float = 30.0) -> None:
        self.api = api_client or load_api_client()
        self.timeout = timeout
        self._discovery: dict[str, tuple[float, set[str]]] = {}
        self._lock = threading.Lock()

    # -- transport -------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        raw: bool = False,
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        m, url, hdrs, data, post = self.api.param_serialize(
            method,
            path,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        resp = self.api.call_api(m, url, hdrs, data, post, _request_timeout=self.timeout)
        payload = resp.read() or b""
        text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else str(payload)
        if not 200 <= resp.status <= 299:
            raise KubeError(resp.status, str(resp.reason), text)
        if raw:
            return text
        return json.loads(text) if text else None

    # -- reads -----------------------------------------------------------------------------------

    def get(self, kind: KindInfo, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = self.request("GET", kind.path(namespace, name))
            return obj
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, kind: KindInfo, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        query = [("labelSelector", selector)] if selector else []
        try:
            found = self.request("GET", kind.collection(namespace), query=query)
        except KubeError as exc:
            if exc.status == 404:  # the API (a CRD) is not installed
                return []
            raise
        items: list[dict[str, Any]] = found["items"]
        for item in items:  # list items come without apiVersion and kind
            item.setdefault("apiVersion", kind.api_version)
            item.setdefault("kind", kind.kind)
        return items

    def has_resource(self, api_version: str, plural: str, ttl: float = 60.0) -> bool:
        """Whether the API server serves ``plural`` in ``api_version`` (cached discovery)."""
        now = time.monotonic()
        with self._lock:
            cached = self._discovery.get(api_version)
        if cached is None or now - cached[0] > ttl:
            root = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            try:
                found = {r["name"] for r in self.request("GET", root).get("resources", [])}
            except KubeError as exc:
                if exc.status != 404:
                    raise
                found = set()
            cached = (now, found)
            with self._lock:
                self._discovery[api_version] = cached
        return plural in cached[1]

    def pod_log_tail(self, namespace: str, pod: str, lines: int = 20) -> str:
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(pod)}/log"
        text: str = self.request("GET", path, query=[("tailLines", str(lines))], raw=True)
        return text

    # -- writes ----------------------------------------------------------------------------------

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply under the operator's field manager, taking ownership of conflicts."""
        kind = kind_of(obj) if (obj["apiVersion"], obj["kind"]) in KINDS else BRAIN_KINDS[obj["kind"]]
        meta = obj["metadata"]
        API_WRITES.labels(verb="apply", kind=obj["kind"]).inc()
        out: dict[str, Any] = self.request(
            "PATCH",
            kind.path(meta["namespace"], meta["name"]),
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            body=obj,
            content_type="application/apply-patch+yaml",
        )
        return out

    def create(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Create; None when it already exists (the caller named it deterministically)."""
        kind = kind_of(obj)
        API_WRITES.labels(verb="create", kind=obj["kind"]).inc()
        try:
            out: dict[str, Any] = self.request(
                "POST",
                kind.collection(obj["metadata"]["namespace"]),
                query=[("fieldManager", FIELD_MANAGER)],
                body=obj,
            )
            return out
        except KubeError as exc:
            if exc.status == 409:
                return None
            raise

    def delete(self, kind: KindInfo, namespace: str, name: str) -> None:
        API_WRITES.labels(verb="delete", kind=kind.kind).inc()
        try:
            self.request(
                "DELETE",
                kind.path(namespace, name),
                body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
            )
        except KubeError as exc:
            if exc.status != 404:
                raise

    def patch_status(self, kind: KindInfo, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Merge-patch the status subresource (lists such as conditions are replaced whole)."""
        API_WRITES.labels(verb="status", kind=kind.kind).inc()
        try:
            self.request(
                "PATCH",
                kind.path(namespace, name) + "/status",
                body={"status": status},
                content_type="application/merge-patch+json",
            )
        except KubeError as exc:
            if exc.status != 404:  # deleted meanwhile
                raise
