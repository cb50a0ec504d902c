"""`brainctl up -f brain.yaml -f sources.yaml`: the whole stack on a laptop from the manifests a cluster uses.

Starts, in order: an embedded Postgres (data kept in the state directory), the built-in echo
upstream (for models whose apiBase is a loopback address nothing listens on), and the gateway
(LiteLLM proxy + brain, with the offline embedding model in-process) on 127.0.0.1:4000. On first
run it creates an owner key and an agent key and keeps them (0600) in the state directory, so the
banner can show them again. Postgres is supervised: when it exits it is started again (the
gateway reconnects by itself). The manifests' MemorySources, distill and digest run on their
schedules as local processes, through the same job code as the CronJobs (brain/local/jobs.py).
Ctrl-C stops everything.

Provider keys in the environment add real models next to the manifest's: OPENAI_API_KEY → `gpt`,
ANTHROPIC_API_KEY → `claude`, DEEPSEEK_API_KEY → `deepseek` (and fill the apiKeySecretRef of
manifest models of that provider).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import yaml

from brain.embedder.model import DEFAULT_MODEL
from brain.local.jobs import build_jobs, load_sources, run_schedules
from brain.local.settings import LocalSettings, load_local_settings

PROVIDERS: dict[str, tuple[str, str, str]] = {
    # env var → (provider prefix, model name offered, LiteLLM model)
    "OPENAI_API_KEY": ("openai", "gpt", "openai/gpt-4o-mini"),
    "ANTHROPIC_API_KEY": ("anthropic", "claude", "anthropic/claude-sonnet-4-5"),
    "DEEPSEEK_API_KEY": ("deepseek", "deepseek", "deepseek/deepseek-chat"),
}


def default_state_dir(name: str, settings: LocalSettings) -> Path:
    if os.geteuid() == 0:  # Postgres runs as `nobody`, which cannot enter /root
        return Path("/var/lib/brain") / name
    base = Path(settings.state_home or Path.home() / ".local" / "state")
    return base / "brain" / name


def load_manifests(paths: Sequence[str | Path]) -> tuple[Any, list[Any]]:
    """The Brain and the RoutingPolicies that reference it, from one or more (multi-document) files."""
    from brain_operator.api import Brain, RoutingPolicy

    docs: list[dict[str, Any]] = []
    for p in paths:
        docs += [d for d in yaml.safe_load_all(Path(p).read_text()) if isinstance(d, dict)]
    brains = [Brain.model_validate(d) for d in docs if d.get("kind") == "Brain"]
    if len(brains) != 1:
        raise SystemExit(
            f"brainctl up: expected exactly one Brain in {', '.join(map(str, paths))}, found {len(brains)}"
        )
    brain = brains[0]
    policies = [
        RoutingPolicy.model_validate(d)
        for d in docs
        if d.get("kind") == "RoutingPolicy"
        and (d.get("spec", {}).get("brainRef") or {}).get("name") == brain.metadata.name
    ]
    return brain, policies


def local_config(
    brain: Any, policies: Sequence[Any], env: dict[str, str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The gateway config for a laptop, and the model-key environment it needs."""
    from brain_operator.api import GatewayModel
    from brain_operator.render.litellm_config import model_api_key_env, render_litellm_config

    spec = brain.spec.model_copy(deep=True)
    model_env: dict[str, str] = {}
    names = {m.name for m in spec.gateway.models}
    for var, (prefix, name, model) in PROVIDERS.items():
        if not env.get(var):
            continue
        for m in spec.gateway.models:
            if m.api_key_secret_ref is not None and m.model.startswith(prefix + "/"):
                model_env[model_api_key_env(m.name)] = env[var]
        if name not in names:
            spec.gateway.models.append(
                GatewayModel.model_validate(
                    {"name": name, "model": model, "apiKeySecretRef": {"name": "env", "key": var}}
                )
            )
            model_env[model_api_key_env(name)] = env[var]
    config = render_litellm_config(spec, policies)
    return config, model_env


def loopback_upstreams(config: dict[str, Any]) -> list[int]:
    """Ports of loopback api_bases in the config: the echo upstream serves them when nothing else does."""
    ports = set()
    for entry in config.get("model_list", []):
        base = entry.get("litellm_params", {}).get("api_base")
        if base:
            u = urlparse(base)
            if u.hostname in ("127.0.0.1", "localhost") and u.port:
                ports.add(u.port)
    return sorted(ports)


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    out = open(log, "ab")  # noqa: SIM115 - owned by the child for its lifetime
    return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen[bytes] | None, timeout: float = 15.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


async def wait_http(
    url: str, *, timeout: float = 180.0, proc: subprocess.Popen[bytes] | None = None, check: Any = None
) -> None:
    """Poll `url` until it answers 200 (and `check(json)` holds); fail early when `proc` exits."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
            with contextlib.suppress(httpx.HTTPError, ValueError):
                r = await client.get(url)
                if r.status_code == 200 and (check is None or check(r.json())):
                    return
            await asyncio.sleep(0.3)
    raise TimeoutError(f"{url} did not become ready within {timeout:.0f}s")


def gateway_command(config_path: Path, host: str, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "brain.gateway",
        "--config",
        str(config_path),
        "--host",
        host,
        "--port",
        str(port),
    ]


def _secret_file(path: Path, make: Any) -> str:
    if path.exists():
        return path.read_text().strip()
    value = str(make())
    path.write_text(value + "\n")
    path.chmod(0o600)
    return value


@dataclass
class Stack:
    state: Path
    host: str
    port: int
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    pg: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


async def ensure_database(pg: Any, name: str = "brain") -> str:
    from brain.store import admin

    await admin.create_database(pg.dsn, name, if_missing=True)
    return str(pg.dsn_for(name))


async def ensure_keys(dsn: str, state: Path, dim: int) -> dict[str, str]:
    """First run: an owner key and an agent key, kept in the state directory (0600)."""
    path = state / "keys.json"
    if path.exists():
        return dict(json.loads(path.read_text()))
    from brain.services.keys import KeyStore
    from brain.store import Store

    store = await Store.open(dsn, dim=dim)
    try:
        ks = KeyStore(store)
        owner, _ = await ks.create("owner", "owner")
        agent, _ = await ks.create("agent", "agent")
    finally:
        await store.close()
    keys = {"owner": owner, "agent": agent}
    path.write_text(json.dumps(keys, indent=2) + "\n")
    path.chmod(0o600)
    return keys


def banner(stack: Stack, keys: dict[str, str], models: list[str], echo: list[int], dsn: str) -> str:
    u = stack.url
    lines = [
        "",
        "  brain is up",
        "",
        f"  gateway     {u}   (OpenAI /v1/chat/completions · Anthropic /v1/messages)",
        f"  MCP         {u}/mcp",
        f"  REST        {u}/brain/v1   (docs: {u}/brain/v1/docs)",
        f"  metrics     {u}/metrics    health: {u}/brain/v1/health",
        f"  models      {', '.join(models)}"
        + (f"   (echo upstream on :{', :'.join(map(str, echo))})" if echo else ""),
        f"  state       {stack.state}",
        f"  database    {dsn}   (for `brainctl keys`, `brainctl ingest`, … via BRAIN_DATABASE_URL)",
        "",
        f"  owner key   {keys['owner']}   (REST only)",
        f"  agent key   {keys['agent']}",
        "",
        "  try it:",
        f"    export BRAIN_KEY={keys['agent']}",
        f"    curl -s {u}/brain/v1/memories -H \"Authorization: Bearer $BRAIN_KEY\" -H 'content-type: application/json' \\",
        '      -d \'{"body": "The staging database listens on port 6543.", "kind": "fact"}\'',
        f"    curl -s {u}/v1/chat/completions -H \"Authorization: Bearer $BRAIN_KEY\" -H 'content-type: application/json' \\",
        f'      -d \'{{"model": "{models[0] if models else "echo"}", "messages": [{{"role": "user", "content": '
        '"which port does the staging database use?"}]}\'',
        f'    claude mcp add --scope user --transport http brain {u}/mcp --header "Authorization: Bearer $BRAIN_KEY"',
        f"    codex mcp add brain --url {u}/mcp --bearer-token-env-var BRAIN_KEY",
        "",
        "  Ctrl-C stops everything.",
        "",
    ]
    return "\n".join(lines)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def _pause(stop_event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop_event.wait(), seconds)


async def supervise_postgres(
    pg: Any,
    stop_event: asyncio.Event,
    *,
    interval: float = 1.0,
    max_backoff: float = 10.0,
    say: Any = _say,
) -> int:
    """Restart the embedded Postgres whenever it exits, until `stop_event`; returns the restarts made.

    Without this a crashed (OOM-killed, `kill -9`ed) server stayed down and the gateway ran without
    memory until someone restarted `brainctl up`. A restart can fail for a few seconds while the
    dead server's backends still hold its shared memory, so it is retried with a backoff. The gateway
    needs nothing: its pool opens new connections once the server answers again.
    """
    restarts = 0
    while not stop_event.is_set():
        if not pg.running:
            restarts += 1
            say(f"brainctl up: Postgres exited (code {pg.exit_code}); restarting it (restart {restarts}) …")
            delay = 0.5
            while not stop_event.is_set():
                try:
                    await asyncio.to_thread(pg.start)
                except Exception as e:
                    first = (str(e).splitlines() or [type(e).__name__])[0]
                    say(f"brainctl up: Postgres did not start yet ({first}); retrying in {delay:.1f}s")
                    await _pause(stop_event, delay)
                    delay = min(delay * 2, max_backoff)
                    continue
                say(f"brainctl up: Postgres is back on port {pg.port}; the gateway reconnects by itself")
                break
        await _pause(stop_event, interval)
    return restarts


async def up(
    manifests: Sequence[str | Path],
    *,
    state_dir: str | Path | None = None,
    host: str = "127.0.0.1",
    port: int = 4000,
    ready: asyncio.Event | None = None,
    stop_event: asyncio.Event | None = None,
    settings: LocalSettings | None = None,
) -> int:
    """The whole stack of a Brain manifest on this machine; `settings` are brainctl's (None: loaded)."""
    from brain.local.devdb import EmbeddedPostgres

    settings = settings or load_local_settings()
    brain, policies = load_manifests(manifests)
    name = brain.metadata.name or "brain"
    state = Path(state_dir) if state_dir else default_state_dir(name, settings)
    state.mkdir(parents=True, exist_ok=True)
    if port_in_use(port, host):
        print(f"brainctl up: {host}:{port} is already in use (another `brainctl up`?)", file=sys.stderr)
        return 1
    env = dict(settings.environ)
    config, model_env = local_config(brain, policies, env)
    config_path = state / "litellm.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    master = _secret_file(state / "master.key", lambda: "sk-brain-" + secrets.token_urlsafe(24))
    dim = brain.spec.embedding.dim
    stack = Stack(state=state, host=host, port=port)
    stop_event = stop_event or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop_event.set)
    try:
        print(f"starting Postgres (data in {state / 'pgdata'}) …", file=sys.stderr)
        stack.pg = await asyncio.to_thread(EmbeddedPostgres(data_dir=state / "pgdata", fast=False).start)
        dsn = await ensure_database(stack.pg)
        keys = await ensure_keys(dsn, state, dim)
        echo_ports = [p for p in loopback_upstreams(config) if not port_in_use(p)]
        for p in echo_ports:
            stack.procs.append(
                spawn(
                    [
                        sys.executable,
                        "-m",
                        "brain.local.fakeupstream",
                        "--port",
                        str(p),
                        "--transcript-limit",
                        "200000",
                    ],
                    env,
                    state / f"echo-{p}.log",
                )
            )
        gw_env = {
            **env,
            **model_env,
            "BRAIN_DATABASE_URL": dsn,
            "BRAIN_MASTER_KEY": master,
            "BRAIN_EMBEDDING_DIM": str(dim),
        }
        gw_env.pop("BRAIN_EMBEDDER_URL", None)  # the offline model, in the gateway process
        # ... which is the bundled all-MiniLM-L6-v2 whatever the manifest names: label vectors with it.
        gw_env["BRAIN_EMBEDDING_MODEL"] = DEFAULT_MODEL
        if brain.spec.embedding.model != DEFAULT_MODEL:
            print(
                f"embedding: the manifest names {brain.spec.embedding.model}; on this machine the bundled "
                f"offline {DEFAULT_MODEL} ({dim} dims) embeds instead (a cluster's embedder serves the manifest's)",
                file=sys.stderr,
            )
        print(
            f"starting the gateway on {stack.url} (first start takes a while; log: {state / 'gateway.log'}) …",
            file=sys.stderr,
        )
        gw = spawn(gateway_command(config_path, host, port), gw_env, state / "gateway.log")
        stack.procs.append(gw)
        # "up" means a note written now is embedded: wait for the model too, not just the database.
        waiter = asyncio.create_task(
            wait_http(stack.url + "/brain/v1/health", proc=gw, check=lambda d: d.get("status") == "ok")
        )
        stopper = asyncio.create_task(stop_event.wait())
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if not waiter.done():
            waiter.cancel()
            return 130
        stopper.cancel()
        waiter.result()
        for p in echo_ports:
            await wait_http(f"http://127.0.0.1:{p}/healthz", timeout=30)
        models = [e["model_name"] for e in config["model_list"]]
        print(banner(stack, keys, models, echo_ports, dsn), flush=True)
        sources, skipped = load_sources(manifests, name)
        jobs = build_jobs(
            brain,
            sources,
            dsn=dsn,
            state=state,
            gateway_url=stack.url,
            master_key=master,
            base_env=settings.environ,
        )
        for line in skipped:
            _say(f"brainctl up: skipped MemorySource {line}")
        if jobs:
            _say("jobs: " + "; ".join(f"{j.name} ({'suspended' if j.suspend else j.schedule})" for j in jobs)
                 + f" — logs in {state / 'jobs'}")  # fmt: skip
        if ready is not None:
            ready.set()
        supervisor = asyncio.create_task(supervise_postgres(stack.pg, stop_event))
        stack.tasks.append(supervisor)
        stack.tasks.append(asyncio.create_task(run_schedules(jobs, stop_event, say=_say)))
        while not stop_event.is_set():
            if any(p.poll() is not None for p in stack.procs):
                print("brainctl up: a component exited; see the logs in " + str(state), file=sys.stderr)
                return 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop_event.wait(), 1.0)
        return 0
    finally:
        print("stopping …", file=sys.stderr)
        for task in stack.tasks:  # first, so a stopping Postgres is not restarted
            task.cancel()
        await asyncio.gather(*stack.tasks, return_exceptions=True)
        for proc in reversed(stack.procs):
            await asyncio.to_thread(stop, proc)
        if stack.pg is not None:
            await asyncio.to_thread(stack.pg.stop)
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
