"""`brainctl up` / `brainctl ingest --now`: the manifests' jobs as local processes, on their schedules."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from brain.local.jobs import LocalJob, build_jobs, cron_matches, load_sources, run_schedules
from brain.store import Store
from tests.jobs.conftest import Repo

ROOT = Path(__file__).resolve().parents[2]
NOTE = (
    "---\ntitle: Releases\n---\nReleases leave every second Tuesday; a change that misses the train waits.\n"
)


def test_cron_matches() -> None:
    t = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)  # a Tuesday
    assert cron_matches("0 3 * * *", t) and not cron_matches("0 3 * * *", t + timedelta(minutes=1))
    assert cron_matches("*/15 * * * *", t + timedelta(minutes=45))
    assert cron_matches("@daily", t - timedelta(hours=3)) and cron_matches("@hourly", t)
    assert cron_matches("0 3 * * 2", t) and not cron_matches("0 3 * * 1-1", t)
    assert cron_matches("0 3 15 * 2", t)  # day of month or day of week, as cron does
    with pytest.raises(ValueError, match="five fields"):
        cron_matches("0 3 * *", t)
    with pytest.raises(ValueError, match="outside"):
        cron_matches("61 * * * *", t)


def _manifests(tmp_path: Path, repo: Repo, **source_spec: object) -> list[Path]:
    brain = yaml.safe_load((ROOT / "samples" / "brain.yaml").read_text())
    src = {
        "apiVersion": "brain.dev/v1alpha1",
        "kind": "MemorySource",
        "metadata": {"name": "notes"},
        "spec": {
            "brainRef": {"name": brain["metadata"]["name"]},
            "git": {"url": f"file://{repo.path}"},
            **source_spec,
        },
    }
    other = {
        **src,
        "metadata": {"name": "someone-elses"},
        "spec": {**src["spec"], "brainRef": {"name": "other"}},
    }
    (tmp_path / "brain.yaml").write_text(yaml.safe_dump(brain))
    (tmp_path / "sources.yaml").write_text(yaml.safe_dump_all([src, other]))
    return [tmp_path / "brain.yaml", tmp_path / "sources.yaml"]


async def test_brainctl_ingest_now_runs_the_manifests_sources(
    dsn: str, store: Store, repo: Repo, tmp_path: Path
) -> None:
    repo.write(".teambrain/memories/decisions/01J0000000000000000000000A-releases.md", NOTE)
    repo.commit()
    files = _manifests(tmp_path, repo)
    cmd = [
        str(Path(sys.executable).parent / "brainctl"),
        "--dsn",
        dsn,
        "ingest",
        "--state-dir",
        str(tmp_path / "st"),
    ]
    for f in files:
        cmd += ["-f", str(f)]
    refused = await asyncio.to_thread(
        subprocess.run, cmd, capture_output=True, text=True, env=dict(os.environ)
    )
    assert refused.returncode == 2 and "--now" in refused.stderr
    done = await asyncio.to_thread(
        subprocess.run, [*cmd, "--now"], capture_output=True, text=True, env=dict(os.environ), timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "ingest-notes: added 1" in done.stderr and "someone-elses" not in done.stderr
    rows = await store.pool_for_tests.fetch(
        "SELECT source_key, embedding_model FROM memories WHERE status = 'active'"
    )
    assert [r["source_key"] for r in rows] == [
        "notes:.teambrain/memories/decisions/01J0000000000000000000000A-releases.md"
    ]
    assert rows[0]["embedding_model"] == "sentence-transformers/all-MiniLM-L6-v2"


async def test_schedules_run_sources_at_start_then_each_job_in_its_minute(tmp_path: Path, repo: Repo) -> None:
    from brain.local.up import load_manifests

    files = _manifests(tmp_path, repo, schedule="*/5 * * * *")
    brain, _ = load_manifests(files)
    sources, skipped = load_sources(files, brain.metadata.name)
    assert [s.metadata.name for s in sources] == ["notes"] and skipped == []
    jobs = build_jobs(
        brain, sources, dsn="postgresql://x", state=tmp_path / "st", gateway_url="http://gw", master_key="k"
    )
    assert [j.name for j in jobs] == ["ingest-notes", "distill", "digest"]
    assert jobs[1].env["BRAIN_GATEWAY_URL"] == "http://gw" and jobs[1].env["BRAIN_DISTILL_MODEL"]
    doc = (tmp_path / "st" / "sources" / "notes.json").read_text()
    assert '"brain": "team"' in doc and str(repo.path) in doc  # the document the operator mounts
    # the scheduler itself, with cheap stand-in commands and a clock that walks minute by minute
    probe = [sys.executable, "-c", "import json; print(json.dumps({'added': 0}))"]
    fake = [
        LocalJob("ingest-a", probe, dict(os.environ), "*/5 * * * *", at_start=True),
        LocalJob("distill", probe, dict(os.environ), "2 * * * *"),
        LocalJob("digest", probe, dict(os.environ), "2 * * * *", suspend=True),
    ]
    minutes = iter(datetime(2026, 12, 1, 4, m, tzinfo=UTC) for m in range(1, 7))
    stop = asyncio.Event()
    said: list[str] = []

    def clock() -> datetime:
        try:
            return next(minutes)
        except StopIteration:  # 04:07 matches nothing: wait there until the launched runs are done
            if len(fake[0].runs) >= 2 and len(fake[1].runs) >= 1:
                stop.set()
            return datetime(2026, 12, 1, 4, 7, tzinfo=UTC)

    await run_schedules(fake, stop, say=said.append, clock=clock, tick=0.3)
    assert len(fake[0].runs) == 2  # at start, and at 04:05
    assert len(fake[1].runs) == 1 and fake[2].runs == []  # 04:02 once; suspended never
    assert all(r["rc"] == 0 and r["summary"] == {"added": 0} for j in fake for r in j.runs)
