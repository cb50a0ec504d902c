"""What importing reads from the process's environment: only the environment git runs in.

The ingest job's own knobs (BRAIN_CHUNK_*, BRAIN_INLINE_DIR, credentials) are brain.jobs.settings.ingest's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping


def git_base_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment git starts from (PATH, HOME, proxies); brain.ingest.gitsrc sets the rest."""
    return dict(environ)
