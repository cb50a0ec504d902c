"""brainctl's settings: the one place the command line reads its environment.

`main` loads them once (`load_cli_settings`); the flags take their defaults from here and every
command finds them on its arguments (`args.settings`). The local stack's part (`brainctl up`) is
brain.local.settings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from brain.core.contract import DEFAULT_EMBEDDING_MODEL, Env, parse_embedding_dim
from brain.local.settings import LocalSettings, load_local_settings


@dataclass(frozen=True)
class CliSettings:
    database_url: str | None = field(default=None, repr=False)  # --dsn's default (holds the password)
    embedder_url: str | None = None  # --embedder-url's default
    embedding_model: str = DEFAULT_EMBEDDING_MODEL  # --embedding-model's default
    user: str = "owner"  # --as's default: $USER
    # as written (None: unset); parsed by the commands that open the store themselves
    embedding_dim_raw: str | None = None
    progress: str = ""  # BRAIN_PROGRESS: set, a progress bar is drawn without a terminal too
    local: LocalSettings = field(default_factory=LocalSettings)

    @property
    def embedding_dim(self) -> int:
        return parse_embedding_dim(self.embedding_dim_raw)


def load_cli_settings(environ: Mapping[str, str] = os.environ) -> CliSettings:
    return CliSettings(
        database_url=environ.get(Env.DATABASE_URL),
        embedder_url=environ.get(Env.EMBEDDER_URL),
        embedding_model=environ.get(Env.EMBEDDING_MODEL, DEFAULT_EMBEDDING_MODEL),
        user=environ.get("USER", "owner"),
        embedding_dim_raw=environ.get(Env.EMBEDDING_DIM),
        progress=environ.get("BRAIN_PROGRESS", ""),
        local=load_local_settings(environ),
    )
