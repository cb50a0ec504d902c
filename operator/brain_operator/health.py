"""The gateway's ``/brain/v1/health`` JSON → ``status.index`` (pure parsing, one small HTTP read)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from brain_operator.api import IndexStatus

HEALTH_PATH = "/brain/v1/health"


@dataclass(frozen=True)
class Health:
    """What the gateway says about itself; ``error`` is set when it could not be asked."""

    status: str = "unknown"
    database: str = "unknown"
    embedder: str = "unknown"
    index: IndexStatus | None = None
    error: str | None = None

    @property
    def healthy(self) -> bool:
        return self.error is None and self.status == "ok" and self.database == "ok" and self.embedder == "ok"


def parse_health(doc: dict[str, Any]) -> Health:
    """Tolerant of missing fields (an older gateway) but never of wrong types in what it keeps."""
    raw = doc.get("index") or {}
    by_kind = {str(k): int(v) for k, v in (raw.get("entriesByKind") or {}).items()}
    by_ns = {str(k): int(v) for k, v in (raw.get("entriesByNamespace") or {}).items()}
    index = IndexStatus.model_validate(
        {
            "totalEntries": sum(by_kind.values()) if by_kind else sum(by_ns.values()),
            "entriesByKind": by_kind,
            "entriesByNamespace": by_ns,
            "embeddedRatio": raw.get("embeddedRatio"),
            "staleEntries": raw.get("staleEntries"),
            "pendingProposals": raw.get("pendingProposals"),
            "lastIngest": raw.get("lastIngest"),
            "lastDistill": raw.get("lastDistill"),
            "lastDigest": raw.get("lastDigest"),
            "lastBackup": raw.get("lastBackup"),
            "lastBackupResult": raw.get("lastBackupResult")
            if raw.get("lastBackupResult") in ("ok", "failed")
            else None,
            "lastBackupBytes": raw.get("lastBackupBytes"),
            "embeddingModel": raw.get("embeddingModel"),
            "embeddingDim": raw.get("embeddingDim"),
            "liveModel": raw.get("liveModel"),
            "reindex": _reindex(raw.get("reindex")),
        }
    )
    return Health(
        status=str(doc.get("status", "unknown")),
        database=str(doc.get("database", "unknown")),
        embedder=str(doc.get("embedder", "unknown")),
        index=index,
    )


def _reindex(raw: Any) -> dict[str, Any] | None:
    """The fields of a running model migration that status shows (the gateway sends a few more)."""
    if not isinstance(raw, dict):
        return None
    keys = ("fromModel", "toModel", "toDim", "done", "total", "startedAt")
    return {k: raw[k] for k in keys if raw.get(k) is not None}


async def fetch_health(url: str, timeout: float = 3.0, key: str | None = None) -> Health:
    """Never raises. The error text is deliberately stable (no timings, no ports) so an unreachable
    gateway does not produce a new status write on every poll. `key` (the master key) makes the
    gateway include the per-namespace counts, which it never shows without an owner key."""
    headers = {"authorization": f"Bearer {key}"} if key else {}
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            resp = await client.get(url, headers=headers)
            resp.raise_for_status()
            return parse_health(resp.json())
    except httpx.HTTPStatusError as exc:
        return Health(error=f"HTTP {exc.response.status_code} from {url}")
    except (httpx.HTTPError, ValueError, TypeError, AttributeError) as exc:
        return Health(error=f"{type(exc).__name__} from {url}")
