"""Names of a Brain's children, in one place so handlers, renderers and docs agree."""

from __future__ import annotations

from collections.abc import Callable

from brain.core.contract import DB_ROLES
from brain_operator.render.common import child_name


def db_credentials(brain: str) -> str:
    """The managed database's superuser: only the migration step (the gateway's init container) reads it."""
    return child_name(brain, "db-credentials")


def db_role(brain: str, role: str) -> str:
    """One Postgres login's Secret (username, password, dsn): `brain.core.contract.DB_ROLES`."""
    return child_name(brain, "db-role", role)


def master_key(brain: str) -> str:
    return child_name(brain, "master-key")


def generated_secrets(brain: str) -> tuple[str, ...]:
    """Every Secret the operator may create for a Brain: it reads them back by name (it may not
    list Secrets, brain_operator.rbac), so one it no longer renders is still found and pruned."""
    return (db_credentials(brain), master_key(brain), *(db_role(brain, r) for r in DB_ROLES))


def database(brain: str) -> str:
    return child_name(brain, "db")


def cnpg_app_secret(brain: str) -> str:
    """CloudNativePG writes the application credentials (key ``uri``) here."""
    return f"{database(brain)}-app"


def cnpg_rw_service(brain: str) -> str:
    """CloudNativePG's Service for the current primary."""
    return f"{database(brain)}-rw"


def embedder(brain: str) -> str:
    return child_name(brain, "embedder")


def gateway(brain: str) -> str:
    return child_name(brain, "gateway")


def gateway_config(brain: str) -> str:
    return child_name(brain, "gateway-config")


def cronjob(brain: str, job: str) -> str:
    # CronJob names are capped at 52 characters: the controller appends an 11-character suffix.
    return child_name(brain, job, max_len=52)


def ingest_cronjob(brain: str, source: str) -> str:
    return child_name(brain, "ingest", source, max_len=52)


def ingest_job(brain: str, source: str, spec_hash: str) -> str:
    return child_name(child_name(brain, "ingest", source, max_len=54), spec_hash[:8])


def reindex_job(brain: str, model_hash: str) -> str:
    """One migration Job per target model: a resync or a second replica re-creating it hits AlreadyExists."""
    return child_name(child_name(brain, "reindex", max_len=54), model_hash[:8])


def backups_claim(brain: str) -> str:
    """The volume spec.backup's dumps go to, unless spec.backup.claimName names another."""
    return child_name(brain, "backups")


def source_config(brain: str, source: str) -> str:
    return child_name(brain, "source", source)


def dashboard(brain: str) -> str:
    return child_name(brain, "dashboard")


def brain_label(namespace: str, name: str) -> str:
    """Brains are namespaced; the metric label is ``<namespace>/<name>`` so two teams never collide."""
    return f"{namespace}/{name}"


# The children whose name is `<brain>-<fixed part>` (an ingest child also carries the source's name
# and is hashed to fit whatever the lengths).
_FIXED: tuple[Callable[[str], str], ...] = (
    db_credentials,
    master_key,
    *(lambda brain, r=r: db_role(brain, r) for r in DB_ROLES),
    database,
    cnpg_app_secret,
    embedder,
    gateway,
    gateway_config,
    dashboard,
    lambda brain: cronjob(brain, "distill"),
    lambda brain: cronjob(brain, "digest"),
    lambda brain: cronjob(brain, "backup"),
    backups_claim,
)


def keeps_plain_names(brain: str) -> bool:
    """Whether every fixed child of `brain` is `<brain>-<part>`, not shortened with a hash."""
    return all(fn(brain) == brain + fn("x")[1:] for fn in _FIXED)


# The longest Brain name whose children all keep their plain names (the CRD refuses longer ones:
# a hashed child name is correct but nobody recognises it in `kubectl get`, and a Brain name over
# 63 characters could not be a label value at all). The distill CronJob sets it: 52 - len("-distill").
MAX_BRAIN_NAME = max(n for n in range(1, 64) if keeps_plain_names("b" * n))

#: The longest MemorySource name: it is a label value (brain.dev/memorysource) on its children.
MAX_SOURCE_NAME = 63
