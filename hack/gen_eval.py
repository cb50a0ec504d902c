"""Writes tests/data/generated_eval.json from brain.local.evalgen (issue #28): `python hack/gen_eval.py`.

The generator and its seed are the source; the JSON is committed because it is small and a test
checks it is what the generator gives."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "operator"))

from brain.local.evalgen import SEED, generate  # noqa: E402

OUT = ROOT / "tests" / "data" / "generated_eval.json"


def render(seed: int = SEED) -> str:
    return json.dumps(generate(seed), indent=1) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT.relative_to(ROOT)}")
