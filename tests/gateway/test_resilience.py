"""Never break the agent: with the embedder, the database or retrieval gone, every request still succeeds."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import uuid
from collections.abc import Iterator

import asyncpg

from tests.kit.poll import until

from .conftest import Gateway, metric


async def _health(gw: Gateway) -> dict[str, object]:
    r = await gw.rest("GET", "/health")
    assert r.status_code == 200
    return dict(r.json())


async def test_embedder_stopped_requests_succeed_on_keywords(gw: Gateway, ns: str) -> None:
    r = await gw.rest(
        "POST",
        "/memories",
        json={"body": "The flux capacitor config lives in FLUXCAP_CONFIG_PATH.", "namespace": ns},
    )
    assert r.status_code == 201
    before = metric(await gw.metrics(), "brain_retrieval_degraded_total")
    await gw.embedder_server.stop()
    try:
        for stream in (False, True):
            r = await gw.chat(
                f"where does FLUXCAP_CONFIG_PATH point? {uuid.uuid4().hex[:6]}",
                stream=stream,
                headers={"x-brain-namespaces": ns},
            )
            assert r.status_code == 200, r.text
            # the keyword legs still find the entry
            assert "FLUXCAP_CONFIG_PATH" in json.dumps(gw.upstream_bodies()[-1]["messages"][0])
            if not stream:  # the caller is told what retrieval ran without (benches count it, #33)
                assert r.headers["x-brain-memory"] == "injected"
                assert "embedder_down" in r.headers["x-brain-memory-degraded"].split(","), r.headers
        assert metric(await gw.metrics(), "brain_retrieval_degraded_total") > before
        assert (await _health(gw))["embedder"] == "down"
    finally:
        await gw.embedder_server.start()


@contextlib.contextmanager
def _hung_port(port: int) -> Iterator[None]:
    """What a stopped embedder process (SIGSTOP, a frozen node) looks like from the gateway: the
    kernel still completes connections into the listen backlog, and nothing ever answers."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    try:
        yield
    finally:
        sock.close()


async def test_a_hung_embedder_opens_the_breaker_so_later_questions_do_not_wait_for_it(
    gw: Gateway, ns: str
) -> None:
    # Retrieval cancels a question's embedding at its deadline, before the client's own timeout, so
    # a hung embedder was never counted as failing: every question waited out the deadline
    # ("timeout"), however long it stayed hung. Counted now, the breaker opens after three, and the
    # questions after them are answered by the keyword legs without trying ("embedder_down").
    r = await gw.rest(
        "POST", "/memories", json={"body": "The drill reads HUNGDRILL_LEVEL from the env.", "namespace": ns}
    )
    assert r.status_code == 201

    async def whole() -> bool:  # the embedder answers and its breaker is closed (no earlier test's left open)
        r = await gw.chat(
            f"what sets HUNGDRILL_LEVEL? {uuid.uuid4().hex[:6]}", headers={"x-brain-namespaces": ns}
        )
        return r.status_code == 200 and "x-brain-memory-degraded" not in r.headers

    await until("a question answered with its embedding", whole)
    before = metric(await gw.metrics(), "brain_retrieval_degraded_total", cause="embedder_down")
    await gw.embedder_server.stop()
    causes = []
    try:
        with _hung_port(gw.embedder_server.port):
            for _ in range(6):
                r = await gw.chat(
                    f"what sets HUNGDRILL_LEVEL? {uuid.uuid4().hex[:6]}", headers={"x-brain-namespaces": ns}
                )
                assert r.status_code == 200, r.text
                assert r.headers["x-brain-memory"] == "injected"  # the keyword legs still find it
                causes.append(r.headers["x-brain-memory-degraded"])
    finally:
        await gw.embedder_server.start()
    # at most three waited (another call through the same client may have counted first), the
    # rest did not try
    assert set(causes) <= {"timeout", "embedder_down"}, causes
    assert 1 <= causes.count("timeout") <= 3 and causes[-3:] == ["embedder_down"] * 3, causes
    assert metric(await gw.metrics(), "brain_retrieval_degraded_total", cause="embedder_down") >= before + 3
    # and it closes again once the embedder answers (the breaker tries one call after 10 s)
    await until("the breaker to close once the embedder is back", whole, timeout=60)


async def test_an_entry_written_while_the_embedder_is_away_is_found_by_meaning_once_it_is_back(
    gw: Gateway, ns: str
) -> None:
    # Stored without a vector while the embedder is stopped (the write still succeeds); the question
    # shares no content word with it, so only the vector leg can ever find it: the gateway must embed
    # the entry itself once the embedder answers again (brain.gateway.mend), not wait for a reindex.
    before = metric(await gw.metrics(), "brain_gateway_vectors_mended_total")
    await gw.embedder_server.stop()
    try:
        r = await gw.rest(
            "POST",
            "/memories",
            json={
                "body": "The nightly settlement batch runs at 02:00 UTC on the payments cluster.",
                "namespace": ns,
            },
        )
        assert r.status_code == 201, r.text
        entry = r.json()["id"]
    finally:
        await gw.embedder_server.start()

    async def served_by_meaning() -> dict[str, str] | None:
        r = await gw.chat(
            "At what hour does the overnight money reconciliation start?", headers={"x-brain-namespaces": ns}
        )
        assert r.status_code == 200, r.text
        said = {k: v for k, v in r.headers.items() if k.startswith("x-brain-memory")}
        return said if entry in said.get("x-brain-memory-ids", "") else None

    said = await until("the entry written while the embedder was away to be served", served_by_meaning)
    assert "x-brain-memory-degraded" not in said, said  # found with the whole retrieval, not by keywords
    assert metric(await gw.metrics(), "brain_gateway_vectors_mended_total") > before


async def test_an_entry_longer_than_the_embedder_takes_is_stored_with_its_vector(
    gw: Gateway, ns: str
) -> None:
    # A body may hold 32,768 characters, the embedder takes 8,192 per input: the text is cut before
    # it is embedded (the model reads its first few hundred word pieces anyway). Before, the embedder
    # refused it with a 413 on every try, the door's and the mend's, and the entry kept no vector for
    # good (and the mend, taking the oldest missing rows first, retried that batch for ever).
    runbook = "Invoices are archived to cold storage after seven years. " * 170  # a pasted log, say
    assert len(runbook) > 9000
    r = await gw.rest("POST", "/memories", json={"body": runbook, "namespace": ns})
    assert r.status_code == 201, r.text
    vector = await gw.store.pool_for_tests.fetchval(
        "SELECT embedding IS NOT NULL FROM memories WHERE id = $1", r.json()["id"]
    )
    assert vector is True


async def test_retrieval_timeout_sends_the_request_without_memory(gw: Gateway, ns: str) -> None:
    before = metric(await gw.metrics(), "brain_retrieval_degraded_total", cause="timeout")
    conn = await asyncpg.connect(gw.dsn)
    try:
        tx = conn.transaction()
        await tx.start()
        await conn.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")  # every retrieval leg now waits
        r = await gw.chat(
            f"anything about the deploy pipeline {uuid.uuid4().hex[:6]}?", headers={"x-brain-namespaces": ns}
        )
        assert r.status_code == 200 and r.headers["x-brain-memory"] == "degraded"
        assert r.headers["x-brain-memory-degraded"] == "timeout"
        assert [m["role"] for m in gw.upstream_bodies()[-1]["messages"]] == ["user"]
        await tx.rollback()
    finally:
        await conn.close()
    assert metric(await gw.metrics(), "brain_retrieval_degraded_total", cause="timeout") == before + 1


async def test_postgres_stopped_requests_succeed_and_memory_returns(gw: Gateway, ns: str) -> None:
    fact = "The nightly settlement batch runs at 02:00 UTC on the payments cluster."
    # An embedder another test restarted may still be behind its circuit breaker: a fact written then
    # is stored without a vector (embedded later by reindex), and after the outage only the keyword
    # legs could find it. That was this test failing after the others in this file, not the outage.
    for _ in range(100):
        if (await _health(gw))["embedder"] == "ok":
            break
        await asyncio.sleep(0.2)
    r = await gw.rest("POST", "/memories", json={"body": fact, "namespace": ns})
    assert r.status_code == 201
    assert (
        await gw.chat("when does the settlement batch run?", headers={"x-brain-namespaces": ns})
    ).status_code == 200
    from brain.services.keys import KeyStore

    fresh, _ = await KeyStore(gw.store).create(f"fresh-{ns}", "agent", namespaces=[ns])  # never used yet
    await gw.store.close()
    await asyncio.to_thread(gw.pg.stop, False)  # keep the data: it comes back below
    try:
        # A good key the gateway has not seen cannot be checked: "retry" (503), never "bad key" (401).
        r = await gw.chat("when does the settlement batch run?", key=fresh)
        assert r.status_code == 503, r.text
        assert "retry" in r.text
        r = await gw.rest("GET", "/search", key=fresh, params={"q": "settlement"})
        assert r.status_code == 503 and r.json()["code"] == "key_store_unavailable", r.text
        for i, stream in enumerate((False, True, False)):
            r = await gw.chat(
                f"when does the nightly settlement batch run? ({i})",
                stream=stream,
                headers={"x-brain-namespaces": ns},
            )
            assert r.status_code == 200, r.text
            assert r.headers.get("x-brain-memory", "degraded") == "degraded"
        r = await gw.messages(
            "when does the nightly settlement batch run? (messages)", headers={"x-brain-namespaces": ns}
        )
        assert r.status_code == 200, r.text
        assert (await _health(gw))["database"] == "down"
        r = await gw.rest("GET", "/search", params={"q": "settlement"})
        assert r.status_code == 503 and r.json()["code"] == "unavailable"
    finally:
        await asyncio.to_thread(gw.pg.start)
        from brain.store import Store

        gw.store = await Store.open(gw.dsn, dim=384)
    for _ in range(50):
        if (await _health(gw))["database"] == "ok":
            break
        await asyncio.sleep(0.2)
    for attempt in range(20):  # the pool replaces its dead connections as they are used
        r = await gw.chat(
            f"when does the nightly settlement batch run? (back {attempt})",
            headers={"x-brain-namespaces": ns},
        )
        assert r.status_code == 200
        if r.headers.get("x-brain-memory") == "injected":
            break
        await asyncio.sleep(0.2)
    assert r.headers["x-brain-memory"] == "injected" and fact in json.dumps(gw.upstream_bodies()[-1]), (
        {k: v for k, v in r.headers.items() if k.startswith("x-brain")},
        attempt,
    )


async def test_stalled_stream_gets_heartbeats_and_completes(gw: Gateway) -> None:
    gw.script({"stall_s": 1.5, "content": "slow but steady answer"})
    r = await gw.chat("think hard", stream=True, headers={"x-brain-memory": "off"})
    assert r.status_code == 200
    assert r.text.startswith(": heartbeat\n\n") and r.headers.get("x-brain-heartbeat") == "early"
    assert "slow " in r.text and r.text.rstrip().endswith("data: [DONE]")
    assert metric(await gw.metrics(), "brain_sse_heartbeats_total") >= 1


async def test_upstream_failure_after_heartbeats_arrives_as_an_sse_error(gw: Gateway) -> None:
    gw.script({"delay_s": 1.5, "status": 500, "times": -1})  # every retry fails too
    r = await gw.chat("this will fail upstream", stream=True, headers={"x-brain-memory": "off"})
    assert r.status_code == 200 and ": heartbeat" in r.text
    events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    assert events and "error" in events[-1]


async def test_a_retried_upstream_failure_still_says_what_memory_the_reply_was_given(
    gw: Gateway, ns: str
) -> None:
    """LiteLLM's router retries a failed attempt (twice by default) and logs each failure; when that
    log ended the call, the retry's 200 went out with no x-brain-memory at all (3 of 200 replies in
    the 50-client test on the real node, where the fake upstream's pod was short of CPU)."""
    r = await gw.rest(
        "POST", "/memories", json={"body": "The ledger service listens on port 7443.", "namespace": ns}
    )
    assert r.status_code == 201, r.text
    sent = len(gw.upstream_bodies())
    gw.script({"match": "ledger", "status": 503})  # the first attempt only
    r = await gw.chat("which port does the ledger service listen on?", headers={"x-brain-namespaces": ns})
    assert r.status_code == 200, r.text
    assert r.headers.get("x-litellm-attempted-retries") == "1" and len(gw.upstream_bodies()) - sent == 2
    assert r.headers.get("x-brain-memory") == "injected", dict(r.headers)
    assert "7443" in json.dumps(gw.upstream_bodies()[-1]["messages"])


async def test_non_streaming_requests_pass_through_untouched(gw: Gateway) -> None:
    gw.script({"delay_s": 1.0, "content": "late but fine, and long enough to say something"})
    r = await gw.chat("slow non-stream", headers={"x-brain-memory": "off"})
    assert r.status_code == 200 and "x-brain-heartbeat" not in r.headers
    assert r.json()["choices"][0]["message"]["content"].startswith("late but fine")


async def test_a_hanging_database_does_not_hold_requests(gw: Gateway, ns: str) -> None:
    """Postgres stops answering (SIGSTOP) instead of refusing: every request still completes during the
    outage, chat within its retrieval budget without memory, REST with a 503; memory returns after."""
    fact = "The quarterly ledger reconciliation runs on the first Monday of the quarter."
    r = await gw.rest("POST", "/memories", json={"body": fact, "namespace": ns})
    assert r.status_code == 201
    h = {"x-brain-namespaces": ns}
    r = await gw.chat("when does the ledger reconciliation run?", headers=h)
    assert r.headers["x-brain-memory"] == "injected"
    m = await gw.metrics()
    before = {c: metric(m, "brain_retrieval_degraded_total", cause=c) for c in ("timeout", "db_down")}
    frozen = True

    def thaw() -> None:
        nonlocal frozen
        frozen = False
        gw.pg.thaw()

    gw.pg.freeze()
    safety = asyncio.get_running_loop().call_later(40, thaw)  # the test fails, rather than hangs, on a bug
    try:
        answers = await asyncio.gather(
            *(gw.chat(f"when does the ledger reconciliation run? ({i})", headers=h) for i in range(4)),
            gw.chat("when does the ledger reconciliation run? (stream)", stream=True, headers=h),
            gw.messages("when does the ledger reconciliation run? (messages)", headers=h),
        )
        chats_done_while_frozen = frozen
        # Once a probe found the database hung, requests skip retrieval instead of each waiting the budget.
        for _ in range(50):
            if (
                metric(await gw.metrics(), "brain_retrieval_degraded_total", cause="db_down")
                > before["db_down"]
            ):
                break
            await gw.chat("when does the ledger reconciliation run? (later)", headers=h)
        search = await gw.rest("GET", "/search", params={"q": "ledger reconciliation", "namespace": ns})
        rest_done_while_frozen = frozen
    finally:
        safety.cancel()
        thaw()
    assert chats_done_while_frozen and rest_done_while_frozen
    for a in answers:
        assert a.status_code == 200, a.text
        # (a stream that already sent heartbeats has no room left for the header)
        assert a.headers.get("x-brain-memory", "degraded") == "degraded"
    assert search.status_code == 503 and search.json()["code"] == "unavailable"
    m = await gw.metrics()
    assert metric(m, "brain_retrieval_degraded_total", cause="timeout") > before["timeout"]
    assert metric(m, "brain_retrieval_degraded_total", cause="db_down") > before["db_down"]
    for attempt in range(50):  # the pool opens fresh connections; the cached answer is not reused
        r = await gw.chat(f"when does the ledger reconciliation run? (back {attempt})", headers=h)
        if r.headers.get("x-brain-memory") == "injected":
            break
        await asyncio.sleep(0.2)
    assert r.headers["x-brain-memory"] == "injected" and fact in json.dumps(gw.upstream_bodies()[-1]), (
        {k: v for k, v in r.headers.items() if k.startswith("x-brain")},
        attempt,
    )
