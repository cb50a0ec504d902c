"""Ingest writes through the one door (#32): a MemorySource's import is authorised by the same code
as every other write (services.memory), as the source's own identity.

Through the real entry point (`run_ingest`, a real git repository, real Postgres): an entry that
carries a source's key but that someone else wrote (an owner by hand, or an agent planting one) is
not the source's. The source neither supersedes it, nor retires it, nor takes it for its own
unchanged item (a planted `ingest_hash`); it writes its own entry beside it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from brain.core.errors import Forbidden
from brain.core.models import Actor, MemoryIn
from brain.embedder import LocalEmbedder
from brain.ingest.markdown import parse_memory
from brain.jobs.common import Progress
from brain.jobs.ingest import run_ingest, source_actor
from brain.services.memory import MemoryService
from brain.store import Store
from brain.store.writer import StoreWriter
from tests.jobs.conftest import Repo
from tests.jobs.test_ingest import spec_for

DEPLOYS = "---\ntitle: Deploys\n---\nDeploys go out on Tuesdays after the change freeze lifts.\n"
QUIET = Progress(enabled=False)


async def _rows(store: Store, key: str) -> list[dict]:
    rows = await store.pool_for_tests.fetch(
        "SELECT id, author, origin, tier, body, status FROM memories WHERE source_key = $1 ORDER BY created_at",
        key,
    )
    return [dict(r) for r in rows]


async def test_a_source_never_replaces_or_retires_an_entry_an_owner_wrote(
    store: Store, embedder: LocalEmbedder, repo: Repo, tmp_path: Path, owner: Actor
) -> None:
    svc = MemoryService(store, embedder)
    by_hand = "Deploys go out on Thursdays; the owner wrote this by hand and it must stay."
    kept = await svc.note(MemoryIn(body=by_hand, source_key="team-notes:notes/deploys.md"), owner)
    gone = await svc.note(
        MemoryIn(
            body="The staging cluster is rebuilt every night at 02:00.", source_key="team-notes:notes/x.md"
        ),
        owner,
    )
    repo.write("notes/deploys.md", DEPLOYS)
    repo.commit()

    s = await run_ingest(store, embedder, spec_for(repo), workdir=tmp_path / "w", progress=QUIET)

    assert (s["added"], s["superseded"], s["retired"]) == (1, 0, 0), s
    for mine in (kept.memory, gone.memory):
        after = (await store.get(mine.id)).memory
        assert (after.status, after.author, after.body) == ("active", "cole", mine.body)
    rows = await _rows(store, "team-notes:notes/deploys.md")
    assert [(r["author"], r["status"]) for r in rows] == [("cole", "active"), ("source:team-notes", "active")]
    assert "Tuesdays" in rows[1]["body"] and rows[1]["tier"] == "curated"
    # A second run finds the source's own entry unchanged, and still leaves the owner's alone.
    again = await run_ingest(store, embedder, spec_for(repo), workdir=tmp_path / "w", progress=QUIET)
    assert (again["added"], again["superseded"], again["skipped"], again["retired"]) == (0, 0, 1, 0)
    assert [r["status"] for r in await _rows(store, "team-notes:notes/deploys.md")] == ["active", "active"]


async def test_a_planted_ingest_hash_does_not_pass_for_the_sources_own_entry(
    store: Store, embedder: LocalEmbedder, repo: Repo, tmp_path: Path, agent: Actor
) -> None:
    """An agent that knows a public file plants an entry with its key and fingerprint: the import
    must not skip the file as unchanged and leave the agent's words standing as the source's."""
    repo.write("notes/deploys.md", DEPLOYS)
    repo.commit()
    item = parse_memory("notes/deploys.md", DEPLOYS)
    assert item is not None
    svc = MemoryService(store, embedder)
    planted = await svc.note(
        MemoryIn(
            body="Deploys go out any time; skip the freeze.",
            source_key="team-notes:notes/deploys.md",
            attrs={"ingest_hash": item.fingerprint(), "source": "team-notes"},
        ),
        agent,
    )

    s = await run_ingest(store, embedder, spec_for(repo), workdir=tmp_path / "w", progress=QUIET)

    assert (s["added"], s["skipped"], s["superseded"]) == (1, 0, 0), s
    rows = await _rows(store, "team-notes:notes/deploys.md")
    assert [(r["author"], r["origin"]) for r in rows] == [
        ("claude-mac", "agent"),
        ("source:team-notes", "import"),
    ]
    assert "Tuesdays" in rows[1]["body"]
    assert (await store.get(planted.memory.id)).memory.author == "claude-mac"


async def test_the_door_holds_a_source_to_its_namespace_and_its_own_entries(
    store: Store, embedder: LocalEmbedder, repo: Repo, owner: Actor
) -> None:
    """The rules sync relies on are the door's: the source's Actor writes only its declared
    namespace, may write curated kinds (a source is where skills come from), and supersedes or
    retires only what it wrote."""
    svc = MemoryService(store, embedder)
    src = source_actor(spec_for(repo, namespace="repo:web"))
    assert src.namespaces == ("repo:web",)
    with pytest.raises(Forbidden, match="repo:api"):
        await svc.note(MemoryIn(body="The api deploys on Fridays.", namespace="repo:api"), src)
    skill = await svc.note(
        MemoryIn(body="1. Reproduce. 2. Bisect. 3. Fix the cause.", kind="skill", namespace="repo:web"), src
    )
    assert (skill.memory.tier, skill.memory.author) == ("curated", "source:team-notes")
    theirs = await svc.note(MemoryIn(body="The web app builds with vite.", namespace="repo:web"), owner)
    with pytest.raises(Forbidden, match="only its own"):
        await svc.supersede(
            theirs.memory.id,
            MemoryIn(body="The web app builds with webpack.", namespace="repo:web"),
            theirs.memory.content_hash,
            src,
        )
    with pytest.raises(Forbidden, match="only its own"):
        await svc.retire(theirs.memory.id, "removed upstream", src)
    assert (await store.get(theirs.memory.id)).memory.status == "active"


async def test_no_other_writer_passes_for_the_source(
    store: Store, embedder: LocalEmbedder, repo: Repo, tmp_path: Path
) -> None:
    """An import's author name is reserved at the door, not only for key names: an owner acting
    under it (`brainctl --as source:team-notes`) is refused, and an entry that carries the source's
    name without an import's origin (written behind the door) is still not the source's."""
    svc = MemoryService(store, embedder)
    posing = Actor(name="source:team-notes", role="owner", origin="owner")
    with pytest.raises(Forbidden, match="import writes as"):
        await svc.note(
            MemoryIn(body="Deploys go out any time.", source_key="team-notes:notes/deploys.md"), posing
        )
    behind = await StoreWriter(store).note(
        MemoryIn(body="Deploys go out any time.", source_key="team-notes:notes/deploys.md"), actor=posing
    )
    repo.write("notes/deploys.md", DEPLOYS)
    repo.commit()
    s = await run_ingest(store, embedder, spec_for(repo), workdir=tmp_path / "w", progress=QUIET)
    assert (s["added"], s["superseded"], s["skipped"], s["foreign"]) == (1, 0, 0, 1), s
    assert (await store.get(behind.memory.id)).memory.status == "active"
