"""What a database outage looks like, so the rooms above the store can tell one without asyncpg.

`UNAVAILABLE`: the server is gone, refuses, or stopped a statement at its `statement_timeout`: the
gateway degrades (skips retrieval, answers 503) instead of failing the request. `FAILED` adds any
server-side error: a cached key verdict outlives it (services.keys.KeyVerifier).
"""

from __future__ import annotations

import asyncpg

UNAVAILABLE: tuple[type[Exception], ...] = (
    OSError,  # TimeoutError too: the client gave up on a server that did not answer
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.QueryCanceledError,  # the server's statement_timeout
)
FAILED: tuple[type[Exception], ...] = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    TimeoutError,
)
