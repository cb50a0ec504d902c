"""Traces: a span for each step a memory takes, exported over OTLP/HTTP when an endpoint is set.

Off unless `spec.observability.traces.endpoint` is set, and then free: `span()` hands back one
shared, non-recording span without touching the OpenTelemetry context, so a request pays a function
call per step and nothing is queued, serialised or sent.

On, a span ends into a bounded queue that one thread empties into the exporter. The request path
never waits on the collector: a full queue drops the span, a failed or slow export drops its batch,
and both are counted (`brain_trace_spans_dropped_total`), so a collector that is down or hung
costs spans, never latency. The SDK's own batch processor drops as well, but silently; counting is
the reason this one exists.

What a span may carry is decided here too: counts, ids, model names, outcomes, never memory text,
query text or keys, unless `content` is set (`text()`), which docs/tracing.md calls a data-exposure
choice. Attribute names follow the OpenTelemetry GenAI semantic conventions where one names the
thing (`gen_ai.operation.name`, `gen_ai.request.model`, `gen_ai.usage.*`), `brain.*` elsewhere.

This module is the only one that imports the OpenTelemetry SDK and exporter (.importlinter); every
other module opens spans through `span()` and passes context through `carrier()`/`extract()`.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import hmac
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode
from pydantic import BaseModel, ConfigDict, Field

from brain import __version__
from brain.core.contract import Env

log = logging.getLogger("brain.tracing")

SERVER = SpanKind.SERVER
CLIENT = SpanKind.CLIENT

AttrValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]
Attrs = Mapping[str, AttrValue | None]  # None: left out
#: counted(reason, spans): reason is `exported`, `queue_full` or `export_failed`
Counter = Callable[[str, int], None]

OPERATION = "gen_ai.operation.name"
MODEL = "gen_ai.request.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CONVERSATION = "gen_ai.conversation.id"


class TraceSettings(BaseModel):
    """Where spans go and what they may hold; from the pod's environment (`from_env`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # the OTLP/HTTP traces URL (…/v1/traces); None: no exporter, no spans
    endpoint: str | None = None
    service: str = "brain"
    # memory text and query text in spans (spec.observability.traces.content): a data-exposure choice
    content: bool = False
    queue_size: int = Field(default=2048, ge=1)
    batch_size: int = Field(default=256, ge=1)
    interval_s: float = Field(default=1.0, gt=0)
    # one export's whole budget, retries included; the queue keeps filling (and dropping) meanwhile
    export_timeout_s: float = Field(default=2.0, gt=0)

    @classmethod
    def from_env(cls, env: Mapping[str, str], service: str) -> TraceSettings:
        """The OpenTelemetry SDK's own variable names, so a collector's usual wiring works as is:
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL) or OTEL_EXPORTER_OTLP_ENDPOINT (a base
        that gets /v1/traces), OTEL_SERVICE_NAME; and BRAIN_TRACES_CONTENT=1 for text in spans."""
        endpoint = (env.get(Env.TRACES_ENDPOINT) or "").strip()
        base = (env.get(Env.OTLP_ENDPOINT) or "").strip()
        if not endpoint and base:
            endpoint = base.rstrip("/") + "/v1/traces"
        return cls(
            endpoint=endpoint or None,
            service=(env.get(Env.SERVICE_NAME) or "").strip() or service,
            content=(env.get(Env.TRACES_CONTENT) or "").strip().lower() in ("1", "true", "yes"),
        )


class BoundedExport(SpanProcessor):
    """Ended spans into a bounded queue; one thread sends them in batches. Never blocks `on_end`."""

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        queue_size: int = 2048,
        batch_size: int = 256,
        interval_s: float = 1.0,
        counted: Counter | None = None,
    ) -> None:
        self._exporter = exporter
        self._queue: collections.deque[ReadableSpan] = collections.deque()
        self._queue_size = queue_size
        self._batch_size = batch_size
        self._interval = interval_s
        self._counted = counted or (lambda reason, n: None)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="brain-trace-export", daemon=True)
        self._thread.start()

    def on_start(self, span: Any, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            if self._stopped or len(self._queue) >= self._queue_size:
                full = True
            else:
                full = False
                self._queue.append(span)
                self._idle.clear()
            waiting = len(self._queue)
        if full:
            self._counted("queue_full", 1)
        elif waiting >= self._batch_size:
            self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(self._interval)
            self._wake.clear()
            self._drain()
            with self._lock:
                if self._stopped and not self._queue:
                    return

    def _drain(self) -> None:
        while True:
            with self._lock:
                batch = [self._queue.popleft() for _ in range(min(self._batch_size, len(self._queue)))]
                if not batch:
                    self._idle.set()
                    return
            try:
                ok = self._exporter.export(batch) is SpanExportResult.SUCCESS
            except Exception:  # an exporter bug must not end the thread
                log.debug("span export raised", exc_info=True)
                ok = False
            self._counted("exported" if ok else "export_failed", len(batch))

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Wait (bounded) until what is queued now has been sent or dropped: a job's last spans."""
        self._wake.set()
        return self._idle.wait(timeout_millis / 1000)

    def shutdown(self) -> None:
        with self._lock:
            self._stopped = True
        self._wake.set()
        self._thread.join(timeout=5)
        self._exporter.shutdown()


class _State:
    tracer: trace.Tracer | None = None
    provider: TracerProvider | None = None
    content: bool = False
    key: bytes = os.urandom(32)  # pseudonym()'s


_state = _State()


def configure(settings: TraceSettings, counted: Counter | None = None, *, key: str | None = None) -> bool:
    """Install (or, with no endpoint, remove) this process's exporter. True when spans are sent.
    `key` keys `pseudonym()` (the gateway's master key: the same on every replica); None: random."""
    shutdown()
    _state.content = settings.content
    _state.key = key.encode() if key else os.urandom(32)
    if not settings.endpoint:
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = TracerProvider(
        resource=Resource.create({"service.name": settings.service, "service.version": __version__}),
        # every request is traced: a caller's traceparent is continued, but its sampled flag is not
        # obeyed, or an agent could keep its own requests out of the SREs' traces
        sampler=ALWAYS_ON,
    )
    provider.add_span_processor(
        BoundedExport(
            OTLPSpanExporter(endpoint=settings.endpoint, timeout=settings.export_timeout_s),
            queue_size=settings.queue_size,
            batch_size=settings.batch_size,
            interval_s=settings.interval_s,
            counted=counted,
        )
    )
    _state.provider = provider
    _state.tracer = provider.get_tracer("brain", __version__)
    return True


def shutdown(timeout_s: float = 5.0) -> None:
    """Send what is queued (bounded) and stop exporting."""
    provider, _state.provider, _state.tracer = _state.provider, None, None
    if provider is not None:
        provider.force_flush(int(timeout_s * 1000))
        provider.shutdown()


def flush(timeout_s: float = 5.0) -> None:
    if _state.provider is not None:
        _state.provider.force_flush(int(timeout_s * 1000))


def enabled() -> bool:
    return _state.tracer is not None


@contextlib.contextmanager
def span(
    name: str,
    attrs: Attrs | None = None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    parent: Context | None = None,
) -> Iterator[Span]:
    """A span for one step, current for what runs inside it; an exception marks it failed and goes on."""
    tracer = _state.tracer
    if tracer is None:
        yield INVALID_SPAN
        return
    # the SDK's own status on an exception is "{type}: {message}", and messages name what a writer
    # sent (a field path such as attrs.<key>): the status here says the type, nothing more
    with tracer.start_as_current_span(
        _short(name),
        context=parent,
        kind=kind,
        attributes=_clean(attrs),
        record_exception=False,
        set_status_on_exception=False,
    ) as s:
        try:
            yield s
        except BaseException as e:
            s.set_status(Status(StatusCode.ERROR, type(e).__name__))
            raise


@contextlib.contextmanager
def leaf(name: str, attrs: Attrs | None = None) -> Iterator[Span]:
    """A span for a step that opens no spans of its own (a retrieval leg): not made current, which
    saves the context switch that `span()` pays, a quarter of a span's cost here."""
    tracer = _state.tracer
    if tracer is None:
        yield INVALID_SPAN
        return
    s = tracer.start_span(_short(name), attributes=_clean(attrs), record_exception=False)
    try:
        yield s
    except BaseException as e:
        s.set_status(Status(StatusCode.ERROR, type(e).__name__))
        raise
    finally:
        s.end()


def start(
    name: str,
    attrs: Attrs | None = None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    parent: Context | None = None,
) -> Span:
    """A span the caller ends itself (`end()`): one that outlives the function that opened it, such
    as the gateway's request span, opened before the model call and ended when its answer is logged."""
    tracer = _state.tracer
    if tracer is None:
        return INVALID_SPAN
    return tracer.start_span(_short(name), context=parent, kind=kind, attributes=_clean(attrs))


def end(s: Span | None, attrs: Attrs | None = None, *, error: str = "") -> None:
    if s is None or not s.is_recording():
        return
    if attrs:
        s.set_attributes(_clean(attrs))
    if error:
        s.set_status(Status(StatusCode.ERROR, error))
    s.end()


@contextlib.contextmanager
def within(s: Span) -> Iterator[None]:
    """Make `s` the current span for the block (its children nest under it)."""
    if not s.is_recording():
        yield
        return
    token = otel_context.attach(trace.set_span_in_context(s))
    try:
        yield
    finally:
        otel_context.detach(token)


def set_attrs(s: Span, attrs: Attrs) -> None:
    if s.is_recording():
        s.set_attributes(_clean(attrs))


def annotate(attrs: Attrs) -> None:
    """Attributes on whatever span is current (a job's run span, from its summary)."""
    if _state.tracer is not None:
        set_attrs(trace.get_current_span(), attrs)


def text(s: Span, key: str, value: str) -> None:
    """Text (a query, a memory) on a span, only where `content` is on; the cut keeps spans small."""
    if _state.content and s.is_recording():
        s.set_attribute(key, value[:2000].encode("utf-8", "replace").decode("utf-8"))


def pseudonym(value: str | None) -> str | None:
    """A keyed digest of an id that is itself an unkeyed hash of text (the conversation id is a
    SHA-256 chain over the turns as sent): equal for equal ids, but whoever reads the collector
    cannot confirm a guessed question by hashing it."""
    if value is None or _state.tracer is None:  # off: not even the digest is paid for
        return None
    return hmac.new(_state.key, b"brain.trace\x00" + value.encode(), hashlib.sha256).hexdigest()[:32]


def context_of(s: Span | None) -> Context | None:
    """A context whose current span is `s`, to open children of it elsewhere (a queue's worker),
    also after `s` has ended: capture runs after the request's span is closed."""
    if s is None or not s.get_span_context().is_valid:
        return None
    return trace.set_span_in_context(s)


def current() -> Context | None:
    """The context to carry across a queue or a task boundary (None when tracing is off)."""
    return otel_context.get_current() if _state.tracer is not None else None


def inject(headers: dict[str, str]) -> dict[str, str]:
    """W3C `traceparent` for the current span into outgoing headers (a no-op when off)."""
    if _state.tracer is not None:
        propagate.inject(headers)
    return headers


def extract(headers: Mapping[str, str]) -> Context | None:
    """The caller's trace context from incoming headers: our spans continue its trace."""
    if _state.tracer is None or "traceparent" not in {k.lower() for k in headers}:
        return None
    return propagate.extract({k.lower(): v for k, v in headers.items()})


#: a span name's or a string attribute's most characters (text() has its own cut)
SHORT = 256


def _short(value: str) -> str:
    """Names and labels come from callers too (a request's `model`, up to a 32 MB body): one huge span
    would make its whole batch too big for the collector, and a lone surrogate unencodable."""
    return value[:SHORT].encode("utf-8", "replace").decode("utf-8")


def _clean(attrs: Attrs | None) -> dict[str, AttrValue]:
    return {k: _short(v) if isinstance(v, str) else v for k, v in (attrs or {}).items() if v is not None}
