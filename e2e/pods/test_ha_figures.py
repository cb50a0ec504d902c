"""The failover figures (e2e/pods/ha_pods.failover_figures) from a made-up timeline: no node needed."""

from __future__ import annotations

from .ha_pods import Outcome, failover_figures


def _chat(t: float, memory: bool, status: int | str = 200) -> Outcome:
    return Outcome("chat", t, t + 0.5, status, memory)


def _write(t: float, status: int | str) -> Outcome:
    return Outcome("write", t, t + 0.2, status, memory_id="m" if status == 201 else None)


def test_window_and_first_write_are_measured_from_what_the_stream_saw() -> None:
    outcomes = [
        _chat(0, True),
        _write(1, 201),
        # primary deleted at 10
        _chat(10.5, False),
        _write(11, 503),
        _write(12, 503),
        _chat(14, False),
        _write(15, 201),  # first acknowledged write after the refusals: ends at 15.2
        _chat(16, True),
        _chat(17, False, "ReadTimeout"),
    ]
    f = failover_figures(outcomes, t_delete=10, t_promoted=13)
    assert (f.chats, f.chats_without_memory, f.chats_broken) == (5, 2, 1)
    assert (f.writes, f.writes_acknowledged, f.writes_refused_503, f.writes_other) == (4, 2, 2, 0)
    assert f.window_without_memory_s == 14.5 - 10.5
    assert round(f.first_write_after_failover_s, 6) == 5.2
    assert f.promoted_after_s == 3


def test_a_failover_no_request_noticed() -> None:
    f = failover_figures([_chat(0, True), _write(11, 201), _chat(12, True)], t_delete=10, t_promoted=11)
    assert f.window_without_memory_s == 0 and round(f.first_write_after_failover_s, 6) == 1.2
    f = failover_figures([_write(11, 503)], t_delete=10, t_promoted=11)
    assert f.first_write_after_failover_s == float("inf")  # never wrote again: the test fails on it
