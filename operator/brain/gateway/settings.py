"""Gateway settings: the `brain:` section of the LiteLLM config plus the process environment.

The config file is the same one the operator renders into the gateway ConfigMap (and `brainctl up`
writes on a laptop), so every knob a Brain manifest sets arrives here. Connection details and
secrets come from the environment only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from brain.core.contract import CaptureFilters, EmbeddingSection, Env, RetrievalSection
from brain.core.tracing import TraceSettings
from brain.gateway.boundary import LimitSettings

DEFAULT_REFRESH_S = 30.0  # the backlog gauges' refresh (brain.gateway.backlog)


class RetrievalSettings(RetrievalSection):
    """The rendered `brain.retrieval` section (brain.core.contract, the CRD's bounds) and the
    gateway's own cache knob; a key this gateway does not know is ignored, as before."""

    model_config = ConfigDict(extra="ignore")

    cache_ttl_s: float = 30.0  # agent loops resend the same question with every tool call


class CaptureSettings(BaseModel):
    enabled: bool = True
    filters: CaptureFilters = Field(default_factory=CaptureFilters)
    trusted_hosts: list[str] = Field(default_factory=list)  # spec.gateway.capture.trustedHosts
    queue_size: int = Field(default=1000, ge=1)
    workers: int = Field(default=2, ge=1, le=32)


class ExposureSettings(BaseModel):
    """Exposure receipts and retraction notices (brain.gateway.retractions)."""

    retention_days: int = Field(default=30, ge=1, le=3650)  # spec.gateway.exposure.retentionDays
    flush_s: float = Field(default=1.0, gt=0)  # receipts are written in batches this often
    poll_s: float = Field(default=1.0, gt=0)  # how often a replica checks for new retractions
    queue_size: int = Field(default=10_000, ge=1)  # receipts waiting for a write; past it they drop


class Override(BaseModel):
    phrase: str
    model: str
    router: str | None = None
    policy: str | None = None


class RoutingSettings(BaseModel):
    overrides: list[Override] = Field(default_factory=list)


class GatewaySettings(BaseModel):
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    capture: CaptureSettings = Field(default_factory=CaptureSettings)
    embedding: EmbeddingSection = Field(default_factory=EmbeddingSection)
    routing: RoutingSettings = Field(default_factory=RoutingSettings)
    exposure: ExposureSettings = Field(default_factory=ExposureSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    traces: TraceSettings = Field(default_factory=TraceSettings)  # from the environment only
    heartbeat_s: float = Field(default=20.0, gt=0)
    database_url: str | None = None
    embedder_url: str | None = None
    master_key: str | None = None

    model_config = {"extra": "ignore"}


def load_settings(
    config: dict[str, Any] | str | Path | None = None, env: dict[str, str] | None = None
) -> GatewaySettings:
    """Settings from a config dict or file (its `brain:` section) and the environment."""
    env = dict(os.environ if env is None else env)
    if isinstance(config, (str, Path)):
        config = yaml.safe_load(Path(config).read_text()) or {}
    section = dict((config or {}).get("brain") or {})
    settings = GatewaySettings.model_validate(section)
    if env.get(Env.EMBEDDING_DIM):
        settings.embedding.dim = int(env[Env.EMBEDDING_DIM])
    if env.get(Env.EMBEDDING_MODEL):
        settings.embedding.model = env[Env.EMBEDDING_MODEL]
    if env.get("BRAIN_SSE_HEARTBEAT_S"):
        settings.heartbeat_s = float(env["BRAIN_SSE_HEARTBEAT_S"])
    if env.get("BRAIN_CORS_ORIGINS"):
        settings.limits.cors_origins = [o.strip() for o in env["BRAIN_CORS_ORIGINS"].split(",") if o.strip()]
    settings.database_url = env.get(Env.DATABASE_URL) or settings.database_url
    settings.embedder_url = env.get(Env.EMBEDDER_URL) or settings.embedder_url
    settings.master_key = env.get(Env.MASTER_KEY) or settings.master_key
    settings.traces = TraceSettings.from_env(env, "brain-gateway")
    return settings


def refresh_interval(environ: Mapping[str, str] = os.environ) -> float:
    """How often the gateway reads the backlog gauges (brain.gateway.backlog): $BRAIN_BACKLOG_REFRESH_S."""
    raw = environ.get("BRAIN_BACKLOG_REFRESH_S", "")
    try:
        value = float(raw) if raw else DEFAULT_REFRESH_S
    except ValueError:
        raise ValueError(f"BRAIN_BACKLOG_REFRESH_S: a number of seconds, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"BRAIN_BACKLOG_REFRESH_S: a positive number of seconds, got {raw!r}")
    return value


def fallback_master_key(environ: Mapping[str, str] = os.environ) -> str | None:
    """The master key, for LiteLLM loading the auth hook without the brain runtime (brain.gateway.auth)."""
    return environ.get(Env.MASTER_KEY)


def prepare_litellm_env(config_path: str | Path, environ: MutableMapping[str, str] = os.environ) -> None:
    """LiteLLM reads these at import and startup: our config, the bundled cost map, no telemetry."""
    environ["CONFIG_FILE_PATH"] = str(config_path)
    environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    environ.setdefault("LITELLM_TELEMETRY", "False")
    environ.setdefault("LITELLM_MODE", "PRODUCTION")  # do not load a .env from the working directory
