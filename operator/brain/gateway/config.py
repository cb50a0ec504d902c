"""The config LiteLLM actually loads: the rendered one plus the gateway's invariants.

The operator's renderer describes *what* to serve; a few settings are about *how* this gateway must
run LiteLLM, whatever the manifest says, so they are enforced here rather than in every renderer:
- a model with an `api_base` and no key gets a placeholder key: keyless OpenAI-compatible servers
  (the echo upstream, vLLM, Ollama) ignore it, while LiteLLM's OpenAI client refuses to send nothing;
- /v1/messages reaches OpenAI-compatible upstreams over chat/completions (every provider speaks it;
  LiteLLM would otherwise try the Responses API);
- cooldowns are off: each model has one deployment, so a cooldown would turn one upstream error into
  seconds of refusals with nothing to fail over to.
"""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from brain.core.contract import check_env_references

PLACEHOLDER_KEY = "no-key"


def effective_config(config: dict[str, Any]) -> dict[str, Any]:
    """The config LiteLLM loads. Refuses (ValueError naming the place) an `os.environ/` string the
    renderer did not write: LiteLLM would fill it from this process's environment (master key,
    database URL, model keys) and a model name or error would show it to any key holder."""
    check_env_references(config)
    out = copy.deepcopy(config)
    for entry in out.get("model_list") or []:
        params = entry.get("litellm_params") or {}
        if params.get("api_base") and not params.get("api_key"):
            params["api_key"] = PLACEHOLDER_KEY
    settings = out.setdefault("litellm_settings", {}) or {}
    out["litellm_settings"] = settings
    settings.setdefault("use_chat_completions_url_for_anthropic_messages", True)
    router = out.setdefault("router_settings", {}) or {}
    out["router_settings"] = router
    router.setdefault("disable_cooldowns", True)
    return out


def write_effective_config(path: str | Path) -> tuple[dict[str, Any], Path]:
    """Load `path`, apply the invariants, write the result next to nothing secret (0600 temp file)."""
    config = yaml.safe_load(Path(path).read_text()) or {}
    eff = effective_config(config)
    fd, name = tempfile.mkstemp(prefix="brain-litellm-", suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(eff, f, sort_keys=False)
    return eff, Path(name)
