"""Secrets opt in by label before the operator uses them on a tenant's behalf (issue #26).

The operator may read every Secret of a watched namespace; whoever may write a Brain or a
MemorySource often may not. Each Secret a spec names ends up in a pod the operator creates
(``secretKeyRef``), and from there goes where the spec says: a model's API key to its ``apiBase``,
git credentials to the host of the source URL, the master key to the gateway and its health poll.
Without a check, a right to write a Brain would be a right to send any Secret of the namespace to
a host of one's choosing.

So a Secret is used only when its owner said for what: its label ``brain.dev/secret-use`` must
name the use of the field that refers to it (one use per Secret, as Argo CD's
``argocd.argoproj.io/secret-type``). The check reads the Secret by name (the operator never lists
Secrets) and looks at its labels only; a refusal message names the field, the Secret, the key and
the label to add, never a value. It reads the same whether the Secret is missing, unlabelled or
labelled for another use: a tenant learns nothing about the namespace's Secrets from it (the
operator's log, read by whoever runs the operator, says which).

What a refusal does (the reconciler applies it; docs/security.md lists it):

- ``spec.gateway.models[i].apiKeySecretRef``: the model is served without a key;
- ``spec.gateway.auth.masterKeySecretRef``: the operator's generated ``<brain>-master-key`` is used;
- ``spec.tunnel.tokenSecretRef``: no tunnel (the gateway keeps its in-cluster Service);
- ``spec.database.external.secretRef``: nothing is applied, the Brain is Failed (there is no
  database to fall back to);
- a MemorySource's ``credentialsSecretRef``: that source gets no ingest Job or CronJob.

The names the operator generates (``<brain>-master-key``, ``<brain>-db-credentials``) are a reference
too, chosen through the Brain's name: a Secret already there that this Brain did not generate is
adopted (its value used, its ownership taken) only when labelled for the use; else nothing is
applied.

Each refused reference shows in the ``SecretsPermitted`` condition (reason ``SecretNotPermitted``)
of the Brain or MemorySource and in a Warning Event on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from brain_operator.api import Brain, MemorySource, SecretKeyRef

SECRET_USE_LABEL = "brain.dev/secret-use"
GIT_CREDENTIALS = "git-credentials"
MODEL_API_KEY = "model-api-key"
MASTER_KEY = "master-key"
TUNNEL_TOKEN = "tunnel-token"
DATABASE_URL = "database-url"
#: The label of the managed database's superuser Secret (`<brain>-db-credentials`): a use no spec
#: field has, so no Brain can name it (as an external database it ran every pod as the superuser).
DATABASE_SUPERUSER = "database-superuser"
USES = (GIT_CREDENTIALS, MODEL_API_KEY, MASTER_KEY, TUNNEL_TOKEN, DATABASE_URL)
SECRETS_CONDITION = "SecretsPermitted"
SECRET_NOT_PERMITTED = "SecretNotPermitted"

MASTER_KEY_FIELD = "spec.gateway.auth.masterKeySecretRef"
TUNNEL_FIELD = "spec.tunnel.tokenSecretRef"
DATABASE_FIELD = "spec.database.external.secretRef"

#: get_secret(name) -> the Secret in the resource's namespace, or None when it does not exist.
GetSecret = Callable[[str], dict[str, Any] | None]


def model_key_field(index: int) -> str:
    return f"spec.gateway.models[{index}].apiKeySecretRef"


@dataclass(frozen=True)
class Use:
    """One reference of a resource to a Secret: the spec field, the Secret and key, the use."""

    field: str
    ref: SecretKeyRef
    use: str


@dataclass(frozen=True)
class Refusal:
    """A reference that is not used: ``message`` for the tenant (status, Event), ``found`` (what the
    Secret has instead) for the operator's log only."""

    use: Use
    message: str
    found: str


def label_of(secret: dict[str, Any] | None) -> str | None:
    labels = ((secret or {}).get("metadata") or {}).get("labels") or {}
    value = labels.get(SECRET_USE_LABEL)
    return str(value) if value is not None else None


def permitted(secret: dict[str, Any] | None, use: str) -> bool:
    return secret is not None and label_of(secret) == use


def refusal_message(u: Use) -> str:
    """Names the field, the Secret, the key and the label to add; never a value, nor whether the
    Secret exists or how it is labelled (those are for whoever may read Secrets)."""
    return (
        f"{u.field}: Secret {u.ref.name} (key {u.ref.key!r}) is not labelled {SECRET_USE_LABEL}={u.use}, "
        f"so it is not used; its owner opts in with: kubectl label secret {u.ref.name} "
        f"{SECRET_USE_LABEL}={u.use}"
    )


def taken_over_message(secret: str, brain: str, use: str) -> str:
    """A Secret already at a name the operator generates, not generated for this Brain."""
    return (
        f"Secret {secret} exists and was not generated for Brain {brain}; the operator would take it over "
        f"(and delete it with the Brain), so it does so only when the Secret is labelled "
        f"{SECRET_USE_LABEL}={use} (kubectl label secret {secret} {SECRET_USE_LABEL}={use}); "
        f"or give the Brain another name"
    )


def found_message(secret: dict[str, Any] | None) -> str:
    """What the Secret has instead, for the operator's log."""
    if secret is None:
        return "it does not exist"
    label = label_of(secret)
    return f"it has {SECRET_USE_LABEL}={label!r}" if label else f"it has no label {SECRET_USE_LABEL}"


def refused(uses: list[Use], get_secret: GetSecret) -> list[Refusal]:
    """The references whose Secret does not opt in to their use. Each Secret is read once."""
    seen: dict[str, dict[str, Any] | None] = {}
    out = []
    for u in uses:
        if u.ref.name not in seen:
            seen[u.ref.name] = get_secret(u.ref.name)
        secret = seen[u.ref.name]
        if not permitted(secret, u.use):
            out.append(Refusal(u, refusal_message(u), found_message(secret)))
    return out


def brain_uses(brain: Brain) -> list[Use]:
    """Every Secret a Brain's spec names, with the use the field puts it to."""
    spec = brain.spec
    out = [
        Use(model_key_field(i), m.api_key_secret_ref, MODEL_API_KEY)
        for i, m in enumerate(spec.gateway.models)
        if m.api_key_secret_ref is not None
    ]
    if spec.gateway.auth.master_key_secret_ref is not None:
        out.append(Use(MASTER_KEY_FIELD, spec.gateway.auth.master_key_secret_ref, MASTER_KEY))
    if spec.tunnel is not None and spec.tunnel.token_secret_ref is not None:
        out.append(Use(TUNNEL_FIELD, spec.tunnel.token_secret_ref, TUNNEL_TOKEN))
    if spec.database.external is not None:
        out.append(Use(DATABASE_FIELD, spec.database.external.secret_ref, DATABASE_URL))
    return out


def source_uses(source: MemorySource) -> list[Use]:
    """Every Secret a MemorySource's spec names (git credentials, whichever of git/skills/personas)."""
    out = []
    for kind in ("git", "skills", "personas"):
        part = getattr(source.spec, kind, None)
        if part is not None and part.credentials_secret_ref is not None:
            out.append(Use(f"spec.{kind}.credentialsSecretRef", part.credentials_secret_ref, GIT_CREDENTIALS))
    return out


def blocks_brain(refusals: list[Refusal]) -> bool:
    """Whether a refusal leaves nothing to render: the external database has no fallback."""
    return any(r.use.field == DATABASE_FIELD for r in refusals)


def without_refused(brain: Brain, refusals: list[Refusal]) -> Brain:
    """The Brain as if each refused reference were unset: a model without its key, the generated
    master key, no tunnel. (A refused database Secret cannot be dropped: see `blocks_brain`.)"""
    if not refusals:
        return brain
    fields = {r.use.field for r in refusals}
    doc = brain.model_dump(by_alias=True, exclude_none=True, mode="json")
    gw = doc["spec"]["gateway"]
    for i, m in enumerate(gw.get("models") or []):
        if model_key_field(i) in fields:
            m.pop("apiKeySecretRef", None)
    if MASTER_KEY_FIELD in fields:
        (gw.get("auth") or {}).pop("masterKeySecretRef", None)
    if TUNNEL_FIELD in fields:
        doc["spec"].pop("tunnel", None)
    return Brain.model_validate(doc)


def summary(refusals: list[Refusal]) -> str:
    """One message for a condition or an Event: every refusal, in spec order."""
    return "; ".join(r.message for r in refusals)


def log_summary(refusals: list[Refusal]) -> str:
    """The same for the operator's log, with what each Secret has instead (never a value)."""
    return "; ".join(f"{r.message} ({r.found})" for r in refusals)
