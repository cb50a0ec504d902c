"""The schema job's settings (`python -m brain.store.roles`, the migration step before every pod)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from brain.core.contract import Env, parse_embedding_dim


@dataclass(frozen=True)
class MigrateSettings:
    database_url: str = field(default="", repr=False)  # $BRAIN_DATABASE_URL (holds the password)
    embedding_dim_raw: str | None = None  # $BRAIN_EMBEDDING_DIM as written

    @property
    def embedding_dim(self) -> int:
        return parse_embedding_dim(self.embedding_dim_raw)


def load_migrate_settings(environ: Mapping[str, str] = os.environ) -> MigrateSettings:
    return MigrateSettings(
        database_url=environ.get(Env.DATABASE_URL, ""), embedding_dim_raw=environ.get(Env.EMBEDDING_DIM)
    )
