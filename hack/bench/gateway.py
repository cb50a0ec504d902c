"""Gateway benchmarks: the brain hooks' added latency over the bare LiteLLM proxy under load, and streaming.

    .venv/bin/python -m hack.bench.gateway [--memories 100000] [--requests 300] [--concurrency 1,10,50]
        [--turn 2] [--level-timeout 600] [--cases new,repeated] [--clients 100] [--duration 60]

Everything is loopback and real: an embedded Postgres seeded with `--memories` entries (generated
text with the model's own vectors of it, embedded once and cached by hack/bench/vectors.py; the
database kept under ~/.cache/brain-operator/bench-gateway-v4-<n> between runs, `--seed-only` to
make it and stop), in two layouts, each its own database: the whole corpus in the team's `shared`
(the agent key, no header, sees all of it) and split over four namespaces (`shared` + three repos;
the key asks for all four with `x-brain-namespaces`). Questions are drawn from the seeded text, so
every one has an answer; each request's outcome (hack/bench/check.py, from the `x-brain-memory`
headers) is counted, and the run fails unless every brain request was injected with retrieval
whole, every bare one was bare, none failed, and every row counted the requests it claims
(`--stop-embedder` stops the embedder process first: the embedder-process rows must then fail).

Three arms serve the same echo upstream in the same run: the bare LiteLLM proxy (same models, no
brain callback, master-key auth) and the brain gateway in both topologies, the offline model
in-process (`brainctl up`'s setup) and a second gateway whose embeddings come from `python -m
brain.embedder` over HTTP (the cluster's), all started here and stopped at the end; so the
differences are the hooks and where the model runs. For each `--concurrency` level C, C clients
drive one arm at a time in small turns (`--turn` requests per client; each client sends its next
request when its last is answered) and the arms take turns in an order rotating every round, until
each arm has had `--requests` (bounded in time too: `--level-timeout`); see `level()`. While an arm
is driven a probe GETs its health endpoint (2 ms into each turn, then 50 ms after each answer): how
long that proxy's event loop takes to answer (the in-process model runs in a worker thread, but tokenisation holds the GIL). Prints a
Markdown section for docs/benchmarks.md; the figures go to the run's record (hack/bench/results.py), and to `--json`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import random
import signal
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import yaml
from hack.bench import ROOT, check, parser, results, vectors
from hack.bench.corpus import LEXEME_STATS_SQL
from tests.kit.database import postgres

from brain.local.stats import percentile, rank_from_top

_PARAGRAPH = (
    "deploy cluster postgres replica index cache queue worker retry timeout latency budget gateway token "
    "schema migration rollback canary flag service billing invoice payment refund ledger webhook cron batch "
    "kafka topic consumer producer partition lag metric alert pager incident runbook owner team review merge "
    "branch release train freeze staging production region zone node pod secret vault certificate tls proxy "
    "tunnel dns route ingress egress bucket upload download thumbnail search ranking embedding vector shard"
)
WORDS = _PARAGRAPH.split()
MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # brain.embedder.DEFAULT_MODEL, the bundled offline one
CODE_ANSWER = (
    "Here it is.\n\n```python\n" + "\n".join(f"value_{i} = compute({i})" for i in range(14)) + "\n```\n"
)


def _vocabulary(size: int = 20_000, seed: int = 3) -> list[str]:
    """Synthetic words; drawn with Zipf weights below, so a few are common and most are rare, like real text."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = list(WORDS)
    while len(words) < size:
        words.append("".join(rng.choice(letters) for _ in range(rng.randint(4, 10))))
    return words


VOCAB = _vocabulary()
CUM_ZIPF = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(VOCAB))))


def _sentence(rng: random.Random, n: int = 18) -> str:
    return " ".join(rng.choices(VOCAB, cum_weights=CUM_ZIPF, k=n)) + f" {rng.randint(1000, 65000)}."


#: seeded first, so the repeated question of an agent loop has its answer in every layout
FACT = "The payments postgres replica listens on port 6432; the primary on 5432."
REPEATED = "which port does the payments postgres replica use?"
SPLIT = ("shared", "repo:payments", "repo:web", "repo:infra")
LAYOUTS = {
    # layout → (what the key sends as x-brain-namespaces, the row's words)
    "shared": ("", "whole corpus in `shared`"),
    "split": (",".join(SPLIT[1:]), "split over 4 namespaces, all four read"),
}


class Memory(NamedTuple):
    namespace: str
    title: str
    body: str


def corpus(n: int, layout: str) -> list[Memory]:
    """The seeded memories, the same texts in every layout (so their vectors are embedded once)."""
    rng = random.Random(7)
    out = []
    for i in range(n):
        body = FACT if i == 0 else _sentence(rng)
        ns = "shared" if layout == "shared" else ("repo:payments" if i == 0 else SPLIT[i % 4])
        out.append(Memory(ns, body[:40], body))
    return out


def question(rng: random.Random, memories: list[Memory]) -> str:
    """A new question about a seeded memory: eight of its words, in its order."""
    words = rng.choice(memories[1:]).body.rstrip(".").split()
    picked = sorted(rng.sample(range(len(words)), min(8, len(words))))
    return "what about " + " ".join(words[i] for i in picked) + "?"


async def seed(dsn: str, n: int, dim: int = 384, layout: str = "shared") -> None:
    """Bulk-load `n` memories (COPY, then the HNSW index built once) unless there, then VACUUM ANALYZE.

    The vacuum brings the store to the steady state autovacuum keeps a live brain in (GIN pending
    lists merged, statistics current), also for a cached seed: otherwise the run times autovacuum.
    """
    from brain.store import Store

    store = await Store.open(dsn, dim=dim)
    try:
        have = await store.pool_for_tests.fetchval("SELECT count(*) FROM memories")
        indexes = await store.pool_for_tests.fetchval(
            "SELECT count(*) FROM pg_indexes WHERE indexname = ANY($1::text[])",
            ["memories_embedding", "memories_tsv", "memories_trgm"],
        )
        if have < n or indexes < 3:  # a seed interrupted during its load or index build
            await _load(dsn, have, n, dim, layout)
        # BM25 weights at the corpus mean, now (a cached seed from before schema v4 is backfilled
        # here once), so no rewrite runs in the background while the gateways are timed.
        await store.settle_weights(only_if_due=True)
        await store.pool_for_tests.execute("VACUUM (ANALYZE) memories, lexeme_stats")
    finally:
        await store.close()


async def _load(dsn: str, have: int, n: int, dim: int, layout: str) -> None:
    import asyncpg
    from pgvector.asyncpg import register_vector

    from brain.embedder import LocalEmbedder
    from brain.store.store import content_hash, embed_text, new_id

    print(f"seeding {n} memories, layout {layout} (once; cached for later runs) …", file=sys.stderr)
    memories = corpus(n, layout)
    # the gateway's model; every core for the one-time corpus (the vectors do not depend on threads;
    # 100k texts take ~30 min on two cores, once: hack/bench/vectors.py caches them)
    embedder = LocalEmbedder()
    assert embedder.model == MODEL, embedder.model
    all_vecs = await vectors.vectors(embedder, [embed_text(m.title, m.body) for m in memories])
    conn = await asyncpg.connect(dsn)
    await register_vector(conn)
    try:
        # A bulk load, not n inserts: the search indexes are built once afterwards and the lexeme
        # statistics counted in one statement (the per-row trigger and GIN upkeep made seeding 100k
        # take half an hour on a loaded two-core machine).
        for index in ("memories_embedding", "memories_tsv", "memories_trgm"):
            await conn.execute(f"DROP INDEX IF EXISTS {index}")
        await conn.execute("ALTER TABLE memories DISABLE TRIGGER memories_lexeme_df")
        await conn.execute("ALTER TABLE memories DISABLE TRIGGER memories_bm25")  # weights once, below
        # Labelled with the model the gateways embed queries with, so the vector leg searches them
        # (until v3 they were labelled "bench": the vector leg answered nothing, in both topologies).
        await conn.execute("UPDATE brain_meta SET value = $1 WHERE key = 'embedding_model'", MODEL)
        batch = 5000
        if have:  # an interrupted load: start again, the indexes are built over the whole corpus
            await conn.execute("DELETE FROM memories")
        for start in range(0, n, batch):
            rows = []
            for m, v in zip(memories[start : start + batch], all_vecs[start : start + batch], strict=True):
                mid = new_id()
                rows.append(
                    (
                        mid,
                        mid,
                        "note",
                        m.namespace,
                        "episodic",
                        "agent",
                        "bench",
                        m.title,
                        m.body,
                        content_hash(m.body),
                        v,
                        MODEL,
                    )
                )
            await conn.copy_records_to_table(
                "memories",
                records=rows,
                columns=[
                    "id",
                    "lineage_id",
                    "kind",
                    "namespace",
                    "tier",
                    "origin",
                    "author",
                    "title",
                    "body",
                    "content_hash",
                    "embedding",
                    "embedding_model",
                ],
            )
            print(f"  {start + len(rows)}/{n}", file=sys.stderr)
        await conn.execute("ALTER TABLE memories ENABLE TRIGGER memories_lexeme_df")
        await conn.execute("ALTER TABLE memories ENABLE TRIGGER memories_bm25")
        await conn.execute(
            """INSERT INTO brain_meta (key, value)
               SELECT 'bm25_avgdl', avg(length(tsv))::text FROM memories WHERE status = 'active'
               ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"""
        )
        await conn.execute(
            "UPDATE memories SET bm25 = brain_bm25_doc(tsv, (SELECT value::float8 FROM brain_meta "
            "WHERE key = 'bm25_avgdl'))"
        )
        await conn.execute("DELETE FROM brain_meta WHERE key = 'bm25_rewrite_after'")
        await conn.execute("DELETE FROM lexeme_stats")
        await conn.execute(LEXEME_STATS_SQL)
        await conn.execute("SET maintenance_work_mem = '1GB'")
        await conn.execute("CREATE INDEX memories_tsv ON memories USING gin (tsv)")
        await conn.execute("CREATE INDEX memories_trgm ON memories USING gin (body gin_trgm_ops)")
        await conn.execute(
            "CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops) "
            "WITH (m = 16, ef_construction = 64)"
        )
    finally:
        await conn.close()


def configs(fake_url: str, state: Path, master: str) -> tuple[Path, Path]:
    from brain.gateway.config import effective_config
    from brain_operator.api import BrainSpec
    from brain_operator.render.litellm_config import render_litellm_config

    spec = BrainSpec.model_validate(
        {"gateway": {"models": [{"name": "echo", "model": "openai/echo", "apiBase": f"{fake_url}/v1"}]}}
    )
    brain = render_litellm_config(spec)
    bare = effective_config(brain)
    bare["litellm_settings"]["callbacks"] = ["prometheus"]  # both proxies export LiteLLM's metrics
    bare["general_settings"] = {"master_key": master}
    bare.pop("brain", None)
    paths = state / "brain.yaml", state / "bare.yaml"
    paths[0].write_text(yaml.safe_dump(brain))
    paths[1].write_text(yaml.safe_dump(bare))
    return paths


def bare_command(config: Path, port: int) -> list[str]:
    """The bare proxy's process. As a module: run as a script, its folder would come first on
    sys.path, and this package's `operator.py` would shadow the standard library's `operator`, so
    the bare proxy died at its first import and the caller waited out its health check."""
    return [sys.executable, "-m", "hack.bench.gateway", "--serve-bare", str(config), str(port)]


def with_root(env: dict[str, str]) -> dict[str, str]:
    """`env` with the repository first on PYTHONPATH, so that `-m hack.bench…` imports from any cwd."""
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)}


def serve_bare(config: str, port: int) -> None:
    """The bare proxy: LiteLLM's app under uvicorn, same as the gateway minus the brain."""
    os.environ["CONFIG_FILE_PATH"] = config
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import uvicorn
    from litellm.proxy.proxy_server import app

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


class Target(NamedTuple):
    name: str
    url: str
    key: str
    health: str  # the cheap endpoint the loop probe asks while the arm is driven
    headers: tuple[tuple[str, str], ...] = ()  # sent with every request (x-brain-namespaces, split layout)


class Level(NamedTuple):
    """One concurrency level's figures per target."""

    ms: dict[str, list[float]]  # request latencies
    probe: dict[str, list[float]]  # loop probe latencies
    counts: dict[str, check.Counts]  # request outcomes
    busy_s: dict[str, float]  # wall seconds the target was being driven (its turns, end to end)
    cut_short: bool  # the level ran into its time bound before every request was sent


#: the stage table's columns: the hook's pre_call and the retrieval stages it waits on
STAGES = ("pre_call", "embed", "lexical", "vector", "context")
#: how often the loop probe GETs the driven proxy's health endpoint
PROBE_EVERY_S = 0.05


async def level(
    targets: list[Target],
    clients: int,
    requests: int,
    questions: list[str],
    *,
    turn: int = 2,
    deadline_s: float = 600.0,
    warmup: int = 0,
    transport: httpx.AsyncBaseTransport | None = None,  # tests: a mock in place of the network
) -> Level:
    """`requests` to every target from `clients` concurrent clients, in rotating turns.

    The targets take turns, one at a time: a turn sends `clients × turn` requests (or what is left) to
    one target through `clients` workers, each sending its next request when its last one is answered,
    so the target has `clients` requests in flight until the turn's last ones drain. Round r's turns go
    in the order of `targets` rotated by r (bare, brain, remote; then brain, remote, bare; …), so every
    target is driven many times over the level, next to each of the others, and they share the
    machine's load drift; the targets not driven are idle meanwhile. The k-th request to every target
    asks `questions[warmup + k]`; first `warmup` requests to each (one turn, `questions[:warmup]`)
    are not counted: they open the connections.

    Bounded in count (`requests` per target) and time (`deadline_s` for the level: no request is sent
    after it, the level is then `cut_short` and its rows count fewer requests than they claim).
    Each request has a 30 s timeout (an error outcome). While a target is driven a probe GETs its
    health endpoint, 2 ms into the turn and then PROBE_EVERY_S after each answer: how long that
    proxy's event loop takes to answer.
    """
    assert len(questions) >= warmup + requests
    ms: dict[str, list[float]] = {t.name: [] for t in targets}
    probe: dict[str, list[float]] = {t.name: [] for t in targets}
    counts = {t.name: check.Counts() for t in targets}
    busy = {t.name: 0.0 for t in targets}
    sent = {t.name: 0 for t in targets}  # counted requests sent so far
    stop_at = time.monotonic() + deadline_s
    # An arm waits while the others have their turns; its idle connections are dropped after 3 s, before
    # the proxies' own 5 s keep-alive (uvicorn's) closes them under a request about to reuse one (an
    # error of the bench's client, not the proxy's: seen as RemoteProtocolError at 50 clients).
    limits = httpx.Limits(
        max_connections=len(targets) * clients + 10, max_keepalive_connections=None, keepalive_expiry=3.0
    )

    async with (
        httpx.AsyncClient(timeout=30, limits=limits, transport=transport) as c,
        httpx.AsyncClient(timeout=30, transport=transport) as pc,
    ):

        async def run_turn(t: Target, first: int, n: int, record: bool) -> None:
            nxt = first
            end = first + n

            async def worker() -> None:
                nonlocal nxt
                while nxt < end and time.monotonic() < stop_at:
                    k, nxt = nxt, nxt + 1
                    body = {"model": "echo", "messages": [{"role": "user", "content": questions[k]}]}
                    t0 = time.perf_counter()
                    try:
                        r = await c.post(
                            f"{t.url}/v1/chat/completions",
                            json=body,
                            headers={"authorization": f"Bearer {t.key}", **dict(t.headers)},
                        )
                        status, headers, failed = r.status_code, dict(r.headers), ""
                    except httpx.HTTPError as e:
                        status, headers, failed = None, {}, type(e).__name__
                    if record:
                        ms[t.name].append((time.perf_counter() - t0) * 1000)
                        if failed:  # no reply: which exception, as the cause
                            counts[t.name].add("error", [failed])
                        else:
                            counts[t.name].add_response(status, headers)

            async def probe_loop() -> None:
                await asyncio.sleep(0.002)  # the first one 2 ms in, also in a turn shorter than the period
                while True:
                    t1 = time.perf_counter()
                    try:
                        (await pc.get(t.url + t.health)).raise_for_status()
                    except httpx.HTTPError:
                        continue  # the probe is a measure, not a check: a failed one is not timed
                    if record:
                        probe[t.name].append((time.perf_counter() - t1) * 1000)
                    await asyncio.sleep(PROBE_EVERY_S)

            p = asyncio.create_task(probe_loop())
            t0 = time.perf_counter()
            try:
                await asyncio.gather(*(worker() for _ in range(min(clients, n))))
            finally:
                p.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await p
            if record:
                busy[t.name] += time.perf_counter() - t0
                sent[t.name] = nxt - warmup

        if warmup:
            for t in targets:
                await run_turn(t, 0, warmup, record=False)
        r = 0
        while time.monotonic() < stop_at and any(sent[t.name] < requests for t in targets):
            for t in targets[r % len(targets) :] + targets[: r % len(targets)]:
                left = requests - sent[t.name]
                if left > 0 and time.monotonic() < stop_at:
                    await run_turn(t, warmup + sent[t.name], min(clients * turn, left), record=True)
            r += 1
    return Level(ms, probe, counts, busy, any(sent[t.name] < requests for t in targets))


def by_label(metrics_text: str, sample: str, label: str = "") -> dict[str, float]:
    """Values of one sample name in a /metrics scrape, summed per value of `label` (all in "" without)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        for s in family.samples:
            if s.name == sample:
                key = s.labels.get(label, "")
                out[key] = out.get(key, 0.0) + s.value
    return out


def mean_ms(before: str, after: str, name: str, label: str) -> dict[str, tuple[float, int]]:
    """(mean milliseconds, observations) of histogram `name` between two scrapes, per label value.

    The count matters: a stage that runs for few requests (expand: only when something is injected)
    has a mean over those alone, which a single slow one can dominate.
    """
    sum0, count0 = by_label(before, name + "_sum", label), by_label(before, name + "_count", label)
    sum1, count1 = by_label(after, name + "_sum", label), by_label(after, name + "_count", label)
    return {
        k: ((sum1[k] - sum0.get(k, 0.0)) / (n - count0.get(k, 0.0)) * 1000, round(n - count0.get(k, 0.0)))
        for k, n in count1.items()
        if n > count0.get(k, 0.0)
    }


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def streaming(gw: str, key: str, clients: int, duration: float, pid: int) -> dict[str, Any]:
    ok = failed = 0
    ttfb: list[float] = []
    peak = 0.0
    stop_at = time.monotonic() + duration

    async def client(i: int) -> None:
        nonlocal ok, failed
        rng = random.Random(i)
        async with httpx.AsyncClient(timeout=120) as c:
            while time.monotonic() < stop_at:
                body = {
                    "model": "echo",
                    "stream": True,
                    "messages": [{"role": "user", "content": "write the helper: " + _sentence(rng, 8)}],
                }
                t0 = time.perf_counter()
                try:
                    async with c.stream(
                        "POST",
                        f"{gw}/v1/chat/completions",
                        json=body,
                        headers={"authorization": f"Bearer {key}"},
                    ) as r:
                        first = True
                        done = False
                        async for line in r.aiter_lines():
                            if first:
                                ttfb.append((time.perf_counter() - t0) * 1000)
                                first = False
                            done = done or line == "data: [DONE]"
                        if r.status_code == 200 and done:
                            ok += 1
                        else:
                            failed += 1
                except httpx.HTTPError:
                    failed += 1

    async def sample() -> None:
        nonlocal peak
        while time.monotonic() < stop_at:
            peak = max(peak, rss_mb(pid))
            await asyncio.sleep(1)

    t0 = time.monotonic()
    await asyncio.gather(sample(), *(client(i) for i in range(clients)))
    wall = time.monotonic() - t0
    return {
        "ok": ok,
        "failed": failed,
        "rps": ok / wall,
        "ttfb_p50": percentile(ttfb, 0.5),
        "ttfb_p95": percentile(ttfb, 0.95),
        "rss_peak_mb": peak,
        "wall_s": wall,
    }


class Pair(NamedTuple):
    key: str  # an agent key for the brain
    master: str  # the bare proxy's key
    gw_url: str
    bare_url: str
    fake_url: str
    gw: Any  # the brain gateway's process
    remote_url: str | None = None  # a second gateway, its embeddings from `python -m brain.embedder`
    embedder: Any = None  # that embedder's process


async def start_pair(
    dsn: str,
    state: Path,
    procs: list[Any],
    *,
    ready: Callable[[dict[str, Any]], bool],
    remote_embedder: bool = False,
) -> Pair:
    """An agent key, then the echo upstream, the brain gateway and the bare proxy (the same LiteLLM
    without the brain) on free ports, appended to `procs` for the caller to stop. With
    `remote_embedder`, also the embedder service and a second gateway using it."""
    from brain.local.devdb import free_port
    from brain.local.up import gateway_command, spawn, wait_http
    from brain.services.keys import KeyStore
    from brain.store import Store

    store = await Store.open(dsn, dim=384)
    key, _ = await KeyStore(store).create(f"bench-{uuid.uuid4().hex[:6]}", "agent")
    await store.close()
    master = "sk-bench-" + uuid.uuid4().hex
    fake_port, gw_port, bare_port = free_port(), free_port(), free_port()
    env = {
        **os.environ,
        "BRAIN_DATABASE_URL": dsn,
        "BRAIN_MASTER_KEY": master,
        "BRAIN_EMBEDDING_DIM": "384",
        # what `brainctl up` sets: the bundled offline model embeds, and vectors are labelled with it
        "BRAIN_EMBEDDING_MODEL": MODEL,
    }
    env.pop("BRAIN_EMBEDDER_URL", None)
    procs.append(
        spawn(
            [sys.executable, "-m", "brain.local.fakeupstream", "--port", str(fake_port)],
            env,
            state / "fake.log",
        )
    )
    fake = f"http://127.0.0.1:{fake_port}"
    brain_cfg, bare_cfg = configs(fake, state, master)
    gw = spawn(gateway_command(brain_cfg, "127.0.0.1", gw_port), env, state / "gateway.log")
    procs.append(gw)
    bare = spawn(bare_command(bare_cfg, bare_port), with_root(env), state / "bare.log")
    procs.append(bare)
    gw_url, bare_url = f"http://127.0.0.1:{gw_port}", f"http://127.0.0.1:{bare_port}"
    await wait_http(fake + "/healthz", timeout=60)
    await wait_http(gw_url + "/brain/v1/health", proc=gw, timeout=300, check=ready)
    await wait_http(bare_url + "/health/liveliness", proc=bare, timeout=300)
    remote_url = embedder = None
    if remote_embedder:
        emb_port, remote_port = free_port(), free_port()
        # One onnxruntime thread, as for a pod of one core: on these two shared cores an all-cores pool
        # spins against the gateway and Postgres (docs/performance.md, "The query model's threads").
        embedder = spawn(
            [sys.executable, "-m", "brain.embedder", "--port", str(emb_port), "--threads", "1"],
            env,
            state / "embedder.log",
        )
        procs.append(embedder)
        emb_url = f"http://127.0.0.1:{emb_port}"
        await wait_http(emb_url + "/readyz", timeout=300)
        remote = spawn(
            gateway_command(brain_cfg, "127.0.0.1", remote_port),
            {**env, "BRAIN_EMBEDDER_URL": emb_url},
            state / "gateway-remote.log",
        )
        procs.append(remote)
        remote_url = f"http://127.0.0.1:{remote_port}"
        await wait_http(remote_url + "/brain/v1/health", proc=remote, timeout=300, check=ready)
    return Pair(key, master, gw_url, bare_url, fake, gw, remote_url, embedder)


def _write_json(a: argparse.Namespace, figures: dict[str, Any]) -> None:
    """The figures so far to the run's record (hack/bench/results.py) and to --json."""
    results.emit("gateway", figures, markdown="\n".join(figures.get("table", [])) or None, also=a.json)


def _cells(f: dict[str, Any]) -> str:
    """An arm's throughput and loop probe cells."""
    return f"{f['throughput_rps']:.1f} | {f['loop_probe_p50_ms']:.1f} / {f['loop_probe_p99_ms']:.1f} ms"


def _ordinal(n: int) -> str:
    """ "slowest", "2nd slowest", …: the `rank_from_top` in words."""
    return {1: "", 2: "2nd ", 3: "3rd "}.get(n, f"{n}th ") + "slowest"


async def layout_rows(
    a: argparse.Namespace,
    layout: str,
    pg: Any,
    state: Path,
    figures: dict[str, Any],
    stage_rows: list[str],
) -> tuple[list[str], list[str], list[tuple[check.Counts, check.Claim]]]:
    """One layout's database, gateways and latency rows (and, for the first, the streaming run):
    the table's rows, the notes under it, and each row's outcome check; its rows of the stage table
    appended to `stage_rows`."""
    from brain.local.up import stop

    dsn = pg.dsn_for(f"bench_{layout}")
    await seed(dsn, a.memories, layout=layout)
    memories = corpus(a.memories, layout)
    namespaces, words = LAYOUTS[layout]
    procs: list[Any] = []
    rows: list[str] = []
    lines: list[str] = []  # the notes under the table
    checks: list[tuple[check.Counts, check.Claim]] = []
    try:
        # status ok: the database answers and the embedder does, so the in-process gateway has loaded
        # its model (until then its questions are answered by keywords, and say so: embedder_down)
        pair = await start_pair(
            dsn, state / layout, procs, ready=lambda d: d["status"] == "ok", remote_embedder=True
        )
        gw_url, remote_url = pair.gw_url, pair.remote_url
        assert remote_url is not None
        if a.stop_embedder:  # the outcome check must fail: the remote gateway's retrieval is degraded
            print("stopping the embedder process (--stop-embedder)", file=sys.stderr)
            stop(pair.embedder)
        h = (("x-brain-namespaces", namespaces),) if namespaces else ()
        targets = [
            Target("bare", pair.bare_url, pair.master, "/health/liveliness"),
            Target("brain", gw_url, pair.key, "/healthz", h),
            Target("remote", remote_url, pair.key, "/healthz", h),
        ]
        topologies = (("brain", "model in-process"), ("remote", "embedder process"))
        gateways = targets[1:]  # the brain gateways: the hook's histograms are in their /metrics
        cases = {
            "new": ("new question every request", False),
            "repeated": ("repeated question (agent loop)", True),
        }
        for case_key in a.cases.split(","):
            label, repeat = cases[case_key]
            for clients in a.concurrency:
                # Questions drawn afresh for every level (its own seed), so no level re-asks another's
                # within the gateways' 30 s injection cache; the k-th request to every arm asks the same.
                rng = random.Random(11 + clients)
                warmup = max(10, clients)
                questions = [
                    REPEATED if repeat else question(rng, memories) for _ in range(warmup + a.requests)
                ]
                async with httpx.AsyncClient() as c:
                    before = {t.name: (await c.get(t.url + "/metrics")).text for t in gateways}
                load0, t0 = os.getloadavg(), time.monotonic()
                lv = await level(
                    targets,
                    clients,
                    a.requests,
                    questions,
                    turn=a.turn,
                    deadline_s=a.level_timeout,
                    warmup=warmup,
                )
                load1, wall = os.getloadavg(), time.monotonic() - t0
                async with httpx.AsyncClient() as c:
                    after = {t.name: (await c.get(t.url + "/metrics")).text for t in gateways}
                case = f"{label}, {words}"
                print(f"  {case}, {clients} clients: {wall:.0f} s", file=sys.stderr, flush=True)
                fig: dict[str, dict[str, Any]] = {
                    t.name: {
                        "n": len(lv.ms[t.name]),
                        "p50_ms": percentile(lv.ms[t.name], 0.5),
                        "p95_ms": percentile(lv.ms[t.name], 0.95),
                        "p99_ms": percentile(lv.ms[t.name], 0.99),
                        "p99_rank": rank_from_top(len(lv.ms[t.name]), 0.99),
                        "throughput_rps": len(lv.ms[t.name]) / lv.busy_s[t.name]
                        if lv.busy_s[t.name]
                        else 0.0,
                        "busy_s": lv.busy_s[t.name],
                        "loop_probe_p50_ms": percentile(lv.probe[t.name], 0.5),
                        "loop_probe_p99_ms": percentile(lv.probe[t.name], 0.99),
                        "loop_probes": len(lv.probe[t.name]),
                        "outcomes": lv.counts[t.name].as_dict(),
                    }
                    for t in targets
                }
                bare_fig = fig["bare"]
                for name, _ in topologies:
                    fig[name]["p50_ratio"] = fig[name]["p50_ms"] / bare_fig["p50_ms"]
                    fig[name]["p99_ratio"] = fig[name]["p99_ms"] / bare_fig["p99_ms"]
                if not repeat:
                    for name, topology in topologies:
                        b, e = before[name], after[name]
                        st = mean_ms(b, e, "brain_retrieval_stage_duration_seconds", "stage")
                        st |= mean_ms(b, e, "brain_gateway_hook_duration_seconds", "hook")
                        figures.setdefault("stages", {})[f"{layout}, {clients} clients, {topology}"] = st
                        stage_rows.append(
                            f"| {words} | {clients} | {topology} | "
                            + " | ".join(f"{st[k][0]:.1f}" if k in st else "–" for k in STAGES)
                            + " |"
                        )
                figures["rows"].append(
                    {
                        "layout": layout,
                        "case": label,
                        "concurrency": clients,
                        "requests": a.requests,
                        "warmup": warmup,
                        "wall_s": wall,
                        "cut_short": lv.cut_short,
                        "load_before": load0,
                        "load_after": load1,
                        **fig,
                    }
                )
                _write_json(a, figures)  # after every level: a run stopped later keeps what it measured

                rows.append(
                    f"| {case} | {clients} | bare proxy | {bare_fig['n']} | {bare_fig['p50_ms']:.1f} ms | | "
                    f"{bare_fig['p99_ms']:.1f} ms | | {_cells(bare_fig)} | {lv.counts['bare'].summary()} |"
                )
                checks.append(
                    (lv.counts["bare"], check.bare(f"{case}, {clients} clients, bare proxy", a.requests))
                )
                for name, topology in topologies:
                    f = fig[name]
                    rows.append(
                        f"| {case} | {clients} | {topology} | {f['n']} | {f['p50_ms']:.1f} ms | "
                        f"{f['p50_ratio']:.2f}× | {f['p99_ms']:.1f} ms | {f['p99_ratio']:.2f}× | {_cells(f)} | "
                        f"{lv.counts[name].summary()} |"
                    )
                    checks.append(
                        (
                            lv.counts[name],
                            check.memory_on(f"{case}, {clients} clients, {topology}", a.requests),
                        )
                    )
        if a.skip_streaming or layout != a.layouts.split(",")[0]:
            return rows, lines, checks
        async with httpx.AsyncClient() as c:
            await c.post(
                pair.fake_url + "/_fake/script",
                json=[{"content": CODE_ANSWER, "chunk_delay_s": 0.02, "times": -1}],
            )
            metrics_before = (await c.get(gw_url + "/metrics")).text
        load0 = os.getloadavg()
        s = await streaming(gw_url, pair.key, a.clients, a.duration, pair.gw.pid)
        load1 = os.getloadavg()
        async with httpx.AsyncClient() as c:
            m = (await c.get(gw_url + "/metrics")).text
        dropped = sum(by_label(m, "brain_capture_queue_dropped_total").values())
        stored = sum(by_label(m, "brain_captures_stored_total").values()) - sum(
            by_label(metrics_before, "brain_captures_stored_total").values()
        )
        figures["streaming"] = {**s, "load_before": load0, "load_after": load1, "layout": layout}
        lines += [
            "",
            f"{a.clients} concurrent streaming clients for {a.duration:.0f} s, {words} (each answer 16 "
            "chunks, 20 ms apart, with a 14-line code block to capture):",
            "",
            "| completed | failed | throughput | first byte p50 / p95 | gateway RSS peak | captures stored | "
            "capture jobs dropped |",
            "|---|---|---|---|---|---|---|",
            f"| {s['ok']} | {s['failed']} | {s['rps']:.1f} req/s | {s['ttfb_p50']:.0f} / {s['ttfb_p95']:.0f} ms | "
            f"{s['rss_peak_mb']:.0f} MiB | {stored:.0f} | {dropped:.0f} |",
        ]
        return rows, lines, checks
    finally:
        for p in reversed(procs):
            stop(p)


async def main(a: argparse.Namespace) -> None:
    cache = Path(os.environ.get("BRAIN_CACHE", Path.home() / ".cache" / "brain-operator"))
    if os.geteuid() == 0:  # Postgres runs as `nobody`, which cannot enter /root
        cache = Path("/var/tmp/brain-operator")
    # v2: Zipf vocabulary; v3: labelled with MODEL; v4: the model's vectors of the text, two layouts
    data = cache / f"bench-gateway-v4-{a.memories}"
    data.mkdir(parents=True, exist_ok=True)
    state = Path(f"/tmp/bench-gateway-{uuid.uuid4().hex[:6]}")
    layouts = a.layouts.split(",")
    for layout in layouts:
        (state / layout).mkdir(parents=True)
    with postgres(data / "pgdata") as pg:  # kept: the seed is reused by the next run
        figures: dict[str, Any] = {
            "memories": a.memories,
            "requests": a.requests,  # per arm and concurrency level
            "concurrency": a.concurrency,
            "turn": a.turn,
            "level_timeout_s": a.level_timeout,
            "cases": a.cases.split(","),
            "layouts": layouts,
            "percentile": "sample at sorted index floor(q*n), no interpolation",
            "machine": results.machine(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "rows": [],
        }
        import asyncpg

        conn = await asyncpg.connect(pg.dsn)
        for layout in layouts:
            if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", f"bench_{layout}"):
                await conn.execute(f"CREATE DATABASE bench_{layout}")
        await conn.close()
        if a.seed_only:  # seed (and cache) every layout's database, time nothing
            for layout in layouts:
                await seed(pg.dsn_for(f"bench_{layout}"), a.memories, layout=layout)
            return
        lines = [
            "## Gateway",
            "",
            f"{a.memories:,} memories stored (the model's own vectors of their text), in each layout its own "
            "database: all in the team's `shared` (the agent key, no header, sees all of it), and split over "
            "`shared` + three repos, all four asked for with `x-brain-namespaces`. Echo upstream; loopback; "
            f"{results.machine()}. Three arms: the bare proxy, the gateway with the model in-process "
            "(`brainctl up`) and the gateway with the embedder as its own process (the cluster topology; here "
            "it shares the same cores). At each concurrency level C, C clients (one event loop, the same "
            f"machine) drive one arm at a time in turns of {a.turn} requests per client (each sends its next "
            "request when its last is answered); the arms take turns in an order rotating every round (bare, "
            "in-process, embedder; then in-process, embedder, bare; …), so all three share the load's drift, "
            f"until each has had {a.requests} requests (after a warm-up turn of max(10, C), not counted; at most "
            f"{a.level_timeout:.0f} s a level). New questions are eight words of a seeded memory, new every "
            "request; the repeated one asks a seeded fact. Throughput is an arm's requests over the seconds it "
            "was driven (its turns end to end, the drain at each turn's end included). Percentiles are the "
            "sample at sorted index ⌊q·n⌋, no interpolation: with n = "
            f"{a.requests} the p99 is the {_ordinal(rank_from_top(a.requests, 0.99))} of n. The loop probe GETs "
            f"the driven proxy's health endpoint 2 ms into each turn, then {PROBE_EVERY_S * 1000:.0f} ms after each "
            "answer: how long its event loop "
            "takes to answer. Outcomes from each reply's `x-brain-memory` / `x-brain-memory-degraded` headers "
            "(hack/bench/check.py): the run fails unless every brain reply was injected with retrieval whole, "
            "every bare one bare, none an error, and every row counted all its requests. "
            f"Load average at the start: {' / '.join(f'{x:.1f}' for x in os.getloadavg())}.",
            "",
            "| case | clients | topology | n | p50 | p50 × bare | p99 | p99 × bare | req/s | loop probe p50 / p99 "
            "| outcomes |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        checks: list[tuple[check.Counts, check.Claim]] = []
        tails: list[str] = []
        stage_rows: list[str] = []
        for layout in layouts:
            rows, notes, more = await layout_rows(a, layout, pg, state, figures, stage_rows)
            lines += rows
            tails += notes
            checks += more
        if stage_rows:
            lines += [
                "",
                "Where a new question's time goes inside each gateway, per level (mean ms per observation, "
                "from its own histograms, warm-up included):",
                "",
                f"| layout | clients | topology | {' | '.join(STAGES)} |",
                "|---|---|---|" + "---|" * len(STAGES),
                *stage_rows,
            ]
        lines += [*tails, ""]
        lines += [
            "`pre_call` is all the hook added before the request went upstream; stages overlap (the "
            "lexical legs run while the query is embedded). At more than one client a stage's time includes "
            "its wait for the cores, Postgres and (embedder process) the embedder's one thread.",
        ]
        print("\n".join(lines))
        figures["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        figures["table"] = lines
        figures["checks"] = [
            {
                "row": claim.row,
                "claims": claim.says,
                "counts": counts.as_dict(),
                "ok": check.mismatch(counts, claim) is None,
            }
            for counts, claim in checks
        ]
        _write_json(a, figures)
        check.expect_all(checks)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--serve-bare":
        serve_bare(sys.argv[2], int(sys.argv[3]))
        sys.exit(0)
    ap = parser(__spec__.name, __doc__)
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--requests", type=int, default=300, help="per arm, per concurrency level")
    ap.add_argument(
        "--concurrency",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[1, 10, 50],
        help="comma-separated client counts, one level each (default 1,10,50)",
    )
    ap.add_argument("--turn", type=int, default=2, help="requests per client in each arm's turn")
    ap.add_argument("--level-timeout", type=float, default=600.0, help="seconds a level may take at most")
    ap.add_argument("--cases", default="new,repeated", help="comma-separated subset of new, repeated")
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--json", help="also write the numbers as JSON")
    ap.add_argument("--skip-streaming", action="store_true", help="only the latency tables")
    ap.add_argument(
        "--layouts", default="shared,split", help=f"comma-separated subset of {', '.join(LAYOUTS)}"
    )
    ap.add_argument("--seed-only", action="store_true", help="seed and cache the databases, time nothing")
    ap.add_argument(
        "--stop-embedder",
        action="store_true",
        help="stop the embedder process before the rows: the outcome check must then fail",
    )

    def _interrupt(*_: object) -> None:
        raise KeyboardInterrupt  # so `finally` stops the processes this script started

    signal.signal(signal.SIGTERM, _interrupt)
    asyncio.run(main(ap.parse_args()))
