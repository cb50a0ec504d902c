"""HTTP client for the embedder, with a timeout and a circuit breaker so a dead embedder costs nothing."""

from __future__ import annotations

import asyncio
import base64
import time

import httpx
import numpy as np

from brain.core import tracing
from brain.core.contract import DEFAULT_EMBEDDING_DIM


class EmbedderUnavailable(Exception):
    """The embedder failed, timed out, or the breaker is open; callers fall back to lexical retrieval."""

    def __init__(self, message: str, cause: str = "embedder_down") -> None:
        super().__init__(message)
        self.cause = cause


class EmbeddingClient:
    def __init__(
        self,
        base_url: str,
        *,
        model: str = "default",
        dim: int = DEFAULT_EMBEDDING_DIM,
        timeout: float = 2.0,
        failure_threshold: int = 3,
        cooldown: float = 10.0,
        batch: int = 128,
        transport: httpx.AsyncBaseTransport | None = None,
        require_model: bool = False,
    ) -> None:
        """`transport` replaces the network (httpx.MockTransport in tests, as httpx itself advises).

        `require_model` refuses vectors the server says another model made (its `model` field): a
        model migration writes vectors labelled `model`, and behind a Service that is rolling from
        the old model to the new one some requests still reach an old pod."""
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.require_model = require_model
        self.dim = dim
        self.batch = batch
        self.failure_threshold = failure_threshold
        self.cooldown = cooldown
        # The breaker opens only when nothing has answered for as long as one call may wait: a slow
        # but working embedder under load answers some calls while others run past their caller's
        # deadline, and must keep serving those it can rather than be cut off by the ones it cannot.
        self.stall_s = timeout
        self._failures = 0  # since the last answer
        self._last_answer = time.monotonic()  # a new client gives its embedder as long as a call
        self._tripped = False
        self._open_until = 0.0
        self._trial = False  # a tripped breaker's one call after its cooldown is out
        self._http = httpx.AsyncClient(timeout=timeout, transport=transport)

    @property
    def open(self) -> bool:
        """Calls are answered at once without a connection: tripped and cooling down, or tripped with
        its one trial call still out (the others do not all rush a hung embedder at the same time)."""
        return self._tripped and (time.monotonic() < self._open_until or self._trial)

    def _fail(self) -> None:
        self._failures += 1
        now = time.monotonic()
        if self._failures >= self.failure_threshold and now - self._last_answer >= self.stall_s:
            self._tripped = True
            self._open_until = now + self.cooldown

    def _answered(self) -> None:
        """Any answer (a 4xx, another model's vectors) shows the embedder is there: the breaker closes."""
        self._failures, self._last_answer, self._tripped = 0, time.monotonic(), False

    async def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.open:
            raise EmbedderUnavailable("embedder circuit open after repeated failures", "embedder_down")
        trial = self._trial = self._tripped  # cooled down: this call tries the embedder again
        try:
            out = []
            for i in range(0, len(texts), self.batch):
                out.append(await self._post(texts[i : i + self.batch]))
        finally:
            if trial:
                self._trial = False
        return np.concatenate(out)

    async def _post(self, texts: list[str]) -> np.ndarray:
        attrs: tracing.Attrs = {
            tracing.OPERATION: "embeddings",
            tracing.MODEL: self.model,
            "brain.embed.texts": len(texts),
        }
        with tracing.span(f"embeddings {self.model}", attrs, kind=tracing.CLIENT):
            return await self._request(texts)

    async def _request(self, texts: list[str]) -> np.ndarray:
        try:
            r = await self._http.post(
                f"{self.base_url}/v1/embeddings",
                json={"input": texts, "model": self.model, "encoding_format": "base64"},
                headers=tracing.inject({}),  # the embedder's span joins this trace (traceparent)
            )
        except asyncio.CancelledError:
            # The caller's deadline ended the wait first (retrieval gives a question's embedding 60 %
            # of its budget, well under this client's timeout). A hung embedder answers nothing, so
            # only such cancellations ever see it: counted, its breaker opens once nothing has
            # answered for `stall_s`, and later questions go to the lexical legs at once instead of
            # each waiting out the deadline.
            self._fail()
            raise
        except httpx.TimeoutException as e:
            self._fail()
            raise EmbedderUnavailable(f"embedder timed out: {e}", "timeout") from e
        except httpx.HTTPError as e:
            self._fail()
            raise EmbedderUnavailable(f"embedder unreachable: {e}") from e
        if r.status_code >= 500:
            self._fail()
            raise EmbedderUnavailable(f"embedder answered {r.status_code}")
        self._answered()
        if r.status_code >= 400:
            raise ValueError(r.json().get("error", {}).get("message", r.text))
        body = r.json()
        if self.require_model and body.get("model") != self.model:
            raise EmbedderUnavailable(
                f"the embedder at {self.base_url} embedded with {body.get('model')!r}, not {self.model!r}",
                "model_mismatch",
            )
        data = sorted(body["data"], key=lambda d: d["index"])
        return np.stack([np.frombuffer(base64.b64decode(d["embedding"]), dtype=np.float32) for d in data])

    async def ready(self, timeout: float = 2.0) -> bool:
        """Whether the embedder answers its readiness probe (`GET /readyz` → 200) within `timeout`.

        An open breaker answers False at once: the gateway's health check then costs nothing while
        the embedder is known to be down."""
        if self.open:
            return False
        try:
            r = await self._http.get(f"{self.base_url}/readyz", timeout=timeout)
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    async def aclose(self) -> None:
        await self._http.aclose()
