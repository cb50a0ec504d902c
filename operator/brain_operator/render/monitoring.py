"""Prometheus ServiceMonitor and a Grafana dashboard ConfigMap, when enabled in the spec."""

from __future__ import annotations

import json

from brain_operator.render import names
from brain_operator.render.common import Manifest, RenderInput, meta


def render_service_monitor(inp: RenderInput) -> list[Manifest]:
    sm = inp.brain.spec.monitoring.service_monitor
    if not sm.enabled or not inp.capabilities.service_monitor:
        return []
    metadata = meta(inp, inp.name, "monitoring")
    metadata["labels"].update(sm.labels or {})
    return [
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": metadata,
            "spec": {
                "selector": {
                    "matchLabels": {
                        "app.kubernetes.io/instance": inp.name,
                        "app.kubernetes.io/part-of": "brain-operator",
                    },
                    "matchExpressions": [
                        {
                            "key": "app.kubernetes.io/component",
                            "operator": "In",
                            "values": ["embedder", "gateway"],
                        }
                    ],
                },
                "endpoints": [{"port": "http", "path": "/metrics", "interval": sm.interval}],
            },
        }
    ]


def _panel(pid: int, title: str, expr: str, y: int) -> dict[str, object]:
    return {
        "id": pid,
        "title": title,
        "type": "timeseries",
        "gridPos": {"h": 8, "w": 12, "x": 12 * (pid % 2), "y": y},
        "targets": [{"expr": expr, "refId": "A"}],
    }


def dashboard_selectors(namespace: str, brain: str) -> tuple[str, str]:
    """The label matchers of one Brain's series: the operator's carry `brain="<namespace>/<name>"`
    (`brain_label`), the gateway's the scrape labels its ServiceMonitor gives them (`namespace`, and
    `job` = the gateway Service's name). Matching `brain="<name>"` alone selected nothing."""
    return (
        f'brain="{names.brain_label(namespace, brain)}"',
        f'namespace="{namespace}", job="{names.gateway(brain)}"',
    )


def render_dashboard(inp: RenderInput) -> list[Manifest]:
    gd = inp.brain.spec.monitoring.grafana_dashboards
    if not gd.enabled:
        return []
    b = inp.name
    op, gw = dashboard_selectors(inp.namespace, b)
    dashboard = {
        "title": f"Brain {inp.namespace}/{b}",
        "uid": f"brain-{inp.namespace}-{b}"[:40],
        "schemaVersion": 39,
        "panels": [
            _panel(0, "Index entries", f'sum by (kind) (brain_index_entries{{{op}, kind!="*"}})', 0),
            _panel(1, "Stale entries", f"brain_index_stale_entries{{{op}}}", 0),
            _panel(2, "Ready", f"brain_ready{{{op}}}", 8),
            _panel(
                3, "Reconciles", 'sum by (result) (rate(brain_operator_reconcile_total{kind="Brain"}[5m]))', 8
            ),
            _panel(4, "Proposals waiting for an owner", f"sum(brain_proposals_pending{{{gw}}})", 16),
            _panel(
                5,
                "Oldest pending proposal (s)",
                f"max(brain_proposals_oldest_pending_age_seconds{{{gw}}})",
                16,
            ),
            _panel(6, "Digest: retrieval hit rate", f"max(brain_digest_retrieval_hit_rate{{{gw}}})", 24),
            _panel(
                7, "Digest: proposal acceptance", f"max(brain_digest_proposal_acceptance_rate{{{gw}}})", 24
            ),
        ],
    }
    metadata = meta(inp, names.dashboard(b), "monitoring")
    metadata["labels"].update(gd.labels)
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata,
            "data": {f"brain-{b}.json": json.dumps(dashboard, sort_keys=True)},
        }
    ]
