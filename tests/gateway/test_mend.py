"""The vector mend's loop (brain/gateway/mend.py) on the way out: a gateway stopping while the
database hangs must not keep it alive."""

from __future__ import annotations

import asyncio

from brain.gateway.mend import VectorMend


class HungDatabase:
    """A fill that is cancelled mid-batch and whose clean-up then fails, as an unlock or the pool's
    reset does against a database that does not answer: the error replaces the cancellation."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()

    async def fill_live(self, *_: object, **__: object) -> int:
        self.entered.set()
        try:
            await asyncio.sleep(3600)
        finally:
            raise TimeoutError("the unlock got no answer")  # the failure being simulated


async def test_a_mend_cancelled_while_the_database_hangs_ends() -> None:
    mend = VectorMend(retry_s=(0.01, 0.01))
    db = HungDatabase()
    task = asyncio.create_task(mend.run(lambda: db, lambda: object(), lambda: None))  # type: ignore[arg-type,return-value]
    mend.wake()
    await asyncio.wait_for(db.entered.wait(), 5)
    task.cancel()  # the gateway stopping (Runtime.stop)
    done, _ = await asyncio.wait({task}, timeout=5)
    assert done == {task} and task.cancelled()  # before, it logged a mend failure and looped on
