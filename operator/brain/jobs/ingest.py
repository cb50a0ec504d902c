"""`python -m brain.jobs.ingest --source-file /etc/brain/source.json`: import one MemorySource.

Fetch (git at a ref, or the inline ConfigMap folder) → parse → grade code → sync with the store.
Exit status 0 when the import ran (rejected items are listed in the summary, not failures) or
stopped at the mass-retire guard (the summary's `stopped` says why), 1 when the source could not
be fetched or read, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Any

from brain.core.contract import IngestCounts
from brain.core.errors import BrainError
from brain.core.models import Actor
from brain.embedder.model import Embedder
from brain.ingest.gitsrc import checkout
from brain.ingest.grading import GradingConfig
from brain.ingest.retireguard import ImportStopped
from brain.ingest.source import SourceSpec, load_source_file, parse_tree
from brain.ingest.sync import sync
from brain.jobs.common import (
    Progress,
    emit,
    finish_run,
    job_env,
    progress_enabled,
    setup_logging,
    start_run,
    traced,
)
from brain.jobs.settings.ingest import IngestSettings, load_ingest_settings
from brain.store.store import Store


def source_actor(spec: SourceSpec) -> Actor:
    """Imports write as the source, through the door (services.memory) like every writer: origin
    `import` (curated) or `untrusted` (episodic, never standing), confined to the namespace the
    MemorySource declares, and replacing or retiring only the entries it wrote itself."""
    return Actor(
        name=f"source:{spec.name}"[:128], role="agent", origin=spec.origin, namespaces=(spec.namespace,)
    )


async def run_ingest(
    store: Store,
    embedder: Embedder,
    spec: SourceSpec,
    *,
    settings: IngestSettings | None = None,
    workdir: Path | None = None,
    grading: GradingConfig | None = None,
    progress: Progress | None = None,
    allow_insecure: bool | None = None,
) -> dict[str, Any]:
    """One import, recorded in job_runs. Returns the summary (also on failure, with `error`).

    `allow_insecure` lets http://, file:// and local-path git URLs through; None takes the settings'
    BRAIN_GIT_ALLOW_INSECURE_URLS=1, which the operator sets only when started with
    --allow-insecure-git-urls (and brainctl's local jobs set), so a cluster job refuses them by default.
    `settings` are the job process's (its `main` passes them); None loads them (tests, brainctl)."""
    settings = settings or load_ingest_settings()
    progress = progress or Progress(progress_enabled(settings))
    if allow_insecure is None:
        allow_insecure = settings.git_allow_insecure_urls
    run_id = await start_run(store, "ingest", spec.name)
    try:
        commit = None
        if spec.kind == "inline":
            root = Path(spec.inline_dir)
            if not root.is_dir():
                raise BrainError(f"inline folder {root} does not exist (is the ConfigMap mounted?)")
        else:
            assert spec.url is not None
            with_creds = settings.source_credentials
            try:
                co = checkout(
                    spec.url,
                    spec.ref,
                    workdir,
                    with_creds,
                    allow_insecure=allow_insecure,
                    field=f"spec.{spec.kind}",
                )
            except ValueError as e:  # a bad spec.<kind>.ref / .url, refused before git ran
                raise BrainError(str(e)) from None
            root, commit = co.path, co.commit
        parsed = await asyncio.to_thread(
            parse_tree,
            spec,
            root,
            lambda d, t: progress("parsing", d, t),
            embed_chars=settings.chunk_embed_chars,
        )
        summary = await sync(
            store,
            embedder,
            spec.key_prefix,
            spec.namespace,
            parsed,
            source_actor(spec),
            grading=grading or settings.grading,
            progress=progress,
            guard=spec.retire_guard,
        )
        out = {**summary.as_dict(), "source": spec.name, "kind": spec.kind}
        if commit:
            out["commit"] = commit
        await finish_run(store, run_id, "ok", out)
        return out
    except ImportStopped as e:
        # Not a failure: the job did its work, which was to stop and ask (no retry would help).
        out = IngestCounts().model_dump()
        out |= {"source": spec.name, "kind": spec.kind, "stopped": e.stop.as_dict()}
        if commit:
            out["commit"] = commit
        await finish_run(store, run_id, "stopped", out)
        return out
    except BrainError as e:
        out = {**IngestCounts().model_dump(), "error": e.message}
        await finish_run(store, run_id, "failed", out)
        raise
    finally:
        progress.close()


async def main_async(args: argparse.Namespace, settings: IngestSettings) -> int:
    spec = load_source_file(args.source_file, inline_dir=settings.inline_dir)
    async with job_env(settings, args.dsn) as env, contextlib.AsyncExitStack() as made:
        # A checkout of our own is removed after the run (a pod's /tmp goes with the pod, but a run by
        # hand or a test's left one behind each time); `--workdir` is kept, to be reused. A folder that
        # cannot be removed is left, rather than fail a run whose entries are stored.
        workdir = Path(
            args.workdir
            or made.enter_context(
                tempfile.TemporaryDirectory(prefix="brain-ingest-", ignore_cleanup_errors=True)
            )
        )
        try:
            summary = await run_ingest(env.store, env.embedder, spec, settings=settings, workdir=workdir)
        except BrainError as e:
            emit({**IngestCounts().model_dump(), "error": e.message})
            return 1
    emit(summary)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m brain.jobs.ingest", description=__doc__.splitlines()[0])
    p.add_argument("--source-file", required=True, help="MemorySource document (JSON) the operator mounts")
    p.add_argument("--dsn", default=None, help="Postgres DSN (default: BRAIN_DATABASE_URL)")
    p.add_argument("--workdir", help="where to keep the checkout (reused across runs); default a temp folder")
    return p


@traced("ingest")
def main(argv: list[str] | None = None) -> int:
    settings = load_ingest_settings()
    setup_logging(settings)
    args = build_parser().parse_args(argv)
    try:
        return asyncio.run(main_async(args, settings))
    except (BrainError, ValueError) as e:
        message = getattr(e, "message", str(e))
        print(f"ingest: error: {message}", file=sys.stderr)
        emit({**IngestCounts().model_dump(), "error": message})
        return 2
    except Exception as e:  # the database or embedder is down: still end with a summary line
        print(f"ingest: failed: {type(e).__name__}: {e}", file=sys.stderr)
        emit({**IngestCounts().model_dump(), "error": str(e)})
        return 1


if __name__ == "__main__":
    sys.exit(main())
