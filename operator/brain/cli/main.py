"""brainctl: the command line for people who run a brain.

Every command talks to the same store and pipeline the gateway uses. Connection settings come from
flags or the environment (BRAIN_DATABASE_URL, BRAIN_EMBEDDER_URL); without an embedder URL the
offline model is loaded in-process. Each command group lives in its own module (`index`, `memory`,
`local`, `keys`, `proposals`, `loops`); this one builds the parser from them and runs a command.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from brain.cli import exposure, index, keys, local, loops, memory, proposals, restore
from brain.cli.common import COMMANDS
from brain.cli.settings import CliSettings, load_cli_settings
from brain.core.errors import BrainError


def build_parser(settings: CliSettings | None = None) -> argparse.ArgumentParser:
    """brainctl's parser; the flags' defaults come from `settings` (None: this process's)."""
    settings = settings or load_cli_settings()
    p = argparse.ArgumentParser(
        prog="brainctl",
        description="Run and inspect a brain: one shared, governed memory for a team's coding agents.",
        epilog="Connection: --dsn / BRAIN_DATABASE_URL, --embedder-url / BRAIN_EMBEDDER_URL "
        "(without it the offline model loads in-process).",
    )
    p.add_argument("--dsn", default=settings.database_url, help="Postgres DSN of the brain")
    p.add_argument("--embedder-url", default=settings.embedder_url, help="embedder base URL")
    p.add_argument(
        "--embedding-model",
        default=settings.embedding_model,
        help="the model this client embeds with (must be the brain's; default: BRAIN_EMBEDDING_MODEL)",
    )
    p.add_argument(
        "--as",
        dest="as_name",
        default=settings.user,
        help="owner name recorded as author/promoter (default: $USER)",
    )
    p.set_defaults(settings=settings)  # every command reads the process's settings from its args
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # The order --help lists the commands in (unchanged since they lived in one module).
    index.add_eval(sub)
    memory.add_parsers(sub)
    exposure.add_parsers(sub)
    index.add_reindex(sub)
    local.add_up(sub)
    keys.add_parsers(sub)
    proposals.add_parsers(sub)
    local.add_ingest(sub)
    loops.add_parsers(sub)
    restore.add_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser(load_cli_settings()).parse_args(argv)
    try:
        return asyncio.run(COMMANDS[args.command](args))
    except BrainError as e:
        print(f"brainctl: error: {e.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
