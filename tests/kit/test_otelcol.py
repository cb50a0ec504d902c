"""The real OpenTelemetry Collector fixture (tests/kit/traces.py, #31): OTLP in, spans back out."""

from __future__ import annotations

import ipaddress
import os
import time
import uuid
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from tests.kit.traces import _BUILT, Collector, CollectorBuildError, Span, _binary


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        v: dict[str, Any] = {"boolValue": value}
    elif isinstance(value, int):
        v = {"intValue": str(value)}
    elif isinstance(value, float):
        v = {"doubleValue": value}
    elif isinstance(value, list):
        v = {"arrayValue": {"values": [{"stringValue": x} for x in value]}}
    else:
        v = {"stringValue": value}
    return {"key": key, "value": v}


def otlp_trace(service: str, spans: list[dict[str, Any]]) -> dict[str, Any]:
    """An OTLP/JSON ExportTraceServiceRequest: one resource (service.name), one scope."""
    now = time.time_ns()
    out = []
    for s in spans:
        span = {
            "traceId": s["trace_id"],
            "spanId": s["span_id"],
            "name": s["name"],
            "kind": s.get("kind", 1),
            "startTimeUnixNano": str(now - 5_000_000),
            "endTimeUnixNano": str(now),
            "attributes": [_attr(k, v) for k, v in s.get("attributes", {}).items()],
            "status": s.get("status", {}),
        }
        if s.get("parent_span_id"):
            span["parentSpanId"] = s["parent_span_id"]
        out.append(span)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [_attr("service.name", service)]},
                "scopeSpans": [{"scope": {"name": "tests.kit.test_otelcol"}, "spans": out}],
            }
        ]
    }


def post(collector: Collector, body: dict[str, Any], timeout: float = 5.0) -> httpx.Response:
    return httpx.post(
        collector.traces_url, json=body, headers={"content-type": "application/json"}, timeout=timeout
    )


def ids() -> tuple[str, str, str]:
    """A trace id and two span ids, hex."""
    return uuid.uuid4().hex, os.urandom(8).hex(), os.urandom(8).hex()


def test_a_parent_and_child_span_come_back_with_link_service_and_attributes(
    otel_collector: Collector,
) -> None:
    trace_id, parent_id, child_id = ids()
    service = f"brain-test-{uuid.uuid4().hex[:8]}"
    body = otlp_trace(
        service,
        [
            {
                "trace_id": trace_id,
                "span_id": parent_id,
                "name": "POST /v1/chat/completions",
                "kind": 2,
                "attributes": {"http.request.method": "POST", "http.response.status_code": 200},
            },
            {
                "trace_id": trace_id,
                "span_id": child_id,
                "parent_span_id": parent_id,
                "name": "retrieval",
                "attributes": {
                    "brain.memories": 3,
                    "brain.exact": True,
                    "brain.score": 0.5,
                    "brain.legs": ["vector", "lexical"],
                },
                "status": {"code": 2, "message": "partial"},
            },
        ],
    )
    r = post(otel_collector, body)
    assert r.status_code == 200, r.text

    spans = otel_collector.wait_spans(lambda s: s["trace_id"] == trace_id, count=2)
    by_name: dict[str, Span] = {s["name"]: s for s in spans}
    assert set(by_name) == {"POST /v1/chat/completions", "retrieval"}
    parent, child = by_name["POST /v1/chat/completions"], by_name["retrieval"]
    assert parent["span_id"] == parent_id and parent["parent_span_id"] is None
    assert child["span_id"] == child_id and child["parent_span_id"] == parent_id
    assert parent["service"] == child["service"] == service
    assert parent["kind"] == "SERVER" and child["kind"] == "INTERNAL"
    assert parent["attributes"] == {"http.request.method": "POST", "http.response.status_code": 200}
    assert child["attributes"] == {
        "brain.memories": 3,
        "brain.exact": True,
        "brain.score": 0.5,
        "brain.legs": ["vector", "lexical"],
    }
    assert (parent["status"], child["status"], child["status_message"]) == ("UNSET", "ERROR", "partial")
    assert child["scope"] == "tests.kit.test_otelcol"
    assert parent["end_time_unix_nano"] - parent["start_time_unix_nano"] == 5_000_000


def test_a_stopped_collector_refuses_and_a_restarted_one_receives_again(otel_collector: Collector) -> None:
    service = "brain-test-restart"
    trace_id, first_id, second_id = ids()
    assert (
        post(
            otel_collector,
            otlp_trace(service, [{"trace_id": trace_id, "span_id": first_id, "name": "before"}]),
        ).status_code
        == 200
    )
    otel_collector.wait_spans(lambda s: s["span_id"] == first_id)
    port = otel_collector.http_port

    otel_collector.stop()
    with pytest.raises(httpx.ConnectError):
        post(
            otel_collector,
            otlp_trace(service, [{"trace_id": trace_id, "span_id": second_id, "name": "lost"}]),
        )

    otel_collector.start()
    assert otel_collector.http_port == port
    r = post(
        otel_collector, otlp_trace(service, [{"trace_id": trace_id, "span_id": second_id, "name": "after"}])
    )
    assert r.status_code == 200, r.text
    (after,) = otel_collector.wait_spans(lambda s: s["name"] == "after")
    assert after["span_id"] == second_id
    # The file is appended to across the restart, and the refused span never arrived.
    assert [s["name"] for s in otel_collector.spans()] == ["before", "after"]


def test_a_paused_collector_hangs_and_a_resumed_one_answers(otel_collector: Collector) -> None:
    trace_id, span_id, _ = ids()
    body = otlp_trace("brain-test-pause", [{"trace_id": trace_id, "span_id": span_id, "name": "held"}])
    otel_collector.pause()
    try:
        with pytest.raises(httpx.ReadTimeout):  # connected (the kernel's backlog), never answered
            post(otel_collector, body, timeout=1.0)
    finally:
        otel_collector.resume()
    assert post(otel_collector, body).status_code == 200
    otel_collector.wait_spans(lambda s: s["span_id"] == span_id)


def test_the_collector_listens_on_loopback_only(otel_collector: Collector) -> None:
    listening = otel_collector.listening()
    assert {port for _, port in listening} == {otel_collector.http_port, otel_collector.grpc_port}
    assert all(ipaddress.ip_address(addr).is_loopback for addr, _ in listening), listening


def test_a_failed_build_errors_the_test_instead_of_skipping() -> None:
    config = SimpleNamespace(stash=pytest.Stash())
    config.stash[_BUILT] = CollectorBuildError("hack/otelcol-build.sh exited 1")
    with pytest.raises(pytest.fail.Exception, match="could not be built"):
        _binary(config)  # type: ignore[arg-type]
