"""Builders shared by the operator tests: sample-based Brains and a walk over pod templates."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from brain.core.contract import DB_ROLES
from brain_operator.api import Brain, MemorySource, RoutingPolicy
from brain_operator.render import Capabilities, GeneratedSecrets, RenderInput, render_brain

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"


def sample(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    return doc


def deep_set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Copy of ``doc`` with the dotted ``path`` set (``spec.gateway.replicas``)."""
    out = copy.deepcopy(doc)
    node = out
    parts = path.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def brain(doc: dict[str, Any] | None = None, namespace: str = "team-ns") -> Brain:
    doc = copy.deepcopy(doc or sample("brain.yaml"))
    doc.setdefault("metadata", {}).update(namespace=namespace, uid="uid-team", generation=1)
    return Brain.model_validate(doc)


def source(doc: dict[str, Any] | None = None, namespace: str = "team-ns") -> MemorySource:
    doc = copy.deepcopy(doc or sample("memorysource-git.yaml"))
    doc["metadata"]["namespace"] = namespace
    return MemorySource.model_validate(doc)


def policy(doc: dict[str, Any] | None = None, namespace: str = "team-ns") -> RoutingPolicy:
    doc = copy.deepcopy(doc or sample("routingpolicy.yaml"))
    doc["metadata"]["namespace"] = namespace
    return RoutingPolicy.model_validate(doc)


SECRETS = GeneratedSecrets(
    db_password="pw-123",
    master_key="sk-brain-abc",
    db_role_passwords={role: f"pw-{role}" for role in DB_ROLES},
)


def render(
    b: Brain | None = None,
    *,
    policies: tuple[RoutingPolicy, ...] = (),
    sources: tuple[MemorySource, ...] = (),
    caps: Capabilities | None = None,
) -> list[dict[str, Any]]:
    inp = RenderInput(
        brain=b or brain(),
        routing_policies=policies,
        memory_sources=sources,
        secrets=SECRETS,
        capabilities=caps or Capabilities(),
    )
    return render_brain(inp)


def by_key(manifests: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(m["kind"], m["metadata"]["name"]): m for m in manifests}


def pod_templates(manifests: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(``Kind/name``, pod template) for every workload that creates pods."""
    out = []
    for m in manifests:
        ref = f"{m['kind']}/{m['metadata']['name']}"
        if m["kind"] in ("Deployment", "StatefulSet", "Job"):
            out.append((ref, m["spec"]["template"]))
        elif m["kind"] == "CronJob":
            out.append((ref, m["spec"]["jobTemplate"]["spec"]["template"]))
    return out


def everything_on() -> Brain:
    """A Brain using every optional feature: tunnel, monitoring, keys, PDB-sized replicas, backups, traces."""
    doc = sample("brain.yaml")
    doc["spec"]["gateway"]["models"].append(
        {"name": "gpt-4o", "model": "openai/gpt-4o", "apiKeySecretRef": {"name": "llm", "key": "openai"}}
    )
    doc["spec"]["embedding"]["replicas"] = 2
    doc["spec"]["tunnel"] = {
        "tokenSecretRef": {"name": "cf", "key": "token"},
        "hostname": "brain.example.com",
    }
    doc["spec"]["monitoring"] = {"serviceMonitor": {"enabled": True}, "grafanaDashboards": {"enabled": True}}
    doc["spec"]["backup"] = {}
    doc["spec"]["observability"] = {
        "traces": {"endpoint": "http://otel-collector.monitoring:4318", "content": True}
    }
    return brain(doc)
