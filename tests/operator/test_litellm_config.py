"""The gateway's LiteLLM config: independent of Kubernetes, shared with `brainctl up`."""

from __future__ import annotations

import yaml

from brain_operator.api import RoutingPolicySpec
from brain_operator.render.litellm_config import check_policies, model_api_key_env, render_litellm_config

from .helpers import brain, everything_on, policy, sample


def test_models_hooks_and_auth() -> None:
    cfg = render_litellm_config(everything_on())
    entries = {e["model_name"]: e["litellm_params"] for e in cfg["model_list"]}
    assert entries["echo"] == {"model": "openai/echo", "api_base": "http://127.0.0.1:4001/v1"}
    assert (
        entries["gpt-4o"]["api_key"]
        == f"os.environ/{model_api_key_env('gpt-4o')}"
        == ("os.environ/BRAIN_MODEL_GPT_4O_API_KEY")
    )
    assert cfg["litellm_settings"]["callbacks"] == [
        "brain.gateway.hooks.proxy_handler_instance",
        "prometheus",
    ]
    assert cfg["general_settings"]["custom_auth"] == "brain.gateway.auth.user_api_key_auth"
    assert cfg["brain"]["retrieval"]["top_k"] == 5 and cfg["brain"]["embedding"]["dim"] == 384
    assert "sk-" not in yaml.safe_dump(cfg)  # no secret ever lands in the config


def test_complexity_router_entry() -> None:
    cfg = render_litellm_config(brain(), [policy()])
    router = next(e for e in cfg["model_list"] if e["model_name"] == "smart-router")["litellm_params"]
    assert router["model"] == "auto_router/complexity_router"
    crc = router["complexity_router_config"]
    assert crc["tiers"] == {"SIMPLE": "echo", "MEDIUM": "echo", "COMPLEX": "echo", "REASONING": "echo"}
    assert crc["tier_boundaries"] == {"simple_medium": 0.15, "medium_complex": 0.35, "complex_reasoning": 0.6}
    assert set(crc["dimension_weights"]) == {
        "tokenCount",
        "codePresence",
        "reasoningMarkers",
        "technicalTerms",
        "simpleIndicators",
        "multiStepPatterns",
        "questionComplexity",
    }
    assert router["complexity_router_default_model"] == "echo"
    assert cfg["brain"]["routing"]["overrides"] == [
        {"phrase": "use echo", "model": "echo", "router": "smart-router", "policy": "smart-router"}
    ]


def test_works_on_bare_specs_for_brainctl() -> None:
    spec = brain().spec
    rp = RoutingPolicySpec.model_validate(sample("routingpolicy.yaml")["spec"])
    cfg = render_litellm_config(spec, [rp])
    assert [e["model_name"] for e in cfg["model_list"]] == ["echo", "smart-router"]


def test_policies_routing_to_unknown_models_are_left_out() -> None:
    doc = sample("routingpolicy.yaml")
    doc["spec"]["tiers"]["reasoning"] = "o3"
    bad = policy(doc)
    applied, rejected = check_policies(brain(), [bad])
    assert applied == [] and "o3" in rejected["smart-router"]
    cfg = render_litellm_config(brain(), [bad])
    assert [e["model_name"] for e in cfg["model_list"]] == ["echo"]


def test_second_policy_with_same_model_name_is_rejected() -> None:
    doc = sample("routingpolicy.yaml")
    doc["metadata"]["name"] = "z-other"
    applied, rejected = check_policies(brain(), [policy(), policy(doc)])
    assert [n for n, _ in applied] == ["smart-router"]
    assert "already served by RoutingPolicy smart-router" in rejected["z-other"]
