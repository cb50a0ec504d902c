"""The gateway tests' fixtures (`gateway`, `gw`, `ns`) live in `tests/kit/gateway.py`, a plugin of the
root conftest, so every folder that needs the real gateway shares one process for the session."""

from tests.kit.gateway import Gateway, metric

__all__ = ["Gateway", "metric"]
