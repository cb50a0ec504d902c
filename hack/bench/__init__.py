"""The benches: one package, run from the repository root (#30, #33).

    .venv/bin/python -m hack.bench [--only quality,gateway,...]   # `make bench`: every section, docs/benchmarks.md
    .venv/bin/python -m hack.bench.<part> --help                  # one part alone (gateway, scale, faults, ...)

What every bench shares lives here once:
- `results`: the one writer of `bench-results/<date>-<HHMM>-<commit>[-<part>].json` (the machine,
  the command, the load before and after, each row's outcome counts);
- `check`: what each request's retrieval did, counted, and checked against what its row claims;
- `corpus` and `vectors`: the copied corpus's layouts, and its texts' real vectors cached on disk;
- Postgres is started one way, `tests.kit.database.postgres` (the suite's own), and percentiles are
  computed one way, `brain.local.stats.percentile`.

The sections in `__main__` (quality, selectivity, latency, ingest of notes) run in `make bench`'s
process; every other part is a module run as its own process (`python -m hack.bench.<part>`), so a
part that starts servers or a cluster cleans up after itself whatever the others do.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: LoCoMo's retrieval set (shared/data, outside the repository); BRAIN_LOCOMO points elsewhere
LOCOMO = Path(os.environ.get("BRAIN_LOCOMO") or ROOT.parent / "shared" / "data" / "locomo10-retrieval.json")
TEAM = ROOT / "tests" / "data" / "team_eval.json"


def parser(module: str, doc: str | None, **kw: Any) -> argparse.ArgumentParser:
    """A bench's command line: `python -m <module>` in its usage, its whole docstring as the help."""
    return argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kw,
    )


def on_the_real_node(title: str) -> bool:
    """The real node's parts need root (it runs containers); without it their section says so and
    measures nothing, so `make bench` as a user still writes every other section."""
    if os.geteuid() == 0:
        return True
    print(f"## {title}\n\nNot measured: the real node needs root.\n")
    return False
