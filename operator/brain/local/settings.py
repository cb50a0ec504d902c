"""`brainctl up`'s settings: the one place the local stack (brain.local) reads its environment.

The local gateway and jobs are child processes that inherit this environment (with the variables
the operator would render set on top), so the whole mapping is kept, read once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


def _default_cache() -> Path:
    return Path.home() / ".cache" / "brain-operator"


@dataclass(frozen=True)
class LocalSettings:
    #: what the local gateway and job processes start from (provider API keys, PATH, HOME, ...)
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)  # provider keys among them
    #: $XDG_STATE_HOME: where a Brain's state folder goes (None: ~/.local/state)
    state_home: str | None = None
    #: $BRAIN_CACHE: the model and the eval embeddings
    cache: Path = field(default_factory=_default_cache)


def load_local_settings(environ: Mapping[str, str] = os.environ) -> LocalSettings:
    return LocalSettings(
        environ=dict(environ),
        state_home=environ.get("XDG_STATE_HOME") or None,
        cache=Path(environ.get("BRAIN_CACHE", _default_cache())),
    )
