"""The security suites run against the session's one real gateway (`tests/gateway_fixtures.py`)."""

from tests.gateway_fixtures import Gateway, metric

__all__ = ["Gateway", "metric"]
