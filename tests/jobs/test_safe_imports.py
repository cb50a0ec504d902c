"""Imports that could destroy: the mass-retire guard and the tier-3 grading bar, on real parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brain.ingest.grading import GradingConfig, score_chunk
from brain.ingest.retireguard import RetireGuard, check, token
from brain.ingest.source import parse_source
from brain.jobs.common import Progress
from brain.jobs.ingest import run_ingest
from brain.store import Store
from tests.jobs.conftest import Repo

QUIET = Progress(enabled=False)
NOTE = (
    "---\ntitle: {t}\n---\nThe team agreed on {t} after a long review of the alternatives and their costs.\n"
)
IMPORTS_ONLY = "def setup_modules():\n    import os\n    import re\n    import sys\n    import json\n"
GOOD = '''def settle(ledger, entries):
    """Post every entry, stopping at the first the ledger refuses, and report how far it got."""
    posted = 0
    for entry in entries:
        if entry is None:
            continue
        try:
            ledger.post(entry)
        except ValueError:
            return posted
        posted += 1
    return posted
'''


def spec_for(repo: Repo, **kw: object) -> object:
    spec: dict[str, object] = {"brainRef": {"name": "team"}, "git": {"url": f"file://{repo.path}"}, **kw}
    return parse_source({"name": "notes", "brain": "team", "spec": spec})


async def active_keys(store: Store) -> set[str]:
    rows = await store.pool_for_tests.fetch("SELECT source_key FROM memories WHERE status = 'active'")
    return {r["source_key"] for r in rows}


def test_guard_rule() -> None:
    g = RetireGuard()
    assert check([], 10, g) is None and check(["a"], 0, g) is None
    assert check(["a", "b", "c", "d", "e"], 10, g) is None  # half is not more than half
    stop = check(["a", "b", "c", "d", "e", "f"], 10, g)
    assert stop is not None and (stop.would_retire, stop.stored) == (6, 10)
    assert "60%" in stop.message and stop.token in stop.message
    assert check(["a"], 1, g) is not None  # retiring every entry always asks, however few
    assert check(["a"], 1, RetireGuard(confirm=token(["a"]))) is None
    assert check(["a", "b"], 2, RetireGuard(confirm=token(["a"]))) is not None  # a token confirms one set
    assert check(["a", "b", "c"], 4, RetireGuard(max_share=0.8)) is None
    with pytest.raises(ValueError, match=r"spec\.retireGuard\.maxShare"):
        RetireGuard.from_spec({"maxShare": 0})


async def test_paths_matching_nothing_stop_the_import(
    store: Store, embedder, repo: Repo, tmp_path: Path
) -> None:
    for i, t in enumerate(["postgres only", "errors name fields", "one gateway", "small modules"]):
        repo.write(f".teambrain/memories/decisions/01J000000000000000000000{i}A-n.md", NOTE.format(t=t))
    repo.commit()
    work = tmp_path / "w"
    first = await run_ingest(store, embedder, spec_for(repo), workdir=work, progress=QUIET)  # type: ignore[arg-type]
    assert first["added"] == 4
    before = await active_keys(store)

    # a typo in paths: the source now yields nothing, which reads as "retire all four"
    typo = spec_for(repo, git={"url": f"file://{repo.path}", "paths": ["memoires/"]})
    stopped = await run_ingest(store, embedder, typo, workdir=work, progress=QUIET)  # type: ignore[arg-type]
    assert stopped["retired"] == 0 and stopped["stopped"]["wouldRetire"] == 4
    assert stopped["stopped"]["stored"] == 4 and "every entry" in stopped["stopped"]["message"]
    assert await active_keys(store) == before  # nothing written, nothing retired
    runs = await store.pool_for_tests.fetch("SELECT status, summary FROM job_runs ORDER BY id")
    assert [r["status"] for r in runs] == ["ok", "stopped"]
    assert json.loads(runs[1]["summary"])["stopped"]["confirm"] == stopped["stopped"]["confirm"]

    # three of four deleted upstream: more than maxShare (0.5), stops; a higher maxShare lets it through
    for i in range(3):
        repo.delete(f".teambrain/memories/decisions/01J000000000000000000000{i}A-n.md")
    repo.commit("cleanup")
    again = await run_ingest(store, embedder, spec_for(repo), workdir=work, progress=QUIET)  # type: ignore[arg-type]
    assert again["stopped"]["wouldRetire"] == 3 and await active_keys(store) == before
    # the typo's token does not confirm a different removal
    wrong = spec_for(repo, retireGuard={"confirm": stopped["stopped"]["confirm"]})
    assert "stopped" in await run_ingest(store, embedder, wrong, workdir=work, progress=QUIET)  # type: ignore[arg-type]
    confirmed = spec_for(repo, retireGuard={"confirm": again["stopped"]["confirm"]})
    done = await run_ingest(store, embedder, confirmed, workdir=work, progress=QUIET)  # type: ignore[arg-type]
    assert "stopped" not in done and done["retired"] == 3
    assert len(await active_keys(store)) == 1


async def test_tier3_keeps_the_tier1_bar_when_no_neighbour_vouches(
    store: Store, embedder, repo: Repo, tmp_path: Path
) -> None:
    """With tuning on, tier 1 lets chunks down to min_score - 0.10 wait for tier 3; a chunk that
    no proven neighbour vouches for must still clear min_score (it used to be stored)."""
    assert 0.2 <= score_chunk(IMPORTS_ONLY, "setup_modules") < 0.3
    repo.write("app/boot.py", IMPORTS_ONLY)
    repo.write("app/ledger.py", GOOD)
    repo.commit()
    spec = parse_source({"name": "code", "spec": {"git": {"url": str(repo.path), "format": "code"}}})
    s = await run_ingest(
        store, embedder, spec, workdir=tmp_path / "w", grading=GradingConfig(tuning=True), progress=QUIET
    )
    keys = await active_keys(store)
    assert "code:app/ledger.py#settle" in keys
    assert "code:app/boot.py#setup_modules" not in keys
    assert s["grading"]["tier1_dropped"] >= 1
