"""Per-agent keys over the `keys` table: create, list, revoke, and verify with a small cache.

A key is 256 random bits (`brk_` + url-safe base64), shown once at creation; only its SHA-256 is
stored. A fast hash is enough here because the input is uniformly random, not a password: there is
nothing to brute-force. The key's name is the author of everything written with it.

Verification sits on every proxied request, so `KeyVerifier` caches lookups (30 s), remembers
unknown keys briefly (so a bad key cannot hammer the database) and, when the database is down,
keeps honouring keys it verified recently: a DB outage must not lock agents out (the brain degrades
to "no memory", never to an error).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import re
import secrets
import time
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from brain.core.errors import Conflict, Forbidden, InvalidInput, KeyStoreUnavailable, NotFound, Unauthorized
from brain.core.models import Actor, check_namespace
from brain.store import key_rows, outage
from brain.store.store import Store

KEY_PREFIX = "brk_"
ROLES = ("read", "agent", "owner")
#: A key's name is the author of its writes, so it may not look like an internal author: none of
#: `RESERVED`, and no `<reserved>:…` or `source:…` (a MemorySource's import writes as `source:<name>`).
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,63}$")
MASTER_NAME = "master"
#: The authors the brain writes as itself (the master key, the jobs, the gateway's anonymous reader,
#: the evaluation harness): a key by one of these names could pass for the job that owns it.
RESERVED = frozenset({MASTER_NAME, "digest", "distill", "ingest", "reindex", "gateway", "anonymous", "eval"})
#: Prefixes (before the first `:`) of internal authors: the reserved names, and `source`.
RESERVED_PREFIXES = RESERVED | {"source"}


def reserved(name: str) -> bool:
    """Whether `name` is, or is shaped like, an author the brain writes as itself (any case)."""
    lowered = name.lower()
    return lowered in RESERVED or (":" in lowered and lowered.split(":", 1)[0] in RESERVED_PREFIXES)


REVOKE_BY = ("name", "id")
log = logging.getLogger("brain.services.keys")
_UNCHECKED = "the key database is unavailable and this key was not verified recently; retry shortly"


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class KeyInfo:
    id: str
    name: str
    role: str
    namespaces: tuple[str, ...] | None
    expires_at: datetime | None
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= datetime.now(UTC)

    def actor(self) -> Actor:
        return Actor(
            name=self.name,
            role=self.role,
            origin="owner" if self.role == "owner" else "agent",
            namespaces=self.namespaces,
        )

    def public(self) -> dict[str, Any]:
        """What listings show: never the key or its hash."""
        return {
            "id": self.id,
            "name": self.name,
            "role": self.role,
            "namespaces": list(self.namespaces) if self.namespaces is not None else None,
            "expires_at": self.expires_at,
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
            "last_used_at": self.last_used_at,
            "state": "revoked" if self.revoked_at else "expired" if self.expired else "active",
        }


def _info(r: Mapping[str, Any]) -> KeyInfo:
    ns = r["namespaces"]
    return KeyInfo(
        id=r["id"],
        name=r["name"],
        role=r["role"],
        namespaces=tuple(ns) if ns is not None else None,
        expires_at=r["expires_at"],
        created_at=r["created_at"],
        revoked_at=r["revoked_at"],
        last_used_at=r["last_used_at"],
    )


class KeyStore:
    """The owners' door to the `keys` table (REST and brainctl): names, roles and scopes are checked
    here, the SQL is the store's (brain.store.key_rows)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def create(
        self,
        name: str,
        role: str = "agent",
        *,
        namespaces: list[str] | None = None,
        expires_at: datetime | None = None,
        actor: Actor | None = None,
    ) -> tuple[str, KeyInfo]:
        """Returns (the key in plain text — shown once, never stored —, its record). `actor` is the owner
        minting it: a confined owner mints only keys confined within its own namespaces (None: brainctl,
        which holds the database itself)."""
        if not NAME_RE.match(name or ""):
            raise InvalidInput(
                f"invalid key name {name!r}: 1-64 letters, digits and . _ @ : -, e.g. 'claude-mac'",
                field="name",
            )
        if reserved(name):
            raise InvalidInput(
                f"{name!r} is reserved: the brain writes as {', '.join(sorted(RESERVED))} and "
                "source:<name> itself (nor may a name start with one of those and ':'); pick another name",
                field="name",
            )
        if role not in ROLES:
            raise InvalidInput(f"role must be one of {', '.join(ROLES)}; got {role!r}", field="role")
        if namespaces is not None:
            if not namespaces:
                raise InvalidInput(
                    "namespaces: give at least one, or omit it for every namespace", field="namespaces"
                )
            try:
                namespaces = [check_namespace(ns) for ns in namespaces]
            except ValueError as e:
                raise InvalidInput(str(e), field="namespaces") from None
        if actor is not None:
            _require_within(actor, namespaces, "create")
        if expires_at is not None and expires_at.tzinfo is None:
            expires_at = expires_at.replace(tzinfo=UTC)
        key = generate_key()
        row = await key_rows.insert(self.store, name, hash_key(key), role, namespaces, expires_at)
        if row is None:
            raise Conflict(
                f"a key named {name!r} already exists; revoke it first or pick another name", field="name"
            )
        return key, _info(row)

    async def list(self, *, include_revoked: bool = False, actor: Actor | None = None) -> list[KeyInfo]:
        """Every key, or for a confined owner the keys confined within its namespaces."""
        keys = [_info(r) for r in await key_rows.listing(self.store, include_revoked=include_revoked)]
        return [k for k in keys if actor is None or _within(actor, k.namespaces)]

    async def revoke(self, value: str, *, by: str = "name", actor: Actor | None = None) -> KeyInfo:
        """Revoke the key whose name (or, with `by="id"`, whose id) is `value`: one column, never both,
        so a name that happens to equal another key's id cannot revoke that key too."""
        if by not in REVOKE_BY:
            raise InvalidInput(f"by is one of {', '.join(REVOKE_BY)}; got {by!r}", field="by")
        if actor is not None:
            target = await key_rows.find(self.store, value, by_id=by == "id")
            if target is None or not _within(actor, _info(target).namespaces):
                raise NotFound(f"no key with {by} {value!r} that this key may manage", field=by)
        row = await key_rows.revoke(self.store, value, by_id=by == "id")
        if row is None:
            raise NotFound(f"no key with {by} {value!r}", field=by)
        return _info(row)

    async def lookup(self, key: str) -> KeyInfo | None:
        row = await key_rows.by_hash(self.store, hash_key(key))
        return _info(row) if row else None

    async def lookup_many(self, digests: Sequence[str]) -> dict[str, KeyInfo]:
        """Key hash → its row, for the hashes that have one (an unknown hash is simply absent)."""
        return {r["key_hash"]: _info(r) for r in await key_rows.by_hashes(self.store, [*digests])}

    async def touch(self, key_id: str) -> None:
        await key_rows.touch(self.store, key_id)

    async def version(self) -> tuple[Any, ...]:
        """The keys table's fingerprint: it changes with every create and revoke (store.keys)."""
        return await key_rows.fingerprint(self.store)


def _within(actor: Actor, namespaces: tuple[str, ...] | list[str] | None) -> bool:
    """Whether a key scoped to `namespaces` (None: all) lies within what `actor` may manage."""
    if actor.namespaces is None:
        return True
    return namespaces is not None and set(namespaces) <= set(actor.namespaces)


def _require_within(actor: Actor, namespaces: list[str] | None, what: str) -> None:
    if actor.role != "owner":
        raise Forbidden(f"key {actor.name!r} has role {actor.role!r}; managing keys needs an owner key")
    if not _within(actor, namespaces):
        mine = ", ".join(actor.namespaces or ())
        raise Forbidden(
            f"key {actor.name!r} is confined to {mine}; it may {what} only keys confined within those "
            "(give namespaces)",
            field="namespaces",
        )


#: The fingerprint of a verdict that must be looked up again before it is served fresh (`forget`):
#: it equals no fingerprint the database can answer.
_RECHECK: tuple[Any, ...] = ("recheck",)


@dataclass
class _Cached:
    info: KeyInfo | None
    at: float
    version: tuple[Any, ...] | None = None  # the keys table's fingerprint when this verdict was read


def _revoked(c: _Cached | None) -> bool:
    return c is not None and c.info is not None and c.info.revoked_at is not None


class KeyVerifier:
    """Key → Actor, with the master key as owner, a TTL cache and stale-if-the-database-is-down."""

    def __init__(
        self,
        keys: KeyStore | None,
        *,
        master_key: str | None = None,
        ttl: float = 30.0,
        negative_ttl: float = 5.0,
        stale_for: float = 3600.0,
        touch_every: float = 60.0,
        size: int = 10_000,
        lookup_timeout: float = 5.0,
        stale_timeout: float = 0.1,
        version_every: float = 1.0,
    ) -> None:
        self.keys = keys
        # Revocation across replicas: at most every `version_every` a check reads the keys table's
        # fingerprint; a cached verdict read under another fingerprint is looked up again before it
        # is served. So a revoke (or create) on any replica is seen by every other within about
        # `version_every` while the database answers, with no notification channel to miss.
        self.version_every = version_every
        self._version: tuple[Any, ...] | None = None
        self._version_at = float("-inf")
        self._version_reading = False
        self.lookup_timeout = lookup_timeout
        self.stale_timeout = stale_timeout
        self._db_down_until = 0.0
        self._refreshing: set[str] = set()
        self.master_key = master_key or None
        self.ttl = ttl
        self.negative_ttl = negative_ttl
        self.stale_for = stale_for
        self.touch_every = touch_every
        self.size = size
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._touched: dict[str, float] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._watch: asyncio.Task[None] | None = None

    def forget(self) -> None:
        """Mark every cached verdict for a re-check before it is served fresh again. The verdicts stay
        as the fallback of the stale window: dropping them would leave every other key of this replica
        unverifiable (503) should the database go away before each is used again."""
        for c in self._cache.values():
            c.version = _RECHECK

    async def recheck(self) -> None:
        """Look every cached verdict up again now (the revoking replica, right after its revoke); where
        the database does not answer, `forget` has them looked up again on their next use."""
        self.forget()
        if self.keys is not None:
            with contextlib.suppress(*outage.FAILED):
                await asyncio.wait_for(self._recheck(), self.lookup_timeout)

    async def close(self) -> None:
        """Stop the watcher and the background lookups (the gateway's shutdown)."""
        tasks = [t for t in (self._watch, *self._tasks) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._watch = None

    def _ensure_watch(self) -> None:
        """The watcher runs while this verifier holds verdicts and has a database: it re-reads the
        fingerprint every `version_every` *whether or not requests come*, and on a change looks up
        every verdict read under another one in one query. So a replica no request reached since a
        revoke still learns of it within about a second, and a revocation it has seen is what it
        serves should the database then go away (docs/security.md, the stale window)."""
        if self.keys is None or (self._watch is not None and not self._watch.done()):
            return
        try:
            self._watch = asyncio.get_running_loop().create_task(_watch(weakref.ref(self)))
        except RuntimeError:  # no running loop (a synchronous caller): verify's own re-check remains
            self._watch = None

    async def _recheck(self) -> bool:
        """One fingerprint read and, if any verdict was read under another fingerprint, one lookup of
        all of them. Whether the cache now matches the fingerprint read. Raises what the database does."""
        assert self.keys is not None
        at = time.monotonic()
        version = await self.keys.version()
        self._version, self._version_at = version, time.monotonic()
        behind = [d for d, c in self._cache.items() if c.version != version]
        if not behind:
            return True
        found = await self.keys.lookup_many(behind)
        for digest in behind:
            if digest in self._cache:  # not evicted meanwhile
                self._remember(digest, found.get(digest), at, version)
        return True

    def _master(self, key: str) -> bool:
        return self.master_key is not None and hmac.compare_digest(key.encode(), self.master_key.encode())

    async def verify(self, key: str | None) -> Actor:
        """The key's Actor, or Unauthorized with a reason that never repeats the key."""
        key = (key or "").strip()
        if key.lower().startswith("bearer "):
            key = key[7:].strip()
        if not key:
            raise Unauthorized("no key: send 'Authorization: Bearer <key>' (or x-api-key)")
        if self._master(key):
            return Actor(name=MASTER_NAME, role="owner", origin="owner")
        self._ensure_watch()
        info = await self._lookup(hash_key(key), key)
        if info is None:
            raise Unauthorized("unknown key")
        if info.revoked_at is not None:
            raise Unauthorized(f"key {info.name!r} was revoked")
        if info.expired:
            raise Unauthorized(f"key {info.name!r} expired at {info.expires_at:%Y-%m-%d %H:%M} UTC")
        self._maybe_touch(info)
        return info.actor()

    async def _current_version(self) -> tuple[Any, ...] | None:
        """The keys table's fingerprint, read at most every `version_every` (one read at a time). While
        the database fails or hangs it stays the last one read: the stale window (docs/security.md)."""
        now = time.monotonic()
        if (
            self.keys is None
            or self._version_reading
            or now - self._version_at < self.version_every
            or now < self._db_down_until
        ):
            return self._version
        self._version_reading = True
        try:
            wait = self.stale_timeout if self._version is not None else self.lookup_timeout
            self._version = await asyncio.wait_for(self.keys.version(), wait)
            self._version_at = time.monotonic()
        except outage.FAILED:
            self._db_down_until = time.monotonic() + self.negative_ttl
        finally:
            self._version_reading = False
        return self._version

    async def _lookup(self, digest: str, key: str) -> KeyInfo | None:
        version = await self._current_version()
        now = time.monotonic()
        hit = self._cache.get(digest)
        # A key was created or revoked since this verdict was read (on this replica or any other): it is
        # not fresh any more, and the database just answered the fingerprint, so it is asked again
        # with the full wait; the old verdict is only a fallback should that lookup fail.
        changed = hit is not None and hit.version != version
        if hit is not None and not changed:
            fresh = self.ttl if hit.info is not None else self.negative_ttl
            if now - hit.at < fresh:
                if hit.info is not None and now - hit.at > self.ttl / 2:
                    self._refresh_ahead(digest, key)  # a key in use never waits for its own re-check
                return hit.info
        stale = hit is not None and hit.info is not None and now - hit.at < self.stale_for
        if self.keys is None:
            if stale:
                return hit.info if hit is not None else None
            raise KeyStoreUnavailable(_UNCHECKED)
        # A hanging database must not hold requests: with a verdict to fall back on, a lookup gets a
        # short wait, none while a re-check is already in flight or the database just failed one.
        if stale and (now < self._db_down_until or (not changed and digest in self._refreshing)):
            return hit.info if hit is not None else None
        try:
            wait = self.stale_timeout if stale and not changed else self.lookup_timeout
            info = await asyncio.wait_for(self.keys.lookup(key), wait)
        except outage.FAILED as e:
            if stale:
                self._db_down_until = time.monotonic() + self.negative_ttl
                return hit.info if hit is not None else None  # a key verified within the hour keeps working
            raise KeyStoreUnavailable(_UNCHECKED) from e
        self._remember(digest, info, now, version)
        return info

    def _remember(
        self, digest: str, info: KeyInfo | None, at: float, version: tuple[Any, ...] | None = None
    ) -> None:
        old = self._cache.get(digest)
        if _revoked(old) and (info is None or info.revoked_at is None):
            # A revocation is final (a key hash is never un-revoked): a lookup that began before it
            # and answered after it (a refresh ahead, a slow re-check) never brings the key back.
            assert old is not None
            info, at = old.info, max(at, old.at)
        self._cache[digest] = _Cached(info, at, version)
        self._cache.move_to_end(digest)
        while len(self._cache) > self.size:
            self._cache.popitem(last=False)

    def _refresh_ahead(self, digest: str, key: str) -> None:
        if digest in self._refreshing or self.keys is None:
            return
        self._refreshing.add(digest)
        keys = self.keys

        async def refresh() -> None:
            try:
                at, version = time.monotonic(), self._version
                info = await asyncio.wait_for(keys.lookup(key), self.lookup_timeout)
                self._remember(digest, info, at, version)
            except Exception:
                self._db_down_until = time.monotonic() + self.negative_ttl
            finally:
                self._refreshing.discard(digest)

        task = asyncio.create_task(refresh())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _maybe_touch(self, info: KeyInfo) -> None:
        if self.keys is None:
            return
        now = time.monotonic()
        if now - self._touched.get(info.id, 0.0) < self.touch_every:
            return
        self._touched[info.id] = now
        task = asyncio.create_task(self._touch(info.id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _touch(self, key_id: str) -> None:
        assert self.keys is not None
        with contextlib.suppress(Exception):  # last_used_at is a convenience; never fail a request over it
            await self.keys.touch(key_id)


async def _watch(ref: weakref.ref[KeyVerifier]) -> None:
    """KeyVerifier's watcher; it holds its verifier weakly, so a dropped verifier takes it along, and
    it ends when the verifier holds no verdict (the next verify starts it again)."""
    while True:
        verifier = ref()
        if verifier is None or verifier.keys is None or not verifier._cache:
            return
        every, wait = verifier.version_every, verifier.lookup_timeout
        del verifier
        await asyncio.sleep(max(every, 0.05))
        verifier = ref()
        if verifier is None:
            return
        try:
            await asyncio.wait_for(verifier._recheck(), wait)
        except outage.FAILED:  # the database is down or slow: the stale window, until it answers again
            verifier._db_down_until = time.monotonic() + verifier.negative_ttl
        except Exception as e:  # never let the watcher die of a surprise; verify's own re-check remains
            log.warning("key verdict re-check failed: %s: %s", type(e).__name__, e)
        del verifier


def require_role(actor: Actor, *roles: str) -> None:
    if actor.role not in roles:
        raise Forbidden(f"key {actor.name!r} has role {actor.role!r}; this needs {' or '.join(roles)}")
