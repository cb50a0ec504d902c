"""Boundary types of the data plane: what callers send and what the store returns."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from brain.core.sanitize import clean_text, has_nul, has_surrogate, one_line

Kind = Literal[
    "note",
    "fact",
    "decision",
    "convention",
    "map",
    "learning",
    "experience",
    "code",
    "summary",
    "skill",
    "persona",
    "digest",
]
KINDS: tuple[str, ...] = get_args(Kind)
Tier = Literal["episodic", "curated"]
Origin = Literal["owner", "agent", "import", "untrusted", "gateway"]
Status = Literal["active", "superseded", "forgotten", "retired"]
Role = Literal["read", "agent", "owner"]

SHARED = "shared"
NAMESPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$")
NAMESPACE_HELP = (
    "a namespace is 1-128 characters of letters, digits and . _ : / @ -, starting with a letter or digit "
    "(e.g. 'shared', 'repo:payments', 'agent:claude-mac')"
)

MAX_TITLE = 200
MAX_BODY = 32_768
MAX_TAGS = 20
MAX_TAG = 64
MAX_KEYWORD = 64
MAX_ATTRS_BYTES = 32_768
MAX_ATTRS_DEPTH = 6
MAX_ATTRS_KEYS = 256
MAX_ATTR_KEY = 64
# A time a memory became true: not before 1900 (nothing the team knows is older), not in the future
# (a future valid_from would rank as the freshest entry forever). Postgres' ±infinity is outside both.
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
FUTURE_SLACK = timedelta(days=1)
LATEST_AS_OF = datetime(9999, 1, 1, tzinfo=UTC)
# Tags are labels: letters, digits, spaces and a few joiners; never markup, quotes or fences.
_TAG_FORBIDDEN = re.compile(r"[\[\]<>{}`|\\]")
_IDENT_FORBIDDEN = re.compile("[\x00-\x1f\x7f\u2028\u2029\ud800-\udfff]")


def check_namespace(value: str) -> str:
    if not NAMESPACE_RE.match(value):
        raise ValueError(f"invalid namespace {value!r}: {NAMESPACE_HELP}")
    return value


def check_valid_from(value: datetime, *, now: datetime | None = None) -> datetime:
    """When a memory became true: zone-aware (a naive time is read as UTC), from 1900 up to tomorrow."""
    when = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    latest = (now or datetime.now(UTC)) + FUTURE_SLACK
    if not EARLIEST <= when <= latest:
        raise ValueError(
            f"valid_from must lie between {EARLIEST:%Y-%m-%d} and now (UTC, with a day of slack); "
            "give the time the fact became true, with a zone, e.g. 2026-05-01T12:00:00Z"
        )
    return when


def check_as_of(value: datetime) -> datetime:
    """A point-in-time read: zone-aware (naive is read as UTC), between 1900 and year 9999."""
    when = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if not EARLIEST <= when <= LATEST_AS_OF:
        raise ValueError(f"as_of must lie between {EARLIEST:%Y-%m-%d} and 9999-01-01, with a zone")
    return when


def stored_time(value: Any) -> Any:
    """Read-back path: a row written before validation existed may hold a naive or infinite time.

    Postgres' -infinity/infinity come back from the driver as naive datetime.min/max; they are given
    UTC here so comparisons (ranking by age) never mix naive and aware times, whatever is stored.
    """
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


StoredTime = Annotated[datetime, BeforeValidator(stored_time)]


def stored_title(value: Any) -> Any:
    """Read-back path: a title stored before titles were validated is still handed out as one clean line."""
    return one_line(value, MAX_TITLE) if isinstance(value, str) else value


StoredTitle = Annotated[str, BeforeValidator(stored_title)]


def _label(value: str, field: str, limit: int) -> str:
    if has_nul(value):
        raise ValueError(f"{field} contains a NUL character, which text storage cannot hold")
    text = one_line(value)
    if not text or len(text) > limit:
        raise ValueError(f"each {field} is 1-{limit} characters on one line; got {value[:80]!r}")
    return text


def bad_identifier(value: str) -> bool:
    """Whether `value` holds what no stored identifier may (control characters, line breaks, the
    surrogates an undecodable file name becomes): a source_key built from it would be refused."""
    return bool(_IDENT_FORBIDDEN.search(value))


def _identifier(value: str, field: str) -> str:
    if _IDENT_FORBIDDEN.search(value):
        raise ValueError(f"{field} may not contain control characters or line breaks")
    return value


#: the attrs a purge writes (brain.store.writer.StoreWriter.purge); no writer may set them
PURGE_MARKS = frozenset({"purged_by", "purged_at"})


def _check_json(value: Any, path: str, depth: int) -> None:
    """attrs are small, plain JSON: string keys, finite numbers, no NUL, bounded depth and fan-out."""
    if depth > MAX_ATTRS_DEPTH:
        raise ValueError(f"{path}: attrs nest at most {MAX_ATTRS_DEPTH} levels deep")
    if isinstance(value, dict):
        if len(value) > MAX_ATTRS_KEYS:
            raise ValueError(f"{path}: at most {MAX_ATTRS_KEYS} keys per object")
        for k, v in value.items():
            if not isinstance(k, str) or not 1 <= len(k) <= MAX_ATTR_KEY or _IDENT_FORBIDDEN.search(k):
                raise ValueError(
                    f"{path}: keys are 1-{MAX_ATTR_KEY} characters without control characters; got {str(k)[:80]!r}"
                )
            _check_json(v, f"{path}.{k}", depth + 1)
    elif isinstance(value, list):
        if len(value) > MAX_ATTRS_KEYS:
            raise ValueError(f"{path}: at most {MAX_ATTRS_KEYS} items per list")
        for i, v in enumerate(value):
            _check_json(v, f"{path}[{i}]", depth + 1)
    elif isinstance(value, str):
        if has_nul(value) or has_surrogate(value):
            raise ValueError(f"{path}: contains a NUL or a lone surrogate, which JSON storage cannot hold")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path}: numbers must be finite (no NaN or infinity)")
    elif value is not None and not isinstance(value, bool | int):
        raise ValueError(f"{path}: values are strings, numbers, booleans, null, lists or objects")


def attr_strings(value: Any) -> list[str]:
    """Every string inside attrs, keys included: what the secret gate and the lint must read."""
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *attr_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in attr_strings(v)]
    return [value] if isinstance(value, str) else []


class Actor(BaseModel):
    """Who is acting: code derives author, origin and scope from this, never from the caller's payload."""

    model_config = ConfigDict(frozen=True)

    name: str
    role: Role = "agent"
    origin: Origin = "agent"
    namespaces: tuple[str, ...] | None = None  # None: every namespace

    def can_see(self, namespace: str) -> bool:
        return self.namespaces is None or namespace in self.namespaces or namespace == SHARED

    def can_write(self, namespace: str) -> bool:
        return self.role != "read" and (self.namespaces is None or namespace in self.namespaces)


class MemoryIn(BaseModel):
    """A new entry as a caller proposes it. Governance fields are not part of it on purpose."""

    model_config = ConfigDict(extra="forbid")

    body: str = Field(min_length=1, max_length=MAX_BODY)
    title: str = Field(default="", max_length=MAX_TITLE)
    kind: Kind = "note"
    namespace: str = SHARED
    tags: list[str] = Field(default_factory=list, max_length=MAX_TAGS)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    valid_from: datetime | None = None
    attrs: dict[str, Any] = Field(default_factory=dict)
    source_key: str | None = Field(default=None, max_length=512)
    domain_keywords: list[str] = Field(default_factory=list, max_length=64)
    # Entries recorded together (a conversation, a session, one exchange) share an episode; seq orders
    # them in it and is assigned in arrival order when left out.
    episode: str | None = Field(default=None, min_length=1, max_length=200)
    seq: int | None = Field(default=None, ge=0)

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str) -> str:
        return check_namespace(v)

    @field_validator("title")
    @classmethod
    def _title(cls, v: str) -> str:
        # Rendered as a label: one line, NFKC, no control or invisible characters.
        if has_nul(v):
            raise ValueError("title contains a NUL character, which text storage cannot hold")
        return one_line(v, MAX_TITLE)

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        out: dict[str, None] = {}
        for tag in v:
            text = _label(tag, "tag", MAX_TAG)
            if _TAG_FORBIDDEN.search(text):
                raise ValueError(
                    f"tag {text[:80]!r} holds markup; tags may not contain [ ] < > {{ }} ` | or \\"
                )
            out.setdefault(text, None)
        return list(out)

    @field_validator("domain_keywords")
    @classmethod
    def _keywords(cls, v: list[str]) -> list[str]:
        return list(dict.fromkeys(_label(k, "domain keyword", MAX_KEYWORD).lower() for k in v))

    @field_validator("source_key")
    @classmethod
    def _source_key(cls, v: str | None) -> str | None:
        return None if v is None else _identifier(v, "source_key")

    @field_validator("episode")
    @classmethod
    def _episode(cls, v: str | None) -> str | None:
        return None if v is None else _identifier(v, "episode")

    @field_validator("valid_from")
    @classmethod
    def _valid_from(cls, v: datetime | None) -> datetime | None:
        return None if v is None else check_valid_from(v)

    @field_validator("attrs")
    @classmethod
    def _attrs(cls, v: dict[str, Any]) -> dict[str, Any]:
        if reserved := sorted(PURGE_MARKS & v.keys()):
            # a row carrying them is a purged tombstone to the store: never embedded, its vector dropped
            raise ValueError(f"attrs.{reserved[0]} is set by a purge only; use another key")
        _check_json(v, "attrs", 1)
        size = len(json.dumps(v, ensure_ascii=False).encode())
        if size > MAX_ATTRS_BYTES:
            raise ValueError(f"attrs are at most {MAX_ATTRS_BYTES} bytes as JSON; got {size}")
        return v

    @field_validator("body")
    @classmethod
    def _body(cls, v: str) -> str:
        if "\x00" in v:
            raise ValueError("body contains a NUL character, which text storage cannot hold")
        v = clean_text(v)
        if not v.strip():
            raise ValueError("body is empty")
        return v


class Memory(BaseModel):
    """One stored version of an entry, with every governance field."""

    id: str
    lineage_id: str
    version: int
    kind: str
    namespace: str
    tier: Tier
    origin: Origin
    author: str
    title: StoredTitle
    body: str
    tags: list[str]
    attrs: dict[str, Any]
    source_key: str | None
    content_hash: str
    valid_from: StoredTime
    valid_to: StoredTime | None
    supersedes: str | None
    status: Status
    status_reason: str | None
    importance: float
    standing: bool
    required: bool
    access_count: int
    last_accessed_at: datetime | None
    promoted_by: str | None
    created_at: datetime
    embedded: bool = False
    domain_keywords: list[str] = Field(default_factory=list)
    episode: str | None = None
    seq: int | None = None


class MemorySummary(BaseModel):
    """A listing row: no body, so listings stay small."""

    id: str
    kind: str
    namespace: str
    tier: Tier
    origin: Origin
    author: str
    title: StoredTitle
    status: Status
    valid_from: StoredTime
    content_hash: str


class MemoryDetail(BaseModel):
    memory: Memory
    history: list[Memory]


class NoteResult(BaseModel):
    memory: Memory
    created: bool


class Hit(BaseModel):
    """A retrieved entry with the provenance every hit must state."""

    id: str
    kind: str
    namespace: str
    tier: Tier
    origin: Origin
    author: str
    title: StoredTitle
    body: str
    valid_from: StoredTime
    score: float
    importance: float = 0.5
    standing: bool = False
    required: bool = False
    lineage_id: str = ""
    content_hash: str = ""
    legs: list[str] = Field(default_factory=list)
    via: str | None = None  # set when pulled in by edge expansion
