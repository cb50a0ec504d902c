"""Nothing waits unseen: the gateway's public `/metrics` says how many proposals wait and for how
long, and carries the newest digest's figures, read from the database (the digest job exits before
any scrape). The fixture's gateway refreshes every 0.5 s (`BRAIN_BACKLOG_REFRESH_S`)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from brain.embedder import LocalEmbedder
from brain.gateway.backlog import Backlog, BacklogCollector
from brain.gateway.settings import refresh_interval
from brain.jobs.digest import run_digest
from brain.services import proposals

from .conftest import Gateway, metric

DAY = 86400.0


async def until(gw: Gateway, check: object, timeout: float = 15.0) -> str:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        text = await gw.metrics()
        if check(text):  # type: ignore[operator]
            return text
        if loop.time() > deadline:
            raise AssertionError(
                "the gauges never showed it:\n"
                + "\n".join(line for line in text.splitlines() if "proposals" in line or "digest" in line)
            )
        await asyncio.sleep(0.2)


async def test_pending_proposals_and_the_oldest_ones_age_are_on_public_metrics(gw: Gateway, ns: str) -> None:
    pid = await proposals.create(
        gw.store, kind="fact", namespace=ns, title="Old one", body="x", evidence=[], authors=["a"], score=0.1
    )
    await gw.store.pool_for_tests.execute(
        "UPDATE proposals SET created_at = $2 WHERE id = $1", pid, datetime.now(UTC) - timedelta(days=40)
    )
    pending = await gw.store.pool_for_tests.fetchval(
        "SELECT count(*) FROM proposals WHERE status = 'pending'"
    )
    text = await until(
        gw,
        lambda t: (
            metric(t, "brain_proposals_pending") == pending
            and metric(t, "brain_proposals_oldest_pending_age_seconds") >= 40 * DAY
        ),
    )
    assert "# TYPE brain_proposals_pending gauge" in text
    assert ns not in text  # no memory namespace on the public view
    r = await gw.rest("POST", f"/proposals/{pid}/reject", key="owner", json={"reason": "stale"})
    assert r.status_code == 200, r.text
    await until(
        gw,
        lambda t: (
            metric(t, "brain_proposals_pending") == pending - 1
            and metric(t, "brain_proposals_oldest_pending_age_seconds") < 40 * DAY
        ),
    )


async def test_the_newest_digests_figures_are_scraped_from_the_gateway(
    gw: Gateway, ns: str, embedder: LocalEmbedder
) -> None:
    for verdict in ("approve", "reject", "reject", "reject"):
        pid = await proposals.create(
            gw.store,
            kind="fact",
            namespace=ns,
            title=verdict,
            body=f"{verdict} {ns}",
            evidence=[],
            authors=["a"],
            score=0.1,
        )
        r = await gw.rest("POST", f"/proposals/{pid}/{verdict}", key="owner", json={"reason": "test"})
        assert r.status_code == 200, r.text
    summary = await run_digest(gw.store, embedder, now=datetime.now(UTC) + timedelta(seconds=1))
    want = summary["acceptanceRate"]
    assert want is not None and 0 < want < 1
    text = await until(gw, lambda t: metric(t, "brain_digest_proposal_acceptance_rate") == want)
    assert metric(text, "brain_digest_no_hit_queries") == summary["noHits"]


def test_no_sample_before_the_database_was_read_and_the_age_keeps_growing() -> None:
    latest: list[Backlog | None] = [None]
    clock = [1000.0]
    c = BacklogCollector(lambda: latest[0], clock=lambda: clock[0])
    assert [f.samples for f in c.collect()] == [[], []]  # unknown, not a reassuring 0
    latest[0] = Backlog(pending=2, oldest_created=400.0)
    assert [f.samples[0].value for f in c.collect()] == [2.0, 600.0]
    clock[0] += DAY
    assert [f.samples[0].value for f in c.collect()] == [2.0, 600.0 + DAY]
    latest[0] = Backlog(pending=0, oldest_created=None)
    assert [f.samples[0].value for f in c.collect()] == [0.0, 0.0]


def test_the_refresh_interval_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN_BACKLOG_REFRESH_S", "soon")
    with pytest.raises(ValueError, match="BRAIN_BACKLOG_REFRESH_S: a number of seconds"):
        refresh_interval()
    monkeypatch.setenv("BRAIN_BACKLOG_REFRESH_S", "0")
    with pytest.raises(ValueError, match="positive"):
        refresh_interval()
    monkeypatch.delenv("BRAIN_BACKLOG_REFRESH_S")
    assert refresh_interval() == 30.0


async def test_each_namespace_reads_its_own_digest_over_rest(
    gw: Gateway, ns: str, embedder: LocalEmbedder
) -> None:
    """One digest per namespace: `GET /digest/latest?namespace=` (owner) is that namespace's report."""
    other = ns + "-other"
    for where, question in ((ns, "where is the billing cron job\n# Heading"), (other, "who owns the ledger")):
        await gw.store.record_event(
            "query_no_hit", key_name="reader", namespace=where, payload={"query": question, "api": "openai"}
        )
    await run_digest(gw.store, embedder, now=datetime.now(UTC) + timedelta(seconds=1))
    r = await gw.rest("GET", "/digest/latest", key="owner", params={"namespace": ns})
    assert r.status_code == 200, r.text
    md = r.json()["markdown"]
    assert "`where is the billing cron job # heading`" in md and "ledger" not in md
    assert "\n# Heading" not in md
    r = await gw.rest("GET", "/digest/latest", key="agent", params={"namespace": ns})
    assert r.status_code == 403
