"""Nothing a writer controls escapes the fence: generated hostile titles, bodies, tags and attrs.

Two layers. The renderer itself, over thousands of generated entries (raw, as a row written before
validation existed would be, and validated, as the door stores them). Then the real gateway: a few
hundred hostile writes through REST and MCP with an ordinary agent key, chats through the echo
model, and the check on what the upstream actually received. Writes the door refuses (lint, gate,
validation) are a defence and are counted, so the suite cannot pass with nothing stored.
"""

from __future__ import annotations

import json
import unicodedata
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from brain.core.models import Hit, MemoryIn
from brain.core.sanitize import clean_text, one_line
from brain.retrieval.render import render_block, render_persona
from tests.kit.gateway import Gateway, injected_block

from .fence import expected_inner, parse
from .hostile import hostile_entry

_IDS = st.integers(0, 2**80).map(lambda n: f"{n:026x}")


def _hit(entry: dict[str, Any], hid: str, *, kind: str = "note") -> Hit:
    return Hit(
        id=hid,
        kind=kind,
        namespace="shared",
        tier="episodic",
        origin="agent",
        author="agent",
        title=str(entry["title"]),
        body=str(entry["body"]),
        valid_from=datetime(2026, 1, 1, tzinfo=UTC),
        score=0.0,
    )


def _check(text: str, hits: list[Hit], persona: Hit | None) -> None:
    p = parse(text)
    assert not p.unclosed, text
    assert p.escapes == [], f"outside the fences: {p.escapes!r}"
    assert p.ids == [h.id for h in hits]
    blocks = p.blocks[1:] if persona is not None else p.blocks
    if persona is not None:
        assert p.blocks[0] == expected_inner(one_line(persona.title, 200), clean_text(persona.body))
    assert blocks == [expected_inner(one_line(h.title, 200), clean_text(h.body)) for h in hits]


@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(hostile_entry(), _IDS), min_size=1, max_size=4), st.one_of(st.none(), hostile_entry())
)
def test_render_keeps_raw_hostile_rows_inside_fences(entries: list[Any], persona_entry: Any) -> None:
    hits = [_hit(e, hid) for e, hid in entries]
    persona = _hit(persona_entry, "01persona", kind="persona") if persona_entry else None
    prefix = render_persona(persona, persona.body) if persona else ""
    _check(render_block(hits, prefix=prefix), hits, persona)


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_entry(), _IDS)
def test_validated_entries_are_one_line_titles_and_render_inside_fences(
    entry: dict[str, Any], hid: str
) -> None:
    try:
        item = MemoryIn.model_validate(entry)
    except ValidationError:
        return  # refused at the door with a field-named error: nothing to render
    assert all(
        c == " " or not (c.isspace() or unicodedata.category(c) in ("Cc", "Cf", "Cs")) for c in item.title
    )
    hit = _hit({"title": item.title, "body": item.body}, hid)
    _check(render_block([hit]), [hit], None)


# ---------------------------------------------------------------------------------- real gateway

BATCHES = 60
PER_BATCH = 5
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _draw(n: int, marker: str, batch: int) -> list[dict[str, Any]]:
    """`n` generated entries (Hypothesis drives the generation; seeded per batch, so reruns are the same)."""
    out: list[dict[str, Any]] = []

    @seed(batch)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate])
    @given(hostile_entry(marker=marker))
    def collect(e: dict[str, Any]) -> None:
        out.append(e)

    collect()
    return out[:n]


async def _write(c: httpx.AsyncClient, gw: Gateway, entry: dict[str, Any], ns: str, via_mcp: bool) -> str:
    """'stored', or the refusal code; anything else (a 5xx, a dropped connection) fails the test."""
    args = {**entry, "namespace": ns}
    if via_mcp:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "brain_note", "arguments": args},
        }
        r = await c.post(f"{gw.url}/mcp", json=body, headers={**MCP_HEADERS, **gw.headers("agent")})
        assert r.status_code == 200, r.text
        result = r.json()["result"]
        payload = json.loads(result["content"][0]["text"])
        return str(payload.get("code", "refused")) if result.get("isError") else "stored"
    r = await c.post(f"{gw.url}/brain/v1/memories", json=args, headers=gw.headers("agent"))
    assert r.status_code < 500, f"{r.status_code} {r.text[:300]}"
    if r.status_code in (200, 201):
        return "stored"
    assert r.status_code in (400, 413, 422), r.text[:300]
    return str(r.json().get("code", r.status_code))


async def test_hostile_writes_never_escape_the_fence_through_the_gateway(gw: Gateway) -> None:
    run = uuid.uuid4().hex[:6]
    outcomes: dict[str, int] = {}
    checked = chats_with_memory = 0
    async with httpx.AsyncClient(timeout=60) as c:
        for b in range(BATCHES):
            marker = f"zq{run}b{b:03d}"
            ns = f"test:fence-{run}-{b}"
            for i, entry in enumerate(_draw(PER_BATCH, marker, b)):
                outcome = await _write(c, gw, entry, ns, via_mcp=(b * PER_BATCH + i) % 5 == 0)
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
            gw.fake.received.clear()
            r = await gw.chat(f"what do we know about {marker}?", headers={"x-brain-namespaces": ns})
            assert r.status_code == 200, r.text
            block = injected_block(gw.upstream_bodies()[-1])
            if not block:
                continue
            chats_with_memory += 1
            p = parse(block)
            assert not p.unclosed and p.escapes == [], f"escaped the fence: {p.escapes!r}"
            rows = await gw.store.pool_for_tests.fetch(
                "SELECT id, title, body FROM memories WHERE id = ANY($1)", p.ids
            )
            stored = {r["id"]: expected_inner(r["title"], r["body"]) for r in rows}
            blocks = p.blocks[len(p.blocks) - len(p.ids) :]
            for mid, block in zip(p.ids, blocks, strict=True):
                assert block == stored[mid], f"memory {mid} was not rendered exactly inside its fence"
                checked += 1
    print(
        f"fence e2e: writes {outcomes}, chats with memory {chats_with_memory}/{BATCHES}, entries checked {checked}"
    )
    total = sum(outcomes.values())
    assert total == BATCHES * PER_BATCH
    assert outcomes.get("stored", 0) >= total // 3, outcomes  # not vacuous: most hostile writes are stored
    assert checked >= total // 4, (checked, outcomes)
