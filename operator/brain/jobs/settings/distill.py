"""The distill job's own settings (`python -m brain.jobs.distill`, and `brainctl distill`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from brain.core.contract import Env


@dataclass(frozen=True)
class DistillConfig:
    """The distill job's LLM and clustering knobs (brain.jobs.distill)."""

    model: str = "default"
    api_base: str | None = None
    api_key: str | None = None
    timeout_s: float = 60.0
    attempts: int = 3
    backoff_s: float = 2.0
    lookback_days: int = 14
    cluster_similarity: float = 0.6
    min_evidence: int = 2
    min_authors: int = 1
    duplicate_similarity: float = 0.92
    max_episodes: int = 2000
    max_clusters: int = 50

    @staticmethod
    def from_env(env: Mapping[str, str]) -> DistillConfig:
        gateway = env.get(Env.GATEWAY_URL)
        base = env.get("BRAIN_DISTILL_API_BASE") or (gateway.rstrip("/") + "/v1" if gateway else None)
        return DistillConfig(
            model=env.get(Env.DISTILL_MODEL, "default"),
            api_base=base,
            api_key=env.get("BRAIN_DISTILL_API_KEY") or env.get(Env.MASTER_KEY),
            timeout_s=float(env.get("BRAIN_DISTILL_TIMEOUT_S", "60")),
            attempts=int(env.get("BRAIN_DISTILL_ATTEMPTS", "3")),
            backoff_s=float(env.get("BRAIN_DISTILL_BACKOFF_S", "2")),
            lookback_days=int(env.get("BRAIN_DISTILL_LOOKBACK_DAYS", "14")),
            cluster_similarity=float(env.get("BRAIN_DISTILL_CLUSTER_SIMILARITY", "0.6")),
            min_evidence=int(env.get("BRAIN_DISTILL_MIN_EVIDENCE", "2")),
            min_authors=int(env.get("BRAIN_DISTILL_MIN_AUTHORS", "1")),
        )


def load_distill_config(environ: Mapping[str, str] = os.environ) -> DistillConfig:
    return DistillConfig.from_env(environ)
