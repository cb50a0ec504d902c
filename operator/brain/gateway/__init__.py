"""The gateway: LiteLLM proxy + brain hooks (retrieve, capture, routing overrides), per-agent keys,
MCP and REST, SSE heartbeat and metrics. `python -m brain.gateway --config litellm.yaml` runs it.

LiteLLM's config refers to `brain.gateway.hooks.proxy_handler_instance` (callbacks) and
`brain.gateway.auth.user_api_key_auth` (custom_auth). This package imports nothing heavy at import
time so those dotted paths stay cheap.
"""
