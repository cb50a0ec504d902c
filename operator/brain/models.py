"""Boundary types of the data plane: what callers send and what the store returns."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

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


def check_namespace(value: str) -> str:
    if not NAMESPACE_RE.match(value):
        raise ValueError(f"invalid namespace {value!r}: {NAMESPACE_HELP}")
    return value


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

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        for tag in v:
            if not tag or len(tag) > MAX_TAG:
                raise ValueError(f"each tag is 1-{MAX_TAG} characters; got {tag[:80]!r}")
        return v

    @field_validator("body")
    @classmethod
    def _body(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("body is empty")
        if "\x00" in v:
            raise ValueError("body contains a NUL character, which text storage cannot hold")
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
    title: str
    body: str
    tags: list[str]
    attrs: dict[str, Any]
    source_key: str | None
    content_hash: str
    valid_from: datetime
    valid_to: datetime | None
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
    title: str
    status: Status
    valid_from: datetime
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
    title: str
    body: str
    valid_from: datetime
    score: float
    importance: float = 0.5
    standing: bool = False
    required: bool = False
    lineage_id: str = ""
    content_hash: str = ""
    legs: list[str] = Field(default_factory=list)
    via: str | None = None  # set when pulled in by edge expansion
