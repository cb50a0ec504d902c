"""`os.environ/` in a spec never reaches the gateway's LiteLLM config (session 14).

LiteLLM replaces every string of its config that starts with `os.environ/` with the environment
variable it names, read in the gateway pod: a model *named* `os.environ/BRAIN_MASTER_KEY` was listed
by `GET /v1/models` (any agent or read key) as the master key itself; a model whose `model` was
`os.environ/BRAIN_DATABASE_URL` put the gateway's DSN in the error of every request to it. So each
spec field that lands in the config refuses the prefix (pydantic and the CRD's CEL, naming the
field), the renderer refuses any such string it did not write, and so does the gateway at start.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from brain.core.contract import ENV_REFERENCE, check_env_references, env_references
from brain.gateway.config import effective_config
from brain_operator.api import Brain, RoutingPolicy
from brain_operator.render.litellm_config import render_litellm_config

from .helpers import ROOT, deep_set, everything_on, sample

LEAK = "os.environ/BRAIN_MASTER_KEY"


def test_litellm_resolves_an_environment_reference_anywhere_in_its_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Why: the model list LiteLLM serves would carry the gateway's master key."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("BRAIN_MASTER_KEY", "sk-brain-the-real-one")
    from litellm.proxy.proxy_server import ProxyConfig

    config = render_litellm_config(Brain.model_validate(sample("brain.yaml")))
    config["model_list"].append({"model_name": LEAK, "litellm_params": {"model": LEAK}})
    resolved = ProxyConfig()._check_for_os_environ_vars(config=copy.deepcopy(config))
    assert resolved["model_list"][-1] == {
        "model_name": "sk-brain-the-real-one",
        "litellm_params": {"model": "sk-brain-the-real-one"},
    }
    assert env_references(config) == ["model_list[1].model_name", "model_list[1].litellm_params.model"]


BRAIN_FIELDS = [
    ("spec.gateway.models.1.name", {"name": LEAK, "model": "openai/x"}),
    ("spec.gateway.models.1.model", {"name": "leak", "model": LEAK}),
]
POLICY_FIELDS = [
    "spec.modelName",
    "spec.defaultModel",
    "spec.tiers.simple",
    "spec.tiers.medium",
    "spec.tiers.complex",
    "spec.tiers.reasoning",
]


@pytest.mark.parametrize(("loc", "model"), BRAIN_FIELDS, ids=[f for f, _ in BRAIN_FIELDS])
def test_a_gateway_model_naming_the_environment_is_refused(loc: str, model: dict[str, str]) -> None:
    doc = sample("brain.yaml")
    doc["spec"]["gateway"]["models"].append(model)
    with pytest.raises(ValidationError) as err:
        Brain.model_validate(doc)
    assert loc in {".".join(str(p) for p in e["loc"]) for e in err.value.errors()}
    assert f"must not start with {ENV_REFERENCE!r}" in str(err.value)


def test_the_embedding_model_naming_the_environment_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"must not start with 'os\.environ/'"):
        Brain.model_validate(deep_set(sample("brain.yaml"), "spec.embedding.model", LEAK))


@pytest.mark.parametrize("path", [*POLICY_FIELDS, "spec.overrides", "spec.keywords"])
def test_a_routing_policy_naming_the_environment_is_refused(path: str) -> None:
    value: Any = LEAK
    if path == "spec.overrides":
        value = [{"phrase": LEAK, "model": "pro"}]
    if path == "spec.keywords":
        value = {"code": ["def", LEAK]}
    with pytest.raises(ValidationError, match=r"must not start with 'os\.environ/'"):
        RoutingPolicy.model_validate(deep_set(sample("routingpolicy.yaml"), path, value))


def _schema_at(crd: str, path: str) -> dict[str, Any]:
    doc = yaml.safe_load(Path(ROOT / "crds" / crd).read_text())
    node = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for part in path.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


@pytest.mark.parametrize(
    ("crd", "path"),
    [
        ("brain.dev_brains.yaml", "spec.gateway.models.[].name"),
        ("brain.dev_brains.yaml", "spec.gateway.models.[].model"),
        ("brain.dev_brains.yaml", "spec.embedding.model"),
        *(("brain.dev_routingpolicies.yaml", p) for p in POLICY_FIELDS),
        ("brain.dev_routingpolicies.yaml", "spec.overrides.[].phrase"),
        ("brain.dev_routingpolicies.yaml", "spec.overrides.[].model"),
        *(("brain.dev_routingpolicies.yaml", f"spec.keywords.{k}.[]") for k in ("code", "simple")),
    ],
)
def test_the_crd_refuses_it_too(crd: str, path: str) -> None:
    rules = [r["rule"] for r in _schema_at(crd, path).get("x-kubernetes-validations", [])]
    assert f"!self.startsWith('{ENV_REFERENCE}')" in rules, (path, rules)


def test_the_renderer_writes_only_its_own_references() -> None:
    config = render_litellm_config(everything_on())
    assert env_references(config) == []  # the key and the master key are the renderer's own
    assert config["model_list"][1]["litellm_params"]["api_key"].startswith(ENV_REFERENCE)
    hostile = copy.deepcopy(config)
    hostile["brain"]["routing"]["overrides"] = [{"phrase": LEAK, "model": "echo"}]
    with pytest.raises(ValueError, match=r"brain\.routing\.overrides\[0\]\.phrase: must not start"):
        check_env_references(hostile)


def test_the_gateway_refuses_a_config_that_reads_its_environment_unasked() -> None:
    config = render_litellm_config(everything_on())
    assert effective_config(config)["model_list"]  # the rendered one starts
    for where in ("model_name", "model"):
        hostile = copy.deepcopy(config)
        target = (
            hostile["model_list"][0] if where == "model_name" else hostile["model_list"][0]["litellm_params"]
        )
        target[where] = "os.environ/BRAIN_DATABASE_URL"
        named = "model_list[0].model_name" if where == "model_name" else "model_list[0].litellm_params.model"
        with pytest.raises(ValueError, match=rf"{re.escape(named)}: must not start with 'os.environ/'"):
            effective_config(hostile)
