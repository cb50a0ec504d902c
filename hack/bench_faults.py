"""Fault benchmark: chat latency while the database hangs, against the bare proxy's.

    .venv/bin/python hack/bench_faults.py [--memories 10000] [--freeze 10] [--clients 4]

A database that hangs (SIGSTOP of the postmaster and every backend: what a stuck disk, a frozen VM
or a black-holed network looks like from the client) is worse than one that is down, because
nothing fails: every wait simply lasts. Here a real gateway and the bare LiteLLM proxy serve the
same echo upstream; `--clients` agents keep asking new questions while Postgres is frozen for
`--freeze` seconds. The goal (issue 14): p99 of chat latency during the freeze stays under the
retrieval budget plus the bare proxy's own p99. Also reported: how long after the thaw memory is
injected again. Its own Postgres (seeded like hack/bench_gateway.py), so no shared cache is touched.
Prints a Markdown section for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_gateway as bg  # a sibling script, not a package

BUDGET_MS = 500  # retrieval.timeoutMs default (brain.gateway.settings)


async def _ask(c: httpx.AsyncClient, url: str, key: str, q: str) -> tuple[float, float, str]:
    body = {"model": "echo", "messages": [{"role": "user", "content": q}]}
    t0 = time.perf_counter()
    r = await c.post(f"{url}/v1/chat/completions", json=body, headers={"authorization": f"Bearer {key}"})
    dt = (time.perf_counter() - t0) * 1000
    r.raise_for_status()
    return t0, dt, r.headers.get("x-brain-memory", "")


async def warm(url: str, key: str, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    async with httpx.AsyncClient(timeout=60) as c:
        return [(await _ask(c, url, key, bg._sentence(rng, 10) + "?"))[1] for _ in range(n)]


async def load(
    url: str, key: str, clients: int, seconds: float, seed: int, pg: Any = None
) -> tuple[list[tuple[float, float, str]], float]:
    """`clients` loops asking new questions for `seconds` (with Postgres frozen meanwhile when `pg` is
    given): the requests that started in that window, and when it ended (perf_counter)."""
    out: list[tuple[float, float, str]] = []
    stop = asyncio.Event()

    async def client(i: int) -> None:
        rng = random.Random(seed * 1000 + i)  # questions of their own: no answer cached by an earlier case
        async with httpx.AsyncClient(timeout=120) as c:
            while not stop.is_set():
                out.append(await _ask(c, url, key, bg._sentence(rng, 10) + "?"))

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


async def recovery(url: str, key: str, thawed_at: float) -> float:
    """Seconds from the thaw until a question that has an answer in memory gets it injected again."""
    async with httpx.AsyncClient(timeout=60) as c:
        for i in range(600):
            _, _, memory = await _ask(c, url, key, f"which port does the payments replica use? ({i})")
            if memory in ("injected", "none"):
                return time.perf_counter() - thawed_at
            await asyncio.sleep(0.1)
    return float("nan")


async def main(a: argparse.Namespace) -> None:
    from brain.local.devdb import EmbeddedPostgres
    from brain.local.up import stop

    state = Path(f"/tmp/bench-faults-{uuid.uuid4().hex[:6]}")
    state.mkdir()
    pg = EmbeddedPostgres().start()
    procs = []
    try:
        dsn = await pg.create_database("bench")
        await bg.seed(dsn, a.memories)
        key, master, gw_url, bare_url, *_ = await bg.start_pair(
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
        for seed, (label, url, k, pg_) in enumerate(cases, start=1):
            res, ended = await load(url, k, a.clients, a.freeze, seed, pg_)
            rows.append((label, [dt for _, dt, _ in res], res))
        back_s = await recovery(gw_url, key, ended)
        frozen = rows[-1][2]
        degraded = sum(1 for *_, m in frozen if m == "degraded")
        bare99, frozen99 = bg.pct(rows[0][1], 0.99), bg.pct(rows[-1][1], 0.99)
        goal = BUDGET_MS + bare99
        lines = [
            "## Faults: the database hangs",
            "",
            f"{a.memories:,} memories; {a.clients} clients keep asking new questions for {a.freeze:.0f} s in each "
            "case; in the last, Postgres is SIGSTOPped (postmaster and every backend) for those seconds. "
            f"Retrieval budget {BUDGET_MS} ms; echo upstream; loopback; {os.cpu_count()} CPUs "
            f"(load average {os.getloadavg()[0]:.1f} at the end: every case shares them with whatever else runs).",
            "",
            "| case | requests | p50 | p95 | p99 | max |",
            "|---|---|---|---|---|---|",
        ]
        for label, lat, _ in rows:
            lines.append(
                f"| {label} | {len(lat)} | {bg.pct(lat, 0.5):.0f} ms | {bg.pct(lat, 0.95):.0f} ms | "
                f"{bg.pct(lat, 0.99):.0f} ms | {max(lat, default=float('nan')):.0f} ms |"
            )
        lines += [
            "",
            f"Goal: p99 while frozen ≤ budget + bare p99 = {goal:.0f} ms: "
            f"**{'met' if frozen99 <= goal else 'NOT met'}** ({frozen99:.0f} ms). {degraded} of {len(frozen)} "
            "requests during the freeze went upstream without memory (`x-brain-memory: degraded`), none failed: "
            "the first ones after the freeze began waited out the budget, then a probe found the database "
            "hung and the rest skipped retrieval. "
            f"Memory was injected again {back_s:.1f} s after the thaw.",
        ]
        print("\n".join(lines))
    finally:
        for p in reversed(procs):
            stop(p)
        pg.thaw()
        pg.stop()
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--freeze", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=4)

    def _interrupt(*_: object) -> None:
        raise KeyboardInterrupt  # so `finally` stops the processes this script started

    signal.signal(signal.SIGTERM, _interrupt)
    asyncio.run(main(ap.parse_args()))
