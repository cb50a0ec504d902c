"""The one bounded wait of the suite, the e2e stories and the benches.

Polling is how a test meets a real part (a pod turning Ready, a row arriving, a Service answering),
and there were five copies with three behaviours: some let a half-ready part's exception end the
wait at once, some waited through it, one lost the last answer. This one waits through the usual
signs of "not yet" (a kubectl that failed, a key not yet in a status, an index not there), and on
timeout names what it waited for and quotes the last answer or exception, so a red test says where
the part stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: what a part that is not ready yet raises from a probe: kubectl's failure (raised as an assertion
#: by the kit's wrappers), a status without the key yet, an empty list, a None where a dict will be
NOT_YET: tuple[type[BaseException], ...] = (AssertionError, KeyError, IndexError, TypeError)


def wait_for(what: str, fn: Callable[[], T | None], timeout: float = 120, every: float = 0.5) -> T:
    """`fn`'s first truthy answer within `timeout` seconds; AssertionError naming `what` if none came."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = fn()
        except NOT_YET as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")
        time.sleep(every)


def first_within(fn: Callable[[], T | None], timeout: float, every: float = 0.5) -> T | None:
    """`fn`'s first truthy answer within `timeout`, else None: a bounded poll for an event that may
    rightly never come (a chat answered without memory while a part is down)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(every)
    return None


async def until(what: str, probe: Callable[[], Awaitable[T | None]], timeout: float = 60) -> T:
    """`wait_for` for a probe that must run on the test's own event loop (a part the test serves
    itself, such as the gateway kit's embedder, answers only while the loop is free). Unlike
    `wait_for`, an exception from the probe ends the wait at once: an async probe asserts what must
    hold on every try (a 200) and returns a falsy "not yet" for the rest."""
    deadline = time.monotonic() + timeout
    answer: Any = None
    while time.monotonic() <= deadline:
        answer = await probe()
        if answer:
            return answer
        await asyncio.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {answer!r})")
