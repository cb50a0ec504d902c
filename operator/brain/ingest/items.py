"""What parsers produce: items with a stable identity, and the edges between them."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from brain.services.plan import Edge  # one type for a derived edge, from the parse to the write


@dataclass
class Item:
    """One entry-to-be. `key` is its identity inside the source ("<path>[#symbol]")."""

    key: str
    kind: str
    title: str
    body: str
    tags: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    domain_keywords: list[str] = field(default_factory=list)
    importance: float = 0.5
    standing: bool = False
    required: bool = False
    graded: bool = False  # code chunks go through the quality grading; curated text does not
    embed_text: str | None = None  # what to embed when it should differ from title + body
    raw: str | None = None  # graded items: the bare source the quality score reads (body adds a header)

    def fingerprint(self) -> str:
        """Changes when anything stored changes, so an unchanged item is skipped without a write."""
        doc = [self.kind, self.title, self.body, sorted(self.tags), self.domain_keywords, self.standing]
        doc += [self.required, round(self.importance, 3), json.dumps(self.attrs, sort_keys=True, default=str)]
        return hashlib.sha256(json.dumps(doc, default=str).encode()).hexdigest()[:32]


def shown_name(rel: str) -> str:
    """A file name fit for the summary and job_runs (JSON in Postgres): control characters and the
    surrogates of undecodable bytes written as escapes."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in rel)


@dataclass(frozen=True)
class Reject:
    item: str
    reason: str


@dataclass
class Parsed:
    """Everything one source yielded: items, edges, and what could not even be parsed."""

    items: list[Item] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)

    def extend(self, other: Parsed) -> None:
        self.items.extend(other.items)
        self.edges.extend(other.edges)
        self.rejects.extend(other.rejects)
