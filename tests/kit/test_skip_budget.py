"""The skip budget fails a run on a skip nobody listed, and on a listed one outside its condition."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit.skip_budget import BUDGET, parse_budget, unexpected

ROOT = Path(__file__).resolve().parents[2]

SKIPPING = """
import pytest

def test_needs_chromium():
    pytest.skip("no headless chromium: hack/chromium.sh failed")

def test_runs():
    assert True
"""


def _run(tmp_path: Path, budget: str) -> subprocess.CompletedProcess[str]:
    """pytest over one file that skips, with the budget plugin and ``budget`` as the budget file."""
    (tmp_path / "test_gui.py").write_text(SKIPPING)
    (tmp_path / "budget.txt").write_text(budget)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "BRAIN_SKIP_BUDGET"))}
    env.update(PYTHONPATH=str(ROOT), BRAIN_SKIP_BUDGET_FILE=str(tmp_path / "budget.txt"))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.kit.skip_budget", "--rootdir", str(tmp_path),
         "-c", "/dev/null", "-o", f"cache_dir={tmp_path / 'cache'}", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_an_unlisted_skip_fails_the_run_and_names_the_test(tmp_path: Path) -> None:
    proc = _run(tmp_path, "# nothing allowed\n")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "test_gui.py::test_needs_chromium: not in the budget: no headless chromium" in out, out
    assert "1 passed, 1 skipped" in out, out


def test_a_listed_skip_passes(tmp_path: Path) -> None:
    proc = _run(tmp_path, "test_gui.py::test_needs_chromium | always | no GPU here\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the non-root condition is judged against a root run")
def test_a_non_root_allowance_does_not_cover_a_root_run(tmp_path: Path) -> None:
    proc = _run(tmp_path, "test_gui.py::* | non-root | the node needs root\n")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "listed only for another machine (line 1: non-root)" in proc.stdout


def test_an_opt_in_allowance_holds_only_while_its_switch_is_off() -> None:
    budget = parse_budget("e2e/pods/test_ha.py::* | env-unset:BRAIN_E2E_HA | opt-in\n")
    skip = [("e2e/pods/test_ha.py::test_failover", "opt-in: make e2e-ha")]
    assert unexpected(skip, budget, {}, 0) == []
    assert unexpected(skip, budget, {"BRAIN_E2E_HA": "1"}, 0) == [
        (skip[0][0], skip[0][1], "listed only for another machine (line 1: env-unset:BRAIN_E2E_HA)")
    ]


def test_a_malformed_line_is_refused_with_its_number_and_the_accepted_form() -> None:
    with pytest.raises(pytest.UsageError, match=r"x:2: condition 'sometimes' is not one of always, non-root"):
        parse_budget("a | always | ok\nb | sometimes | why\n", source="x")
    with pytest.raises(pytest.UsageError, match=r"want '<node id glob> \| <condition> \| <reason>'"):
        parse_budget("just a test id\n")


def test_the_shipped_budget_parses_and_gives_every_skip_a_reason() -> None:
    entries = parse_budget(BUDGET.read_text())
    assert entries and all(len(e.reason) > 20 for e in entries)
