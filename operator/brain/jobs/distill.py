"""`python -m brain.jobs.distill`: automation proposes, people approve.

collect (captured episodes, session records, no-hit queries) → cluster by embedding, per namespace
→ gate (evidence count, distinct authors; before any LLM cost) → draft through litellm with the
Brain's model, the versioned prompt in `prompts/` and its JSON schema (invalid output is discarded
and counted, never patched) → dedup and conflict check against existing memories (a contradiction
becomes a proposal that supersedes, both texts shown by `proposals show`) → score → `proposals`
with provenance (which episodes, which sessions, which keys).

Episodes already cited by a proposal are not collected again, so a run cut short by a provider
outage (retries with backoff, then the run is *deferred*) loses nothing: the next run picks up
exactly the clusters that were not drafted. The LLM is reached through the Brain's own gateway
(BRAIN_GATEWAY_URL, BRAIN_MASTER_KEY, BRAIN_DISTILL_MODEL) with `x-brain-memory: off`, so the
drafting exchange is neither injected into nor captured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import jsonschema
import numpy as np

from brain.core.errors import BrainError
from brain.embedder.model import Embedder
from brain.ingest.grading import unit
from brain.ingest.sync import as_vector
from brain.jobs.common import emit, finish_run, job_env, setup_logging, start_run, traced
from brain.jobs.settings import JobSettings, load_job_settings
from brain.jobs.settings.distill import DistillConfig, load_distill_config
from brain.services import proposals
from brain.store import episode_rows, proposal_rows
from brain.store.store import Store, embed_text

log = logging.getLogger("brain.jobs.distill")
PROMPT_VERSION = "distill-v1"
EPISODE_KINDS = ("experience", "summary", "note", "fact", "learning", "decision", "convention")


def load_prompt(version: str = PROMPT_VERSION) -> tuple[str, dict[str, Any]]:
    base = resources.files("brain.jobs.prompts")
    text = (base / f"{version}.md").read_text()
    schema = json.loads((base / f"{version}.schema.json").read_text())
    return text, schema


@dataclass
class Episode:
    id: str
    kind: str
    namespace: str
    title: str
    body: str
    author: str
    vector: np.ndarray
    session: int | None = None  # the capture event (session record) that stored it


@dataclass
class Query:
    event_id: int
    namespace: str
    text: str
    key: str | None
    vector: np.ndarray | None = None


@dataclass
class Cluster:
    namespace: str
    episodes: list[Episode]
    queries: list[Query] = field(default_factory=list)

    @property
    def authors(self) -> list[str]:
        keys = [e.author for e in self.episodes] + [q.key for q in self.queries if q.key]
        return sorted(set(keys))

    def centroid(self) -> np.ndarray:
        c = np.mean(unit(np.stack([e.vector for e in self.episodes])), axis=0)
        n = float(np.linalg.norm(c))
        return c / n if n else c


@dataclass
class DistillSummary:
    episodes: int = 0
    queries: int = 0
    sessions: int = 0
    clusters: int = 0
    gated: int = 0
    drafted: int = 0
    invalid: int = 0
    duplicates: int = 0
    rejected: int = 0
    rejected_by: dict[str, int] = field(default_factory=dict)  # the door's refusal codes
    proposals: int = 0
    conflicts: int = 0
    gaps: int = 0
    provider_errors: int = 0
    deferred: bool = False
    deferred_clusters: int = 0
    error: str | None = None

    def reject(self, code: str) -> None:
        self.rejected += 1
        self.rejected_by[code] = self.rejected_by.get(code, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["prompt"] = PROMPT_VERSION
        return {k: v for k, v in d.items() if v is not None}


class ProviderDown(Exception):
    """Every attempt failed: the run is deferred, nothing drafted from the remaining clusters."""


class InvalidOutput(Exception):
    pass


# ---------------------------------------------------------------------- pure parts


def cluster_vectors(vectors: np.ndarray, threshold: float) -> list[list[int]]:
    """Greedy centroid clustering: each vector joins the most similar cluster above `threshold`.

    Episodes arrive in time order; a handful per topic and a few hundred per run make this
    O(n·k) pass both enough and deterministic, with no cluster count to choose.
    """
    if len(vectors) == 0:
        return []
    u = unit(vectors)
    sums: list[np.ndarray] = []
    members: list[list[int]] = []
    for i, v in enumerate(u):
        best, best_sim = -1, threshold
        for c, s in enumerate(sums):
            sim = float(s @ v) / max(float(np.linalg.norm(s)), 1e-9)
            if sim >= best_sim:
                best, best_sim = c, sim
        if best < 0:
            sums.append(v.copy())
            members.append([i])
        else:
            sums[best] = sums[best] + v
            members[best].append(i)
    return members


def score(evidence: int, authors: int, confidence: float) -> float:
    """More episodes and more distinct people make a claim more likely to be team knowledge."""
    return round(0.5 * min(1.0, evidence / 5) + 0.3 * min(1.0, authors / 3) + 0.2 * confidence, 3)


def parse_draft(
    content: str | None, schema: dict[str, Any], shown_ids: set[str], n_episodes: int
) -> list[dict]:
    """Strict: the text must be one JSON object matching the schema; nothing is repaired."""
    if not content:
        raise InvalidOutput("empty answer")
    try:
        doc = json.loads(content)
    except json.JSONDecodeError as e:
        raise InvalidOutput(f"not JSON: {e.msg}") from None
    try:
        jsonschema.validate(doc, schema)
    except jsonschema.ValidationError as e:
        raise InvalidOutput(f"schema: {e.message[:200]}") from None
    for p in doc["proposals"]:
        if p.get("supersedes") and p["supersedes"] not in shown_ids:
            raise InvalidOutput("supersedes names a memory that was not shown, or not of this namespace")
        if any(i > n_episodes for i in p["evidence"]):
            raise InvalidOutput("evidence cites an episode that does not exist")
    return list(doc["proposals"])


def render_request(cluster: Cluster, related: list[dict[str, Any]]) -> str:
    doc = {
        "episodes": [
            {"n": i + 1, "kind": e.kind, "title": e.title[:200], "body": e.body[:1500]}
            for i, e in enumerate(cluster.episodes[:30])
        ],
        "unanswered_questions": [q.text[:300] for q in cluster.queries[:20]],
        "existing_memories": [
            {"id": r["id"], "title": r["title"], "body": r["body"][:1500]} for r in related
        ],
    }
    return json.dumps(doc, ensure_ascii=False, indent=1)


# ---------------------------------------------------------------------- LLM


class LLM:
    """litellm with our own retry loop: transient or not, a failed call is retried with backoff."""

    def __init__(self, cfg: DistillConfig) -> None:
        self.cfg = cfg
        self.errors = 0

    async def complete(self, system: str, user: str) -> str | None:
        import litellm

        last: Exception | None = None
        model = (
            self.cfg.model if "/" in self.cfg.model and not self.cfg.api_base else f"openai/{self.cfg.model}"
        )
        for attempt in range(self.cfg.attempts):
            try:
                resp = await litellm.acompletion(
                    model=model,
                    api_base=self.cfg.api_base,
                    api_key=self.cfg.api_key or "none",
                    messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                    temperature=0,
                    response_format={"type": "json_object"},
                    timeout=self.cfg.timeout_s,
                    num_retries=0,
                    extra_headers={"x-brain-memory": "off"},
                )
                return resp.choices[0].message.content
            except Exception as e:
                self.errors += 1
                last = e
                log.warning("distill model call failed (attempt %d/%d): %s", attempt + 1, self.cfg.attempts,
                            type(e).__name__)  # fmt: skip
                if attempt + 1 < self.cfg.attempts:
                    await asyncio.sleep(self.cfg.backoff_s * (2**attempt))
        raise ProviderDown(f"{type(last).__name__}: {str(last)[:200]}")


# ---------------------------------------------------------------------- stages


async def collect(
    store: Store, embedder: Embedder, cfg: DistillConfig
) -> tuple[list[Episode], list[Query], int]:
    rows = await episode_rows.unproposed(store, EPISODE_KINDS, cfg.lookback_days, cfg.max_episodes)
    sessions = await episode_rows.capture_sessions(store, cfg.lookback_days)
    stored_by: dict[str, int] = {}
    for s in sessions:
        payload = json.loads(s["payload"]) if isinstance(s["payload"], str) else s["payload"]
        for st in payload.get("stored") or []:
            if isinstance(st, dict) and st.get("id"):
                stored_by[st["id"]] = s["id"]
    missing = [i for i, r in enumerate(rows) if r["embedding"] is None]
    extra: Any = (
        await embedder.embed([embed_text(rows[i]["title"], rows[i]["body"]) for i in missing])
        if missing
        else []
    )
    vecs: dict[int, np.ndarray] = {
        i: np.asarray(v, dtype=np.float32) for i, v in zip(missing, extra, strict=True)
    }
    episodes = [
        Episode(r["id"], r["kind"], r["namespace"], r["title"], r["body"], r["author"],
                vecs[i] if i in vecs else as_vector(r["embedding"]),  # type: ignore[arg-type]
                stored_by.get(r["id"]))
        for i, r in enumerate(rows)
    ]  # fmt: skip
    since = await episode_rows.last_ok_distill(store)
    qrows = await episode_rows.no_hit_questions(store, since, cfg.lookback_days)
    queries = [Query(r["id"], r["namespace"] or "shared", r["q"], r["key_name"]) for r in qrows if r["q"]]
    if queries:
        qv = await embedder.embed([q.text for q in queries])
        for q, v in zip(queries, qv, strict=True):
            q.vector = np.asarray(v, dtype=np.float32)
    return episodes, queries, len(sessions)


def make_clusters(
    episodes: list[Episode], queries: list[Query], threshold: float
) -> tuple[list[Cluster], int]:
    """Clusters per namespace (a proposal never mixes namespaces); queries join the nearest one."""
    clusters: list[Cluster] = []
    by_ns: dict[str, list[Episode]] = {}
    for e in episodes:
        by_ns.setdefault(e.namespace, []).append(e)
    for ns, eps in by_ns.items():
        for members in cluster_vectors(np.stack([e.vector for e in eps]), threshold):
            clusters.append(Cluster(ns, [eps[i] for i in members]))
    gaps = 0
    for q in queries:
        cands = [c for c in clusters if c.namespace == q.namespace]
        if q.vector is None or not cands:
            gaps += 1
            continue
        qv = unit(q.vector[None, :])[0]
        sims = [float(c.centroid() @ qv) for c in cands]
        best = int(np.argmax(sims))
        if sims[best] >= threshold:
            cands[best].queries.append(q)
        else:
            gaps += 1
    return clusters, gaps


async def _model_is_live(store: Store) -> bool:
    """Vectors are compared only within one model: a distill run on another model compares nothing."""
    return await store.model_is_live()


async def related_memories(store: Store, cluster: Cluster, limit: int = 3) -> list[dict[str, Any]]:
    if not await _model_is_live(store):
        return []
    rows = await episode_rows.curated_near(
        store, cluster.centroid(), list({cluster.namespace, "shared"}), limit
    )
    return [r for r in rows if r["sim"] >= 0.35]


async def nearest_similarity(store: Store, vec: np.ndarray, namespace: str, exclude: str | None) -> float:
    if not await _model_is_live(store):
        return 0.0
    sim = await episode_rows.nearest_curated_similarity(store, vec, list({namespace, "shared"}), exclude)
    return float(sim or 0.0)


async def run_distill(
    store: Store, embedder: Embedder, cfg: DistillConfig, llm: LLM | None = None
) -> DistillSummary:
    llm = llm or LLM(cfg)
    system, schema = load_prompt()
    out = DistillSummary()
    episodes, queries, out.sessions = await collect(store, embedder, cfg)
    out.episodes, out.queries = len(episodes), len(queries)
    clusters, out.gaps = make_clusters(episodes, queries, cfg.cluster_similarity)
    out.clusters = len(clusters)
    pending = await proposal_rows.pending_texts(store)
    pending_vecs = (
        unit(await embedder.embed([embed_text(p["title"], p["body"]) for p in pending])) if pending else None
    )
    ready = []
    for c in clusters:
        if len(c.episodes) < cfg.min_evidence or len({e.author for e in c.episodes}) < cfg.min_authors:
            out.gated += 1
        else:
            ready.append(c)
    ready.sort(key=lambda c: (-len(c.episodes), -len(c.authors)))
    for i, c in enumerate(ready[: cfg.max_clusters]):
        related = await related_memories(store, c)
        try:
            content = await llm.complete(system, render_request(c, related))
        except ProviderDown as e:
            out.deferred = True
            out.deferred_clusters = len(ready[: cfg.max_clusters]) - i
            out.error = str(e)
            break
        finally:
            out.provider_errors = llm.errors
        # Shown for context: the cluster's namespace and `shared`. Supersedable: the cluster's own only,
        # so a repo's episodes can never rewrite what the whole team reads (an owner notes that).
        shown = {r["id"]: r for r in related if r["namespace"] == c.namespace}
        try:
            drafts = parse_draft(content, schema, set(shown), len(c.episodes))
        except InvalidOutput as e:
            out.invalid += 1
            log.info("discarded invalid draft: %s", e)
            continue
        out.drafted += len(drafts)
        for d in drafts:
            text = f"{d['title']}\n{d['body']}"
            try:  # the proposals door's screening, before the draft's text goes to the embedder
                proposals.screen_draft(
                    kind=d["kind"], namespace=c.namespace, title=d["title"], body=d["body"]
                )
            except BrainError as e:
                out.reject(e.code)
                continue
            except ValueError:
                out.reject("invalid")
                continue
            vec = unit(await embedder.embed([text]))[0]
            sup = d.get("supersedes") or None
            if await nearest_similarity(store, vec, c.namespace, sup) >= cfg.duplicate_similarity:
                out.duplicates += 1
                continue
            if pending_vecs is not None and float(np.max(pending_vecs @ vec)) >= cfg.duplicate_similarity:
                out.duplicates += 1
                continue
            cited = [c.episodes[n - 1] for n in sorted(set(d["evidence"]))]
            evidence: list[dict[str, Any]] = [
                {"type": "episode", "memory_id": e.id, "author": e.author, "kind": e.kind, "title": e.title[:200],
                 "session": e.session, "cited": e in cited}
                for e in c.episodes
            ]  # fmt: skip
            evidence += [
                {"type": "query", "event_id": q.event_id, "key": q.key, "query": q.text[:300]}
                for q in c.queries
            ]
            if sup:
                evidence.append(
                    {
                        "type": "supersedes",
                        "memory_id_current": sup,
                        "content_hash": shown[sup]["content_hash"],
                    }
                )
                out.conflicts += 1
            await proposals.create(
                store,
                kind=d["kind"],
                namespace=c.namespace,
                title=d["title"],
                body=d["body"],
                evidence=evidence,
                authors=c.authors,
                score=score(len(c.episodes), len(c.authors), float(d["confidence"])),
                supersedes=sup,
            )
            pending_vecs = vec[None, :] if pending_vecs is None else np.vstack([pending_vecs, vec[None, :]])
            out.proposals += 1
    return out


async def main_async(args: argparse.Namespace, settings: JobSettings, cfg: DistillConfig) -> int:
    if args.model:
        cfg = DistillConfig(**{**cfg.__dict__, "model": args.model})
    async with job_env(settings, args.dsn) as env:
        run_id = await start_run(env.store, "distill")
        try:
            summary = await run_distill(env.store, env.embedder, cfg)
        except Exception as e:
            await finish_run(env.store, run_id, "failed", {"error": f"{type(e).__name__}: {e}"})
            raise
        status = "deferred" if summary.deferred else "ok"
        await finish_run(env.store, run_id, status, summary.as_dict())
    if summary.deferred:
        print(f"distill: deferred — the model provider failed ({summary.error}); "
              f"{summary.deferred_clusters} cluster(s) wait for the next run", file=sys.stderr)  # fmt: skip
    emit(summary.as_dict())
    return 0


@traced("distill")
def main(argv: list[str] | None = None) -> int:
    settings, cfg = load_job_settings(), load_distill_config()
    setup_logging(settings)
    p = argparse.ArgumentParser(prog="python -m brain.jobs.distill", description=__doc__.splitlines()[0])
    p.add_argument("--dsn", default=None, help="Postgres DSN (default: BRAIN_DATABASE_URL)")
    p.add_argument("--model", default=None, help="model name at the gateway (default: BRAIN_DISTILL_MODEL)")
    args = p.parse_args(argv)
    try:
        return asyncio.run(main_async(args, settings, cfg))
    except Exception as e:
        print(f"distill: failed: {type(e).__name__}: {e}", file=sys.stderr)
        emit({"error": f"{type(e).__name__}: {e}", "proposals": 0})
        return 1


if __name__ == "__main__":
    sys.exit(main())
