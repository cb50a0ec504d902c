"""Job settings: the one place a job process (ingest, distill, digest, reindex) reads its environment.

The operator renders these variables into each CronJob (brain_operator.render.jobs; the names are
brain.core.contract.Env); `brainctl up` sets them for its local jobs. A job's `main` loads them
once and everything below receives them, never `os.environ` (`make lint`, ruff TID251). What every
job reads is here; a job's own variables are in its own module (`settings.ingest`,
`settings.distill`), so a pod's code mentions only what its pod is given (tests/operator/test_contract.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from brain.core.contract import Env, parse_embedding_dim
from brain.core.tracing import TraceSettings


@dataclass(frozen=True)
class JobSettings:
    database_url: str | None = field(default=None, repr=False)  # holds the password
    embedder_url: str | None = None
    embedding_model: str | None = None  # None: unset (each job says what that means)
    # as written (None: unset); parsed where a job needs it, so a bad value fails only there
    embedding_dim_raw: str | None = None
    progress: str = ""  # BRAIN_PROGRESS: anything but "" or "0" draws the bar without a terminal
    log_level: str = "INFO"

    @property
    def embedding_dim(self) -> int:
        """The dimension an embedder client is built for: $BRAIN_EMBEDDING_DIM, else the default."""
        return parse_embedding_dim(self.embedding_dim_raw)

    @property
    def embedding_dim_or_none(self) -> int | None:
        """$BRAIN_EMBEDDING_DIM when set and not empty, else None."""
        return int(self.embedding_dim_raw) if self.embedding_dim_raw else None


def common_fields(environ: Mapping[str, str]) -> dict[str, Any]:
    """JobSettings' fields from `environ` (a job's own settings class adds its fields to them)."""
    return {
        "database_url": environ.get(Env.DATABASE_URL),
        "embedder_url": environ.get(Env.EMBEDDER_URL),
        "embedding_model": environ.get(Env.EMBEDDING_MODEL),
        "embedding_dim_raw": environ.get(Env.EMBEDDING_DIM),
        "progress": environ.get("BRAIN_PROGRESS", ""),
        "log_level": environ.get("BRAIN_LOG_LEVEL", "INFO"),
    }


def load_job_settings(environ: Mapping[str, str] = os.environ) -> JobSettings:
    """A job process's settings from its environment (read once, in its `main`)."""
    return JobSettings(**common_fields(environ))


def trace_settings(job: str, environ: Mapping[str, str] = os.environ) -> TraceSettings:
    """Where a job's spans go (brain.core.tracing), service `brain-<job>` unless OTEL_SERVICE_NAME says."""
    return TraceSettings.from_env(environ, f"brain-{job}")
