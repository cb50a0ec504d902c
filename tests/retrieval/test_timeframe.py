"""Time expressions in a question resolve to a window over valid_from (brain.retrieval.timeframe)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brain.core.models import Actor, MemoryIn
from brain.retrieval import RetrievalConfig, Retriever, telemetry
from brain.retrieval.timeframe import parse
from brain.services.memory import MemoryService
from brain.store import Scope
from tests.kit.embedders import DownEmbedder

NOW = datetime(2025, 6, 18, 15, 30, tzinfo=UTC)  # a Wednesday
# These tests are about ranking: a loaded machine must not drop the vector leg at the 300 ms budget.
SLOW_OK = RetrievalConfig(embed_timeout_s=10)


def d(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[arg-type,misc]


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what did we decide last week about retries?", d(2025, 6, 9), d(2025, 6, 16)),
        ("what changed this week", d(2025, 6, 16), NOW),
        ("what did we decide in May?", d(2025, 5, 1), d(2025, 6, 1)),
        # a month not yet reached this year means last year's
        ("what broke in September", d(2024, 9, 1), d(2024, 10, 1)),
        ("what did we ship in March 2024", d(2024, 3, 1), d(2024, 4, 1)),
        ("the outage in 2024", d(2024, 1, 1), d(2025, 1, 1)),
        ("what went wrong yesterday", d(2025, 6, 17), d(2025, 6, 18)),
        ("notes from last month", d(2025, 5, 1), d(2025, 6, 1)),
        ("last year's incidents", d(2024, 1, 1), d(2025, 1, 1)),
        ("anything in the last 3 days?", NOW - timedelta(days=3), NOW),
        ("what have we done since March", d(2025, 3, 1), None),
        ("what did we use before June 2025", None, d(2025, 6, 1)),
        ("what did we use after 2024", d(2025, 1, 1), None),
    ],
)
def test_expressions_resolve_to_windows(query: str, start: datetime | None, end: datetime | None) -> None:
    frame = parse(query, NOW)
    assert frame is not None, query
    assert (frame.start, frame.end) == (start, end)
    assert frame.anchor is None


def test_two_weeks_ago_is_a_window_around_that_day() -> None:
    frame = parse("what did Alice say two weeks ago", NOW)
    assert frame is not None and frame.start and frame.end
    assert frame.contains(NOW - timedelta(days=14))
    assert not frame.contains(NOW - timedelta(days=30)) and not frame.contains(NOW)


@pytest.mark.parametrize(
    ("query", "anchor", "relation"),
    [
        ("what did we use before Linear?", "Linear", "before"),
        ("how did deploys work before the migration", "the migration", "before"),
        ("what changed after the Postgres upgrade?", "the Postgres upgrade", "after"),
        ("which tracker did we have prior to Linear", "Linear", "before"),
    ],
)
def test_named_events_become_anchors(query: str, anchor: str, relation: str) -> None:
    frame = parse(query, NOW)
    assert frame is not None
    assert (frame.anchor, frame.relation, frame.start, frame.end) == (anchor, relation, None, None)


@pytest.mark.parametrize(
    "query",
    [
        "which port does the staging database use?",
        "may I deploy on Friday?",  # "may" the verb, not the month
        "run the tests before merging",  # an instruction, not a point in time
        "what do we do before that?",
        "write a haiku about autumn leaves",
        "what is the time complexity of quicksort?",
    ],
)
def test_questions_without_time_have_no_frame(query: str) -> None:
    assert parse(query, NOW) is None


@given(st.text(max_size=200), st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)))
def test_any_text_parses_without_error_and_windows_are_ordered(text: str, now: datetime) -> None:
    frame = parse(text, now)
    if frame is not None and frame.start is not None and frame.end is not None:
        assert frame.start <= frame.end


# ---------------------------------------------------------------- applied by the pipeline, real store


async def test_before_a_named_event_answers_with_the_version_valid_then(
    service: MemoryService, owner: Actor
) -> None:
    jira = (
        await service.note(
            MemoryIn(body="We track issues and tickets in Jira.", valid_from=d(2024, 1, 10)), owner
        )
    ).memory
    linear = await service.supersede(
        jira.id,
        MemoryIn(body="We track issues and tickets in Linear.", valid_from=d(2025, 3, 1)),
        jira.content_hash,
        owner,
    )
    r = Retriever(service.store, service.embedder, SLOW_OK)
    now = await r.retrieve("which tool do we track issues in?", Scope.of([]))
    assert [h.id for h in now.hits] == [linear.id]  # without time in the question: what is true now
    before = await r.retrieve("what did we track issues in before Linear?", Scope.of([]))
    assert before.timeframe is not None and before.timeframe.end == d(2025, 3, 1)
    assert before.hits[0].id == jira.id  # the superseded version answers, ahead of today's
    # time off: the same question only sees what is current
    off = Retriever(service.store, service.embedder, RetrievalConfig(time_weight=0, embed_timeout_s=10))
    assert [
        h.id for h in (await off.retrieve("what did we track issues in before Linear?", Scope.of([]))).hits
    ] == [linear.id]


async def test_a_question_about_the_past_asks_a_down_embedder_once(
    service: MemoryService, owner: Actor
) -> None:
    """ "before Linear" retrieves a second time, as of then; that pass reuses the first one's embedding
    (or its failure) instead of asking again, so a hung embedder costs the question one deadline, not
    two, and the outage is counted once."""
    jira = (
        await service.note(
            MemoryIn(body="We track issues and tickets in Jira.", valid_from=d(2024, 1, 10)), owner
        )
    ).memory
    await service.supersede(
        jira.id,
        MemoryIn(body="We track issues and tickets in Linear.", valid_from=d(2025, 3, 1)),
        jira.content_hash,
        owner,
    )

    question = "what did we track issues in before Linear?"
    down = DownEmbedder(service.embedder.model, service.embedder.dim)
    counted = telemetry.retrieval_degraded.labels("embedder_down")
    before = counted._value.get()
    res = await Retriever(service.store, down, SLOW_OK).retrieve(question, Scope.of([]))
    assert res.timeframe is not None and res.timeframe.end == d(2025, 3, 1)
    assert down.asked.count([question]) == 1 and counted._value.get() == before + 1
    assert res.degraded == ["embedder_down"]
    assert jira.id in [h.id for h in res.hits]  # the keyword legs still reach the version valid then


async def test_a_month_in_the_question_lifts_what_was_recorded_then(
    service: MemoryService, owner: Actor
) -> None:
    may = await service.note(
        MemoryIn(
            body="Retry decision: payment retries back off exponentially, five attempts.",
            valid_from=d(2025, 5, 14),
        ),
        owner,
    )
    august = await service.note(
        MemoryIn(
            body="Retry decision: payment retries back off linearly, three attempts.",
            valid_from=d(2025, 8, 2),
        ),
        owner,
    )
    for body in (
        "The staging database listens on port 6543.",
        "Frontend builds run on Vite and deploy to Cloudflare Pages.",
        "Payment webhooks are verified with a shared secret.",
        "Incidents page the on-call engineer through PagerDuty.",
    ):
        await service.note(MemoryIn(body=body, valid_from=d(2025, 6, 1)), owner)
    r = Retriever(service.store, service.embedder, SLOW_OK)
    plain = await r.retrieve("what did we decide about payment retries?", Scope.of([]))
    assert plain.hits[0].id == august.memory.id  # recency favours the newer one
    in_may = await r.retrieve("what did we decide about payment retries in May 2025?", Scope.of([]))
    assert in_may.hits[0].id == may.memory.id
    assert august.memory.id in {h.id for h in in_may.hits}  # a boost, not a filter
