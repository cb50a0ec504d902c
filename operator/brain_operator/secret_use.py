"""Secrets opt in by label before the operator reads them on a tenant's behalf (issue #26).

The operator can read every Secret in a namespace; whoever may write a Brain or a MemorySource
cannot necessarily. Without this check a reference would let them send any Secret to a host they
name (an ``apiBase``, a git URL) or to a health URL. A Secret is used only if its label
``brain.dev/secret-use`` names the use (a comma-separated list when one Secret serves several).
A refused reference is treated as unset, and the resource says so in its ``SecretsPermitted``
condition, reason ``SecretNotPermitted``, and in a Warning Event. The value is never read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brain_operator.api import Brain, MemorySource, SecretKeyRef

SECRET_USE_LABEL = "brain.dev/secret-use"
GIT_CREDENTIALS = "git-credentials"
MODEL_API_KEY = "model-api-key"
MASTER_KEY = "master-key"
TUNNEL_TOKEN = "tunnel-token"
DATABASE_URL = "database-url"
CONDITION = "SecretsPermitted"
REASON = "SecretNotPermitted"


@dataclass(frozen=True)
class Use:
    """One reference of a resource to a Secret: the spec field, the Secret and key, the use."""

    field: str
    ref: SecretKeyRef
    use: str


def uses_of(value: str | None) -> set[str]:
    """The uses a label value grants: ``"model-api-key, master-key"`` → both."""
    return {u.strip() for u in (value or "").split(",") if u.strip()}


def permitted(secret: dict[str, Any] | None, use: str) -> bool:
    labels = ((secret or {}).get("metadata") or {}).get("labels") or {}
    return use in uses_of(labels.get(SECRET_USE_LABEL))


def refusal_message(u: Use, secret: dict[str, Any] | None) -> str:
    """Names the Secret, key, field and the label required; never the value."""
    if secret is None:
        found = "does not exist"
    else:
        label = ((secret.get("metadata") or {}).get("labels") or {}).get(SECRET_USE_LABEL)
        found = f"has {SECRET_USE_LABEL}={label!r}" if label else f"has no label {SECRET_USE_LABEL}"
    return (
        f"{u.field}: Secret {u.ref.name} (key {u.ref.key!r}) {found}; it is used only with label "
        f"{SECRET_USE_LABEL}={u.use} (kubectl label secret {u.ref.name} {SECRET_USE_LABEL}={u.use})"
    )


def brain_uses(brain: Brain) -> list[Use]:
    spec = brain.spec
    out = [
        Use(f"spec.gateway.models[{i}].apiKeySecretRef", m.api_key_secret_ref, MODEL_API_KEY)
        for i, m in enumerate(spec.gateway.models)
        if m.api_key_secret_ref is not None
    ]
    if spec.gateway.auth.master_key_secret_ref is not None:
        out.append(Use("spec.gateway.auth.masterKeySecretRef", spec.gateway.auth.master_key_secret_ref, MASTER_KEY))
    if spec.tunnel is not None and spec.tunnel.token_secret_ref is not None:
        out.append(Use("spec.tunnel.tokenSecretRef", spec.tunnel.token_secret_ref, TUNNEL_TOKEN))
    if spec.database.external is not None:
        out.append(Use("spec.database.external.secretRef", spec.database.external.secret_ref, DATABASE_URL))
    return out


def source_uses(source: MemorySource) -> list[Use]:
    out = []
    for kind in ("git", "skills", "personas"):
        part = getattr(source.spec, kind, None)
        if part is not None and part.credentials_secret_ref is not None:
            out.append(Use(f"spec.{kind}.credentialsSecretRef", part.credentials_secret_ref, GIT_CREDENTIALS))
    return out


def without_refused(brain: Brain, refused: list[Use]) -> Brain:
    """The Brain as if each refused reference were unset: a model without its key, the generated
    master key, no tunnel. (A refused database Secret cannot be dropped; the caller stops.)"""
    if not refused:
        return brain
    fields = {u.field for u in refused}
    doc = brain.model_dump(by_alias=True, exclude_none=True, mode="json")
    gw = doc["spec"]["gateway"]
    for i, m in enumerate(gw.get("models") or []):
        if f"spec.gateway.models[{i}].apiKeySecretRef" in fields:
            m.pop("apiKeySecretRef", None)
    if "spec.gateway.auth.masterKeySecretRef" in fields:
        gw.get("auth", {}).pop("masterKeySecretRef", None)
    if "spec.tunnel.tokenSecretRef" in fields:
        doc["spec"].pop("tunnel", None)
    return Brain.model_validate(doc)
