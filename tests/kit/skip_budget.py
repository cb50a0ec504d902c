"""The skip budget: a run fails on any skip that ``tests/expected_skips.txt`` does not allow.

Why: a prerequisite that cannot be installed (Chromium, promtool, hadolint, the real node as
non-root) used to turn its tests into skips, and ``make test`` stayed green with the capability
untested. Every allowed skip is now written down with the condition under which it is allowed, so
a skip is either a decision someone made and can read, or a failure.

The budget file has one entry per line, ``<node id glob> | <condition> | <reason>``:

- ``always``: the skip is expected on every machine (an opt-in suite, a mode not run here);
- ``non-root``: allowed only when the run is not root (CI runs as root, so there it fails);
- ``env-unset:NAME``: allowed only while the environment variable NAME is unset or not ``1``
  (the opt-in switch of a slow suite).

Listed skips that did not happen are not an error: ``-k`` and file selections skip nothing.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

#: BRAIN_SKIP_BUDGET_FILE points elsewhere only for the budget's own tests (tests/kit/test_skip_budget.py).
BUDGET = Path(
    os.environ.get("BRAIN_SKIP_BUDGET_FILE") or Path(__file__).resolve().parents[1] / "expected_skips.txt"
)
CONDITIONS = ("always", "non-root", "env-unset:")


@dataclass(frozen=True)
class Allowance:
    """One line of the budget."""

    pattern: str
    condition: str
    reason: str
    line: int

    def holds(self, env: dict[str, str], euid: int) -> bool:
        """Whether this machine is one where the skip is allowed."""
        if self.condition == "always":
            return True
        if self.condition == "non-root":
            return euid != 0
        name = self.condition.removeprefix("env-unset:")
        return env.get(name) != "1"


def parse_budget(text: str, source: str = "tests/expected_skips.txt") -> list[Allowance]:
    """The budget's entries; a malformed line is an error naming its number and the accepted form."""
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 3 or not all(parts):
            raise pytest.UsageError(
                f"{source}:{n}: want '<node id glob> | <condition> | <reason>', got {raw!r}"
            )
        pattern, condition, reason = parts
        if not (condition in CONDITIONS[:2] or (condition.startswith(CONDITIONS[2]) and len(condition) > 10)):
            raise pytest.UsageError(
                f"{source}:{n}: condition {condition!r} is not one of always, non-root, env-unset:NAME"
            )
        out.append(Allowance(pattern, condition, reason, n))
    return out


def unexpected(
    skips: list[tuple[str, str]], budget: list[Allowance], env: dict[str, str], euid: int
) -> list[tuple[str, str, str]]:
    """(node id, skip reason, why it is not allowed) for every skip the budget does not cover."""
    bad = []
    for nodeid, reason in skips:
        matches = [a for a in budget if fnmatch.fnmatchcase(nodeid, a.pattern)]
        if not matches:
            bad.append((nodeid, reason, "not in the budget"))
        elif not any(a.holds(env, euid) for a in matches):
            conds = ", ".join(f"line {a.line}: {a.condition}" for a in matches)
            bad.append((nodeid, reason, f"listed only for another machine ({conds})"))
    return bad


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


class SkipBudget:
    """Collects skips (on the xdist controller, from every worker's reports) and judges them once."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.skips: list[tuple[str, str]] = []
        self.bad: list[tuple[str, str, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped:  # an expected failure (xfail) is a test that did not pass: counted too
            reason = str(getattr(report, "wasxfail", "")) or _skip_reason(report)
            self.skips.append((report.nodeid, reason))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        budget = parse_budget(BUDGET.read_text())
        self.bad = unexpected(self.skips, budget, dict(os.environ), os.geteuid())
        if self.bad and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.bad:
            return
        terminalreporter.section("skips outside the budget (tests/expected_skips.txt)", red=True)
        for nodeid, reason, why in self.bad:
            terminalreporter.line(f"{nodeid}: {why}: {reason}")
        terminalreporter.line(
            "A skip is a test that did not run. Install what it needs, or list it in "
            "tests/expected_skips.txt with its condition and reason."
        )


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or os.environ.get("BRAIN_SKIP_BUDGET") == "0":
        return  # workers report to the controller, which judges; 0 turns it off for a scratch run
    config.pluginmanager.register(SkipBudget(config), "brain-skip-budget")
