"""Secrets the operator creates when the spec does not supply them.

Values come in through :class:`GeneratedSecrets` (the handler generates them once, or reads the live
Secret back), so rendering twice yields the same bytes and nothing rotates by accident. Each carries
the ``brain.dev/secret-use`` label of its use (:mod:`brain_operator.secret_use`), so a Brain may name
a generated Secret in its spec like any Secret whose owner opted in.
"""

from __future__ import annotations

import base64
from typing import Any

from brain.core.contract import DB_ROLE_PREFIX, DB_ROLES, DB_WORKLOAD_ROLES
from brain_operator.render import names
from brain_operator.render.common import POSTGRES_PORT, Manifest, RenderInput, meta
from brain_operator.secret_use import DATABASE_SUPERUSER, DATABASE_URL, MASTER_KEY, SECRET_USE_LABEL

#: The managed database's superuser (the image's POSTGRES_USER): the migration step's login only.
DB_USER = DB_ROLE_PREFIX
DB_NAME = "brain"


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def managed_dsn(inp: RenderInput, password: str) -> str:
    host = f"{names.database(inp.name)}.{inp.namespace}.svc"
    return f"postgresql://{DB_USER}:{password}@{host}:{POSTGRES_PORT}/{DB_NAME}"


def needs_db_password(inp: RenderInput) -> bool:
    return inp.brain.spec.database.mode == "managed"


def db_roles(inp: RenderInput) -> tuple[str, ...]:
    """The logins (issue #26) the operator generates a password and a Secret for.

    Managed: the owner and every workload (the migration step creates them as the superuser).
    CloudNativePG: the workloads (CNPG creates them from `spec.managed.roles`; its application user
    `brain` owns the schema). External: none, the user's Secret's DSN is used as is
    (docs/security.md, "Database roles")."""
    mode = inp.brain.spec.database.mode
    if mode == "managed":
        return DB_ROLES
    if mode == "cloudNativePG":
        return DB_WORKLOAD_ROLES
    return ()


def needs_db_roles(inp: RenderInput) -> bool:
    return bool(db_roles(inp))


def _role_host(inp: RenderInput) -> str:
    if inp.brain.spec.database.mode == "cloudNativePG":
        return f"{names.cnpg_rw_service(inp.name)}.{inp.namespace}.svc"  # the primary, wherever it is
    return f"{names.database(inp.name)}.{inp.namespace}.svc"


def db_login(role: str) -> str:
    """The Postgres login of `role` (brain.store.roles.role_name with the managed prefix)."""
    return f"{DB_ROLE_PREFIX}_{role}"


def _role_secrets(inp: RenderInput) -> list[Manifest]:
    out: list[Manifest] = []
    for role in db_roles(inp):
        password = inp.secrets.db_role_passwords.get(role)
        if not password:
            raise ValueError(
                f"the {role} login needs a generated password (GeneratedSecrets.db_role_passwords)"
            )
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": meta(
                    inp,
                    names.db_role(inp.name, role),
                    "database",
                    extra_labels={SECRET_USE_LABEL: DATABASE_URL},
                ),
                # basic-auth: the shape CloudNativePG's managed roles read (passwordSecret)
                "type": "kubernetes.io/basic-auth",
                "data": {
                    "username": _b64(db_login(role)),
                    "password": _b64(password),
                    "dsn": _b64(
                        f"postgresql://{db_login(role)}:{password}@{_role_host(inp)}:{POSTGRES_PORT}/{DB_NAME}"
                    ),
                },
            }
        )
    return out


def needs_master_key(inp: RenderInput) -> bool:
    return inp.brain.spec.gateway.auth.master_key_secret_ref is None


def render_secrets(inp: RenderInput) -> list[Manifest]:
    out: list[Manifest] = []
    if needs_db_password(inp):
        password = inp.secrets.db_password
        if not password:
            raise ValueError("a managed database needs a generated password (GeneratedSecrets.db_password)")
        data: dict[str, Any] = {
            "username": _b64(DB_USER),
            "password": _b64(password),
            "database": _b64(DB_NAME),
            "dsn": _b64(managed_dsn(inp, password)),
        }
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": meta(
                    inp,
                    names.db_credentials(inp.name),
                    "database",
                    extra_labels={SECRET_USE_LABEL: DATABASE_SUPERUSER},
                ),
                "type": "Opaque",
                "data": data,
            }
        )
    if needs_db_roles(inp):
        out += _role_secrets(inp)
    if needs_master_key(inp):
        key = inp.secrets.master_key
        if not key:
            raise ValueError("the gateway needs a generated master key (GeneratedSecrets.master_key)")
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": meta(
                    inp, names.master_key(inp.name), "gateway", extra_labels={SECRET_USE_LABEL: MASTER_KEY}
                ),
                "type": "Opaque",
                "data": {"masterKey": _b64(key)},
            }
        )
    return out


def dsn_secret_ref(inp: RenderInput, role: str | None = None) -> tuple[str, str]:
    """(Secret name, key) holding the connection string `role`'s pods use (a DB_ROLES name).

    On a managed or CloudNativePG database each role has its own login; ``None`` is the
    superuser (managed) or CNPG's application owner, for the migration step alone. An external
    database has one DSN, which every pod uses."""
    db = inp.brain.spec.database
    if db.external is not None:
        return db.external.secret_ref.name, db.external.secret_ref.key
    if role is not None and role in db_roles(inp):
        return names.db_role(inp.name, role), "dsn"
    if db.cloud_native_pg is not None:
        return names.cnpg_app_secret(inp.name), "uri"
    return names.db_credentials(inp.name), "dsn"


def master_key_ref(inp: RenderInput) -> tuple[str, str]:
    ref = inp.brain.spec.gateway.auth.master_key_secret_ref
    if ref is not None:
        return ref.name, ref.key
    return names.master_key(inp.name), "masterKey"
