"""What every brainctl command group shares: the command registry, the embedder, the door, output."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from brain.cli.settings import CliSettings, load_cli_settings
from brain.core.contract import DEFAULT_EMBEDDING_MODEL
from brain.core.errors import BrainError

Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]
COMMANDS: dict[str, Handler] = {}


def command(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        COMMANDS[name] = fn
        return fn

    return register


def embedder_for(args: argparse.Namespace, model: str | None = None) -> Any:
    """The client's embedder, named by the model it runs (the name every stored vector records)."""
    from brain.embedder import EmbeddingClient
    from brain.embedder.variants import load_embedder

    model = model or getattr(args, "embedding_model", None) or DEFAULT_EMBEDDING_MODEL
    url = getattr(args, "embedder_url", None)
    if url:
        return EmbeddingClient(url, model=model, dim=settings_of(args).embedding_dim, timeout=30.0)
    return load_embedder(model)


@asynccontextmanager
async def open_service(args: argparse.Namespace) -> AsyncIterator[Any]:
    from brain.services.memory import MemoryService
    from brain.store import Store

    if not args.dsn:
        raise BrainError("no database: pass --dsn or set BRAIN_DATABASE_URL")
    embedder = embedder_for(args)
    store = await Store.open(args.dsn, dim=embedder.dim, embedding_model=embedder.model)
    try:
        yield MemoryService(store, embedder)
    finally:
        await store.close()


def owner(args: argparse.Namespace) -> Any:
    from brain.core.models import Actor

    return Actor(name=args.as_name, role="owner", origin="owner")


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def settings_of(args: argparse.Namespace) -> CliSettings:
    """The process's settings, which `main` puts on every command's arguments."""
    return getattr(args, "settings", None) or load_cli_settings()


def progress_bar(args: argparse.Namespace) -> Callable[[int, int], None]:
    """A progress callback: draws on a terminal, or when BRAIN_PROGRESS is set."""
    enabled = sys.stderr.isatty() or bool(settings_of(args).progress)
    return functools.partial(_progress, enabled)


def _progress(enabled: bool, done: int, total: int) -> None:
    if enabled:
        width = 30
        filled = width * done // max(total, 1)
        print(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}", end="", file=sys.stderr, flush=True
        )
