"""The operator↔pod contract: the env var names and the `brain:` config section, declared once.

The operator renders them (brain_operator.render), the pods read them (the gateway's settings, the
jobs, the embedder), and both import them from here — the one data-plane module the operator may
import (.importlinter). A knob that the CRD accepts but a pod refuses at start (as
`minCodeLines: 0` once did) is caught by tests/operator/test_contract.py, which renders CRD-valid
Brains through the pods' own loaders; a rendered env var that no pod reads fails there too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# The one default embedding model, and its dimension. The CRD's spec.embedding default, the
# embedder image (images/embedder: its Dockerfile ARG and the wheels in model.txt), `brainctl up`
# and the pods all name this one: a Brain that names no model must get an embedder that holds
# it, or it never turns Ready. tests/delivery/test_default_model.py keeps them equal.
DEFAULT_EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_EMBEDDING_DIM = 384
# The longest input the embedder server takes (its 413 past it). Every stored text is cut to it
# before it is embedded: the models read at most 512 word pieces, far fewer characters than this in
# ordinary text, so the cut changes no vector there, and a longer entry gets one instead of a 413.
EMBED_INPUT_MAX_CHARS = 8192


def parse_embedding_dim(raw: str | None) -> int:
    """$BRAIN_EMBEDDING_DIM as a process got it (None: unset, the default model's). Parsed where it
    is used, so a bad value fails the command that needs it, with int()'s own message."""
    return int(raw) if raw is not None else DEFAULT_EMBEDDING_DIM


class Env:
    """Environment variable names shared by the renderer and the pods."""

    # every data-plane pod (gateway and jobs)
    DATABASE_URL = "BRAIN_DATABASE_URL"
    EMBEDDER_URL = "BRAIN_EMBEDDER_URL"
    EMBEDDING_MODEL = "BRAIN_EMBEDDING_MODEL"
    EMBEDDING_DIM = "BRAIN_EMBEDDING_DIM"
    # onnxruntime threads of a model: the embedder pod (from its CPU limit) and the gateway in-process
    EMBEDDER_THREADS = "BRAIN_EMBEDDER_THREADS"
    # the gateway, and the distill job that calls the LLM through it
    MASTER_KEY = "BRAIN_MASTER_KEY"
    GATEWAY_URL = "BRAIN_GATEWAY_URL"
    DISTILL_MODEL = "BRAIN_DISTILL_MODEL"
    # the ingest job
    SOURCE_CREDENTIALS = "BRAIN_SOURCE_CREDENTIALS"
    # "1" only from an operator started with --allow-insecure-git-urls (tests): http:// and file://
    # git URLs are then fetched; without it the job refuses them (brain.core.gitrefs)
    GIT_ALLOW_INSECURE_URLS = "BRAIN_GIT_ALLOW_INSECURE_URLS"
    # one API key per spec.gateway.models[] entry, BRAIN_MODEL_<NAME>_API_KEY (render.litellm_config)
    MODEL_PREFIX = "BRAIN_MODEL"
    # traces (spec.observability.traces; brain.core.tracing): the OpenTelemetry SDK's own names, so
    # a collector's usual wiring works; the gateway, the embedder and every job read them
    TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    OTLP_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
    SERVICE_NAME = "OTEL_SERVICE_NAME"
    RESOURCE_ATTRIBUTES = "OTEL_RESOURCE_ATTRIBUTES"  # read by the SDK itself
    TRACES_CONTENT = "BRAIN_TRACES_CONTENT"


#: The Postgres logins of a Brain's database (issue #26, brain.store.roles): the schema owner, which
#: only the migration step uses, and one login per workload, each with its own generated password.
DB_OWNER_ROLE = "owner"
#: `backup` (spec.backup's pg_dump CronJob) reads everything and records its run in `job_runs`.
DB_WORKLOAD_ROLES = ("gateway", "ingest", "distill", "digest", "reindex", "backup")
DB_ROLES = (DB_OWNER_ROLE, *DB_WORKLOAD_ROLES)
#: `<prefix>_<role>` is each login's name; the prefix is the managed database's superuser name.
DB_ROLE_PREFIX = "brain"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CaptureFilters(_Section):
    """`brain.capture.filters`: the quality gates before a response is captured."""

    venting: bool = True
    noise: bool = True
    # A code block needs at least one line; the CRD's `minCodeLines` has the same floor.
    min_code_lines: int = Field(default=10, ge=1, le=1000)


class CaptureSection(_Section):
    enabled: bool = True
    filters: CaptureFilters = Field(default_factory=CaptureFilters)
    # code that downloads from another host and runs it is proposed for review, not captured
    trusted_hosts: list[str] = Field(default_factory=list, max_length=100)


class RetrievalFloor(_Section):
    """`brain.retrieval.floor`: the least absolute evidence, per leg, for a memory to be injected at
    all (each in [0, 1]); brain.retrieval.pipeline's
    `RetrievalConfig.floor`.

    Evidence per leg: cosine similarity for `vector`, the share of the query's IDF its BM25 covers for
    `lexical`, the share of the query's identifiers it contains for `trigram`. A memory passes when
    those, each divided by its leg's floor, add up to 1: one leg at its floor, or weaker legs that agree. Episode
    neighbours of a passing memory pass with it. 0 turns a leg's floor off (everything it finds
    passes). Defaults and how they were chosen: docs/memory-core.md.

    `calibration` lowers the vector floor, per scope, to that quantile of the best cosines generic
    unrelated questions reach there, when that is lower (retrieval/calibration.py): 0.95 turns
    away 95% of such questions in a quiet brain and admits the weaker paraphrases the fixed 0.3
    would cut. 0 keeps the fixed floor.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    vector: float = Field(default=0.3, ge=0, le=1)
    lexical: float = Field(default=0.5, ge=0, le=1)
    trigram: float = Field(default=0.5, ge=0, le=1)
    calibration: float = Field(default=0.95, ge=0, le=1)
    # Answer only when some memory has an answer's evidence on one leg alone (its floor; for
    # identifiers, all of them verbatim): fusion.gate_open. False: whatever the sum rule passes.
    gate: bool = True

    def legs(self) -> dict[str, float]:
        return {"vector": self.vector, "lexical": self.lexical, "trigram": self.trigram}


class RetrievalSection(_Section):
    """`brain.retrieval`: spec.gateway.retrieval as the gateway reads it, with the CRD's bounds
    (brain_operator.api.Retrieval declares the same fields for the schema; a test keeps them equal)."""

    enabled: bool = True
    top_k: int = Field(default=5, ge=1, le=50)
    token_budget: int = Field(default=2000, ge=100, le=32000)
    timeout_ms: int = Field(default=500, ge=50, le=10000)
    skill_slots: int = Field(default=2, ge=0, le=10)
    persona: bool = True
    standout_ratio: float = Field(default=0.55, ge=0, le=1)  # spec.gateway.retrieval.standoutRatio
    floor: RetrievalFloor = Field(default_factory=RetrievalFloor)
    lexical_mirror: bool = True  # spec.gateway.retrieval.lexicalMirror (brain.store.lexical_mirror)


class IngestCounts(BaseModel):
    """The counts of the ingest job's summary line (its last stdout line, brain.jobs.ingest): what an
    import did. The operator copies them into MemorySource.status.counts (brain_operator.api declares
    the same fields for the CRD schema; tests/operator/test_contract.py keeps them equal)."""

    model_config = ConfigDict(extra="ignore")  # the summary line holds more than the counts

    added: int = Field(default=0, ge=0)  # new entries
    superseded: int = Field(default=0, ge=0)  # changed entries (the old version kept as history)
    skipped: int = Field(default=0, ge=0)  # unchanged entries
    retired: int = Field(default=0, ge=0)  # entries whose source item disappeared
    rejected: int = Field(default=0, ge=0)  # items refused by the secret gate or lint


#: The summary line's count keys, in the order it prints them.
INGEST_COUNTS = tuple(IngestCounts.model_fields)


def ingest_counts(summary: Mapping[str, Any]) -> dict[str, int]:
    """The counts of a summary line as the operator records them (a missing or empty one is 0)."""
    return {k: int(summary.get(k, 0) or 0) for k in INGEST_COUNTS}


class EmbeddingSection(_Section):
    model: str = DEFAULT_EMBEDDING_MODEL
    dim: int = Field(default=DEFAULT_EMBEDDING_DIM, ge=1)


#: LiteLLM replaces *every* string of its config that starts with this (model names, a model's
#: `model`, values nested anywhere) with the environment variable it names, read from the gateway's
#: environment: its master key, its database URL, the model keys. The rendered config holds exactly
#: two kinds of such reference, written by the renderer; a spec value that starts with it would make
#: `GET /v1/models` or an error message hand that variable to any key holder (session 14).
ENV_REFERENCE = "os.environ/"
ENV_REFERENCE_REFUSED = (
    f"must not start with {ENV_REFERENCE!r}: LiteLLM would replace it with an environment variable "
    "of the gateway (its master key, database URL, model keys)"
)


def _allowed_env_reference(path: tuple[str | int, ...]) -> bool:
    """The renderer's own references: a model's `api_key` and the master key."""
    return (len(path) == 4 and path[0] == "model_list" and path[2:] == ("litellm_params", "api_key")) or (
        path == ("general_settings", "master_key")
    )


def env_references(config: object, path: tuple[str | int, ...] = ()) -> list[str]:
    """Where `config` holds an `os.environ/` string that the renderer did not put there (dotted
    paths, e.g. `model_list[1].model_name`); empty when none. Lists are walked whole (LiteLLM's
    own walk skips plain strings in lists today; a later one may not)."""
    out: list[str] = []
    if isinstance(config, dict):
        for key, value in config.items():
            out += env_references(value, (*path, str(key)))
    elif isinstance(config, list):
        for i, value in enumerate(config):
            out += env_references(value, (*path, i))
    elif isinstance(config, str) and config.startswith(ENV_REFERENCE) and not _allowed_env_reference(path):
        out.append("".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip("."))
    return out


def check_env_references(config: object) -> None:
    """ValueError naming each place of `config` where LiteLLM would read the environment unasked."""
    found = env_references(config)
    if found:
        raise ValueError(f"{', '.join(found[:10])}: {ENV_REFERENCE_REFUSED}")
