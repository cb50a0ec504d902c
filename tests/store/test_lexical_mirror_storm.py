"""Found by an outside attack review (session 28), fixed since; each test is the defect's reproduction. a write storm of large bodies by the least-privileged key.

A body of 16,000 distinct CJK characters separated by spaces is 32,000 characters (MAX_BODY 32,768):
its stored weights have 16,000 elements. A look applied up to `page` (2,000) changed rows on the
event loop, a Python loop per posting into per-dimension Python lists (the delta); now looks, drains
and loads work in slices of at most `chars` of weights text, and the delta is numpy parts.
"""

from __future__ import annotations

import tracemalloc

from brain.core.models import Actor, MemoryIn
from brain.store import Store
from brain.store.lexical_mirror import _apply
from brain.store.postings import Postings

PER_ROW = 16_000


def _cjk_body(offset: int) -> str:
    return " ".join(chr(0x4E00 + (offset + i) % 20_000) for i in range(PER_ROW))


def _text(seed: int) -> str:
    return "{" + ",".join(f"{seed * 7 + d * 13 + 1}:0.73" for d in range(PER_ROW)) + "}/999999937"


async def test_an_agent_body_can_carry_16000_weights(store: Store, agent: Actor) -> None:
    from brain.store.writer import StoreWriter

    body = _cjk_body(0)
    assert len(body) <= 32_768
    [m] = await StoreWriter(store).note_many([(MemoryIn(body=body, namespace="shared"), None)], actor=agent)
    n = await store.pool_for_tests.fetchval(
        "SELECT array_length(string_to_array(trim(both '{}' from split_part(bm25::text, '/', 1)), ','), 1)"
        " FROM memories WHERE id = $1",
        m.id,
    )
    assert n == PER_ROW


def test_big_rows_are_applied_and_parsed_in_bounded_slices_of_compact_postings() -> None:
    """A look or drain of such rows applies them a slice of at most `chars` of weights text at a
    time (requests run between slices), and the delta holds numpy postings, not Python objects; the
    loader parses the same slices. (Found: one page of 2,000 such rows would have held the event
    loop for about 36 s and 3 GB of Python lists, and a loader batch of 10,000 about 24 GB.)"""
    from brain.store.lexical_mirror import LexicalMirror, _slices

    chars = LexicalMirror.__init__.__kwdefaults__["chars"]  # type: ignore[index]
    p = Postings()
    p.load(["seed"], ["shared"], ["note"], ["{1:1}/999999937"])
    p.seal()
    rows = [
        {"id": f"m{i}", "namespace": "shared", "kind": "note", "status": "active", "w": _text(i)}
        for i in range(50)
    ]
    slices = list(_slices(rows, chars))
    assert sum(len(s) for s in slices) == 50
    assert all(len(s) == 1 or sum(len(r["w"]) for r in s) <= chars for s in slices)
    before = p.nbytes()
    tracemalloc.start()
    for part in slices:
        _apply(p, part)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # 8 bytes a posting, plus each part's per-dimension index (24 bytes a dimension, here nearly one a
    # posting): against ~106 bytes a posting of Python lists
    assert (p.nbytes() - before) / (50 * PER_ROW) <= 32
    assert peak <= 20 * chars, f"one slice's parse peaked at {peak / 1e6:.0f} MB"
