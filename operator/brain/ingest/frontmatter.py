"""YAML front matter: `---` fenced metadata at the top of a Markdown file."""

from __future__ import annotations

import re
from typing import Any

import yaml

_FM = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


class FrontMatterError(ValueError):
    pass


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases: a few hundred bytes of nested `*ref`s expand into megabytes
    (a "billion laughs"), and front matter has no use for them. Anchors alone are harmless."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise FrontMatterError(
                f"front matter may not use YAML aliases (*{event.anchor} on its line {event.start_mark.line + 1}): "
                "they can expand a few bytes into megabytes; write the value out"
            )
        return super().compose_node(parent, index)


def split(text: str) -> tuple[dict[str, Any], str]:
    """(metadata, body). No front matter → ({}, text). Malformed YAML raises, naming the problem."""
    m = _FM.match(text)
    if not m:
        return {}, text
    try:
        meta = yaml.load(m.group(1), Loader=_NoAliasLoader) or {}  # a SafeLoader, aliases refused
    except yaml.YAMLError as e:
        raise FrontMatterError(f"front matter is not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(meta, dict):
        raise FrontMatterError("front matter must be a mapping of keys to values")
    return {str(k): v for k, v in meta.items()}, text[m.end() :]


def first_heading(body: str) -> str | None:
    m = _HEADING.search(body)
    return m.group(2).strip() if m else None


def sections(body: str) -> dict[str, str]:
    """Top-level sections by heading text (lower-cased, emoji and punctuation stripped) → their text."""
    out: dict[str, str] = {}
    matches = list(_HEADING.finditer(body))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
        name = re.sub(r"[^a-z0-9 &]+", " ", m.group(2).lower())
        name = re.sub(r"\s+", " ", name).strip()
        text = body[m.end() : end].strip()
        if name and text and name not in out:
            out[name] = text
    return out


def as_list(value: Any) -> list[str]:
    """Tags and keywords may be written as a YAML list or a comma-separated string."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if str(v).strip()]
    return [str(value)]
