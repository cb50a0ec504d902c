"""The ingest job's own settings (`python -m brain.jobs.ingest`, and `brainctl ingest`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from brain.core.contract import Env
from brain.ingest.grading import GradingConfig
from brain.ingest.source import DEFAULT_INLINE_DIR, EMBED_CHARS
from brain.jobs.settings import JobSettings, common_fields


@dataclass(frozen=True)
class IngestSettings(JobSettings):
    git_allow_insecure_urls: bool = False  # BRAIN_GIT_ALLOW_INSECURE_URLS=1 (brain.core.gitrefs)
    source_credentials: str | None = field(default=None, repr=False)  # a token or SSH key: never in a repr
    inline_dir: str = DEFAULT_INLINE_DIR  # BRAIN_INLINE_DIR
    chunk_embed_chars: int = EMBED_CHARS  # BRAIN_CHUNK_EMBED_CHARS
    grading: GradingConfig = field(default_factory=GradingConfig)  # BRAIN_CHUNK_*


def load_ingest_settings(environ: Mapping[str, str] = os.environ) -> IngestSettings:
    return IngestSettings(
        **common_fields(environ),
        git_allow_insecure_urls=environ.get(Env.GIT_ALLOW_INSECURE_URLS) == "1",
        source_credentials=environ.get(Env.SOURCE_CREDENTIALS),
        inline_dir=environ.get("BRAIN_INLINE_DIR", DEFAULT_INLINE_DIR),
        chunk_embed_chars=int(environ.get("BRAIN_CHUNK_EMBED_CHARS", str(EMBED_CHARS))),
        grading=GradingConfig.from_env(environ),
    )
