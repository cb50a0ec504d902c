"""The tenant of the cluster tests (#26): a user whose only rights are a few verbs on Brains and
MemorySources in one namespace, impersonated with `kubectl --as`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tests.kit.poll import wait_for

from .conftest import Kubectl


class Tenant:
    """kubectl impersonating one user (`--as`), in one namespace."""

    def __init__(self, kc: Kubectl, user: str) -> None:
        self.kc, self.user = kc, user

    def create(self, doc: dict[str, Any]) -> Any:
        return self.kc("create", f"--as={self.user}", "-f", "-", check=False, input=json.dumps(doc))

    def can(self, verb: str, resource: str) -> bool:
        proc = self.kc("auth", "can-i", verb, resource, f"--as={self.user}", check=False)
        return proc.stdout.strip() == "yes"


def grant(
    kc: Kubectl, user: str, verbs: Sequence[str] = ("create", "update"), role: str = "brain-tenant"
) -> Tenant:
    """A Role with `verbs` on Brains and MemorySources in kc's namespace, bound to `user`, in force."""
    kc.apply({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": role},
        "rules": [{"apiGroups": ["brain.dev"], "resources": ["brains", "memorysources"], "verbs": list(verbs)}],
    })  # fmt: skip
    kc.apply({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    })  # fmt: skip
    tenant = Tenant(kc, user)
    wait_for("the tenant's Role in force", lambda: tenant.can("create", "brains.brain.dev"))
    return tenant
