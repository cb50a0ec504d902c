"""Operator settings: command-line flags with environment-variable defaults (brain_operator.settings)."""

from __future__ import annotations

from dataclasses import dataclass, field

from brain_operator.render import names
from brain_operator.render.common import Images
from brain_operator.settings import images_from_env

# {gateway} is the gateway Service (render/names.py: hashed when the Brain's name is long); {name} is
# the Brain's own name, for templates that point elsewhere.
DEFAULT_HEALTH_URL = "http://{gateway}.{namespace}.svc:4000/brain/v1/health"
HEALTH_URL_ANNOTATION = "brain.dev/health-url"


#: kopf's own default, kept: a peer whose record is younger than this counts as alive.
DEFAULT_PEERING_LIFETIME = 60
#: Below this the refresh (lifetime - 5..10 s) would leave no time for its own patch request.
MIN_PEERING_LIFETIME = 10


@dataclass
class OperatorConfig:
    namespaces: list[str] = field(default_factory=list)  # empty: all namespaces
    resync_seconds: float = 60.0
    health_seconds: float = 30.0
    health_url_template: str = DEFAULT_HEALTH_URL
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 8080
    peering_name: str | None = None
    peering_lifetime_seconds: int = DEFAULT_PEERING_LIFETIME
    standalone: bool = False
    priority: int = 0
    #: Tests only: honour the brain.dev/health-url annotation (a tenant-chosen URL). Off by default.
    allow_health_url_override: bool = False
    images: Images = field(default_factory=images_from_env)
    #: tests only: http:// and file:// git sources are imported (brain.core.gitrefs says why not otherwise)
    allow_insecure_git_urls: bool = False
    #: the collector for Brains whose spec.observability.traces.endpoint is unset (the chart's value)
    traces_endpoint: str | None = None

    def health_url(self, name: str, namespace: str, annotations: dict[str, str] | None) -> str:
        """Where to read a Brain's health: the operator's template; the annotation only when the
        operator runs with --allow-health-url-override (tests), since a tenant writes annotations."""
        if self.allow_health_url_override and annotations and annotations.get(HEALTH_URL_ANNOTATION):
            return annotations[HEALTH_URL_ANNOTATION]
        return self.health_url_template.format(name=name, namespace=namespace, gateway=names.gateway(name))

    @property
    def health_url_names_gateway(self) -> bool:
        """Whether the health URL is reached through the gateway Service's name (the default): then
        the key goes only where a Service the Brain owns has that name (reconciler.master_key)."""
        return "{gateway}" in self.health_url_template

    def health_url_is_gateway(self, name: str, namespace: str, annotations: dict[str, str] | None) -> bool:
        """Whether the health URL is the operator-rendered one: only there may the master key go."""
        return self.health_url(name, namespace, annotations) == self.health_url(name, namespace, None)
