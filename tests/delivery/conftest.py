"""Helpers for the delivery tests: the chart, its rendering with helm, the tool scripts, and the
metric names the dashboards and alert rules query."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "brain-operator"
RULES = CHART / "rules" / "brain-operator.rules.yaml"
DASHBOARDS = CHART / "dashboards"
HACK = ROOT / "hack"

Render = Callable[..., list[dict[str, Any]]]
#: A metric name in a PromQL expression (every metric of ours starts with `brain_`).
METRIC = re.compile(r"\b(brain_[a-z0-9_]+)\b")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def fetched_tool(script: str, missing: str) -> str:
    """The path a `hack/` fetch script prints; the test skips (saying ``missing`` and why) without it."""
    proc = subprocess.run(["bash", str(HACK / script)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        pytest.skip(f"{missing}: {proc.stderr.strip()}")
    return proc.stdout.strip()


#: helm built from source reports Kubernetes v1.20 to `helm template` (no ldflags); say what we run.
KUBE_VERSION = "1.37.2"


@pytest.fixture(scope="session")
def helm_bin() -> str:
    """helm from PATH, or from the local control plane's bin folder (built once, cached)."""
    found = shutil.which("helm")
    if found:
        return found
    proc = subprocess.run(["bash", str(HACK / "kube-build.sh")], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        pytest.fail(f"hack/kube-build.sh failed:\n{proc.stderr[-3000:]}")
    return str(Path(proc.stdout.strip()) / "helm")


def helm(helm_bin: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([helm_bin, *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def set_args(values: dict[str, Any] | None) -> list[str]:
    """`--set-json key=<json>` for each top-level or dotted key."""
    import json

    return [a for k, v in (values or {}).items() for a in ("--set-json", f"{k}={json.dumps(v)}")]


@pytest.fixture(scope="session")
def render(helm_bin: str) -> Render:
    def _render(
        values: dict[str, Any] | None = None, *, namespace: str = "brain-system", release: str = "brain"
    ) -> list[dict[str, Any]]:
        out = helm(
            helm_bin,
            "template",
            release,
            str(CHART),
            "--kube-version",
            KUBE_VERSION,
            "--namespace",
            namespace,
            *set_args(values),
        ).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    return _render


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (doc,) = by_kind(docs, kind)
    return doc


def load_rules() -> dict[str, Any]:
    return yaml.safe_load(RULES.read_text())


def alerts() -> list[dict[str, Any]]:
    return [r for g in load_rules()["groups"] for r in g["rules"] if "alert" in r]


def dashboard_exprs() -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and query variable of the chart's dashboards."""
    out = []
    for f in sorted(DASHBOARDS.glob("*.json")):
        board = json.loads(f.read_text())
        for p in board["panels"]:
            for t in p.get("targets", []):
                out.append((f"{f.name}: {p['title']}", t["expr"]))
        for v in board["templating"]["list"]:
            if v.get("type") == "query":
                out.append((f"{f.name}: ${v['name']}", v["definition"]))
    return out


def brain_dashboard_exprs(namespace: str = "team-ns", name: str = "team") -> list[tuple[str, str]]:
    """(where, PromQL) of the dashboard the operator renders for one Brain (`grafanaDashboards`)."""
    from brain.core.contract import DB_ROLES
    from brain_operator.render import Capabilities, GeneratedSecrets, RenderInput
    from brain_operator.render.monitoring import render_dashboard
    from tests.operator.helpers import brain, sample

    doc = sample("brain.yaml")
    doc["metadata"]["name"] = name
    doc["spec"]["monitoring"] = {"grafanaDashboards": {"enabled": True}}
    b = brain(doc, namespace)
    inp = RenderInput(
        brain=b,
        routing_policies=(),
        memory_sources=(),
        secrets=GeneratedSecrets(
            db_password="pw", master_key="sk", db_role_passwords={r: "pw" for r in DB_ROLES}
        ),
        capabilities=Capabilities(),
    )
    [cm] = render_dashboard(inp)
    [board] = [json.loads(v) for v in cm["data"].values()]
    return [(f"Brain dashboard: {p['title']}", t["expr"]) for p in board["panels"] for t in p["targets"]]


def rule_exprs() -> list[tuple[str, str]]:
    """(alert or record name, PromQL) for every rule of the chart's PrometheusRule."""
    return [
        (r.get("alert", r.get("record", "?")), r["expr"]) for g in load_rules()["groups"] for r in g["rules"]
    ]


def base_name(name: str) -> str:
    """The family of a histogram series name (`x_bucket` -> `x`); other names unchanged."""
    for s in HISTOGRAM_SUFFIXES:
        if name.endswith(s):
            return name[: -len(s)]
    return name


def queried_metrics() -> dict[str, list[str]]:
    """Every `brain_*` name a dashboard or an alert queries, exactly as written, with where."""
    names: dict[str, list[str]] = {}
    for where, expr in dashboard_exprs() + rule_exprs():
        for name in METRIC.findall(expr):
            if where not in names.setdefault(name, []):
                names[name].append(where)
    return dict(sorted(names.items()))
