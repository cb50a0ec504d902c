"""hack/bench/gateway.py's load levels: every arm gets its requests at the level's concurrency, in rotating
turns, bounded in count and time, each reply's outcome counted (#33)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest
from hack.bench import check, gateway

from brain.local.stats import percentile, rank_from_top

TARGETS = [
    gateway.Target("bare", "http://bare", "k", "/health"),
    gateway.Target("brain", "http://brain", "k", "/healthz"),
    gateway.Target("remote", "http://remote", "k", "/healthz"),
]


class Upstream:
    """Three fake proxies: the brain ones say `injected`; counts what is in flight at each."""

    def __init__(self, delay: float = 0.002) -> None:
        self.delay = delay
        self.in_flight = dict.fromkeys(("bare", "brain", "remote"), 0)
        self.peak = dict.fromkeys(("bare", "brain", "remote"), 0)
        self.order: list[str] = []  # the arm of each chat request, in arrival order
        self.questions: dict[str, list[str]] = {"bare": [], "brain": [], "remote": []}

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        arm = request.url.host
        if request.method == "GET":
            return httpx.Response(200, json={"ok": True})
        self.order.append(arm)
        self.questions[arm].append(request.read().decode())
        self.in_flight[arm] += 1
        self.peak[arm] = max(self.peak[arm], sum(self.in_flight.values()))
        await asyncio.sleep(self.delay)
        self.in_flight[arm] -= 1
        headers = {} if arm == "bare" else {"x-brain-memory": "injected"}
        return httpx.Response(200, json={"choices": []}, headers=headers)


@pytest.mark.parametrize("clients", [1, 4])
def test_every_arm_gets_its_requests_at_the_level_in_rotating_turns(clients: int) -> None:
    up = Upstream()
    questions = [f"q{i}" for i in range(3 + 25)]
    lv = asyncio.run(
        gateway.level(TARGETS, clients, 25, questions, turn=2, warmup=3, transport=httpx.MockTransport(up))
    )
    assert not lv.cut_short
    for t in TARGETS:
        assert len(lv.ms[t.name]) == 25
        assert lv.busy_s[t.name] > 0
        # one arm driven at a time, at the level's concurrency
        assert up.peak[t.name] == clients
        # the same questions to every arm, the warm-up's first
        sent = [q.split('"content":"')[1].split('"')[0] for q in up.questions[t.name]]
        assert sorted(sent[3:], key=lambda q: int(q[1:])) == questions[3:]
    check.expect(lv.counts["bare"], check.bare("bare", 25))
    check.expect(lv.counts["brain"], check.memory_on("brain", 25))
    # turns rotate: after the warm-up, round r starts with arm r mod 3
    turns = [arm for i, arm in enumerate(up.order[9:]) if i == 0 or up.order[9 + i - 1] != arm]
    assert turns[:6] == ["bare", "brain", "remote", "brain", "remote", "bare"]


def test_a_level_out_of_time_is_cut_short_and_fails_its_rows() -> None:
    up = Upstream(delay=0.05)
    lv = asyncio.run(
        gateway.level(
            TARGETS, 2, 100, [f"q{i}" for i in range(100)], deadline_s=0.3, transport=httpx.MockTransport(up)
        )
    )
    assert lv.cut_short
    assert check.mismatch(lv.counts["brain"], check.memory_on("brain", 100)) is not None


def test_a_failed_request_is_an_error_outcome() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200)
        if request.url.host == "remote":
            raise httpx.ConnectError("refused")
        return httpx.Response(200, headers={"x-brain-memory": "injected"})

    lv = asyncio.run(
        gateway.level(TARGETS, 3, 6, [f"q{i}" for i in range(6)], transport=httpx.MockTransport(handler))
    )
    assert lv.counts["remote"]["error"] == 6
    assert lv.counts["remote"].causes == {"ConnectError": 6}
    assert lv.counts["bare"]["injected"] == 6  # the mock says injected to all: the bare row's check fails
    assert check.mismatch(lv.counts["bare"], check.bare("bare", 6)) is not None


def test_pct_takes_the_sample_at_floor_q_n() -> None:
    xs = [float(i) for i in range(1, 301)]
    assert percentile(xs, 0.5) == 151.0
    assert percentile(xs, 0.99) == 298.0  # the 3rd largest of 300
    assert rank_from_top(300, 0.99) == 3
    assert rank_from_top(50, 0.99) == 1
    assert rank_from_top(100, 0.99) == 1
    assert rank_from_top(150, 0.99) == 2


async def test_the_bare_proxy_starts(tmp_path: Path) -> None:
    """The bare arm's own process answers its health check (run as a script it died at its first
    import, and the faults and gateway benches waited 300 s for it, then failed)."""
    from brain.local.devdb import free_port
    from brain.local.up import spawn, stop, wait_http

    _, bare = gateway.configs("http://127.0.0.1:9", tmp_path, "sk-bench-test")
    port = free_port()
    proc = spawn(gateway.bare_command(bare, port), gateway.with_root(dict(os.environ)), tmp_path / "bare.log")
    try:
        await wait_http(f"http://127.0.0.1:{port}/health/liveliness", proc=proc, timeout=180)
    finally:
        stop(proc)
