"""Query shaping: identifier-like tokens deserve an exact (trigram) lookup besides the fuzzy legs."""

from __future__ import annotations

import re

_IDENTIFIER_PATTERNS = [
    re.compile(r"(?<![\w-])--?[a-zA-Z][\w-]{2,}"),  # flags: --max-connections, -Xmx
    re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"),  # env vars, error constants: DATABASE_URL, ERR_TIMEOUT
    re.compile(r"\b(?:[a-z0-9-]+\.)+(?:internal|local|com|net|org|io|dev|svc|cluster)\b"),  # host names
    re.compile(r"\b[\w.-]+:\d{2,5}\b"),  # host:port
    re.compile(r"(?<![\w.])\d{4,5}(?![\w.])"),  # bare ports
    re.compile(r"\b[A-Z]{1,5}-?\d{3,6}\b"),  # error codes: E1234, ORA-00942, HTTP-503
    re.compile(r"\b0x[0-9a-fA-F]{4,}\b"),  # hex codes
    re.compile(r"\b[a-z]+(?:_[a-z0-9]+){1,}\b"),  # snake_case identifiers
    re.compile(r"\b[a-z]+(?:[A-Z][a-z0-9]+){1,}\b"),  # camelCase identifiers
]


def identifier_tokens(query: str, limit: int = 8) -> list[str]:
    """Tokens that name one exact thing; plain words are left to the full-text leg."""
    seen: dict[str, None] = {}
    for pattern in _IDENTIFIER_PATTERNS:
        for m in pattern.finditer(query):
            tok = m.group(0).strip()
            if len(tok) >= 3:
                seen.setdefault(tok, None)
    return list(seen)[:limit]


_COMPOUND = re.compile(r"(?<![\w.-])([a-z0-9]+(?:-[a-z0-9]+)+)(?![\w-])", re.I)


def compound_names(query: str, limit: int = 4) -> list[str]:
    """Hyphenated words of a question, lowercased ("korfay-worker", "one-way", "pre-production"):
    what `Store.unknown_names` checks against the brain. Flags (`--dry-run`) and host names are
    `identifier_tokens`'; a word needs a letter."""
    seen: dict[str, None] = {}
    for m in _COMPOUND.finditer(query):
        tok = m.group(1).lower()
        if any(c.isalpha() for c in tok) and all(tok.split("-")):
            seen.setdefault(tok, None)
    return list(seen)[:limit]


_CODE_BLOCK = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def code_blocks(text: str) -> list[str]:
    return [m.group(1) for m in _CODE_BLOCK.finditer(text)]


def shape_query(text: str, max_chars: int = 2000) -> str:
    """The retrieval query of a chat turn: its prose, then its code blocks (capped), within `max_chars`."""
    prose = _CODE_BLOCK.sub(" ", text).strip()
    code = "\n".join(block.strip()[:400] for block in code_blocks(text))
    return (prose + ("\n" + code if code else ""))[:max_chars]
