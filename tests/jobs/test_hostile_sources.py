"""A hostile repository (#32), imported with the real git CLI into real Postgres: one bad file costs
that file, with the reason in the summary, and never the import, the job's memory, or the clone's
own `.git`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from brain.embedder.model import Embedder
from brain.ingest import frontmatter
from brain.jobs.common import Progress
from brain.jobs.ingest import run_ingest
from brain.store import Store
from tests.jobs.conftest import Repo
from tests.jobs.test_ingest import active, spec_for

GOOD = "---\ntitle: Deploys stop on Friday\n---\nProduction deploys stop at 15:00 on Fridays.\n"
#: ~300 bytes that a plain safe_load expands to 9**6 strings (about 3 MB of tags).
BOMB = (
    "---\n"
    "title: laughs\n"
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "tags: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "---\nbody\n"
)


def _reasons(summary: dict) -> dict[str, str]:
    return {r["item"]: r["reason"] for r in summary["rejects"]}


async def _ingest(store: Store, embedder: Embedder, repo: Repo, tmp_path: Path) -> dict:
    return await run_ingest(
        store, embedder, spec_for(repo), workdir=tmp_path / "work", progress=Progress(enabled=False)
    )


def test_front_matter_aliases_are_refused_with_the_line() -> None:
    with pytest.raises(frontmatter.FrontMatterError, match=r"may not use YAML aliases \(\*a on its line 3\)"):
        frontmatter.split(BOMB)
    meta, body = frontmatter.split("---\ntitle: &t anchored\n---\nx\n")  # an anchor alone expands nothing
    assert meta == {"title": "anchored"} and body == "x\n"


async def test_alias_bomb_costs_one_file_not_the_import(
    store: Store, embedder: Embedder, repo: Repo, tmp_path: Path
) -> None:
    repo.write("memories/bomb.md", BOMB)
    repo.write("memories/friday.md", GOOD)
    repo.commit("bomb")
    summary = await _ingest(store, embedder, repo, tmp_path)
    assert summary["added"] == 1, summary
    assert "YAML aliases" in _reasons(summary)["memories/bomb.md"]
    assert len(json.dumps(summary)) < 5000  # nothing expanded into the summary or the store
    assert list(await active(store, "team-notes:")) == ["team-notes:memories/friday.md"]


async def test_a_tab_in_a_file_name_skips_that_file_with_a_warning(
    store: Store, embedder: Embedder, repo: Repo, tmp_path: Path
) -> None:
    repo.write("memories/bad\tname.md", GOOD.replace("Friday", "Monday"))
    repo.write("memories/friday.md", GOOD)
    repo.commit("tab")
    summary = await _ingest(store, embedder, repo, tmp_path)  # raised (a pydantic error) before the fix
    assert summary["added"] == 1 and summary["rejected"] == 1, summary
    assert "control character" in _reasons(summary)["memories/bad\\tname.md"]
    rows = await store.pool_for_tests.fetch(
        "SELECT summary FROM job_runs WHERE source = 'team-notes' AND status = 'ok'"
    )
    assert rows and "memories/bad\\\\tname.md" in rows[-1]["summary"]  # the warning is recorded too


async def test_symlinks_into_git_or_out_of_the_tree_are_not_followed(
    store: Store, embedder: Embedder, repo: Repo, tmp_path: Path
) -> None:
    secret = tmp_path / "outside.md"
    secret.write_text("---\ntitle: host file\n---\nsomething of the job pod's own\n")
    repo.write("memories/friday.md", GOOD)
    os.symlink("../.git/config", repo.path / "memories" / "remote.md")  # the clone's config: remote URL
    os.symlink(str(secret), repo.path / "memories" / "outside.md")
    os.symlink("friday.md", repo.path / "memories" / "alias.md")  # inside the tree: still followed
    os.symlink("loop-b.md", repo.path / "memories" / "loop-a.md")
    os.symlink("loop-a.md", repo.path / "memories" / "loop-b.md")
    repo.commit("links")
    summary = await _ingest(store, embedder, repo, tmp_path)
    reasons = _reasons(summary)
    assert "into .git" in reasons["memories/remote.md"], summary
    assert "outside the repository" in reasons["memories/outside.md"], summary
    assert "cannot be resolved" in reasons["memories/loop-a.md"], summary  # before: RuntimeError, no import
    stored = await active(store, "team-notes:")
    assert set(stored) == {"team-notes:memories/friday.md", "team-notes:memories/alias.md"}
    assert not any("[remote" in r["body"] or "file://" in r["body"] for r in stored.values())
