"""The alert rules: shape, runbooks, and `promtool test rules` (Debian's prometheus package)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT, RULES, Render, alerts, fetched_tool

EXPECTED = {
    "BrainNotReady",
    "RetrievalDegraded",
    "RetrievalLatencyHigh",
    "CaptureDropping",
    "IndexStale",
    "ProposalsPiling",
    "ProposalsWaiting",
    "OperatorReconcileErrors",
    "EmbedderDown",
    "BrainBackupFailed",
    "BrainBackupMissing",
}
RUNBOOK_BASE = "https://github.com/brain-operator/brain-operator/blob/main/docs/runbooks/"


@pytest.fixture(scope="module")
def promtool() -> str:
    return fetched_tool("promtool.sh", "promtool is not available and could not be fetched")


def test_every_alert_is_there_with_severity_summary_description_and_runbook() -> None:
    rules = alerts()
    assert {r["alert"] for r in rules} == EXPECTED
    for r in rules:
        assert r["labels"]["severity"] in {"critical", "warning", "info"}, r["alert"]
        ann = r["annotations"]
        assert ann["summary"] and ann["description"], r["alert"]
        assert ann["runbook_url"] == f"{RUNBOOK_BASE}{r['alert']}.md"
        assert r.get("for"), f"{r['alert']} fires on a single evaluation"


@pytest.mark.parametrize("alert", sorted(EXPECTED))
def test_runbook_exists_and_says_what_to_do(alert: str) -> None:
    path = ROOT / "docs" / "runbooks" / f"{alert}.md"
    assert path.exists(), f"missing runbook {path}"
    text = path.read_text()
    assert text.startswith(f"# {alert}")
    for heading in ("## Meaning", "## Impact", "## Diagnosis", "## Mitigation"):
        assert heading in text, f"{path.name} lacks {heading}"


def test_promtool_check_rules(promtool: str) -> None:
    proc = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_unit_tests(promtool: str) -> None:
    tests = Path(__file__).with_name("rules_test.yaml")
    proc = subprocess.run(
        [promtool, "test", "rules", str(tests)], capture_output=True, text=True, cwd=tests.parent
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    covered = {
        t["alertname"] for case in yaml.safe_load(tests.read_text())["tests"] for t in case["alert_rule_test"]
    }
    assert covered == EXPECTED, f"alerts without a promtool unit test: {EXPECTED - covered}"


def test_the_charts_prometheusrule_is_valid_for_prometheus(
    promtool: str, render: Render, tmp_path: Path
) -> None:
    docs = render({"monitoring.prometheusRule.enabled": True})
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    f = tmp_path / "rendered.rules.yaml"
    f.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    proc = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(EXPECTED)} rules found" in proc.stdout


def test_the_proposal_age_threshold_is_a_chart_value(promtool: str, render: Render, tmp_path: Path) -> None:
    docs = render(
        {"monitoring.prometheusRule.enabled": True, "monitoring.prometheusRule.proposalMaxAgeDays": 3}
    )
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    [waiting] = [
        r for g in rule["spec"]["groups"] for r in g["rules"] if r.get("alert") == "ProposalsWaiting"
    ]
    assert waiting["expr"].endswith("/ 86400 > 3"), waiting["expr"]
    assert "more than 3 days" in waiting["annotations"]["summary"]
    default = [
        d for d in render({"monitoring.prometheusRule.enabled": True}) if d["kind"] == "PrometheusRule"
    ]
    [plain] = [
        r for g in default[0]["spec"]["groups"] for r in g["rules"] if r.get("alert") == "ProposalsWaiting"
    ]
    assert plain["expr"] == next(r for _, r in _rule_exprs() if "oldest_pending" in r)


def _rule_exprs() -> list[tuple[str, str]]:
    from .conftest import rule_exprs

    return rule_exprs()
