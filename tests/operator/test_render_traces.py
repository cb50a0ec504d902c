"""spec.observability.traces as a platform team sets it (#31): every Python pod of the Brain sends its
spans to the one collector, each under its own service name; none does when nothing names one."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from brain.core.contract import Env
from brain.core.tracing import TraceSettings
from brain_operator.api import Brain
from brain_operator.render.common import RenderInput, traces_url
from brain_operator.render.stack import render_brain

from .helpers import SECRETS, brain, deep_set, pod_templates, render, sample, source

TRACED = {Env.TRACES_ENDPOINT, Env.SERVICE_NAME, Env.RESOURCE_ATTRIBUTES, Env.TRACES_CONTENT}
PYTHON_PODS = ("brain.gateway", "brain.embedder", "brain.jobs")


def _python_containers(manifests: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for ref, template in pod_templates(manifests):
        for c in template["spec"]["containers"]:
            module = " ".join(c.get("command", []))
            if any(m in module for m in PYTHON_PODS):
                out.append((f"{ref}/{c['name']}", c))
    return out


def _env(c: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in c.get("env", [])}


def _traced(endpoint: str | None = None, content: bool | None = None) -> Brain:
    traces: dict[str, Any] = {}
    if endpoint is not None:
        traces["endpoint"] = endpoint
    if content is not None:
        traces["content"] = content
    return brain(deep_set(sample("brain.yaml"), "spec.observability", {"traces": traces}))


def test_no_collector_named_no_pod_gets_an_exporter() -> None:
    containers = _python_containers(render(brain(), sources=(source(),)))
    assert len(containers) >= 4  # gateway, embedder, and the jobs
    for ref, c in containers:
        assert not TRACED & set(_env(c)), ref


def test_a_named_collector_reaches_every_python_pod_under_its_own_service_name() -> None:
    manifests = render(_traced("http://otel-collector.monitoring:4318"), sources=(source(),))
    services = set()
    for ref, c in _python_containers(manifests):
        env = _env(c)
        assert env[Env.TRACES_ENDPOINT] == "http://otel-collector.monitoring:4318/v1/traces", ref
        assert Env.TRACES_CONTENT not in env, ref  # content is off unless asked for
        assert "brain.name=team" in env[Env.RESOURCE_ATTRIBUTES], ref
        services.add(env[Env.SERVICE_NAME])
        # what the pod's own loader makes of it
        assert TraceSettings.from_env(env, "x").endpoint == env[Env.TRACES_ENDPOINT]
    assert {"brain-gateway", "brain-embedder", "brain-ingest", "brain-distill", "brain-digest"} <= services


def test_content_is_only_where_asked_for_and_reaches_the_pods() -> None:
    manifests = render(_traced("https://otel.example.com/v1/traces", content=True))
    for ref, c in _python_containers(manifests):
        env = _env(c)
        assert env[Env.TRACES_ENDPOINT] == "https://otel.example.com/v1/traces", ref  # not doubled
        assert TraceSettings.from_env(env, "x").content, ref


def test_the_operator_default_collector_serves_brains_that_name_none() -> None:
    """The chart's observability.traces.endpoint (the operator's --traces-endpoint)."""
    inp = RenderInput(brain=brain(), secrets=SECRETS, traces_endpoint="http://central:4318")
    own = RenderInput(
        brain=_traced("http://own:4318"), secrets=SECRETS, traces_endpoint="http://central:4318"
    )
    for rendered, want in ((inp, "http://central:4318/v1/traces"), (own, "http://own:4318/v1/traces")):
        for ref, c in _python_containers(render_brain(rendered)):
            assert _env(c)[Env.TRACES_ENDPOINT] == want, ref


@pytest.mark.parametrize("endpoint", ["otel-collector:4318", "http://", "http://a b:4318", "ftp://x:21"])
def test_an_endpoint_that_is_no_http_url_is_refused_naming_the_field(endpoint: str) -> None:
    with pytest.raises(ValidationError) as e:
        _traced(endpoint)
    assert "endpoint" in str(e.value) and "http" in str(e.value)


def test_traces_url_adds_the_signal_path_once() -> None:
    assert traces_url("http://c:4318") == "http://c:4318/v1/traces"
    assert traces_url("http://c:4318/") == "http://c:4318/v1/traces"
    assert traces_url("http://c:4318/v1/traces") == "http://c:4318/v1/traces"
