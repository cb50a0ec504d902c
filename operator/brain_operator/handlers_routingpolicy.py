"""kopf wiring for RoutingPolicies: any change re-renders the Brain's gateway config (and rolls it)."""

from __future__ import annotations

from typing import Any

import kopf

from brain_operator import GROUP, VERSION
from brain_operator.runtime import get_runtime


def register(registry: kopf.OperatorRegistry) -> None:
    @kopf.on.event(GROUP, VERSION, "routingpolicies", registry=registry, id="routingpolicy-event")
    async def policy_event(spec: Any, namespace: str | None, **_: Any) -> None:
        brain = (spec.get("brainRef") or {}).get("name")
        if brain and namespace:
            get_runtime().queue.enqueue(namespace, brain)
