"""The pydantic models: defaults a user relies on, and invalid specs refused with the field named."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from brain_operator.api import Brain, MemorySource, RoutingPolicy

from .helpers import deep_set, sample


def test_samples_parse_and_fill_defaults() -> None:
    b = Brain.model_validate(sample("brain.yaml"))
    assert b.spec.database.mode == "managed"
    assert b.spec.gateway.retrieval.top_k == 5
    assert b.spec.network_policies.enabled is True
    assert b.spec.tunnel is None
    minimal = Brain.model_validate(
        {"metadata": {"name": "x"}, "spec": {"gateway": {"models": [{"name": "m", "model": "openai/m"}]}}}
    )
    assert minimal.spec.database.managed is not None and minimal.spec.database.managed.storage == "10Gi"
    assert minimal.spec.embedding.dim == 384
    assert minimal.spec.distill.schedule == "0 3 * * *"


def test_camel_case_round_trip() -> None:
    doc = sample("brain.yaml")
    b = Brain.model_validate(doc)
    out = b.to_k8s()
    assert out["spec"]["gateway"]["retrieval"]["tokenBudget"] == 2000
    assert "cloudNativePG" not in out["spec"]["database"]
    assert Brain.model_validate(out) == b


def test_quantities_accept_numbers() -> None:
    doc = deep_set(sample("brain.yaml"), "spec.gateway.resources", {"limits": {"cpu": 2, "memory": "4Gi"}})
    assert Brain.model_validate(doc).spec.gateway.resources.limits.cpu == "2"  # type: ignore[union-attr]


BRAIN_INVALID: list[tuple[str, Any, str]] = [
    (
        "spec.database",
        {"managed": {}, "external": {"secretRef": {"name": "db", "key": "dsn"}}},
        "exactly one of",
    ),
    ("spec.database", {}, "exactly one of"),
    ("spec.distill.schedule", "every day", "spec.distill.schedule"),
    ("spec.digest.schedule", "61 * * * *", "spec.digest.schedule"),
    ("spec.tunnel", {"hostname": "brain.example.com"}, "spec.tunnel.tokenSecretRef"),
    ("spec.gateway.serviceType", "Ingress", "serviceType"),
    ("spec.gateway.replicas", 0, "replicas"),
    ("spec.gateway.retrieval.topK", 500, "topK"),
    ("spec.gateway.retrieval.floor", {"vector": -0.1}, "vector"),
    ("spec.gateway.retrieval.floor", {"lexical": 2}, "lexical"),
    ("spec.gateway.retrieval.floor", {"rerank": 0.5}, "rerank"),
    ("spec.gateway.retrieval.floor", {"calibration": 1.5}, "calibration"),
    ("spec.gateway.bogus", True, "bogus"),
    ("spec.distill.model", "nope", "spec.distill.model"),
    ("spec.gateway.models", [], "models"),
    ("spec.embedding.dim", 3, "dim"),
    ("spec.gateway.resources", {"limits": {"cpu": "lots"}}, "cpu"),
    ("spec.backup", {"schedule": "nightly"}, "spec.backup.schedule"),
    ("spec.backup", {"keep": 366}, "keep"),
    ("spec.backup", {"maxAgeHours": 0}, "maxAgeHours"),
    ("spec.backup", {"storage": {}, "claimName": "mine"}, "at most one of spec.backup.storage"),
]


@pytest.mark.parametrize(
    ("path", "value", "named"), BRAIN_INVALID, ids=[f"{p}={v!r}" for p, v, _ in BRAIN_INVALID]
)
def test_invalid_brain_is_refused_naming_the_field(path: str, value: Any, named: str) -> None:
    with pytest.raises(ValidationError) as err:
        Brain.model_validate(deep_set(sample("brain.yaml"), path, value))
    assert named in str(err.value)


def test_floor_defaults_are_the_gateways() -> None:
    """The CRD's defaults and the pods' own defaults are one contract: a Brain without `floor`
    and a gateway run without a config behave the same."""
    from brain.core.contract import RetrievalFloor

    rendered = Brain.model_validate(sample("brain.yaml")).spec.gateway.retrieval.floor
    assert rendered.model_dump() == RetrievalFloor().model_dump()


def test_duplicate_model_names_refused() -> None:
    doc = sample("brain.yaml")
    doc["spec"]["gateway"]["models"].append(dict(doc["spec"]["gateway"]["models"][0]))
    with pytest.raises(ValidationError, match=r"spec\.gateway\.models names must be unique"):
        Brain.model_validate(doc)


def test_invalid_routing_policy() -> None:
    doc = deep_set(sample("routingpolicy.yaml"), "spec.tierBoundaries.mediumComplex", 0.1)
    with pytest.raises(ValidationError, match=r"spec\.tierBoundaries must be strictly increasing"):
        RoutingPolicy.model_validate(doc)
    with pytest.raises(ValidationError, match="codePresence"):
        RoutingPolicy.model_validate(
            deep_set(sample("routingpolicy.yaml"), "spec.dimensionWeights.codePresence", 2)
        )


def test_invalid_memory_source() -> None:
    doc = deep_set(sample("memorysource-git.yaml"), "spec.skills", {"url": "https://example.com/skills.git"})
    with pytest.raises(ValidationError, match=r"exactly one of spec\.git, spec\.skills"):
        MemorySource.model_validate(doc)
    with pytest.raises(ValidationError, match="url"):
        MemorySource.model_validate(deep_set(sample("memorysource-git.yaml"), "spec.git.url", "ftp://x"))
    ok = MemorySource.model_validate(sample("memorysource-git.yaml"))
    assert ok.spec.source_type == "git" and ok.spec.git is not None and ok.spec.git.format == "markdown"


def test_backup_defaults_and_the_external_database_refusal() -> None:
    """spec.backup absent: no backups. `{}`: nightly at 03:00, seven dumps, an operator-made 10Gi
    volume, missed after 26 h. An external database is refused naming spec.backup (its provider
    backs it up)."""
    assert Brain.model_validate(sample("brain.yaml")).spec.backup is None
    b = Brain.model_validate(deep_set(sample("brain.yaml"), "spec.backup", {})).spec.backup
    assert b is not None
    assert (b.schedule, b.keep, b.max_age_hours, b.claim_name) == ("0 3 * * *", 7, 26, None)
    assert b.volume.size == "10Gi" and b.volume.storage_class_name is None
    external = deep_set(
        sample("brain.yaml"), "spec.database", {"external": {"secretRef": {"name": "d", "key": "k"}}}
    )
    with pytest.raises(ValidationError) as err:
        Brain.model_validate(deep_set(external, "spec.backup", {}))
    assert "spec.backup is for managed and CloudNativePG databases" in str(err.value)
