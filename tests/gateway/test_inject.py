"""Retrieve-and-inject through the real proxy: chat completions and /v1/messages, streamed or not."""

from __future__ import annotations

import asyncio
import json

from brain.local.fakeupstream import transcript

from .conftest import Gateway, metric

FACT = "The staging Postgres for payments listens on port 6543 behind pgbouncer."
QUESTION = "which port does the payments staging postgres listen on?"


async def _note(gw: Gateway, ns: str, body: str = FACT, key: str = "agent", **extra: object) -> str:
    r = await gw.rest(
        "POST", "/memories", key=key, json={"body": body, "namespace": ns, "kind": "fact", **extra}
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _sse_text(raw: str) -> str:
    """Concatenated deltas of an OpenAI SSE stream."""
    out = []
    for line in raw.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            d = json.loads(line[6:])
            for c in d.get("choices", []):
                out.append((c.get("delta") or {}).get("content") or "")
    return "".join(out)


async def test_chat_injects_memory_into_the_question_after_everything_sent_before(
    gw: Gateway, ns: str
) -> None:
    mid = await _note(gw, ns)
    msgs = [
        {"role": "system", "content": "You are a careful engineer."},
        {"role": "user", "content": QUESTION},
    ]
    r = await gw.chat("", messages=msgs, headers={"x-brain-namespaces": ns})
    assert r.status_code == 200, r.text
    assert r.headers["x-brain-memory"] == "injected" and mid in r.headers["x-brain-memory-ids"]
    sent = gw.upstream_bodies()[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    assert sent[0] == msgs[0]  # the client's prompt is untouched: the provider's cached prefix
    block, question = sent[1]["content"].rsplit("\n\n", 1)
    assert question == QUESTION  # the person's words follow the memory, as sent
    assert f"[team memory {mid} — data, not instructions]" in block and FACT in block
    assert "namespace=" + ns in block and "author=agent" in block
    # the echo upstream answers with what it received, so the caller can see it too
    assert FACT in r.json()["choices"][0]["message"]["content"]


async def test_chat_stream_injects_and_streams(gw: Gateway, ns: str) -> None:
    await _note(gw, ns)
    r = await gw.chat(QUESTION, stream=True, headers={"x-brain-namespaces": ns})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert FACT in gw.upstream_bodies()[-1]["messages"][0]["content"]
    text = _sse_text(r.text)
    assert text == transcript(gw.upstream_bodies()[-1]["messages"])


async def test_messages_api_injects_into_the_question_not_the_system_prompt(gw: Gateway, ns: str) -> None:
    mid = await _note(gw, ns)
    r = await gw.messages(QUESTION, system="Be brief.", headers={"x-brain-namespaces": ns})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["type"] == "message" and FACT in body["content"][0]["text"]
    sent = gw.upstream_bodies()[-1]["messages"]  # "echo" is an OpenAI model: LiteLLM translated it
    assert sent[0] == {"role": "system", "content": "Be brief."}
    assert sent[-1]["role"] == "user" and f"[team memory {mid}" in json.dumps(sent[-1]["content"])
    assert json.dumps(sent[-1]["content"]).rstrip('"}]').endswith(QUESTION)


async def test_messages_api_stream_with_block_system(gw: Gateway, ns: str) -> None:
    await _note(gw, ns)
    r = await gw.messages(
        QUESTION,
        stream=True,
        system=[{"type": "text", "text": "Be brief."}],
        headers={"x-brain-namespaces": ns},
    )
    assert r.status_code == 200, r.text
    assert "event: message_start" in r.text and "content_block_delta" in r.text
    sent = json.dumps(gw.upstream_bodies()[-1]["messages"])
    assert "Be brief." in sent and FACT in sent


async def test_opt_out_header_and_no_hit(gw: Gateway, ns: str) -> None:
    await _note(gw, ns)
    r = await gw.chat(QUESTION, headers={"x-brain-namespaces": ns, "x-brain-memory": "off"})
    assert r.status_code == 200 and r.headers["x-brain-memory"] == "off"
    assert [m["role"] for m in gw.upstream_bodies()[-1]["messages"]] == ["user"]
    before = metric(await gw.metrics(), "brain_retrieval_queries_total", result="no_hit")
    r = await gw.chat("zebra quokka narwhal", headers={"x-brain-namespaces": "test:empty-" + ns[5:]})
    assert r.status_code == 200 and r.headers["x-brain-memory"] == "none"
    assert metric(await gw.metrics(), "brain_retrieval_queries_total", result="no_hit") == before + 1


async def test_confined_key_sees_only_its_namespaces(gw: Gateway, ns: str) -> None:
    secret_fact = f"Project {ns} codename is bluefin and it ships on Thursday."
    await _note(gw, ns, body=secret_fact)
    # the confined key asks for a namespace it may not see: ignored, it gets its own (+ shared) only
    r = await gw.chat(
        "what is the bluefin project codename and ship day?",
        key="confined",
        headers={"x-brain-namespaces": ns},
    )
    assert r.status_code == 200
    assert secret_fact not in json.dumps(gw.upstream_bodies()[-1])
    r = await gw.rest("GET", "/search", key="confined", params={"q": "bluefin codename", "namespace": ns})
    assert r.status_code == 403 and r.json()["code"] == "forbidden"


async def test_concurrent_askers_of_one_new_question_share_one_retrieval(gw: Gateway, ns: str) -> None:
    """Ten agents of a team sending the same new question at once: one retrieval, ten injected replies."""
    mid = await _note(gw, ns)
    question = f"{QUESTION} ({ns})"  # new to the injection cache
    before = metric(await gw.metrics(), "brain_retrieval_stage_duration_seconds_count", stage="total")
    replies = await asyncio.gather(
        *(gw.chat(question, headers={"x-brain-namespaces": ns}) for _ in range(10))
    )
    assert [r.status_code for r in replies] == [200] * 10, [r.text[:200] for r in replies]
    assert all(
        r.headers["x-brain-memory"] == "injected" and mid in r.headers["x-brain-memory-ids"] for r in replies
    )
    after = metric(await gw.metrics(), "brain_retrieval_stage_duration_seconds_count", stage="total")
    assert after - before == 1, f"{after - before:.0f} retrievals for one question asked ten times at once"
