"""diff (desired ⊆ live), status helpers and health parsing."""

from __future__ import annotations

from decimal import Decimal

from brain_operator.diff import contains, first_difference, parse_quantity
from brain_operator.health import parse_health
from brain_operator.status import Check, merge_conditions, phase_of, workload_ready


def test_quantities_compare_by_value() -> None:
    assert parse_quantity("500m") == Decimal("0.5")
    assert parse_quantity("1Gi") == Decimal(2**30)
    assert parse_quantity("1e3") == Decimal(1000)
    assert parse_quantity("abc") is None
    assert contains({"cpu": "0.5", "memory": "1024Mi"}, {"cpu": "500m", "memory": "1Gi"})


def test_contains_ignores_server_defaults_but_not_list_changes() -> None:
    want = {"spec": {"ports": [{"port": 80}], "selector": {"a": "b"}}}
    have = {
        "spec": {"ports": [{"port": 80, "protocol": "TCP"}], "selector": {"a": "b"}, "clusterIP": "1.2.3.4"}
    }
    assert contains(want, have)
    assert first_difference({"spec": {"ports": [{"port": 80}, {"port": 81}]}}, have) == ".spec.ports"
    assert first_difference({"spec": {"selector": {"a": "c"}}}, have) == ".spec.selector.a"
    assert first_difference({"metadata": {"labels": {"x": "y"}}}, {"metadata": {}}) == ".metadata.labels"


def test_conditions_keep_transition_time_until_status_flips() -> None:
    first = merge_conditions(None, {"Ready": Check("False", "X", "m")}, 1, "t1")
    same = merge_conditions(first, {"Ready": Check("False", "Y", "m2")}, 2, "t2")
    assert same[0]["lastTransitionTime"] == "t1" and same[0]["observedGeneration"] == 2
    flipped = merge_conditions(same, {"Ready": Check("True", "Z", "ok")}, 2, "t3")
    assert flipped[0]["lastTransitionTime"] == "t3"


def test_workload_readiness_needs_the_current_generation() -> None:
    dep = {
        "metadata": {"generation": 2},
        "spec": {"replicas": 2},
        "status": {"observedGeneration": 1, "readyReplicas": 2},
    }
    assert workload_ready(dep, "d").reason == "RollingOut"
    dep["status"] = {"observedGeneration": 2, "readyReplicas": 2, "updatedReplicas": 2}
    assert workload_ready(dep, "d").ok
    assert workload_ready(None, "d").reason == "NotFound"


def test_phase() -> None:
    ok, bad = Check("True", "a", ""), Check("False", "b", "")
    assert phase_of({"x": ok, "y": ok}, Check("Unknown", "", ""), None) == "Ready"
    assert phase_of({"x": ok, "y": ok}, bad, None) == "Degraded"
    assert phase_of({"x": ok, "y": bad}, ok, None) == "Progressing"
    assert phase_of({"x": bad}, ok, None) == "Pending"
    assert phase_of({"x": ok}, ok, "boom") == "Failed"


def test_health_parsing_tolerates_missing_fields() -> None:
    h = parse_health({"status": "degraded", "database": "ok", "embedder": "down"})
    assert not h.healthy and h.index is not None and h.index.total_entries == 0
    h = parse_health(
        {"status": "ok", "database": "ok", "embedder": "ok", "index": {"entriesByKind": {"note": 2}}}
    )
    assert h.healthy and h.index is not None and h.index.total_entries == 2
