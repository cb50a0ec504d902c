"""Where the warm suite's minutes go: a pytest plugin that times fixture setups, and the tables.

Nobody had profiled the suite before #12, and `--durations` alone charges a session fixture to the
first test that asks for it, so a slow start-up looks like a slow test. This records each fixture's
own setup (its dependencies excluded: pytest sets those up before this hook) and prints, from one
run, totals per directory and per file, the slowest tests split into setup / call / teardown, and
the costliest fixtures. `make test-profile` runs both halves; by hand:

    PYTHONPATH=hack .venv/bin/pytest -q -p suite_profile --durations=0 > OUT/run.log  # SUITE_PROFILE_DIR=OUT
    .venv/bin/python hack/suite_profile.py OUT
"""

from __future__ import annotations

import collections
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_DURATION = re.compile(r"^\s*([\d.]+)s (setup|call|teardown)\s+(\S.*)$")


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: Any) -> Iterator[None]:
    t0 = time.monotonic()
    yield
    out = Path(os.environ.get("SUITE_PROFILE_DIR", ".suite-profile"))
    out.mkdir(parents=True, exist_ok=True)
    with (out / "fixtures.jsonl").open("a") as f:
        row = {"fixture": fixturedef.argname, "scope": fixturedef.scope, "s": time.monotonic() - t0}
        f.write(json.dumps(row) + "\n")


def _where(nodeid: str) -> tuple[str, str]:
    """(directory, file) of a test id; top-level files are grouped as '<dir> (top level)'."""
    file = nodeid.split("::")[0]
    parts = file.split("/")
    return ("/".join(parts[:-1]) if len(parts) > 2 else f"{parts[0]} (top level)"), file


def _seconds() -> dict[str, float]:
    return collections.defaultdict(float)


def _top(seconds: dict[str, float], n: int) -> list[tuple[str, float]]:
    return sorted(seconds.items(), key=lambda kv: -kv[1])[:n]


def tables(folder: Path, top: int = 25) -> str:
    """Markdown tables from `folder`/run.log (pytest --durations=0) and fixtures.jsonl."""
    phases: dict[str, dict[str, float]] = collections.defaultdict(_seconds)
    per_dir: dict[str, dict[str, float]] = collections.defaultdict(_seconds)
    per_file: dict[str, float] = collections.defaultdict(float)
    for line in (folder / "run.log").read_text(errors="replace").splitlines():
        m = _DURATION.match(line)
        if not m:
            continue
        seconds, phase, nodeid = float(m[1]), m[2], m[3].strip()
        directory, file = _where(nodeid)
        phases[nodeid][phase] += seconds
        per_dir[directory][phase] += seconds
        per_file[file] += seconds
    total = sum(sum(p.values()) for p in per_dir.values())
    out = [f"Sum of test durations: {total:.0f} s over {len(phases)} tests.", ""]
    out += ["| directory | total s | setup | call | teardown |", "|---|---:|---:|---:|---:|"]
    for d, p in sorted(per_dir.items(), key=lambda kv: -sum(kv[1].values())):
        out.append(
            f"| {d} | {sum(p.values()):.0f} | {p['setup']:.0f} | {p['call']:.0f} | {p['teardown']:.0f} |"
        )
    out += ["", "| file | s |", "|---|---:|"]
    out += [f"| {f} | {s:.0f} |" for f, s in _top(per_file, top)]
    out += ["", "| # | test | setup / call / teardown s | total s |", "|---:|---|---|---:|"]
    ranked = sorted(phases.items(), key=lambda kv: -sum(kv[1].values()))[:top]
    for i, (nodeid, p) in enumerate(ranked, 1):
        split = f"{p['setup']:.0f} / {p['call']:.0f} / {p['teardown']:.0f}"
        out.append(f"| {i} | `{nodeid}` | {split} | {sum(p.values()):.0f} |")
    fixtures = folder / "fixtures.jsonl"
    if fixtures.exists():
        count: collections.Counter[str] = collections.Counter()
        spent: dict[str, float] = collections.defaultdict(float)
        for line in fixtures.read_text().splitlines():
            row = json.loads(line)
            key = f"`{row['fixture']}` ({row['scope']})"
            count[key] += 1
            spent[key] += row["s"]
        out += ["", "| fixture (scope) | set up | own setup s |", "|---|---:|---:|"]
        out += [f"| {k} | {count[k]} | {s:.0f} |" for k, s in _top(spent, top)]
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(
            "usage: python hack/suite_profile.py FOLDER  (with FOLDER/run.log from pytest --durations=0)"
        )
    print(tables(Path(sys.argv[1])))
