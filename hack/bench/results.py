"""The one writer of the benches' figures: `bench-results/<date>-<HHMM>-<commit>[-<part>].json` (#33).

`make bench` writes one record with a section per part. A part run alone writes a record of its own
(suffixed `-<part>`) with its one section, so every figure docs/benchmarks.md quotes comes from a
file that names its commit, its command and the machine's load while it ran. A part that `make
bench` runs hands its figures to the runner through $BRAIN_BENCH_JSON instead, and the runner folds
them into its record: one file per run either way.

A commit suffixed `-dirty` was measured on a tree with uncommitted changes.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hack.bench import ROOT, check

RESULTS = ROOT / "bench-results"
#: where `make bench` wants a part's figures (a file it reads back after the part exits)
HANDOFF = "BRAIN_BENCH_JSON"


def commit_id() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, cwd=ROOT
    )
    return (done.stdout.strip() or "uncommitted") + ("-dirty" if dirty.stdout.strip() else "")


def machine(commit: str | None = None) -> str:
    """CPU, cores, memory, Python, commit (`commit_id()` unless given) and time: the line every
    section's figures stand on."""
    cpu = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, Python {platform.python_version()}, "
        f"commit {commit or commit_id()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )


@dataclass
class Record:
    """One run's file: its header, then a section per part as each finishes."""

    path: Path
    data: dict[str, Any]
    failed: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, part: str | None = None, argv: list[str] | None = None) -> Record:
        started = datetime.now(UTC)
        commit = commit_id()
        name = f"{started:%Y-%m-%d-%H%M}-{commit}" + (f"-{part}" if part else "")
        data = {
            "commit": commit,
            "started": started.isoformat(timespec="seconds"),
            "machine": machine(commit),
            "argv": sys.argv[1:] if argv is None else argv,
            "sections": {},
        }
        return cls(RESULTS / f"{name}.json", data)

    def section(
        self,
        name: str,
        *,
        results: dict[str, Any],
        markdown: str | None,
        ok: bool,
        load_before: tuple[float, float, float],
        seconds: float,
    ) -> None:
        self.data["sections"][name] = {
            "load_before": load_before,
            "load_after": os.getloadavg(),
            "seconds": seconds,
            "ok": ok,
            "results": {k: v for k, v in results.items() if not k.startswith("_")},
            "markdown": markdown,  # the section as docs/benchmarks.md shows it, every figure with its words
        }
        if not ok and name not in self.failed:
            self.failed.append(name)

    def save(self) -> Path:
        self.data["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        self.data["failed"] = self.failed
        self.path.parent.mkdir(exist_ok=True)
        self.path.write_text(json.dumps(self.data, indent=2, default=str) + "\n")
        return self.path


# A part run alone: its record starts when the part's process imports this module.
_LOAD0, _T0 = os.getloadavg(), time.perf_counter()
_alone: Record | None = None


def emit(
    part: str,
    figures: dict[str, Any],
    *,
    markdown: str | None = None,
    checks: Iterable[tuple[check.Counts, check.Claim]] = (),
    also: str | None = None,
) -> Path:
    """A part's figures so far: to `make bench` when it runs the part, else into the part's own record
    (rewritten on every call, so a run stopped later keeps what it measured); `also` (a part's
    `--json`) gets the bare figures too. `ok` is False when a row's outcome check fails."""
    ok = all(check.mismatch(counts, claim) is None for counts, claim in checks)
    body = json.dumps(figures, indent=2, default=str) + "\n"
    if also:
        Path(also).write_text(body)
    if os.environ.get(HANDOFF):
        path = Path(os.environ[HANDOFF])
        path.write_text(body)
        return path
    global _alone
    if _alone is None:
        _alone = Record.start(part)
    _alone.section(
        part,
        results=figures,
        markdown=markdown,
        ok=ok,
        load_before=_LOAD0,
        seconds=time.perf_counter() - _T0,
    )
    return _alone.save()
