"""The mass-retire guard: an import that would retire most (or all) of a source stops before writing.

A source whose `paths` match nothing, a wrong `ref`, or a repository emptied by mistake looks to
the sync exactly like a team that deleted every memory on purpose. The guard tells them apart by
asking: it stops the import before anything is written, reports how many entries would go, and
names a confirmation token. Setting `spec.retireGuard.confirm` to that token lets the next run
retire exactly that set; if the set changes (a different mistake), the token changes and the
guard stops again. The token is a hash of the keys, so it confirms *this* removal, not any.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from brain.core.errors import BrainError

DEFAULT_MAX_SHARE = 0.5


@dataclass(frozen=True)
class RetireGuard:
    """`max_share`: the largest share of a source's stored entries one run may retire unasked."""

    max_share: float = DEFAULT_MAX_SHARE
    confirm: str | None = None

    @staticmethod
    def from_spec(raw: Any) -> RetireGuard:
        """`spec.retireGuard` of a MemorySource (camelCase wire form). Raises ValueError naming the field."""
        if raw is None:
            return RetireGuard()
        if not isinstance(raw, dict):
            raise ValueError("spec.retireGuard must be an object with maxShare and confirm")
        share = raw.get("maxShare", DEFAULT_MAX_SHARE)
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < float(share) <= 1:
            raise ValueError(
                f"spec.retireGuard.maxShare must be a number above 0 and at most 1, got {share!r}"
            )
        confirm = raw.get("confirm")
        if confirm is not None and not isinstance(confirm, str):
            raise ValueError(
                "spec.retireGuard.confirm must be the token a stopped import reported (a string)"
            )
        return RetireGuard(float(share), confirm or None)


@dataclass(frozen=True)
class Stop:
    """Why an import stopped: what it would have retired out of what the source holds."""

    would_retire: int
    stored: int
    token: str
    max_share: float

    @property
    def message(self) -> str:
        what = (
            "every entry"
            if self.would_retire == self.stored
            else f"{self.would_retire / self.stored:.0%} of its entries (more than maxShare {self.max_share:g})"
        )
        return (
            f"the import would retire {self.would_retire} of {self.stored} stored entries, {what}; nothing was "
            f"written. If the source really removed them, set spec.retireGuard.confirm to {self.token!r}; "
            "otherwise check spec paths and ref"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "wouldRetire": self.would_retire,
            "stored": self.stored,
            "confirm": self.token,
            "message": self.message,
        }


class ImportStopped(BrainError):
    """Raised by the sync before any write; the ingest job reports it (exit 0: the job did its work)."""

    code = "import_stopped"
    status = 409

    def __init__(self, stop: Stop) -> None:
        super().__init__(stop.message, field="spec.retireGuard.confirm")
        self.stop = stop


def token(keys: Collection[str]) -> str:
    """A short, stable name for exactly this set of keys."""
    h = hashlib.sha256("\n".join(sorted(keys)).encode())
    return h.hexdigest()[:12]


def check(removed: Collection[str], stored: int, guard: RetireGuard) -> Stop | None:
    """A Stop when retiring `removed` (of `stored`) needs a person's confirmation, else None."""
    n = len(removed)
    if n == 0 or stored <= 0:
        return None
    if n < stored and n <= guard.max_share * stored:
        return None
    tok = token(removed)
    if guard.confirm == tok:
        return None
    return Stop(n, stored, tok, guard.max_share)
