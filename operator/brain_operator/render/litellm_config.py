"""The gateway's LiteLLM proxy config, rendered from a Brain spec and its RoutingPolicies.

Pure and Kubernetes-free on purpose: the operator puts the result in the gateway ConfigMap, and
``brainctl up`` renders the same dict for a laptop. Secrets never appear in it, only
``os.environ/<VAR>`` references that the Deployment (or ``brainctl``) fills in.

Layout:
- ``model_list``: one entry per ``spec.gateway.models[]`` plus one ``auto_router/complexity_router``
  entry per applicable RoutingPolicy (LiteLLM's rule-based complexity router: ``tiers``,
  ``tier_boundaries``, ``token_thresholds``, ``dimension_weights``, keyword lists, ``default_model``).
- ``litellm_settings`` / ``general_settings``: the brain hooks, Prometheus, custom auth.
- ``brain``: knobs the brain hooks read (retrieval, capture, embedding, explicit overrides). LiteLLM
  ignores top-level keys it does not know.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from brain.core.contract import (
    CaptureFilters,
    CaptureSection,
    EmbeddingSection,
    Env,
    RetrievalFloor,
    RetrievalSection,
    check_env_references,
)
from brain_operator.api import Brain, BrainSpec, RoutingPolicy, RoutingPolicySpec
from brain_operator.render.common import env_name

CALLBACKS = ["brain.gateway.hooks.proxy_handler_instance", "prometheus"]
CUSTOM_AUTH = "brain.gateway.auth.user_api_key_auth"
MASTER_KEY_ENV = Env.MASTER_KEY
COMPLEXITY_ROUTER = "auto_router/complexity_router"


def model_api_key_env(model_name: str) -> str:
    """Environment variable carrying a model's API key (``gpt-4o`` → ``BRAIN_MODEL_GPT_4O_API_KEY``)."""
    return env_name("BRAIN_MODEL", model_name, "API_KEY")


def _spec(brain: Brain | BrainSpec) -> BrainSpec:
    return brain.spec if isinstance(brain, Brain) else brain


def _named(policies: Sequence[RoutingPolicy | RoutingPolicySpec]) -> list[tuple[str, RoutingPolicySpec]]:
    out = []
    for i, p in enumerate(policies):
        if isinstance(p, RoutingPolicy):
            out.append((p.metadata.name or f"policy-{i}", p.spec))
        else:
            out.append((f"policy-{i}", p))
    return sorted(out, key=lambda item: item[0])


def check_policies(
    brain: Brain | BrainSpec, policies: Sequence[RoutingPolicy | RoutingPolicySpec]
) -> tuple[list[tuple[str, RoutingPolicySpec]], dict[str, str]]:
    """Split policies into applicable ones and rejected ones (name → reason a person understands).

    A policy is rejected when it routes to a model the Brain does not serve, or when an earlier
    policy (by name) already claims its ``modelName`` or that name is a real model.
    """
    spec = _spec(brain)
    models = {m.name for m in spec.gateway.models}
    taken: dict[str, str] = {}
    applied, rejected = [], {}
    for name, p in _named(policies):
        missing = sorted(p.referenced_models() - models)
        if missing:
            rejected[name] = f"routes to models the Brain does not serve: {', '.join(missing)}"
        elif p.model_name in models:
            rejected[name] = f"modelName {p.model_name!r} is already a model in spec.gateway.models"
        elif p.model_name in taken:
            rejected[name] = (
                f"modelName {p.model_name!r} is already served by RoutingPolicy {taken[p.model_name]}"
            )
        else:
            taken[p.model_name] = name
            applied.append((name, p))
    return applied, rejected


def _router_entry(p: RoutingPolicySpec) -> dict[str, Any]:
    w, b, t = p.dimension_weights, p.tier_boundaries, p.token_thresholds
    default_model = p.default_model or p.tiers.medium
    config: dict[str, Any] = {
        "tiers": {
            "SIMPLE": p.tiers.simple,
            "MEDIUM": p.tiers.medium,
            "COMPLEX": p.tiers.complex,
            "REASONING": p.tiers.reasoning,
        },
        "tier_boundaries": {
            "simple_medium": b.simple_medium,
            "medium_complex": b.medium_complex,
            "complex_reasoning": b.complex_reasoning,
        },
        "token_thresholds": {"simple": t.simple, "complex": t.complex},
        "dimension_weights": {
            "tokenCount": w.token_count,
            "codePresence": w.code_presence,
            "reasoningMarkers": w.reasoning_markers,
            "technicalTerms": w.technical_terms,
            "simpleIndicators": w.simple_indicators,
            "multiStepPatterns": w.multi_step_patterns,
            "questionComplexity": w.question_complexity,
        },
        "default_model": default_model,
    }
    if p.keywords is not None:
        for key in ("code", "reasoning", "technical", "simple"):
            words = getattr(p.keywords, key)
            if words is not None:
                config[f"{key}_keywords"] = list(words)
    return {
        "model_name": p.model_name,
        "litellm_params": {
            "model": COMPLEXITY_ROUTER,
            "complexity_router_config": config,
            "complexity_router_default_model": default_model,
        },
    }


def render_litellm_config(
    brain: Brain | BrainSpec, routing_policies: Sequence[RoutingPolicy | RoutingPolicySpec] = ()
) -> dict[str, Any]:
    """The LiteLLM proxy config dict (``yaml.safe_dump`` it to get ``litellm.yaml``)."""
    spec = _spec(brain)
    model_list: list[dict[str, Any]] = []
    for m in spec.gateway.models:
        params: dict[str, Any] = {"model": m.model}
        if m.api_base:
            params["api_base"] = m.api_base
        if m.api_key_secret_ref is not None:
            params["api_key"] = f"os.environ/{model_api_key_env(m.name)}"
        model_list.append({"model_name": m.name, "litellm_params": params})

    applied, _ = check_policies(spec, routing_policies)
    overrides = []
    for name, p in applied:
        model_list.append(_router_entry(p))
        overrides += [
            {"phrase": o.phrase, "model": o.model, "router": p.model_name, "policy": name}
            for o in p.overrides or []
        ]

    r, c = spec.gateway.retrieval, spec.gateway.capture
    config = {
        "model_list": model_list,
        "litellm_settings": {"callbacks": list(CALLBACKS), "drop_params": True},
        "general_settings": {"custom_auth": CUSTOM_AUTH, "master_key": f"os.environ/{MASTER_KEY_ENV}"},
        "brain": {
            # Built with the pods' own models (brain.core.contract), so a value they would refuse fails here.
            "retrieval": RetrievalSection(
                enabled=r.enabled,
                top_k=r.top_k,
                token_budget=r.token_budget,
                timeout_ms=r.timeout_ms,
                skill_slots=r.skill_slots,
                persona=r.persona,
                standout_ratio=r.standout_ratio,
                floor=RetrievalFloor(**r.floor.model_dump()),
                lexical_mirror=r.lexical_mirror,
            ).model_dump(),
            "capture": CaptureSection(
                enabled=c.enabled,
                filters=CaptureFilters(
                    venting=c.filters.venting, noise=c.filters.noise, min_code_lines=c.filters.min_code_lines
                ),
                trusted_hosts=list(c.trusted_hosts),
            ).model_dump(),
            "embedding": EmbeddingSection(model=spec.embedding.model, dim=spec.embedding.dim).model_dump(),
            "routing": {"overrides": overrides},
            "exposure": {"retention_days": spec.gateway.exposure.retention_days},
        },
    }
    # The CRD refuses `os.environ/` in every field that lands here; a spec stored before that rule,
    # or one not from the API server, fails here rather than reading the gateway's environment.
    check_env_references(config)
    return config
