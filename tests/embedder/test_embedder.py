"""The embedding server as a real process with the offline model, and the client's resilience."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from brain.embedder import EmbedderUnavailable, EmbeddingClient, LocalEmbedder, QueryCache
from brain.local.devdb import free_port


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "brain.embedder",
            "--port",
            str(port),
            "--threads",
            "1",
            "--max-chars",
            "2000",
        ],
        env={**os.environ},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz").status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("embedder did not become ready")
    yield url
    proc.terminate()
    proc.wait(10)


def test_openai_compatible_embeddings(server: str, embedder: LocalEmbedder) -> None:
    r = httpx.post(
        f"{server}/v1/embeddings", json={"input": ["postgres port changed", "bananas"], "model": "x"}
    )
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "list" and [d["index"] for d in body["data"]] == [0, 1]
    vec = np.array(body["data"][0]["embedding"], dtype=np.float32)
    assert vec.shape == (384,) and abs(float(np.linalg.norm(vec)) - 1) < 1e-3
    # Same model, same numbers as in-process.
    local = embedder.embed_sync(["postgres port changed"])[0]
    assert float(vec @ local) > 0.999
    single = httpx.post(f"{server}/v1/embeddings", json={"input": "one string"}).json()
    assert len(single["data"]) == 1


def test_bad_and_oversize_input_get_a_4xx_that_says_the_limit(server: str) -> None:
    r = httpx.post(f"{server}/v1/embeddings", json={"input": "x" * 2001})
    assert r.status_code == 413 and "limit is 2000" in r.json()["error"]["message"]
    r = httpx.post(f"{server}/v1/embeddings", json={"input": []})
    assert r.status_code == 422 and "non-empty" in r.json()["error"]["message"]
    r = httpx.post(f"{server}/v1/embeddings", json={"texts": ["wrong field"]})
    assert r.status_code == 422 and "input" in r.json()["error"]["message"]
    r = httpx.post(f"{server}/v1/embeddings", json={"input": ["a"] * 257})
    assert r.status_code == 413 and "256" in r.json()["error"]["message"]


def test_health_and_metrics(server: str) -> None:
    assert httpx.get(f"{server}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{server}/readyz").json()
    assert ready["dim"] == 384
    text = httpx.get(f"{server}/metrics").text
    assert 'brain_embedder_requests_total{code="413"}' in text and "brain_embedder_batch_size_bucket" in text


async def test_client_batches_caches_and_trips_its_breaker(server: str) -> None:
    client = EmbeddingClient(server, batch=3, failure_threshold=2, cooldown=60)
    vecs = await client.embed([f"text {i}" for i in range(7)])
    assert vecs.shape == (7, 384)
    cached = QueryCache(client, size=2)
    await cached.embed(["q1"])
    await cached.embed(["q1"])
    assert (cached.hits, cached.misses) == (1, 1)
    await client.aclose()

    dead = EmbeddingClient(f"http://127.0.0.1:{free_port()}", failure_threshold=2, cooldown=60, timeout=0.2)
    await asyncio.sleep(0.25)  # a new client gives the embedder as long as one call may wait
    for _ in range(2):
        with pytest.raises(EmbedderUnavailable):
            await dead.embed(["x"])
    assert dead.open
    with pytest.raises(EmbedderUnavailable, match="circuit open"):  # answered without a connection attempt
        await dead.embed(["x"])
    await dead.aclose()


async def test_client_readiness_through_its_public_interface() -> None:
    """The gateway's health check asks `ready()`; the transport is injectable (httpx.MockTransport)."""
    calls: list[str] = []
    status = {"code": 200}

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return httpx.Response(status["code"], json={"status": "ok", "dim": 384})

    client = EmbeddingClient(
        "http://embedder", failure_threshold=1, timeout=0.05, transport=httpx.MockTransport(answer)
    )
    assert await client.ready() is True
    status["code"] = 503
    assert await client.ready() is False
    assert calls == ["/readyz", "/readyz"]
    await asyncio.sleep(0.06)  # nothing embedded for as long as a call may wait (`stall_s`)
    client._fail()  # the breaker opens: readiness is answered without a request
    assert await client.ready() is False
    assert calls == ["/readyz", "/readyz"]
    await client.aclose()


def test_threads_from_env_names_the_variable_when_refused() -> None:
    from brain.embedder.model import THREADS_ENV, threads_from_env

    assert threads_from_env(1, {}) == 1  # unset: the caller's default (the gateway's one query thread)
    assert threads_from_env(1, {THREADS_ENV: "3"}) == 3
    assert threads_from_env(1, {THREADS_ENV: "0"}) is None  # 0: onnxruntime's own choice, all cores
    for bad in ("-2", "two", "1.5"):
        with pytest.raises(ValueError, match=THREADS_ENV) as err:
            threads_from_env(1, {THREADS_ENV: bad})
        assert "whole number" in str(err.value)


def test_one_thread_embeds_the_same_vector(embedder: LocalEmbedder) -> None:
    """The gateway's one-thread query model must agree with the default one, or its vectors would not
    compare with those the embedder service and the jobs wrote."""
    one = LocalEmbedder(threads=1)
    text = ["which port does the staging postgres replica use?"]
    assert float(one.embed_sync(text)[0] @ embedder.embed_sync(text)[0]) > 0.9999


async def test_the_breaker_opens_on_a_hung_embedder_not_on_a_slow_one() -> None:
    """A caller's deadline that cancels a call counts as a failure (a hung embedder is seen no other
    way), but the breaker opens only once nothing has answered for `stall_s`: a slow embedder that
    still answers some calls in time keeps serving them. After the cooldown one call tries again
    while the others are still answered at once, and an answer closes it."""
    calls: list[int] = []
    mode = {"now": "slow"}

    async def answer(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if mode["now"] == "hung" or (mode["now"] == "slow" and (len(calls) - 1) % 4):  # 3 of 4 miss
            await asyncio.sleep(30)
        vec = base64.b64encode(np.ones(4, dtype=np.float32).tobytes()).decode()
        return httpx.Response(200, json={"model": "default", "data": [{"index": 0, "embedding": vec}]})

    client = EmbeddingClient(
        "http://embedder", dim=4, timeout=1.0, cooldown=0.5, transport=httpx.MockTransport(answer)
    )

    async def ask() -> str:
        try:
            await asyncio.wait_for(client.embed(["q"]), 0.1)
            return "vector"
        except TimeoutError:
            return "timeout"
        except EmbedderUnavailable:
            return "open"

    slow = [await ask() for _ in range(16)]  # an answer, then three failures in a row, four times
    assert slow.count("vector") == 4 and "open" not in slow, slow

    mode["now"] = "hung"
    hung = [await ask() for _ in range(20)]
    assert hung[:3] == ["timeout"] * 3 and hung[-3:] == ["open"] * 3, hung
    tried = len(calls)
    await asyncio.sleep(0.6)  # the cooldown: one trial, the rest still answered at once
    assert sorted(await asyncio.gather(*(ask() for _ in range(5)))) == ["open"] * 4 + ["timeout"]
    assert len(calls) == tried + 1

    mode["now"] = "fast"
    await asyncio.sleep(0.6)
    assert [await ask() for _ in range(3)] == ["vector"] * 3 and not client.open
    await client.aclose()
