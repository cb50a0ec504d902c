"""The gateway tests' fixtures (`gateway`, `gw`, `ns`) live in `tests/gateway_fixtures.py`, a plugin of the
root conftest, so every folder that needs the real gateway shares one process for the session."""

from tests.gateway_fixtures import Gateway, metric

__all__ = ["Gateway", "metric"]
