"""Command line of the operator: ``python -m brain_operator [--namespace NS ...]``."""

from __future__ import annotations

import argparse
import logging
import secrets
from typing import Any, cast

import kopf

from brain.core.gitrefs import INSECURE_FLAG
from brain_operator import __version__, handlers_brain, handlers_memorysource, handlers_routingpolicy
from brain_operator.config import (
    DEFAULT_HEALTH_URL,
    DEFAULT_PEERING_LIFETIME,
    MIN_PEERING_LIFETIME,
    OperatorConfig,
)
from brain_operator.kube import Kube
from brain_operator.metrics import start_http_server
from brain_operator.runtime import Runtime, get_runtime, set_runtime
from brain_operator.settings import OperatorEnv, load_operator_env

DESCRIPTION = """\
brain-operator: reconciles Brain, MemorySource and RoutingPolicy resources (brain.dev/v1alpha1)
into a running team brain: Postgres (pgvector), embedder, LiteLLM gateway, ingest/distill/digest
CronJobs, PDBs and NetworkPolicies, all owned by the Brain and written with server-side apply
under the field manager "brain-operator". Status carries conditions (Ready, DatabaseReady,
EmbedderReady, GatewayReady, IndexHealthy) with observedGeneration, and index health read from
each gateway's /brain/v1/health.

Connects with the in-cluster service account, or $KUBECONFIG outside a cluster. Every flag has
an environment variable (shown in brackets) so the Deployment can be configured without args.
Serves /metrics and /healthz on --metrics-port. Run two replicas with --peering for HA: kopf
peering keeps exactly one active.
"""

EPILOG = """\
images: BRAIN_OPERATOR_{GATEWAY,EMBEDDER,JOBS,POSTGRES,CLOUDFLARED,CNPG}_IMAGE override the
images the operator renders.

examples:
  python -m brain_operator --namespace team-a --namespace team-b
  python -m brain_operator --all-namespaces --peering brain-operator --metrics-port 8080
"""


def _lifetime(value: str) -> int:
    try:
        seconds = int(value)
    except ValueError:
        seconds = -1
    if seconds < MIN_PEERING_LIFETIME:
        raise argparse.ArgumentTypeError(
            f"expected whole seconds, at least {MIN_PEERING_LIFETIME}, here or in "
            f"BRAIN_OPERATOR_PEERING_LIFETIME_SECONDS; got {value!r}"
        )
    return seconds


def parse_args(argv: list[str] | None = None, settings: OperatorEnv | None = None) -> argparse.Namespace:
    """The command line; each flag's default is its variable in `settings` (None: this process's)."""
    settings = settings or load_operator_env()
    env = settings.get
    p = argparse.ArgumentParser(
        prog="python -m brain_operator",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"brain-operator {__version__}")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "-n",
        "--namespace",
        action="append",
        dest="namespaces",
        default=None,
        help="watch this namespace (repeatable; globs work) [BRAIN_OPERATOR_NAMESPACES, comma list]",
    )
    scope.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="watch every namespace (default when none is given)",
    )
    p.add_argument(
        "--resync-seconds",
        type=float,
        default=float(env("BRAIN_OPERATOR_RESYNC_SECONDS", "60")),
        help="re-check every Brain this often; corrects drift nobody told us about [%(default)s]",
    )
    p.add_argument(
        "--health-seconds",
        type=float,
        default=float(env("BRAIN_OPERATOR_HEALTH_SECONDS", "30")),
        help="read each gateway's /brain/v1/health this often [%(default)s]",
    )
    p.add_argument(
        "--health-url-template",
        default=env("BRAIN_OPERATOR_HEALTH_URL_TEMPLATE", DEFAULT_HEALTH_URL),
        help="health URL with {name}, {namespace} and {gateway} (the gateway Service) [%(default)s]",
    )
    p.add_argument(
        "--allow-health-url-override",
        action="store_true",
        default=env("BRAIN_OPERATOR_ALLOW_HEALTH_URL_OVERRIDE", "") == "1",
        help="tests only: read health from a Brain's brain.dev/health-url annotation instead of the "
        "template. Off by default, because whoever writes a Brain writes its annotations; even when on, "
        "the master key is sent only to the template's URL [BRAIN_OPERATOR_ALLOW_HEALTH_URL_OVERRIDE=1]",
    )
    p.add_argument("--metrics-host", default=env("BRAIN_OPERATOR_METRICS_HOST", "0.0.0.0"))
    p.add_argument(
        "--metrics-port",
        type=int,
        default=int(env("BRAIN_OPERATOR_METRICS_PORT", "8080")),
        help="port for /metrics and /healthz; 0 disables [%(default)s]",
    )
    p.add_argument(
        "--peering",
        default=env("BRAIN_OPERATOR_PEERING") or None,
        help="kopf peering object name; replicas sharing it elect one active [BRAIN_OPERATOR_PEERING]",
    )
    p.add_argument(
        "--priority",
        type=int,
        default=int(env("BRAIN_OPERATOR_PRIORITY", "0")) or None,
        help="peering priority; the highest live replica is active. Default: random per process, because "
        "kopf pauses every replica when the highest priority is shared [BRAIN_OPERATOR_PRIORITY]",
    )
    p.add_argument(
        "--peering-lifetime-seconds",
        type=_lifetime,
        default=env("BRAIN_OPERATOR_PEERING_LIFETIME_SECONDS", str(DEFAULT_PEERING_LIFETIME)),
        help="how long a replica's peering record counts as alive: the longest a killed active replica "
        "holds back the standby; each replica refreshes its record 5-10 s before it expires "
        f"(at least {MIN_PEERING_LIFETIME}) [%(default)s, BRAIN_OPERATOR_PEERING_LIFETIME_SECONDS]",
    )
    p.add_argument("--standalone", action="store_true", help="no peering at all (a single replica)")
    p.add_argument(
        INSECURE_FLAG,
        dest="allow_insecure_git_urls",
        action="store_true",
        default=env("BRAIN_OPERATOR_ALLOW_INSECURE_GIT_URLS", "") in ("1", "true"),
        help="tests only: import MemorySources whose git URL is http:// (clear text) or file:// (the job "
        "pod's disk); without it they get Ready=False, reason InsecureGitURL, and no Job "
        "[BRAIN_OPERATOR_ALLOW_INSECURE_GIT_URLS=1]",
    )
    p.add_argument(
        "--traces-endpoint",
        default=env("BRAIN_OPERATOR_TRACES_ENDPOINT") or None,
        help="the OTLP/HTTP collector every Brain's pods send traces to when its "
        "spec.observability.traces.endpoint is unset, e.g. http://otel-collector.monitoring:4318; "
        "unset: such Brains send none [BRAIN_OPERATOR_TRACES_ENDPOINT]",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    args = p.parse_args(argv)
    if args.namespaces is None and not args.all_namespaces:
        args.namespaces = settings.list("BRAIN_OPERATOR_NAMESPACES")
    return args


def config_from_args(args: argparse.Namespace) -> OperatorConfig:
    return OperatorConfig(
        namespaces=list(args.namespaces or []),
        resync_seconds=args.resync_seconds,
        health_seconds=args.health_seconds,
        health_url_template=args.health_url_template,
        allow_health_url_override=args.allow_health_url_override,
        metrics_host=args.metrics_host,
        metrics_port=args.metrics_port,
        peering_name=args.peering,
        peering_lifetime_seconds=args.peering_lifetime_seconds,
        standalone=args.standalone,
        allow_insecure_git_urls=args.allow_insecure_git_urls,
        traces_endpoint=args.traces_endpoint,
        priority=args.priority if args.priority is not None else secrets.randbelow(2**31 - 2) + 1,
    )


def build_registry(cfg: OperatorConfig) -> kopf.OperatorRegistry:
    registry = kopf.get_default_registry()

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.persistence.finalizer = "brain.dev/finalizer"
        settings.posting.level = logging.WARNING  # our own events are explicit; no log echo as events
        settings.watching.server_timeout = 300
        settings.networking.request_timeout = 60
        settings.peering.lifetime = cfg.peering_lifetime_seconds
        # A timer caught mid-reconcile when its Brain is deleted is re-checked after this long before
        # kopf drops the finalizer; kopf's default (60 s) made every such deletion take a minute.
        settings.background.cancellation_polling = 1.0

        def emit(body: dict[str, Any], etype: str, reason: str, message: str) -> None:
            try:  # events are best effort: never let one break a reconcile
                kopf.event(cast(Any, body), type=etype, reason=reason, message=message)
            except Exception:
                logging.getLogger("brain_operator").debug("event %s not posted", reason, exc_info=True)

        rt = Runtime(cfg, Kube(), emit)
        set_runtime(rt)
        if cfg.metrics_port:
            rt.http_runner = await start_http_server(cfg.metrics_host, cfg.metrics_port, rt.health_state)

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        rt = get_runtime()
        if rt.http_runner is not None:
            await rt.http_runner.cleanup()
        set_runtime(None)

    handlers_brain.register(registry, cfg)
    handlers_memorysource.register(registry)
    handlers_routingpolicy.register(registry)
    return registry


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    cfg = config_from_args(args)
    registry = build_registry(cfg)
    kopf.run(
        registry=registry,
        clusterwide=not cfg.namespaces,
        namespaces=cfg.namespaces,
        standalone=cfg.standalone or None,
        peering_name=cfg.peering_name,
        priority=cfg.priority,
    )
    return 0
