"""brain-operator: turns Brain, MemorySource and RoutingPolicy resources into a running team brain.

The pydantic models in :mod:`brain_operator.api` are the single source of truth for the CRDs
(:mod:`brain_operator.crdgen`), the pure renderers (:mod:`brain_operator.render`) and the kopf
handlers, so what the API server validates and what the operator renders cannot drift apart.
"""

from brain import __version__

GROUP = "brain.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
FIELD_MANAGER = "brain-operator"

__all__ = ["API_VERSION", "FIELD_MANAGER", "GROUP", "VERSION", "__version__"]
