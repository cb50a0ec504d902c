"""The committed CRDs are exactly what the models generate, and are structural for a real API server."""

from __future__ import annotations

import re
from typing import Any

import pytest

from brain_operator import crdgen
from brain_operator.api import CRON_REGEX

from .helpers import ROOT


def test_committed_crds_docs_and_install_match_the_models() -> None:
    rc = crdgen.main([str(ROOT / "crds"), "--check"])
    assert rc == 0, "crds/, docs/crd-reference.md or samples/operator/install.yaml is stale: run `make crds`"


def _walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = [(path, node)]
    for name, sub in (node.get("properties") or {}).items():
        out += _walk(sub, f"{path}.{name}")
    if "items" in node:
        out += _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        out += _walk(node["additionalProperties"], f"{path}{{}}")
    return out


@pytest.mark.parametrize("kind", ["Brain", "MemorySource", "RoutingPolicy"])
def test_schema_is_structural(kind: str) -> None:
    crd = crdgen.crd(kind)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _walk(schema):
        assert "$ref" not in node and "allOf" not in node and "title" not in node, path
        assert node.get("additionalProperties") is not False, path
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        else:
            assert "anyOf" not in node, path
            assert "type" in node, f"untyped node at {path}"
        if node.get("type") == "object" and "properties" in node:
            assert "additionalProperties" not in node, path
        if path.startswith(".spec") and path.count(".") > 1 and not path.endswith(("[]", "{}")):
            assert node.get("description"), f"{path} has no description (kubectl explain)"


def test_brain_crd_surface() -> None:
    crd = crdgen.crd("Brain")
    spec = crd["spec"]
    assert spec["group"] == "brain.dev" and spec["scope"] == "Namespaced"
    assert spec["names"]["shortNames"] == ["brain"] and spec["names"]["categories"] == ["brain-all"]
    version = spec["versions"][0]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Ready",
        "Phase",
        "Entries",
        "Gateway",
        "Age",
    ]
    props = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert props["database"]["default"] == {"managed": {}}
    assert props["gateway"]["properties"]["models"]["x-kubernetes-list-map-keys"] == ["name"]
    assert props["gateway"]["properties"]["serviceType"]["enum"] == ["ClusterIP", "NodePort", "LoadBalancer"]
    rules = [r["rule"] for _, n in _walk(props["database"]) for r in n.get("x-kubernetes-validations", [])]
    assert any("size() == 1" in r for r in rules) and any("oldSelf" in r for r in rules)
    assert props["embedding"]["properties"]["dim"]["x-kubernetes-validations"][0]["rule"] == "self == oldSelf"
    assert "tokenSecretRef" in props["tunnel"]["x-kubernetes-validations"][0]["rule"]


def test_short_names_and_boundaries_rule() -> None:
    assert crdgen.crd("MemorySource")["spec"]["names"]["shortNames"] == ["msrc"]
    rp = crdgen.crd("RoutingPolicy")
    assert rp["spec"]["names"]["shortNames"] == ["rpol"]
    tb = rp["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "tierBoundaries"
    ]
    assert "self.simpleMedium < self.mediumComplex" in tb["x-kubernetes-validations"][0]["rule"]


@pytest.mark.parametrize(
    ("schedule", "ok"),
    [
        ("0 3 * * *", True),
        ("*/15 * * * *", True),
        ("0 0 1,15 * MON-FRI", True),
        ("@daily", True),
        ("0 6 * * 1", True),
        ("61 * * * *", False),
        ("0 24 * * *", False),
        ("every day", False),
        ("* * * *", False),
        ("@often", False),
    ],
)
def test_cron_pattern(schedule: str, ok: bool) -> None:
    assert bool(re.match(CRON_REGEX, schedule)) is ok
