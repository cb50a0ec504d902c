"""Secrets the operator creates when the spec does not supply them.

Values come in through :class:`GeneratedSecrets` (the handler generates them once, or reads the live
Secret back), so rendering twice yields the same bytes and nothing rotates by accident. Each carries
the ``brain.dev/secret-use`` label of its use (:mod:`brain_operator.secret_use`), so a Brain may name
a generated Secret in its spec like any Secret whose owner opted in.
"""

from __future__ import annotations

import base64
from typing import Any

from brain_operator.render import names
from brain_operator.render.common import POSTGRES_PORT, Manifest, RenderInput, meta
from brain_operator.secret_use import DATABASE_URL, MASTER_KEY, SECRET_USE_LABEL

DB_USER = "brain"
DB_NAME = "brain"


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def managed_dsn(inp: RenderInput, password: str) -> str:
    host = f"{names.database(inp.name)}.{inp.namespace}.svc"
    return f"postgresql://{DB_USER}:{password}@{host}:{POSTGRES_PORT}/{DB_NAME}"


def needs_db_password(inp: RenderInput) -> bool:
    return inp.brain.spec.database.mode == "managed"


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
                    extra_labels={SECRET_USE_LABEL: DATABASE_URL},
                ),
                "type": "Opaque",
                "data": data,
            }
        )
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


def dsn_secret_ref(inp: RenderInput) -> tuple[str, str]:
    """(Secret name, key) holding the database connection string for the Brain's pods."""
    db = inp.brain.spec.database
    if db.external is not None:
        return db.external.secret_ref.name, db.external.secret_ref.key
    if db.cloud_native_pg is not None:
        return names.cnpg_app_secret(inp.name), "uri"
    return names.db_credentials(inp.name), "dsn"


def master_key_ref(inp: RenderInput) -> tuple[str, str]:
    ref = inp.brain.spec.gateway.auth.master_key_secret_ref
    if ref is not None:
        return ref.name, ref.key
    return names.master_key(inp.name), "masterKey"
