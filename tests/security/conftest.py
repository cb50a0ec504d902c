"""The security suites run against the session's one real gateway (`tests/kit/gateway.py`)."""

from tests.kit.gateway import Gateway, metric

__all__ = ["Gateway", "metric"]
