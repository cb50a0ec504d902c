"""The Brain's CronJobs on a laptop: `brainctl up` runs its MemorySources, distill and digest on their schedules.

The same code paths as in a cluster: each run is `python -m brain.jobs.<job>` with the environment
the operator renders for the CronJob (database, embedding model, the gateway for the LLM), and an
ingest reads the same source document (`render.jobs.source_document`) from a file instead of a
ConfigMap. Sources run once at start (as a new MemorySource does in a cluster) and then on their
schedule; `brainctl ingest --now` runs them at once. Schedules are standard five-field cron in UTC.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from brain.core.contract import INGEST_COUNTS, Env
from brain.embedder.model import DEFAULT_MODEL
from brain.local.settings import load_local_settings

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))


def _field_values(text: str, lo: int, hi: int) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, s = part.split("/", 1)
            step = int(s)
        if part == "*":
            a, b = lo, hi
        elif "-" in part:
            x, y = part.split("-", 1)
            a, b = int(x), int(y)
        else:
            a = int(part)
            b = hi if step > 1 else a
        if not (lo <= a <= hi and lo <= b <= hi) or step < 1:
            raise ValueError(f"cron field {text!r} is outside {lo}-{hi}")
        out.update(range(a, b + 1, step))
    return out


def cron_matches(expr: str, when: datetime) -> bool:
    """Whether the cron schedule fires in `when`'s minute (UTC). Day-of-month and day-of-week
    combine as cron does: when both are restricted, either one matching is enough."""
    fields = _MACROS.get(expr.strip(), expr).split()
    if len(fields) != 5:
        raise ValueError(f"a cron schedule has five fields, got {expr!r}")
    minute, hour, dom, month, dow = (
        _field_values(f, lo, hi) for f, (lo, hi) in zip(fields, _RANGES, strict=True)
    )
    dow = {d % 7 for d in dow}
    when = when.astimezone(UTC)
    day_ok_dom = when.day in dom
    day_ok_dow = (when.isoweekday() % 7) in dow
    both_restricted = fields[2] != "*" and fields[4] != "*"
    day_ok = (day_ok_dom or day_ok_dow) if both_restricted else (day_ok_dom and day_ok_dow)
    return when.minute in minute and when.hour in hour and when.month in month and day_ok


@dataclass
class LocalJob:
    name: str  # ingest-<source> | distill | digest
    argv: list[str]
    env: dict[str, str]
    schedule: str
    suspend: bool = False
    at_start: bool = False
    log: Path | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)


def load_sources(paths: Sequence[str | Path], brain_name: str) -> tuple[list[Any], list[str]]:
    """The manifests' MemorySources for this Brain (validated as the API server would) and what was skipped."""
    from brain_operator.api import LOCAL_GIT_CONTEXT, MemorySource

    sources, skipped = [], []
    for p in paths:
        for doc in yaml.safe_load_all(Path(p).read_text()):
            if not isinstance(doc, dict) or doc.get("kind") != "MemorySource":
                continue
            # a laptop's own manifest: file://, http:// and local-path git URLs are allowed here
            src = MemorySource.model_validate(doc, context={LOCAL_GIT_CONTEXT: True})
            if src.spec.brain_ref.name != brain_name:
                continue
            if src.spec.inline is not None:
                skipped.append(
                    f"{src.metadata.name}: an inline source reads a ConfigMap, which a laptop has not; "
                    "use a git source with a file:// URL"
                )
                continue
            sources.append(src)
    return sources, skipped


def build_jobs(
    brain: Any,
    sources: Sequence[Any],
    *,
    dsn: str,
    state: Path,
    gateway_url: str | None,
    master_key: str | None,
    base_env: Mapping[str, str] | None = None,
) -> list[LocalJob]:
    """The Brain's jobs as local processes, with the environment the operator renders for them, on
    top of `base_env` (brainctl's own; None: brain.local.settings loads it)."""
    from brain_operator.render.jobs import source_document

    name = brain.metadata.name or "brain"
    env = dict(base_env if base_env is not None else load_local_settings().environ)
    env.pop("BRAIN_EMBEDDER_URL", None)  # the offline model in the job's process, as in the gateway
    env |= {
        "HOME": env.get("HOME", "/tmp"),
        "BRAIN_NAME": name,
        # brainctl up on a laptop: local paths, file:// and http:// sources are the user's own
        Env.GIT_ALLOW_INSECURE_URLS: "1",
        "BRAIN_DATABASE_URL": dsn,
        "BRAIN_EMBEDDING_MODEL": DEFAULT_MODEL,  # what the laptop's vectors are (see brainctl up)
        "BRAIN_EMBEDDING_DIM": str(brain.spec.embedding.dim),
    }
    (state / "sources").mkdir(parents=True, exist_ok=True)
    (state / "jobs").mkdir(parents=True, exist_ok=True)
    jobs = []
    for src in sources:
        sname = src.metadata.name
        doc = state / "sources" / f"{sname}.json"
        doc.write_text(json.dumps(source_document(src, name), indent=2))
        argv = [sys.executable, "-m", "brain.jobs.ingest", "--source-file", str(doc)]
        argv += ["--workdir", str(state / "work" / sname)]
        jobs.append(
            LocalJob(
                f"ingest-{sname}", argv, env, src.spec.schedule, src.spec.suspend, at_start=True,
                log=state / "jobs" / f"ingest-{sname}.log",
            )
        )  # fmt: skip
    models = [m.name for m in brain.spec.gateway.models]
    for job_name, spec, var in (
        ("distill", brain.spec.distill, "BRAIN_DISTILL_MODEL"),
        ("digest", brain.spec.digest, "BRAIN_DIGEST_MODEL"),
    ):
        if gateway_url is None or master_key is None or not models:
            continue
        llm = {"BRAIN_GATEWAY_URL": gateway_url, "BRAIN_MASTER_KEY": master_key, var: spec.model or models[0]}
        jobs.append(
            LocalJob(
                job_name, [sys.executable, "-m", f"brain.jobs.{job_name}"], env | llm, spec.schedule, spec.suspend,
                log=state / "jobs" / f"{job_name}.log",
            )
        )  # fmt: skip
    return jobs


def _summary(stdout: str) -> dict[str, Any]:
    for line in reversed([ln for ln in stdout.splitlines() if ln.strip()]):
        with contextlib.suppress(ValueError):
            doc = json.loads(line)
            if isinstance(doc, dict):
                return doc
        break
    return {}


async def run_job(job: LocalJob, timeout: float = 3600) -> dict[str, Any]:
    """One run, as the CronJob's pod would: returns {"job", "rc", "summary"}; the stderr goes to the job's log."""
    proc = await asyncio.create_subprocess_exec(
        *job.argv, env=job.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
    except asyncio.CancelledError:  # `brainctl up` stops: the job stops with it
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        raise
    result = {"job": job.name, "rc": proc.returncode, "summary": _summary(out.decode(errors="replace"))}
    if job.log is not None:
        with job.log.open("a") as f:
            f.write(f"--- {datetime.now(UTC).isoformat()} rc={proc.returncode}\n")
            f.write(err.decode(errors="replace")[-20000:])
            f.write(out.decode(errors="replace")[-20000:])
    job.runs.append(result)
    return result


def describe(result: dict[str, Any]) -> str:
    s = result["summary"]
    if "stopped" in s:
        return f"{result['job']}: stopped by the retire guard: {s['stopped'].get('message', '')}"
    if result["rc"] != 0:
        return f"{result['job']}: failed (exit {result['rc']}): {s.get('error', 'see its log')}"
    keys = [k for k in (*INGEST_COUNTS, "proposals", "sessions") if k in s]
    return f"{result['job']}: " + (", ".join(f"{k} {s[k]}" for k in keys) or "done")


async def run_schedules(
    jobs: Sequence[LocalJob],
    stop_event: asyncio.Event,
    *,
    say: Callable[[str], None],
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    tick: float = 20.0,
) -> None:
    """Sources once at start, then every job in each minute its schedule names; one run of a job at a time."""
    running: dict[str, asyncio.Task[Any]] = {}
    fired: dict[str, tuple[int, int, int, int, int]] = {}

    def launch(job: LocalJob) -> None:
        if job.name in running and not running[job.name].done():
            return  # concurrencyPolicy: Forbid, as the CronJobs have

        async def one() -> None:
            say(describe(await run_job(job)))

        running[job.name] = asyncio.create_task(one())

    for job in jobs:
        if job.at_start and not job.suspend:
            launch(job)
    try:
        while not stop_event.is_set():
            now = clock()
            minute = (now.year, now.month, now.day, now.hour, now.minute)
            for job in jobs:
                if not job.suspend and fired.get(job.name) != minute and cron_matches(job.schedule, now):
                    fired[job.name] = minute
                    launch(job)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop_event.wait(), tick)
    finally:
        for task in running.values():
            task.cancel()
        await asyncio.gather(*running.values(), return_exceptions=True)
