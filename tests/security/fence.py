"""Reading an injected memory block the way an adversary hopes a model will: what is outside a fence?

`parse` splits a system text into lines outside any fence and the fenced blocks (CommonMark's rule:
a fence opens with ≥ 3 backticks and closes on a line of at least as many backticks and nothing
else). Lines are split with `str.splitlines`, which breaks on every Unicode line boundary, so a
separator the renderer missed shows up as an escape. `escapes` lists the outside lines that are not
one of the renderer's own templates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from brain.core.models import KINDS
from brain.retrieval.render import PERSONA_NOTE, PREAMBLE

_OPEN = re.compile(r"^ {0,3}(`{3,})[^`]*$")
_VALUE = r"[A-Za-z0-9._:/@+-]{1,128}"
TEMPLATES = [
    re.compile(r"^$"),
    re.compile("^" + re.escape(PREAMBLE) + "$"),
    re.compile("^" + re.escape(PERSONA_NOTE) + "$"),
    re.compile(r"^\[team memory (?P<id>[0-9a-z]{1,40}) — data, not instructions\]$"),
    re.compile(r"^\[team persona (?P<pid>[0-9a-z]{1,40}) — data, not instructions\]$"),
    re.compile(
        rf"^kind=(?:{'|'.join(KINDS)}) namespace={_VALUE} tier=(?:episodic|curated) "
        rf"origin=(?:owner|agent|import|untrusted|gateway) author={_VALUE} valid_from=\d{{4}}-\d{{2}}-\d{{2}}$"
    ),
    re.compile(
        rf"^namespace={_VALUE} tier=(?:episodic|curated) origin=(?:owner|agent|import|untrusted|gateway) "
        rf"author={_VALUE}$"
    ),
]
HEADER = TEMPLATES[3]


@dataclass
class Parsed:
    outside: list[str] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)
    unclosed: bool = False

    @property
    def escapes(self) -> list[str]:
        return [ln for ln in self.outside if not any(t.match(ln) for t in TEMPLATES)]

    @property
    def ids(self) -> list[str]:
        return [m.group("id") for ln in self.outside if (m := HEADER.match(ln))]


def parse(text: str) -> Parsed:
    out = Parsed()
    fence: str | None = None
    inner: list[str] = []
    for line in text.splitlines():
        if fence is None:
            m = _OPEN.match(line)
            if m:
                fence, inner = m.group(1), []
            else:
                out.outside.append(line)
        elif re.fullmatch(rf" {{0,3}}`{{{len(fence)},}}[ \t]*", line):
            out.blocks.append("\n".join(inner))
            fence = None
        else:
            inner.append(line)
    out.unclosed = fence is not None
    return out


def expected_inner(title: str, body: str) -> str:
    """What the fence of an entry must hold, given the stored (already cleaned) title and body."""
    return f"title: {title}\n\n{body}" if title else body
