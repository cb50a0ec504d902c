"""Skills: `SKILL.md` files with YAML front matter (name, description) and a Markdown body.

A skill says *how* to do something. It is embedded on name + description (what a request is
matched against); the body is what gets injected into a skill slot.
"""

from __future__ import annotations

from brain.core.models import MAX_TITLE
from brain.ingest import frontmatter
from brain.ingest.items import Item


def is_skill_file(path: str) -> bool:
    return path.rsplit("/", 1)[-1] == "SKILL.md"


def parse_skill(path: str, text: str) -> Item | None:
    meta, body = frontmatter.split(text)
    folder = path.rsplit("/", 2)[-2] if "/" in path else "skill"
    name = str(meta.get("name") or folder).strip()
    description = str(meta.get("description") or "").strip()
    if not body.strip() and not description:
        return None
    full = f"{description}\n\n{body.strip()}".strip() if description else body.strip()
    return Item(
        key=path,
        kind="skill",
        title=name[:MAX_TITLE],
        body=full,
        tags=["skill", *frontmatter.as_list(meta.get("tags"))][:20],
        attrs={"path": path, "name": name, "description": description},
        importance=0.6,
        embed_text=f"{name}\n{description}" if description else None,
    )
