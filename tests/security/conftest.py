"""The security suite runs against the same real gateway as tests/gateway (its fixtures, re-used)."""

from tests.gateway.conftest import gateway, gw, ns

__all__ = ["gateway", "gw", "ns"]
