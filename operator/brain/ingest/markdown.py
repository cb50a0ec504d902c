"""Markdown memories: one file is one entry; the TeamBrain tree's folder names give the kind.

`decisions/ conventions/ map/ learnings/` (files named `<ULID>-<slug>.md`) become decision,
convention, map and learning entries; anything else takes `kind:` from its front matter (default
`note`). A `retired/` folder holds history, not current truth, so it is not imported.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any

from brain.core.models import KINDS, MAX_TITLE
from brain.ingest import frontmatter
from brain.ingest.items import Item

FOLDER_KINDS = {"decisions": "decision", "conventions": "convention", "map": "map", "learnings": "learning"}
_ULID_SLUG = re.compile(r"^(?P<ulid>[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26})-(?P<slug>.+)$")
SKIPPED_FOLDERS = frozenset({"retired", ".git", "node_modules"})


def kind_for(path: str, meta: dict[str, Any]) -> str:
    for part in reversed(path.split("/")[:-1]):
        if part in FOLDER_KINDS:
            return FOLDER_KINDS[part]
    declared = str(meta.get("kind") or meta.get("type") or "note").lower()
    return (
        declared if declared in KINDS and declared not in ("skill", "persona", "digest", "code") else "note"
    )


def _title(path: str, meta: dict[str, Any], body: str) -> str:
    if meta.get("title"):
        return str(meta["title"])[:MAX_TITLE]
    heading = frontmatter.first_heading(body)
    if heading:
        return heading[:MAX_TITLE]
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    m = _ULID_SLUG.match(stem)
    return (m.group("slug") if m else stem).replace("-", " ").replace("_", " ")[:MAX_TITLE]


def _valid_from(meta: dict[str, Any]) -> str | None:
    for key in ("valid_from", "date", "created"):
        v = meta.get(key)
        if isinstance(v, datetime | date):
            return v.isoformat()
        if isinstance(v, str) and v.strip():
            return v.strip()
    return None


def parse_memory(path: str, text: str) -> Item | None:
    """One Markdown memory → an item, or None when the file has no body. Raises on bad front matter."""
    meta, body = frontmatter.split(text)
    if not body.strip():
        return None
    priority = str(meta.get("priority") or "").lower()
    attrs: dict[str, Any] = {"path": path}
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    m = _ULID_SLUG.match(stem)
    if m:
        attrs["ulid"] = m.group("ulid").upper()
    if vf := _valid_from(meta):
        attrs["valid_from"] = vf
    for key in ("scope", "status", "links", "source"):
        if key in meta:
            attrs[key] = meta[key]
    try:
        importance = float(meta.get("importance", 0.6))
    except (TypeError, ValueError):
        importance = 0.6
    return Item(
        key=path,
        kind=kind_for(path, meta),
        title=_title(path, meta, body),
        body=body.strip(),
        tags=frontmatter.as_list(meta.get("tags"))[:20],
        attrs=attrs,
        importance=min(max(importance, 0.0), 1.0),
        standing=priority in ("standing", "required") or bool(meta.get("standing")),
        required=priority == "required",
    )


def is_memory_file(path: str) -> bool:
    parts = path.split("/")
    if any(p in SKIPPED_FOLDERS for p in parts[:-1]):
        return False
    name = parts[-1].lower()
    return name.endswith((".md", ".markdown")) and name not in ("readme.md", "index.md", "changelog.md")
