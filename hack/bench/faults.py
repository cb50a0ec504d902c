"""Fault benchmark: chat latency while the database hangs, against the bare proxy's.

    .venv/bin/python -m hack.bench.faults [--memories 10000] [--freeze 10] [--clients 4]

A database that hangs (SIGSTOP of the postmaster and every backend: what a stuck disk, a frozen VM
or a black-holed network looks like from the client) is worse than one that is down, because
nothing fails: every wait simply lasts. Here a real gateway and the bare LiteLLM proxy serve the
same echo upstream; `--clients` agents keep asking new questions while Postgres is frozen for
`--freeze` seconds. The goal (issue 14): p99 of chat latency during the freeze stays under the
retrieval budget plus the bare proxy's own p99. Also reported: how long after the thaw a seeded fact
is injected again. Its own Postgres (seeded like hack/bench/gateway.py, the whole corpus in
`shared`), so no shared cache is touched. Questions are words of seeded memories, and each reply's
outcome is counted (hack/bench/check.py): the run fails unless the bare proxy injected nothing, every
healthy-database request was injected, every frozen one was answered, and the fact came back
`injected` after the thaw. Prints a Markdown section for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from hack.bench import check, gateway, parser, results
from tests.kit.database import postgres

from brain.local.stats import percentile

BUDGET_MS = 500  # retrieval.timeoutMs default (brain.gateway.settings)


Reply = tuple[float, float, str, list[str]]  # started (perf_counter), ms, outcome, causes


async def _ask(c: httpx.AsyncClient, url: str, key: str, q: str) -> Reply:
    body = {"model": "echo", "messages": [{"role": "user", "content": q}]}
    t0 = time.perf_counter()
    try:
        r = await c.post(f"{url}/v1/chat/completions", json=body, headers={"authorization": f"Bearer {key}"})
        status, headers = r.status_code, dict(r.headers)
    except httpx.HTTPError:
        status, headers = None, {}
    dt = (time.perf_counter() - t0) * 1000
    return (t0, dt, *check.of_response(status, headers))


async def warm(url: str, key: str, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    async with httpx.AsyncClient(timeout=60) as c:
        return [(await _ask(c, url, key, gateway._sentence(rng, 10) + "?"))[1] for _ in range(n)]


async def load(
    url: str,
    key: str,
    clients: int,
    seconds: float,
    seed: int,
    memories: list[gateway.Memory],
    pg: Any = None,
) -> tuple[list[Reply], float]:
    """`clients` loops asking new questions about seeded memories for `seconds` (with Postgres frozen
    meanwhile when `pg` is given): the requests that started in that window, and when it ended."""
    out: list[Reply] = []
    stop = asyncio.Event()

    async def client(i: int) -> None:
        rng = random.Random(seed * 1000 + i)  # questions of their own: no answer cached by an earlier case
        async with httpx.AsyncClient(timeout=120) as c:
            while not stop.is_set():
                out.append(await _ask(c, url, key, gateway.question(rng, memories)))

    tasks = [asyncio.create_task(client(i)) for i in range(clients)]
    await asyncio.sleep(1.0)
    if pg is not None:
        pg.freeze()
    start = time.perf_counter()
    try:
        await asyncio.sleep(seconds)
    finally:
        if pg is not None:
            pg.thaw()
    end = time.perf_counter()
    stop.set()
    await asyncio.gather(*tasks)
    return [r for r in out if start <= r[0] < end], end


async def recovery(url: str, key: str, thawed_at: float) -> tuple[float, check.Counts]:
    """Seconds from the thaw until the seeded fact (gateway.FACT) is injected again, and the
    outcomes of the tries until then; NaN when it is not back within a minute. The plain question,
    asked again: words added to it could drop it below the lexical floor."""
    tries = check.Counts()
    async with httpx.AsyncClient(timeout=60) as c:
        for _ in range(600):
            *_, outcome, causes = await _ask(c, url, key, gateway.REPEATED)
            tries.add(outcome, causes)
            if outcome == "injected":
                return time.perf_counter() - thawed_at, tries
            await asyncio.sleep(0.1)
    return float("nan"), tries


def counted(replies: list[Reply]) -> check.Counts:
    c = check.Counts()
    for *_, outcome, causes in replies:
        c.add(outcome, causes)
    return c


def explain(frozen: check.Counts, back_s: float, tries: check.Counts) -> str:
    """What the frozen case's counts say happened, in words computed from them."""
    n = frozen.total
    timed_out, skipped = frozen.causes["timeout"], frozen.causes["db_down"]
    other = frozen["degraded"] - skipped
    parts = [
        f"Of {n} requests during the freeze, {frozen['injected'] + frozen['none']} got retrieval as usual, "
        f"{timed_out} waited out the {BUDGET_MS} ms budget (`x-brain-memory-degraded: timeout`), {skipped} "
        "skipped retrieval because the database was known not to answer (`db_down`)"
    ]
    if other:
        parts.append(f", {other} were degraded otherwise ({frozen.summary()})")
    parts.append(f"; {frozen['error']} failed.")
    if back_s == back_s:  # not NaN
        parts.append(
            f" The seeded fact was injected again {back_s:.1f} s after the thaw, at try {tries.total} "
            f"({tries.summary()})."
        )
    else:
        parts.append(
            f" The seeded fact was NOT injected again within a minute of the thaw ({tries.summary()})."
        )
    return "".join(parts)


async def main(a: argparse.Namespace) -> None:
    from brain.local.up import stop

    state = Path(f"/tmp/bench-faults-{uuid.uuid4().hex[:6]}")
    state.mkdir()
    with postgres() as pg:
        procs: list[Any] = []
        try:
            dsn = await pg.create_database("bench")
            await gateway.seed(dsn, a.memories)
            memories = gateway.corpus(a.memories, "shared")
            key, master, gw_url, bare_url, *_ = await gateway.start_pair(
                dsn, state, procs, ready=lambda d: d["status"] == "ok"
            )
            await warm(gw_url, key, 20, 1)  # model, pools, caches
            await warm(bare_url, master, 20, 1)
            rows = []
            cases = (
                ("bare proxy", bare_url, master, None),
                ("brain, database healthy", gw_url, key, None),
                ("brain, database frozen", gw_url, key, pg),
            )
            loads = []
            for seed, (label, url, k, pg_) in enumerate(cases, start=1):
                load0 = os.getloadavg()
                res, ended = await load(url, k, a.clients, a.freeze, seed, memories, pg_)
                loads.append((load0, os.getloadavg()))
                rows.append((label, [r[1] for r in res], res))
            back_s, tries = await recovery(gw_url, key, ended)
            counts = [counted(res) for *_, res in rows]
            claims = [
                check.bare(cases[0][0], len(rows[0][1])),
                check.memory_on(cases[1][0], len(rows[1][1])),
                check.answered(cases[2][0], len(rows[2][1])),
            ]
            bare99, frozen99 = percentile(rows[0][1], 0.99), percentile(rows[-1][1], 0.99)
            goal = BUDGET_MS + bare99
            lines = [
                "## Faults: the database hangs",
                "",
                f"{a.memories:,} memories; {a.clients} clients keep asking new questions for {a.freeze:.0f} s in each "
                "case; in the last, Postgres is SIGSTOPped (postmaster and every backend) for those seconds. "
                f"Retrieval budget {BUDGET_MS} ms; echo upstream; loopback; {os.cpu_count()} CPUs "
                f"(load average {os.getloadavg()[0]:.1f} at the end: every case shares them with whatever else runs).",
                "",
                "| case | requests | p50 | p95 | p99 | max | outcomes | load before / after |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for (label, lat, _), c, (l0, l1) in zip(rows, counts, loads, strict=True):
                lines.append(
                    f"| {label} | {len(lat)} | {percentile(lat, 0.5):.0f} ms | {percentile(lat, 0.95):.0f} ms | "
                    f"{percentile(lat, 0.99):.0f} ms | {max(lat, default=float('nan')):.0f} ms | {c.summary()} | "
                    f"{l0[0]:.1f} / {l1[0]:.1f} |"
                )
            lines += [
                "",
                f"Goal: p99 while frozen ≤ budget + bare p99 = {goal:.0f} ms: "
                f"**{'met' if frozen99 <= goal else 'NOT met'}** ({frozen99:.0f} ms). "
                + explain(counts[2], back_s, tries),
            ]
            print("\n".join(lines))
            figures = {
                "memories": a.memories,
                "clients": a.clients,
                "freeze_s": a.freeze,
                "rows": [
                    {
                        "case": label,
                        "requests": len(lat),
                        "p50_ms": percentile(lat, 0.5),
                        "p95_ms": percentile(lat, 0.95),
                        "p99_ms": percentile(lat, 0.99),
                        "max_ms": max(lat, default=float("nan")),
                        "outcomes": c.as_dict(),
                        "load_before": l0,
                        "load_after": l1,
                    }
                    for (label, lat, _), c, (l0, l1) in zip(rows, counts, loads, strict=True)
                ],
                "goal_ms": goal,
                "recovery_s": back_s,
                "recovery_tries": tries.as_dict(),
            }
            checks = list(zip(counts, claims, strict=True))
            if back_s != back_s:  # NaN: the fact never came back
                checks.append((tries, check.memory_on("the seeded fact after the thaw")))
            results.emit("faults", figures, markdown="\n".join(lines), checks=checks)
            check.expect_all(checks)
        finally:
            for p in reversed(procs):
                stop(p)
            pg.thaw()
            shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    ap = parser(__spec__.name, __doc__)
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--freeze", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=4)

    def _interrupt(*_: object) -> None:
        raise KeyboardInterrupt  # so `finally` stops the processes this script started

    signal.signal(signal.SIGTERM, _interrupt)
    asyncio.run(main(ap.parse_args()))
