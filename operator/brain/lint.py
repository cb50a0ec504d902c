"""The instruction lint: memory is data, so bodies shaped like orders to an agent are refused on write."""

from __future__ import annotations

import re

from brain.errors import InstructionRejected

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "override_instructions",
        re.compile(
            r"(?i)\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}\b(?:previous|prior|above|earlier|all|any|"
            r"your|the|system)\b[^.\n]{0,20}\b(?:instructions?|prompts?|rules|directions|guidelines|guardrails)\b"
        ),
    ),
    (
        "role_reassignment",
        re.compile(r"(?i)\b(?:you are now|from now on,? you (?:are|will|must)|act as if you)\b"),
    ),
    (
        "fake_system_turn",
        re.compile(
            r"(?i)(?:<\|?(?:system|im_start|im_end)\|?>|</?system>|^\s*(?:system|developer)\s*:)", re.M
        ),
    ),
    (
        "exfiltration",
        re.compile(
            r"(?i)\b(?:reveal|print|output|exfiltrate|send|leak|upload)\b[^.\n]{0,40}\b(?:system prompt|api keys?|"
            r"secrets?|credentials|environment variables|env vars)\b[^.\n]{0,40}\b(?:to|at|into)\b"
        ),
    ),
    ("concealment", re.compile(r"(?i)\bdo not (?:tell|inform|mention (?:this )?to|alert) the user\b")),
]


def findings(text: str) -> list[str]:
    return [name for name, pattern in _PATTERNS if pattern.search(text)]


def check(field: str, text: str) -> None:
    found = findings(text)
    if found:
        raise InstructionRejected(
            f"{field} reads like instructions to an agent ({', '.join(found)}); memories are data — state the "
            "fact or decision instead of commanding the reader",
            field=field,
        )
