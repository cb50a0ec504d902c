"""`python -m brain.gateway --config litellm.yaml`: serve the gateway (LiteLLM proxy + brain) with uvicorn."""

from __future__ import annotations

import argparse
import logging
import os


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m brain.gateway",
        description="The brain gateway: LiteLLM proxy with memory hooks, per-agent keys, MCP (/mcp), REST "
        "(/brain/v1), /metrics, /healthz, /readyz. Environment: BRAIN_DATABASE_URL, BRAIN_EMBEDDER_URL "
        "(unset: the offline model in-process), BRAIN_MASTER_KEY, BRAIN_EMBEDDING_DIM.",
    )
    p.add_argument("--config", default=os.environ.get("CONFIG_FILE_PATH", "/etc/brain/litellm.yaml"))
    p.add_argument("--host", default=os.environ.get("BRAIN_GATEWAY_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("BRAIN_GATEWAY_PORT", "4000")))
    p.add_argument("--log-level", default=os.environ.get("BRAIN_LOG_LEVEL", "warning"))
    a = p.parse_args(argv)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    brain_log = logging.getLogger("brain")  # LiteLLM configures its own loggers; leave them alone
    brain_log.addHandler(handler)
    brain_log.setLevel(a.log_level.upper())
    brain_log.propagate = False

    import uvicorn

    from brain.gateway.app import create_app

    app = create_app(a.config)
    uvicorn.run(app, host=a.host, port=a.port, log_level=a.log_level, timeout_graceful_shutdown=10)


if __name__ == "__main__":
    main()
