"""Generate the Grafana dashboards of the chart (charts/brain-operator/dashboards/*.json).

    python hack/dashboards.py          # write
    python hack/dashboards.py --check  # exit 1 when the committed JSON differs

Panels are declared here, not hand-edited in JSON, so that they stay consistent (datasource
variable, units, layout) and reviewable. tests/delivery/test_metrics_exist.py checks that every
metric a panel queries is defined in the code.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "charts" / "brain-operator" / "dashboards"
DS = {"type": "prometheus", "uid": "${datasource}"}
RI = "$__rate_interval"
GW = 'namespace=~"$namespace", job=~"$gateway"'
EMB = 'namespace=~"$namespace", job=~"$embedder"'
OPB = 'brain=~"$brain"'


def _var_datasource() -> dict[str, Any]:
    return {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus"}


def _var(name: str, label: str, query: str, *, regex: str = "") -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "query": {"query": query, "refId": f"{name}-var"},
        "definition": query,
        "regex": regex,
        "refresh": 2,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "sort": 1,
    }


def _panel(
    title: str,
    targets: list[tuple[str, str]],
    *,
    unit: str = "short",
    kind: str = "timeseries",
    description: str = "",
    w: int = 12,
    stack: bool = False,
) -> dict[str, Any]:
    custom: dict[str, Any] = {}
    if kind == "timeseries":
        custom = {"fillOpacity": 10, "stacking": {"mode": "normal" if stack else "none"}}
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "fieldConfig": {"defaults": {"unit": unit, "custom": custom}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}} if kind == "timeseries" else {},
        "targets": [
            {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": chr(ord("A") + i)}
            for i, (expr, legend) in enumerate(targets)
        ],
        "_w": w,
    }


def _row(title: str) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "panels": [], "_w": 24}


def _layout(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    x = y = 0
    out = []
    for pid, p in enumerate(panels, start=1):
        w = p.pop("_w")
        h = 1 if p["type"] == "row" else (4 if p["type"] == "stat" else 8)
        if x + w > 24:
            x, y = 0, y + 8
        if p["type"] == "row" and x:
            x, y = 0, y + 8
        p["id"] = pid
        p["gridPos"] = {"h": h, "w": w, "x": x, "y": y}
        x += w
        if x >= 24:
            x, y = 0, y + h
        out.append(p)
    return out


def _dashboard(uid: str, title: str, description: str, variables: list[dict[str, Any]], panels: list) -> dict:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["brain-operator"],
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "",
        "templating": {"list": [_var_datasource(), *variables]},
        "annotations": {"list": []},
        "links": [],
        "panels": _layout(panels),
    }


def overview() -> dict[str, Any]:
    variables = [
        _var("namespace", "Namespace", "label_values(brain_gateway_requests_total, namespace)"),
        _var(
            "gateway", "Gateway", 'label_values(brain_gateway_requests_total{namespace=~"$namespace"}, job)'
        ),
        _var(
            "embedder",
            "Embedder",
            'label_values(brain_embedder_requests_total{namespace=~"$namespace"}, job)',
        ),
        _var("brain", "Brain", "label_values(brain_ready, brain)", regex="/^($namespace)\\/.*/"),
    ]
    hist = "histogram_quantile({q}, sum by ({by}le) (rate({m}_bucket{{{sel}}}[{ri}])))"
    panels = [
        _row("Requests"),
        _panel(
            "Requests by memory outcome",
            [(f"sum by (memory) (rate(brain_gateway_requests_total{{{GW}}}[{RI}]))", "{{memory}}")],
            unit="reqps",
            stack=True,
            description="injected: memory added; no_hit: nothing relevant; degraded: a brain part failed and "
            "the request went on without memory; off/skipped: retrieval not wanted.",
        ),
        _panel(
            "Upstream input tokens by prompt-cache outcome",
            [
                (
                    f"sum by (cache) (rate(brain_upstream_input_tokens_total{{{GW}}}[{RI}]))",
                    "{{cache}}",
                )
            ],
            stack=True,
            description="What the providers billed: read is served from their prompt cache (about 0.1x the "
            "input price), write re-writes it (1.25x), none is neither. Memory is placed so that earlier "
            "turns stay cached; a growing write share means prefixes are moving (docs/gateway.md).",
        ),
        _panel(
            "Prompt-cache share of upstream input tokens",
            [
                (
                    # `or vector(0)`: no provider has read from its cache yet is a share of 0, not no data
                    f'(sum(rate(brain_upstream_input_tokens_total{{{GW}, cache="read"}}[{RI}])) or vector(0)) '
                    f"/ sum(rate(brain_upstream_input_tokens_total{{{GW}}}[{RI}]))",
                    "read from the provider's cache",
                )
            ],
            unit="percentunit",
            description="The share of billed input tokens the providers served from their prompt cache. "
            "Memory is injected into the newest person turn and put back byte for byte on later turns, "
            "so this share should hold as conversations grow (docs/gateway.md, cache-stable injection).",
        ),
        _panel(
            "Router decisions by tier",
            [(f"sum by (tier) (rate(brain_router_decisions_total{{{GW}}}[{RI}]))", "{{tier}}")],
            unit="reqps",
            stack=True,
        ),
        _panel(
            "Brain overhead per request (p50, p95)",
            [
                (hist.format(q=0.5, by="", m="brain_gateway_hook_duration_seconds", sel=GW, ri=RI), "p50"),
                (hist.format(q=0.95, by="", m="brain_gateway_hook_duration_seconds", sel=GW, ri=RI), "p95"),
            ],
            unit="s",
        ),
        _panel(
            "Auth failures",
            [
                (
                    f"sum by (surface, reason) (rate(brain_auth_failures_total{{{GW}}}[{RI}]))",
                    "{{surface}} {{reason}}",
                )
            ],
            unit="reqps",
        ),
        _row("Retrieval"),
        _panel(
            "Retrieval latency p95 by stage",
            [
                (
                    hist.format(
                        q=0.95, by="stage, ", m="brain_retrieval_stage_duration_seconds", sel=GW, ri=RI
                    ),
                    "{{stage}}",
                )
            ],
            unit="s",
            description="The budget is 500 ms for the whole retrieval (stage=total).",
        ),
        _panel(
            "Hit rate",
            [
                (
                    f'sum(rate(brain_retrieval_queries_total{{{GW}, result="hit"}}[{RI}])) '
                    f"/ sum(rate(brain_retrieval_queries_total{{{GW}}}[{RI}]))",
                    "hit rate",
                )
            ],
            unit="percentunit",
        ),
        _panel(
            "No-hit queries",
            [(f'sum(rate(brain_retrieval_queries_total{{{GW}, result="no_hit"}}[{RI}]))', "no hit")],
            unit="reqps",
        ),
        _panel(
            "Injected tokens per request (p50, p95)",
            [
                (hist.format(q=0.5, by="", m="brain_injected_tokens", sel=GW, ri=RI), "p50"),
                (hist.format(q=0.95, by="", m="brain_injected_tokens", sel=GW, ri=RI), "p95"),
            ],
        ),
        _panel(
            "Degradations by cause",
            [(f"sum by (cause) (rate(brain_retrieval_degraded_total{{{GW}}}[{RI}]))", "{{cause}}")],
            unit="reqps",
            stack=True,
            w=24,
        ),
        _panel(
            "Exposure of retracted memories",
            [
                (f"sum(rate(brain_retraction_notices_total{{{GW}}}[{RI}]))", "notices delivered"),
                (f"sum(brain_retraction_notices_pending{{{GW}}})", "conversations not told yet"),
                (f"sum(rate(brain_exposure_receipts_recorded_total{{{GW}}}[{RI}]))", "receipts recorded"),
            ],
            w=24,
            description="When an owner retires, forgets or purges a memory, every conversation that was given "
            "it is told on its next request (docs/gateway.md, 'Exposure receipts and retractions'). Pending: "
            "conversations given a retracted memory that have not come back since (per replica, summed).",
        ),
        _row("Capture"),
        _panel(
            "Captures stored by kind",
            [(f"sum by (kind) (rate(brain_captures_stored_total{{{GW}}}[{RI}]))", "{{kind}}")],
            unit="ops",
            stack=True,
        ),
        _panel(
            "Captures filtered by reason",
            [(f"sum by (reason) (rate(brain_captures_filtered_total{{{GW}}}[{RI}]))", "{{reason}}")],
            unit="ops",
            stack=True,
        ),
        _panel(
            "Captures dropped and failed",
            [
                (f"sum(rate(brain_capture_queue_dropped_total{{{GW}}}[{RI}]))", "dropped (queue full)"),
                (f"sum(rate(brain_capture_errors_total{{{GW}}}[{RI}]))", "errors"),
            ],
            unit="ops",
        ),
        _panel("Capture queue depth", [(f"sum(brain_capture_queue_depth{{{GW}}})", "jobs waiting")]),
        _row("Index"),
        _panel(
            "Index entries by kind",
            [(f'sum by (kind) (brain_index_entries{{{OPB}, kind!="*"}})', "{{kind}}")],
            stack=True,
            description="From the operator, which reads each gateway's /brain/v1/health.",
        ),
        _panel(
            "Pending proposals, stale entries",
            [
                (f"sum by (brain) (brain_index_pending_proposals{{{OPB}}})", "pending {{brain}}"),
                (f"sum by (brain) (brain_index_stale_entries{{{OPB}}})", "stale {{brain}}"),
            ],
        ),
        _panel(
            "Proposals waiting for an owner",
            [(f"sum(brain_proposals_pending{{{GW}}})", "pending")],
            kind="stat",
            w=6,
            description="From the gateway, which reads the database: decide them on its /review page.",
        ),
        _panel(
            "Oldest pending proposal",
            [(f"max(brain_proposals_oldest_pending_age_seconds{{{GW}}})", "waiting for")],
            kind="stat",
            unit="s",
            w=6,
            description="The ProposalsWaiting alert fires past monitoring.prometheusRule.proposalMaxAgeDays.",
        ),
        _panel(
            "Digest: hit rate and proposal acceptance",
            [
                (f"max(brain_digest_retrieval_hit_rate{{{GW}}})", "retrieval hit rate"),
                (f"max(brain_digest_proposal_acceptance_rate{{{GW}}})", "proposal acceptance"),
            ],
            unit="percentunit",
            description="The newest weekly digest's figures, exported by the gateway from the database.",
        ),
        _panel(
            "Digest: no-hit queries and stale memories",
            [
                (f"max(brain_digest_no_hit_queries{{{GW}}})", "no-hit queries (week)"),
                (f"max(brain_digest_stale_memories{{{GW}}})", "stale memories"),
            ],
        ),
        _panel(
            "Embedded ratio",
            [(f"min by (brain) (brain_index_embedded_ratio{{{OPB}}})", "{{brain}}")],
            unit="percentunit",
        ),
        _panel("Brains ready", [(f"brain_ready{{{OPB}}}", "{{brain}}")], kind="stat"),
        _row("Traces"),
        _panel(
            "Spans sent and dropped",
            [
                (f"sum(rate(brain_trace_spans_exported_total{{{GW}}}[{RI}]))", "gateway: sent"),
                (
                    f"sum by (reason) (rate(brain_trace_spans_dropped_total{{{GW}}}[{RI}]))",
                    "gateway: dropped ({{reason}})",
                ),
                (f"sum(rate(brain_trace_spans_exported_total{{{EMB}}}[{RI}]))", "embedder: sent"),
                (
                    f"sum by (reason) (rate(brain_trace_spans_dropped_total{{{EMB}}}[{RI}]))",
                    "embedder: dropped ({{reason}})",
                ),
            ],
            w=24,
            description="Spans go to spec.observability.traces.endpoint (docs/tracing.md); the traces of "
            "requests and job runs are read in the trace backend. Dropped: the collector was down, slow or "
            "refusing (export_failed) or slower than the spans came (queue_full); requests never wait for it.",
        ),
        _row("Embedder"),
        _panel(
            "Embedder requests by code",
            [(f"sum by (code) (rate(brain_embedder_requests_total{{{EMB}}}[{RI}]))", "{{code}}")],
            unit="reqps",
        ),
        _panel(
            "Embedder latency (p95) and texts per call",
            [
                (
                    hist.format(q=0.95, by="", m="brain_embedder_request_duration_seconds", sel=EMB, ri=RI),
                    "p95",
                ),
                (
                    f"sum(rate(brain_embedder_texts_total{{{EMB}}}[{RI}])) "
                    f"/ sum(rate(brain_embedder_batch_size_count{{{EMB}}}[{RI}]))",
                    "texts per model call",
                ),
            ],
        ),
    ]
    return _dashboard(
        "brain-overview",
        "Brain / Overview",
        "One team brain: requests, retrieval, capture, index and embedder.",
        variables,
        panels,
    )


def operator() -> dict[str, Any]:
    variables = [_var("kind", "Kind", "label_values(brain_operator_reconcile_total, kind)")]
    ks = 'kind=~"$kind"'
    panels = [
        _panel("Operator healthy", [("max(brain_operator_healthy)", "healthy")], kind="stat", w=6),
        _panel(
            "Since last successful reconcile",
            [("time() - max(brain_operator_last_success_timestamp_seconds)", "age")],
            kind="stat",
            unit="s",
            w=6,
        ),
        _panel("Brains ready", [("sum(brain_ready)", "ready")], kind="stat", w=6),
        _panel("Brains not ready", [("count(brain_ready == 0) or vector(0)", "not ready")], kind="stat", w=6),
        _panel(
            "Reconciles by kind and result",
            [
                (
                    f"sum by (kind, result) (rate(brain_operator_reconcile_total{{{ks}}}[{RI}]))",
                    "{{kind}} {{result}}",
                )
            ],
            unit="ops",
        ),
        _panel(
            "Reconcile errors by reason",
            [
                (
                    f"sum by (kind, reason) (rate(brain_operator_reconcile_errors_total{{{ks}}}[{RI}]))",
                    "{{kind}} {{reason}}",
                )
            ],
            unit="ops",
        ),
        _panel(
            "Reconcile duration (p50, p95) by kind",
            [
                (
                    f"histogram_quantile({q}, sum by (kind, le) "
                    f"(rate(brain_operator_reconcile_duration_seconds_bucket{{{ks}}}[{RI}])))",
                    f"{{{{kind}}}} p{int(q * 100)}",
                )
                for q in (0.5, 0.95)
            ],
            unit="s",
        ),
        _panel(
            "API writes by verb and kind",
            [(f"sum by (verb, kind) (rate(brain_operator_api_writes_total[{RI}]))", "{{verb}} {{kind}}")],
            unit="ops",
        ),
        _panel("Ready by Brain", [("brain_ready", "{{brain}}")], w=24),
    ]
    return _dashboard(
        "brain-operator",
        "Brain / Operator",
        "Reconciles, errors, durations and Brains ready.",
        variables,
        panels,
    )


DASHBOARDS = {"brain-overview.json": overview, "brain-operator.json": operator}


def render() -> dict[Path, str]:
    return {OUT / name: json.dumps(fn(), indent=2, sort_keys=True) + "\n" for name, fn in DASHBOARDS.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true")
    a = p.parse_args(argv)
    want = render()
    if a.check:
        stale = [str(f) for f, t in want.items() if not f.exists() or f.read_text() != t]
        if stale:
            print("stale dashboards, run `python hack/dashboards.py`: " + ", ".join(stale), file=sys.stderr)
        return 1 if stale else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for f, t in want.items():
        f.write_text(t)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
