"""The security suites run against the real gateway of tests/gateway (one process for the session)."""

from tests.gateway.conftest import Gateway, gateway, gw, metric, ns

__all__ = ["Gateway", "gateway", "gw", "metric", "ns"]
