"""On the real API server: the CRDs install, read well in `kubectl explain`, and refuse bad
manifests with a message that names the field."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from brain_operator.render.names import MAX_BRAIN_NAME

from .conftest import Kubectl
from .helpers import deep_set, sample

pytestmark = pytest.mark.cluster


def _brain(path: str, value: Any) -> dict[str, Any]:
    return deep_set(sample("brain.yaml"), path, value)


def _drop(doc: dict[str, Any], path: str) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node = out
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[part]
    del node[parts[-1]]
    return out


def _two_models_same_name() -> dict[str, Any]:
    doc = sample("brain.yaml")
    doc["spec"]["gateway"]["models"].append({"name": "echo", "model": "openai/other"})
    return doc


INVALID: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "two database modes",
        _brain("spec.database", {"managed": {}, "external": {"secretRef": {"name": "d", "key": "dsn"}}}),
        ["spec.database", "exactly one of"],
    ),
    ("no database mode", _brain("spec.database", {}), ["spec.database", "exactly one of"]),
    ("bad cron", _brain("spec.distill.schedule", "every night"), ["spec.distill.schedule"]),
    ("cron minute out of range", _brain("spec.digest.schedule", "61 * * * *"), ["spec.digest.schedule"]),
    (
        "tunnel without token",
        _brain("spec.tunnel", {"hostname": "brain.example.com"}),
        ["spec.tunnel", "tokenSecretRef"],
    ),
    ("bad enum", _brain("spec.gateway.serviceType", "Ingress"), ["spec.gateway.serviceType"]),
    ("unknown field", _brain("spec.gateway.bogus", True), ["bogus"]),
    ("unknown top-level spec field", _brain("spec.extra", 1), ["extra"]),
    ("replicas below minimum", _brain("spec.gateway.replicas", 0), ["spec.gateway.replicas"]),
    ("topK above maximum", _brain("spec.gateway.retrieval.topK", 500), ["spec.gateway.retrieval.topK"]),
    (
        "floor above 1",
        _brain("spec.gateway.retrieval.floor", {"vector": 1.5}),
        ["spec.gateway.retrieval.floor.vector"],
    ),
    ("floor of an unknown leg", _brain("spec.gateway.retrieval.floor", {"rerank": 0.3}), ["rerank"]),
    ("no models", _brain("spec.gateway.models", []), ["spec.gateway.models"]),
    ("missing gateway", _drop(sample("brain.yaml"), "spec.gateway"), ["spec.gateway"]),
    ("duplicate model names", _two_models_same_name(), ["spec.gateway.models"]),
    (
        "model without provider model",
        _brain("spec.gateway.models", [{"name": "x"}]),
        ["spec.gateway.models[0].model"],
    ),
    (
        "bad apiBase",
        _brain("spec.gateway.models", [{"name": "x", "model": "o/x", "apiBase": "ftp://x"}]),
        ["apiBase"],
    ),
    (
        "bad quantity",
        _brain("spec.gateway.resources", {"limits": {"cpu": "lots"}}),
        ["spec.gateway.resources.limits.cpu"],
    ),
    ("distill model not served", _brain("spec.distill.model", "nope"), ["spec.distill.model"]),
    ("embedding dim too small", _brain("spec.embedding.dim", 3), ["spec.embedding.dim"]),
    (
        "bad service monitor interval",
        _brain("spec.monitoring", {"serviceMonitor": {"interval": "soon"}}),
        ["interval"],
    ),
    (
        "secret ref without key",
        _brain("spec.gateway.auth", {"masterKeySecretRef": {"name": "mk"}}),
        ["spec.gateway.auth.masterKeySecretRef.key"],
    ),
    (
        "decreasing boundaries",
        deep_set(sample("routingpolicy.yaml"), "spec.tierBoundaries.mediumComplex", 0.1),
        ["spec.tierBoundaries", "strictly increasing"],
    ),
    (
        "weight above 1",
        deep_set(sample("routingpolicy.yaml"), "spec.dimensionWeights.codePresence", 2),
        ["spec.dimensionWeights.codePresence"],
    ),
    ("policy without tiers", _drop(sample("routingpolicy.yaml"), "spec.tiers"), ["spec.tiers"]),
    (
        "duplicate override phrases",
        deep_set(
            sample("routingpolicy.yaml"),
            "spec.overrides",
            [{"phrase": "p", "model": "a"}, {"phrase": "p", "model": "b"}],
        ),
        ["spec.overrides"],
    ),
    (
        "source with two kinds",
        deep_set(sample("memorysource-git.yaml"), "spec.inline", {"configMapName": "x"}),
        ["spec", "exactly one of"],
    ),
    (
        "source with bad cron",
        deep_set(sample("memorysource-git.yaml"), "spec.schedule", "hourly"),
        ["spec.schedule"],
    ),
    (
        "source with bad url",
        deep_set(sample("memorysource-git.yaml"), "spec.git.url", "not a url"),
        ["spec.git.url"],
    ),
    (
        "source with bad format",
        deep_set(sample("memorysource-git.yaml"), "spec.git.format", "pdf"),
        ["spec.git.format"],
    ),
    ("source without brainRef", _drop(sample("memorysource-git.yaml"), "spec.brainRef"), ["spec.brainRef"]),
    ("backup with a bad cron", _brain("spec.backup", {"schedule": "nightly"}), ["spec.backup.schedule"]),
    ("backup keeping no dump", _brain("spec.backup", {"keep": 0}), ["spec.backup.keep"]),
    (
        "backup to two volumes",
        _brain("spec.backup", {"storage": {"size": "1Gi"}, "claimName": "mine"}),
        ["spec.backup", "at most one of spec.backup.storage or spec.backup.claimName"],
    ),
    (
        "backup of an external database",
        deep_set(
            _brain("spec.database", {"external": {"secretRef": {"name": "d", "key": "dsn"}}}),
            "spec.backup",
            {},
        ),
        ["spec.backup is for managed and CloudNativePG databases"],
    ),
    (
        "brain name longer than its children allow",
        _brain("metadata.name", "b" * (MAX_BRAIN_NAME + 1)),
        [f"metadata.name must be at most {MAX_BRAIN_NAME} characters"],
    ),
]


def test_crds_are_established_and_explained(kc: Kubectl) -> None:
    out = kc.cluster.kubectl("explain", "brain.spec.gateway").stdout
    assert "The LiteLLM gateway agents talk to" in out
    assert "models" in out and "retrieval" in out
    out = kc.cluster.kubectl("explain", "brain.spec.gateway.retrieval.timeoutMs").stdout
    assert "never fails because of the brain" in out
    names = kc.cluster.kubectl("api-resources", "--api-group=brain.dev", "-o", "name").stdout.split()
    assert sorted(names) == ["brains.brain.dev", "memorysources.brain.dev", "routingpolicies.brain.dev"]


@pytest.mark.parametrize(("what", "doc", "named"), INVALID, ids=[w for w, _, _ in INVALID])
def test_invalid_manifest_is_refused_naming_the_field(
    kc: Kubectl, what: str, doc: dict[str, Any], named: list[str]
) -> None:
    assert len(INVALID) >= 20
    proc = kc.try_create(doc)
    assert proc.returncode != 0, f"{what}: the API server accepted it"
    for words in named:
        assert words in proc.stderr, f"{what}: {words!r} not in {proc.stderr!r}"


def test_valid_samples_are_accepted_with_defaults(kc: Kubectl) -> None:
    for name in ("brain.yaml", "memorysource-git.yaml", "routingpolicy.yaml"):
        kc.apply(sample(name))
    brain = kc.get("brain", "team")
    assert brain["spec"]["networkPolicies"] == {
        "enabled": True,
        "prometheusNamespace": "monitoring",
    }  # defaulted
    assert brain["spec"]["gateway"]["auth"] == {}
    minimal = {
        "apiVersion": "brain.dev/v1alpha1",
        "kind": "Brain",
        "metadata": {"name": "minimal"},
        "spec": {"gateway": {"models": [{"name": "m", "model": "openai/m"}]}},
    }
    kc.apply(minimal)
    longest = deep_set(minimal, "metadata.name", "b" * MAX_BRAIN_NAME)  # the cap itself is allowed
    kc.apply(longest)
    assert kc.get("brain", "b" * MAX_BRAIN_NAME)["metadata"]["name"] == "b" * MAX_BRAIN_NAME
    got = kc.get("brain", "minimal")
    assert got["spec"]["database"] == {"managed": {"storage": "10Gi"}}
    assert "backup" not in got["spec"]  # absent: no backups
    kc.apply(deep_set(minimal, "spec.backup", {}))
    assert kc.get("brain", "minimal")["spec"]["backup"] == {
        "schedule": "0 3 * * *",
        "suspend": False,
        "keep": 7,
        "maxAgeHours": 26,
    }
    assert got["spec"]["embedding"]["dim"] == 384


IMMUTABLE = [
    ("spec.embedding.dim", 768, "spec.embedding.dim is immutable"),
    (
        "spec.database",
        {"external": {"secretRef": {"name": "db", "key": "dsn"}}},
        "spec.database mode is immutable",
    ),
    ("spec.database.managed.storage", "20Gi", "spec.database.managed.storage is immutable"),
]


@pytest.mark.parametrize(("path", "value", "message"), IMMUTABLE, ids=[p for p, _, _ in IMMUTABLE])
def test_fields_that_would_lose_data_are_immutable(kc: Kubectl, path: str, value: Any, message: str) -> None:
    kc.apply(sample("brain.yaml"))
    proc = kc("apply", "-f", "-", check=False, input=json.dumps(_brain(path, value)))
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def test_brain_ref_is_immutable(kc: Kubectl) -> None:
    kc.apply(sample("routingpolicy.yaml"))
    moved = deep_set(sample("routingpolicy.yaml"), "spec.brainRef.name", "other")
    proc = kc("apply", "-f", "-", check=False, input=json.dumps(moved))
    assert proc.returncode != 0 and "spec.brainRef is immutable" in proc.stderr, proc.stderr
