"""Personas: agent identities (front matter + Identity / Critical Rules / Communication Style sections).

A persona says *who* answers. Retrieval matches it by `domain_keywords` overlap first (GIN `&&`),
so the keywords are extracted here: the words of name, description and division first (they name
the domain), then the most frequent significant words of the identity and rules.
"""

from __future__ import annotations

import re
from collections import Counter

from brain.core.models import MAX_TITLE
from brain.ingest import frontmatter
from brain.ingest.items import Item
from brain.retrieval.catalog import STOP_WORDS, keywords

_SECTIONS = {
    "identity": ("identity", "identity & memory", "identity and memory", "who you are", "role"),
    "critical_rules": ("critical rules", "rules", "critical rules you must follow", "principles"),
    "communication_style": ("communication style", "communication", "style", "voice"),
}
NOT_PERSONAS = frozenset({"readme.md", "contributing.md", "changelog.md", "license.md", "code_of_conduct.md"})
MAX_KEYWORDS = 40


def is_persona_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower()
    return name.endswith(".md") and name not in NOT_PERSONAS and not path.startswith(".")


def _pick(sections: dict[str, str], names: tuple[str, ...]) -> str:
    for name, text in sections.items():
        stripped = re.sub(r"^(?:your |the |core )", "", name)
        if stripped in names or any(stripped.startswith(n) for n in names):
            return text
    return ""


def domain_keywords(name: str, description: str, division: str, identity: str, rules: str) -> list[str]:
    head = keywords(f"{name} {description} {division.replace('-', ' ')}")
    words = (w.strip("._-") for w in re.findall(r"[a-z][a-z0-9+#._-]{2,40}", f"{identity}\n{rules}".lower()))
    counts = Counter(w for w in words if len(w) > 3 and w not in STOP_WORDS)
    tail = [w for w, _ in counts.most_common() if w not in head]
    return (head + tail)[:MAX_KEYWORDS]


def parse_persona(path: str, text: str) -> Item | None:
    meta, body = frontmatter.split(text)
    name = str(meta.get("name") or frontmatter.first_heading(body) or "").strip()
    if not name or not body.strip():
        return None
    description = str(meta.get("description") or "").strip()
    division = path.rsplit("/", 2)[-2] if path.count("/") >= 1 else ""
    secs = frontmatter.sections(body)
    parts = {k: _pick(secs, names) for k, names in _SECTIONS.items()}
    if any(parts.values()):
        compact = [f"# {name}", description]
        for key, label in (
            ("identity", "Identity"),
            ("critical_rules", "Critical Rules"),
            ("communication_style", "Communication Style"),
        ):
            if parts[key]:
                compact.append(f"## {label}\n{parts[key]}")
        persona_body = "\n\n".join(p for p in compact if p)
    else:
        persona_body = body.strip()
    kws = domain_keywords(name, description, division, parts["identity"], parts["critical_rules"])
    return Item(
        key=path,
        kind="persona",
        title=name[:MAX_TITLE],
        body=persona_body[:16_000],
        tags=["persona", *([division] if division else [])],
        attrs={
            "path": path,
            "name": name,
            "description": description,
            "division": division,
            **{k: str(meta[k]) for k in ("emoji", "vibe", "color") if k in meta},
            "sections": [k for k, v in parts.items() if v],
        },
        domain_keywords=kws,
        importance=0.6,
        embed_text=f"{name}\n{description}\n{parts['identity'][:1500]}",
    )
