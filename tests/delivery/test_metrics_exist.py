"""Every metric a dashboard panel or an alert queries is defined by the code (no dead panels).

This reads the source; tests/delivery/test_prometheus_scrape.py proves the same names against a real
Prometheus scraping the running gateway, embedder and operator.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from .conftest import DASHBOARDS, METRIC, ROOT, base_name, brain_dashboard_exprs, dashboard_exprs, rule_exprs

#: Series Prometheus itself adds to every scrape.
BUILTIN = {"up"}


def _defined() -> set[str]:
    """Metric names passed as string literals to prometheus_client (Counter/Gauge/Histogram/...Family)."""
    names: set[str] = set()
    for path in (ROOT / "operator").rglob("*.py"):
        names |= set(re.findall(r"""\(\s*["'](brain_[a-z0-9_]+)["']""", path.read_text()))
    return names


@pytest.mark.parametrize("source", ["dashboards", "brain-dashboard", "rules"])
def test_every_queried_metric_is_defined(source: str) -> None:
    exprs = {"dashboards": dashboard_exprs, "brain-dashboard": brain_dashboard_exprs, "rules": rule_exprs}[
        source
    ]()
    assert exprs
    defined = _defined()
    missing: dict[str, list[str]] = {}
    for where, expr in exprs:
        for name in METRIC.findall(expr):
            if name not in defined and base_name(name) not in defined:
                missing.setdefault(name, []).append(where)
    assert not missing, f"metrics queried but defined nowhere in operator/: {missing}"


def test_histogram_suffixes_are_used_only_on_histograms() -> None:
    hist: set[str] = set()
    for path in (ROOT / "operator").rglob("*.py"):
        hist |= set(re.findall(r"""Histogram\(\s*["'](brain_[a-z0-9_]+)["']""", path.read_text()))
    for where, expr in dashboard_exprs() + rule_exprs():
        for name in METRIC.findall(expr):
            if name.endswith(("_bucket",)):
                assert base_name(name) in hist, f"{where}: {name} is not a histogram"


def test_the_issue_panels_are_all_there() -> None:
    titles: dict[str, Any] = {
        f.stem: [p["title"] for p in json.loads(f.read_text())["panels"]] for f in DASHBOARDS.glob("*.json")
    }
    overview = " | ".join(titles["brain-overview"]).lower()
    for words in (
        "requests",
        "latency p95 by stage",
        "hit rate",
        "no-hit",
        "injected tokens",
        "degradations by cause",
        "captures stored",
        "captures filtered",
        "dropped",
        "router",
        "index entries by kind",
        "pending proposals",
    ):
        assert words in overview, words
    operator = " | ".join(titles["brain-operator"]).lower()
    for words in ("reconciles", "errors", "duration", "brains ready"):
        assert words in operator, words


def test_dashboards_are_valid_grafana_json() -> None:
    for f in DASHBOARDS.glob("*.json"):
        board = json.loads(f.read_text())
        assert board["uid"] and board["title"] and board["schemaVersion"] >= 36
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids))
        for p in board["panels"]:
            if p["type"] != "row":
                assert p["datasource"]["uid"] == "${datasource}", (f.name, p["title"])
                assert p["targets"], (f.name, p["title"])
            g = p["gridPos"]
            assert g["x"] >= 0 and g["x"] + g["w"] <= 24, (f.name, p["title"])


def test_scrape_is_not_needed_for_names_but_names_are_real() -> None:
    """Guard the regex itself: it must find the names the issue lists."""
    defined = _defined()
    for name in (
        "brain_retrieval_stage_duration_seconds",
        "brain_retrieval_queries_total",
        "brain_retrieval_degraded_total",
        "brain_injected_tokens",
        "brain_operator_reconcile_total",
        "brain_index_entries",
        "brain_index_stale_entries",
        "brain_ready",
        "brain_embedder_requests_total",
        "brain_gateway_requests_total",
    ):
        assert name in defined, name
    assert Path(ROOT / "operator").is_dir()


def test_the_per_brain_dashboard_selects_the_labels_its_series_carry() -> None:
    """The operator labels a Brain's series `brain="<namespace>/<name>"` (`brain_label`); the gateway's
    carry the scrape's `namespace` and `job` (the gateway Service). A bare `brain="<name>"` matched
    nothing, and every panel of the dashboard stayed empty."""
    from brain_operator.render import names
    from brain_operator.render.names import brain_label

    exprs = brain_dashboard_exprs("team-a", "team")
    assert len(exprs) >= 8
    for where, expr in exprs:
        brains = re.findall(r'brain="([^"]*)"', expr)
        assert all(b == brain_label("team-a", "team") for b in brains), (where, expr)
        if "brain_operator_reconcile_total" in expr:
            continue
        gateway = 'namespace="team-a", job="' + names.gateway("team") + '"'
        assert brains or gateway in expr, f"{where} selects no Brain: {expr}"
