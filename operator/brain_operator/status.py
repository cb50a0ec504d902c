"""Pure status logic: live children (+ gateway health) → conditions, phase, endpoints.

Conditions keep their ``lastTransitionTime`` unless their status flips, so recomputing an unchanged
status yields an identical object and the reconciler writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from brain_operator.api import BrainPhase, BrainSpec, Condition, Endpoints
from brain_operator.health import Health
from brain_operator.render import names
from brain_operator.render.common import GATEWAY_PORT

Status = Literal["True", "False", "Unknown"]


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Check:
    """One component's readiness, with a reason a person can act on."""

    status: Status
    reason: str
    message: str

    @property
    def ok(self) -> bool:
        return self.status == "True"


def workload_ready(obj: dict[str, Any] | None, what: str) -> Check:
    """A Deployment or StatefulSet is ready when its current generation has every replica ready."""
    if obj is None:
        return Check("False", "NotFound", f"{what} does not exist yet")
    spec, st = obj.get("spec", {}), obj.get("status", {})
    want = int(spec.get("replicas", 1))
    ready = int(st.get("readyReplicas", 0) or 0)
    updated = int(st.get("updatedReplicas", 0) or 0)
    current = int(st.get("observedGeneration", 0) or 0) >= int(obj["metadata"].get("generation", 0) or 0)
    if not current:
        return Check("False", "RollingOut", f"{what}: controller has not seen the latest spec yet")
    if ready >= want and updated >= want:
        return Check("True", "ReplicasReady", f"{what}: {ready}/{want} replicas ready")
    if updated < want:
        return Check("False", "RollingOut", f"{what}: {updated}/{want} replicas updated, {ready} ready")
    return Check("False", "ReplicasNotReady", f"{what}: {ready}/{want} replicas ready")


def cnpg_ready(obj: dict[str, Any] | None, what: str) -> Check:
    if obj is None:
        return Check("False", "NotFound", f"{what} does not exist yet")
    want = int(obj.get("spec", {}).get("instances", 1))
    ready = int(obj.get("status", {}).get("readyInstances", 0) or 0)
    if ready >= want:
        return Check("True", "InstancesReady", f"{what}: {ready}/{want} instances ready")
    return Check("False", "InstancesNotReady", f"{what}: {ready}/{want} instances ready")


def secret_has_key(obj: dict[str, Any] | None, name: str, key: str) -> Check:
    if obj is None:
        return Check("False", "SecretMissing", f"Secret {name} (with key {key!r}) does not exist")
    if key not in (obj.get("data") or {}):
        return Check("False", "SecretKeyMissing", f"Secret {name} has no key {key!r}")
    return Check(
        "True", "ExternalDatabaseConfigured", f"connection string read from Secret {name}, key {key!r}"
    )


def index_check(health: Health | None) -> Check:
    if health is None:
        return Check("Unknown", "NotChecked", "the gateway health endpoint has not been read yet")
    if health.error is not None:
        return Check("Unknown", "HealthUnreachable", f"could not read gateway health: {health.error}")
    if health.healthy:
        return Check("True", "IndexHealthy", "gateway reports database and embedder ok")
    return Check(
        "False",
        "IndexDegraded",
        f"gateway reports status={health.status}, database={health.database}, embedder={health.embedder}",
    )


def merge_conditions(
    previous: list[dict[str, Any]] | None, checks: dict[str, Check], generation: int | None, now: str
) -> list[dict[str, Any]]:
    """New conditions in a fixed order; transition times survive when the status is unchanged."""
    old = {c.get("type"): c for c in previous or []}
    out = []
    for ctype, check in checks.items():
        before = old.get(ctype)
        changed = before is None or before.get("status") != check.status
        cond = Condition(
            type=ctype,
            status=check.status,
            reason=check.reason,
            message=check.message[:4096],
            last_transition_time=now if changed or before is None else before.get("lastTransitionTime", now),
            observed_generation=generation,
        )
        out.append(cond.to_k8s())
    return out


def ready_check(components: dict[str, Check]) -> Check:
    failing = [f"{name}: {c.message}" for name, c in components.items() if not c.ok]
    if not failing:
        return Check("True", "AllComponentsReady", "database, embedder and gateway are ready")
    return Check("False", "ComponentsNotReady", "; ".join(failing))


def phase_of(components: dict[str, Check], index: Check, error: str | None) -> BrainPhase:
    if error is not None:
        return "Failed"
    if all(c.ok for c in components.values()):
        return "Degraded" if index.status == "False" else "Ready"
    if any(c.ok for c in components.values()):
        return "Progressing"
    return "Pending"


def endpoints(spec: BrainSpec, name: str, namespace: str) -> Endpoints:
    if spec.tunnel is not None and spec.tunnel.hostname:
        base = f"https://{spec.tunnel.hostname}"
    else:
        base = f"http://{names.gateway(name)}.{namespace}.svc:{GATEWAY_PORT}"
    return Endpoints(gateway=base, mcp=f"{base}/mcp")


def status_differs(current: dict[str, Any] | None, desired: dict[str, Any]) -> bool:
    """Whether writing ``desired`` would change anything (only the keys we own count)."""
    current = current or {}
    return any(current.get(k) != v for k, v in desired.items())
