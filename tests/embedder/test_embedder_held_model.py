"""An embedder image holds one baked model; started for another (spec.embedding.model), it refuses
at once with a message naming both, instead of serving vectors under the wrong name."""

from __future__ import annotations

import os
import subprocess
import sys

from brain.embedder.__main__ import HELD_MODEL_ENV, unheld_model

HELD = "sentence-transformers/all-MiniLM-L6-v2"


def test_wrong_model_is_refused_naming_both() -> None:
    env = {**os.environ, HELD_MODEL_ENV: HELD}
    proc = subprocess.run(
        [sys.executable, "-m", "brain.embedder", "--model", "BAAI/bge-small-en-v1.5", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 2, proc.stderr
    assert "'BAAI/bge-small-en-v1.5'" in proc.stderr and f"holds only '{HELD}'" in proc.stderr
    assert "spec.embedding.model" in proc.stderr


def test_the_held_model_or_no_baked_model_starts() -> None:
    assert unheld_model(HELD, HELD) is None
    assert unheld_model("BAAI/bge-small-en-v1.5", None) is None  # laptops, tests: no image, no rule
