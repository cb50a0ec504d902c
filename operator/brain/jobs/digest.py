"""`python -m brain.jobs.digest`: weekly practice signals, with privacy by projection.

`aggregate` receives `Signal`s only. `Signal` has no key, author, namespace or model field, so the
aggregation (and the Markdown it renders) cannot name who did what, where, or with which model:
that is structural, not a policy someone must remember. `project_*` are the only functions that
read raw rows, and they drop identities as they build signals. No-hit queries pass the secret gate
in redact mode before they become signals.

Signals: outcome mix of captured experiences, retrieval hit rate (captures that had memory
injected vs. no-hit queries), top no-hit queries, proposal acceptance rate and time to decision,
proposals still waiting for an owner (the oldest first, by title and age: nothing waits unseen),
stale memories (never retrieved in N days), growth by kind, and the memories an owner retracted
(retired, forgot or purged) in the week with how many conversations had been given each (the exposure
receipts, brain.gateway.retractions).

One digest per namespace, stored in that namespace (one lineage per namespace and ISO week: a rerun
supersedes), from that namespace's rows only: a question any key left unanswered reaches the digest of
the namespace its event was recorded in (the key's own), never a digest other teams' agents retrieve.
The figures over all namespaces set the digest gauges and are the job's summary; that summary names no
namespace.

Written text in a digest is quoted, not rendered: each question and proposal title is one line (its
whitespace, newlines included, folded to spaces) inside a Markdown code span, so a question cannot add
a heading, a bullet or a link to the report. An instruction-shaped one is withheld (`_listable`).

A digest is written by `DIGEST_ACTOR` (origin `import`, the identity only this job has, so "the
latest digest" is its own) and stored in the *episodic* tier, never curated: the door decides that
by kind (`services.memory.tier_for`), since a digest quotes text that any key can leave, and curated
entries are the standing facts every session starts with.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from brain.core import lint
from brain.core.models import Actor, MemoryIn
from brain.core.redact import SecretGate
from brain.jobs.common import emit, finish_run, job_env, setup_logging, start_run, traced
from brain.jobs.settings import JobSettings, load_job_settings
from brain.services.digests import set_metrics
from brain.store import digest_rows, exposure_rows
from brain.store.store import Store, content_hash

SignalType = Literal["outcome", "retrieval", "no_hit", "proposal", "pending", "stale", "created", "retracted"]
# origin `import`: the identity only the digest job has (services.memory.may_write_kind); the door
# stores kind digest in the episodic tier whoever writes it (services.memory.tier_for)
DIGEST_ACTOR = Actor(name="digest", role="agent", origin="import")
IDENTITY_FIELDS = frozenset({"key", "key_name", "author", "namespace", "model", "actor", "session", "repo"})


@dataclass(frozen=True, slots=True)
class Signal:
    """One anonymous fact. Deliberately no key / author / namespace / model field."""

    ev: SignalType
    at: datetime
    label: str = ""  # outcome name, memory kind, redacted query text, proposal decision or title
    value: float = 0.0  # hours to decision, hours waiting, 1.0 for a hit, ...


@dataclass
class DigestStats:
    week: str
    start: datetime
    end: datetime
    outcomes: dict[str, int] = field(default_factory=dict)
    hits: int = 0
    no_hits: int = 0
    top_no_hit: list[tuple[str, int]] = field(default_factory=list)
    approved: int = 0
    rejected: int = 0
    median_hours_to_decision: float | None = None
    pending: int = 0
    waiting: list[tuple[str, float]] = field(default_factory=list)  # (title, days waiting), oldest first
    stale_by_kind: dict[str, int] = field(default_factory=dict)
    growth_by_kind: dict[str, int] = field(default_factory=dict)
    # (memory id, what the owner did, the reason), conversations given it: the week's retractions
    retracted: list[tuple[str, int]] = field(default_factory=list)

    @property
    def hit_rate(self) -> float | None:
        total = self.hits + self.no_hits
        return round(self.hits / total, 4) if total else None

    @property
    def acceptance_rate(self) -> float | None:
        total = self.approved + self.rejected
        return round(self.approved / total, 4) if total else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "week": self.week,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "outcomes": self.outcomes,
            "hits": self.hits,
            "noHits": self.no_hits,
            "hitRate": self.hit_rate,
            "topNoHitQueries": [{"query": q, "count": n} for q, n in self.top_no_hit],
            "approved": self.approved,
            "rejected": self.rejected,
            "acceptanceRate": self.acceptance_rate,
            "medianHoursToDecision": self.median_hours_to_decision,
            "pendingProposals": self.pending,
            "oldestPendingDays": self.waiting[0][1] if self.waiting else None,
            "waitingProposals": [{"title": t, "days": d} for t, d in self.waiting],
            "staleByKind": self.stale_by_kind,
            "growthByKind": self.growth_by_kind,
            "retracted": [{"memory": m, "conversations": n} for m, n in self.retracted],
        }


# ---------------------------------------------------------------------- pure aggregation


def aggregate(signals: Iterable[Signal], start: datetime, end: datetime, top: int = 10) -> DigestStats:
    """The week's figures. Pending proposals count whenever they were drafted: waiting is waiting."""
    week = f"{start.isocalendar().year}-W{start.isocalendar().week:02d}"
    st = DigestStats(week=week, start=start, end=end)
    no_hit: Counter[str] = Counter()
    hours: list[float] = []
    outcomes: Counter[str] = Counter()
    stale: Counter[str] = Counter()
    growth: Counter[str] = Counter()
    waiting: list[tuple[str, float]] = []
    retracted: list[tuple[str, int]] = []
    for s in signals:
        if s.ev == "stale":
            stale[s.label] += 1
            continue
        if s.ev == "pending":
            waiting.append((s.label, round(s.value / 24, 1)))
            continue
        if not (start <= s.at < end):
            continue
        if s.ev == "outcome":
            outcomes[s.label] += 1
        elif s.ev == "retrieval":
            st.hits += 1
        elif s.ev == "no_hit":
            st.no_hits += 1
            no_hit[s.label.strip().lower()[:120]] += 1
        elif s.ev == "proposal":
            if s.label == "approved":
                st.approved += 1
            else:
                st.rejected += 1
            hours.append(s.value)
        elif s.ev == "created":
            growth[s.label] += 1
        elif s.ev == "retracted":
            retracted.append((s.label, int(s.value)))
    st.outcomes = dict(outcomes.most_common())
    st.top_no_hit = no_hit.most_common(top)
    st.median_hours_to_decision = round(statistics.median(hours), 1) if hours else None
    st.stale_by_kind = dict(stale.most_common())
    st.growth_by_kind = dict(growth.most_common())
    st.pending = len(waiting)
    st.waiting = sorted(waiting, key=lambda w: (-w[1], w[0]))[:top]
    st.retracted = sorted(retracted, key=lambda r: (-r[1], r[0]))
    return st


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def render(st: DigestStats, stale_days: int) -> str:
    lines = [
        f"# Team brain digest {st.week}",
        "",
        f"{st.start:%Y-%m-%d} to {st.end:%Y-%m-%d}. Aggregates only: no key, author, namespace or model.",
        "",
        "## Retrieval",
        f"- Hit rate: {_pct(st.hit_rate)} ({st.hits} with memory, {st.no_hits} found nothing)",
        "",
        "## Outcome mix of captured experiences",
    ]
    lines += [f"- {k}: {v}" for k, v in st.outcomes.items()] or ["- none captured"]
    lines += ["", "## Top questions the brain could not answer"]
    lines += [f"- {n}× {quote_line(q)}" for q, n in st.top_no_hit] or ["- none"]
    lines += [
        "",
        "## Proposals",
        f"- Decided: {st.approved + st.rejected} ({st.approved} approved, {st.rejected} rejected); "
        f"acceptance {_pct(st.acceptance_rate)}",
        "- Median time to decision: "
        + ("n/a" if st.median_hours_to_decision is None else f"{st.median_hours_to_decision} h"),
        "",
        "## Waiting for an owner",
    ]
    if st.pending:
        shown = f", the {len(st.waiting)} oldest:" if st.pending > len(st.waiting) else ":"
        waits = "1 proposal waits" if st.pending == 1 else f"{st.pending} proposals wait"
        lines.append(f"- {waits} for a decision{shown}")
        lines += [f"  - {quote_line(title)} ({days:g} days)" for title, days in st.waiting]
        lines.append("- Decide them on the gateway's review page (`/review`, owner key).")
    else:
        lines.append("- none: every proposal has been decided")
    lines += [
        "",
        f"## Stale memories (never retrieved in {stale_days} days)",
    ]
    lines += [f"- {k}: {v}" for k, v in st.stale_by_kind.items()] or ["- none"]
    lines += ["", "## Growth by kind (new this week)"]
    lines += [f"- {k}: +{v}" for k, v in st.growth_by_kind.items()] or ["- no new entries"]
    lines += ["", "## Retracted by an owner this week (and how many conversations had been given each)"]
    lines += [
        f"- {quote_line(label)}: {n} conversation{'' if n == 1 else 's'}" for label, n in st.retracted
    ] or ["- none"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- projections (the only row readers)


WITHHELD = "«withheld: the question reads like instructions to an agent»"
MAX_QUOTED = 120


def one_line(text: str, limit: int = MAX_QUOTED) -> str:
    """`text` on one line: every whitespace run (newlines too) one space, cut to `limit` (pure)."""
    return " ".join(text.split())[:limit]


def quote_line(text: str) -> str:
    """Written text as a Markdown code span: shown as typed, never read as markup (pure).

    The span's backtick fence is longer than any run inside, and padded when the text starts or ends
    with a backtick (CommonMark strips one space on each side).
    """
    text = one_line(text)
    if text == WITHHELD:
        return text
    longest = max((len(r) for r in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _listable(query: str) -> str:
    """A no-hit question as the digest may list it, on one line. Any key can leave one, and the digest
    is a memory agents of its namespace read, so an instruction-shaped one is counted but not quoted
    (quoting it would also make the write door refuse the whole week's digest)."""
    query = one_line(query)
    return WITHHELD if lint.findings(query) else query


async def project_signals(
    store: Store, start: datetime, end: datetime, stale_days: int, namespace: str | None = None
) -> list[Signal]:
    """Rows (of one namespace) → anonymous signals. Identity columns are never selected."""
    gate = SecretGate("redact")
    out: list[Signal] = []
    for r in await digest_rows.events(store, start, end, namespace):
        p = r["payload"]
        if r["type"] == "query_no_hit":
            out.append(
                Signal("no_hit", r["created_at"], _listable(gate.check("query", str(p.get("query") or ""))))
            )
        elif p.get("injected"):
            out.append(Signal("retrieval", r["created_at"], value=1.0))
    for r in await digest_rows.created(store, start, end, namespace):
        out.append(Signal("created", r["created_at"], r["kind"]))
        if r["kind"] == "experience" and r["outcome"]:
            out.append(Signal("outcome", r["created_at"], r["outcome"]))
    for r in await digest_rows.decided(store, start, end, namespace):
        hrs = (r["decided_at"] - r["created_at"]).total_seconds() / 3600
        out.append(Signal("proposal", r["decided_at"], r["status"], round(hrs, 2)))
    for r in await digest_rows.pending(store, end, namespace):
        hrs = (end - r["created_at"]).total_seconds() / 3600
        title = _listable(gate.check("title", str(r["title"] or "untitled")))
        out.append(Signal("pending", r["created_at"], title, round(hrs, 2)))
    for r in await digest_rows.stale(store, stale_days, namespace):
        out.append(Signal("stale", end, r["kind"]))
    for r in await exposure_rows.retracted_between(store, start, end, namespace):
        reason = _listable(gate.check("reason", str(r["reason"] or "")))
        label = f"{r['memory_id']} {exposure_rows.ACTIONS.get(r['type'], r['type'])}: {reason}"
        out.append(Signal("retracted", r["at"], label, float(r["conversations"])))
    return out


def signal_fields() -> set[str]:
    return {f.name for f in fields(Signal)}


async def store_digest(
    store: Store,
    embedder: Any,
    stats: DigestStats,
    markdown: str,
    namespace: str,
    overall: dict[str, Any] | None = None,
) -> str:
    """One entry per namespace and ISO week, in that namespace; a rerun supersedes it (history kept)."""
    from brain.services.memory import MemoryService

    svc = MemoryService(store, embedder)
    key = f"digest:{namespace}:{stats.week}"
    item = MemoryIn(
        kind="digest",
        namespace=namespace,
        title=f"Team brain digest {stats.week}",
        body=markdown,
        attrs={"stats": stats.as_dict(), **({"overall": overall} if overall is not None else {})},
        source_key=key,
        importance=0.3,
    )
    current = await digest_rows.current(store, key)
    if current is None:
        return (await svc.note(item, DIGEST_ACTOR)).memory.id
    if current["content_hash"] == content_hash(markdown):
        return str(current["id"])
    return (await svc.supersede(current["id"], item, current["content_hash"], DIGEST_ACTOR)).id


async def run_digest(
    store: Store, embedder: Any, *, now: datetime | None = None, days: int = 7, stale_days: int = 30
) -> dict[str, Any]:
    """Each namespace's digest, stored in it; the summary (and the gauges) are the figures over all."""
    end = now or datetime.now(UTC)
    start = end - timedelta(days=days)
    overall = aggregate(await project_signals(store, start, end, stale_days), start, end)
    # counts only: the written text (questions, titles) stays in its own namespace's digest
    counts = {**overall.as_dict(), "topNoHitQueries": [], "waitingProposals": []}
    ids: list[str] = []
    spaces = {*await digest_rows.namespaces(store, start, end)}
    spaces |= {*await exposure_rows.retraction_namespaces(store, start, end)}
    for namespace in sorted(spaces):
        signals = await project_signals(store, start, end, stale_days, namespace)
        stats = aggregate(signals, start, end)
        md = render(stats, stale_days)
        ids.append(await store_digest(store, embedder, stats, md, namespace, counts))
    set_metrics(counts)
    return {"digests": ids, **counts}


async def main_async(args: argparse.Namespace, settings: JobSettings) -> int:
    async with job_env(settings, args.dsn) as env:
        run_id = await start_run(env.store, "digest")
        try:
            summary = await run_digest(env.store, env.embedder, days=args.days, stale_days=args.stale_days)
        except Exception as e:
            await finish_run(env.store, run_id, "failed", {"error": f"{type(e).__name__}: {e}"})
            raise
        await finish_run(env.store, run_id, "ok", summary)
    emit(summary)
    return 0


@traced("digest")
def main(argv: Sequence[str] | None = None) -> int:
    settings = load_job_settings()
    setup_logging(settings)
    p = argparse.ArgumentParser(prog="python -m brain.jobs.digest", description=__doc__.splitlines()[0])
    p.add_argument("--dsn", default=None, help="Postgres DSN (default: BRAIN_DATABASE_URL)")
    p.add_argument("--days", type=int, default=7, help="window length (default 7)")
    p.add_argument("--stale-days", type=int, default=30, help="never retrieved for this long = stale")
    args = p.parse_args(list(argv) if argv is not None else None)
    try:
        return asyncio.run(main_async(args, settings))
    except Exception as e:
        print(f"digest: failed: {type(e).__name__}: {e}", file=sys.stderr)
        emit({"error": f"{type(e).__name__}: {e}"})
        return 1


if __name__ == "__main__":
    sys.exit(main())
