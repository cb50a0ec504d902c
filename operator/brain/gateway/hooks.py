"""The LiteLLM callback: explicit overrides, then retrieve-and-inject before the call; capture after it.

`proxy_handler_instance` is what the rendered config lists under `litellm_settings.callbacks`.
Every path is wrapped so that a brain failure (database, embedder, timeout, bug) degrades to "no
memory" and is counted, never to an error for the request.

Request headers a caller may send:
- `x-brain-memory: off` — neither inject nor capture; `read` — inject, do not capture; `on` (default).
- `x-brain-namespaces: repo:a,repo:b` — retrieve from these namespaces (within what the key may see)
  and capture into the first one the key may write.
- `x-brain-episode: <id>` — record this exchange's captures in that episode (a conversation, a task), so
  retrieval can let them lend each other relevance. Without it LiteLLM's `litellm_session_id` is used,
  else each exchange is an episode of its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from litellm.integrations.custom_logger import CustomLogger

from brain.core import tracing
from brain.core.models import SHARED, Actor
from brain.gateway import metrics
from brain.gateway.auth import actor_of
from brain.gateway.inject import api_of, query_of, response_texts
from brain.gateway.placement import Placed, answered, chain, conversation, newest_person_turn, put_back
from brain.gateway.retractions import with_notices
from brain.gateway.routing import pick_override, routing_decision
from brain.gateway.runtime import CallContext, Runtime, get_runtime
from brain.gateway.usage import input_tokens, usage_attrs
from brain.retrieval import telemetry
from brain.retrieval.compose import Injection
from brain.store.outage import UNAVAILABLE

log = logging.getLogger("brain.gateway.hooks")

MEMORY_HEADER = "x-brain-memory"
NAMESPACES_HEADER = "x-brain-namespaces"
EPISODE_HEADER = "x-brain-episode"
MODEL_IN_SPAN = 128  # characters of the requested model's name in the request span's name and attribute


def _headers(data: dict[str, Any]) -> dict[str, str]:
    psr = data.get("proxy_server_request") or {}
    raw = psr.get("headers") if isinstance(psr, dict) else None
    return {str(k).lower(): str(v) for k, v in (raw or {}).items()}


def _episode(headers: dict[str, str], data: dict[str, Any]) -> str | None:
    meta = data.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    for value in (
        headers.get(EPISODE_HEADER),
        data.get("litellm_session_id"),
        meta.get("litellm_session_id"),
    ):
        if isinstance(value, str) and value.strip():
            return value.strip()[:200]
    call_id = data.get("litellm_call_id")
    return f"call:{call_id}" if isinstance(call_id, str) and call_id else None


def _response_id(response: Any, api: str) -> str | None:
    """A Responses API answer's id (what a continuing request names as `previous_response_id`)."""
    if api != "responses" or response is None:
        return None
    rid = response.get("id") if isinstance(response, dict) else getattr(response, "id", None)
    return rid if isinstance(rid, str) and rid else None


def _write_namespace(actor: Actor, requested: list[str]) -> str:
    for ns in requested:
        if actor.can_write(ns):
            return ns
    if actor.namespaces:
        return actor.namespaces[0]
    return SHARED


class BrainHooks(CustomLogger):
    # ------------------------------------------------------------------ pre-call

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any]:
        t0 = time.perf_counter()
        rt = get_runtime()
        api = api_of(str(call_type))
        if rt is None or api is None:
            return data
        headers = _headers(data)
        model = str(data.get("model") or "")[:MODEL_IN_SPAN]  # the caller's string: bounded
        # the request's span: the caller's trace continues (traceparent), the model call's answer ends it
        request = tracing.start(
            f"chat {model}".strip(),
            {tracing.OPERATION: "chat", tracing.MODEL: model, "brain.api": api},
            kind=tracing.SERVER,
            parent=tracing.extract(headers),
        )
        ctx: CallContext | None = None
        try:
            with tracing.within(request):
                ctx = await self._pre_call(rt, api, user_api_key_dict, data, headers, request)
        except Exception:  # a bug here must never fail the request
            log.exception("brain pre-call hook failed; the request goes on without memory")
            telemetry.retrieval_degraded.labels("error").inc()
            metrics.requests.labels(api, "degraded").inc()
        finally:
            metrics.hook_seconds.labels("pre_call").observe(time.perf_counter() - t0)
            if ctx is None or ctx.span is None:  # no post-call hook will find it: it ends here
                tracing.end(request, {"brain.memory.outcome": ctx.memory if ctx else "degraded"})
        return data

    async def _pre_call(
        self,
        rt: Runtime,
        api: str,
        user_api_key_dict: Any,
        data: dict[str, Any],
        headers: dict[str, str],
        request: Any,
    ) -> CallContext:
        query = query_of(data, api)
        actor = actor_of(user_api_key_dict) or Actor(name="anonymous", role="read", origin="agent")
        route: dict[str, str] = {}
        ov = pick_override(data.get("model"), query, rt.settings.routing.overrides)
        if ov is not None:
            route = {"router": str(data.get("model")), "tier": "override", "model": ov.model}
            data["model"] = ov.model

        mode = headers.get(MEMORY_HEADER, "on").strip().lower()
        requested = [ns.strip() for ns in headers.get(NAMESPACES_HEADER, "").split(",") if ns.strip()]
        scope = rt.scope_for(actor, requested)
        ctx = CallContext(
            actor=actor,
            api=api,
            query=query,
            namespaces=scope.namespaces,
            write_namespace=_write_namespace(actor, requested),
            capture=mode not in ("off", "read", "false", "0", "no"),
            route=route,
            episode=_episode(headers, data),
        )
        call_id = data.get("litellm_call_id")
        if isinstance(call_id, str):
            ctx.span = request if request.is_recording() else None
            rt.remember(call_id, ctx)
        if mode in ("off", "false", "0", "no") or not rt.settings.retrieval.enabled:
            ctx.memory = "off"
        else:
            ctx.memory = await self._place(rt, ctx, scope, data)
        metrics.requests.labels(api, ctx.memory).inc()
        tracing.set_attrs(
            request,
            {
                "brain.memory.outcome": ctx.memory,
                "brain.memory.count": len(ctx.injected),
                "brain.namespaces.count": len(ctx.namespaces),
                tracing.CONVERSATION: tracing.pseudonym(ctx.conversation),
            },
        )
        tracing.text(request, "brain.query.text", query)
        return ctx

    async def _place(self, rt: Runtime, ctx: CallContext, scope: Any, data: dict[str, Any]) -> str:
        """Put earlier turns' blocks back where they were; retrieve only for a question without one.

        brain.gateway.placement says why: the provider's prompt cache holds only while every byte
        the gateway added to earlier turns comes back the same, at the same place.
        """
        items = conversation(data, ctx.api)
        seed = str(data.get("previous_response_id") or "") if ctx.api == "responses" else ""
        hashes = chain(items, seed)
        earlier = rt.ledger.found(ctx.actor.name, ctx.api, hashes)
        target = newest_person_turn(items)
        ctx.conversation = rt.exposure.conversation(ctx.actor.name, hashes, earlier, target, seed or None)
        if target is not None and not answered(items, target):
            earlier.pop(target, None)  # asked anew: fresh memory, not last time's (placement.answered)
        blocks = {i: p.block for i, p in earlier.items() if p.block}
        metrics.blocks_put_back.inc(put := len(blocks))
        ids = [m for p in earlier.values() for m in p.ids]
        # the outcome for this turn's question: a resend's is what its question was given then
        memory = "skipped"
        if target is not None and target in earlier:
            memory = "injected" if earlier[target].block else "none"
        if target is not None and target not in earlier and ctx.query:
            memory, injection = await self._retrieve(rt, ctx, scope)
            # retractions of memories this conversation was given go with this turn's block (retractions.py)
            ctx.notices = rt.exposure.due(ctx.actor.name, hashes, ctx.conversation)
            text = with_notices(injection.text if injection is not None else "", ctx.notices)
            if injection is not None or ctx.notices:
                # "none" is remembered too: the next request of a tool loop must not add memory to a
                # turn the provider has already cached without it
                given = tuple(injection.ids) if injection is not None else ()
                rt.ledger.record(ctx.actor.name, ctx.api, hashes[target], Placed(text, given))
                if text:
                    blocks[target] = text
                if injection is not None and injection.text:
                    ids = [*injection.ids, *ids]
                    rt.exposure.receipt(injection.ids, ctx.actor.name, ctx.conversation, ctx.api)
        with tracing.leaf("inject", {"brain.memory.blocks": len(blocks), "brain.memory.put_back": put}):
            put_back(data, ctx.api, blocks)
        ctx.injected = list(dict.fromkeys(ids))
        ctx.injected_text = "\n\n".join(blocks.values())  # all this request holds: capture never re-learns it
        return memory

    async def _retrieve(self, rt: Runtime, ctx: CallContext, scope: Any) -> tuple[str, Injection | None]:
        attrs: tracing.Attrs = {
            tracing.OPERATION: "search_memory",
            "brain.namespaces.count": len(scope.namespaces),
        }
        with tracing.span("search_memory", attrs) as span:
            tracing.text(span, "brain.query.text", ctx.query)
            outcome, injection = await self._search(rt, ctx, scope)
            tracing.set_attrs(
                span,
                {
                    "brain.retrieval.outcome": outcome,
                    "brain.memory.count": len(injection.ids) if injection is not None else 0,
                    "brain.memory.injected_tokens": injection.tokens if injection is not None else 0,
                    "brain.retrieval.degraded": ctx.degraded or None,
                },
            )
            return outcome, injection

    async def _search(self, rt: Runtime, ctx: CallContext, scope: Any) -> tuple[str, Injection | None]:
        timeout = rt.settings.retrieval.timeout_ms / 1000
        injection: Injection | None = None
        try:
            injection = await asyncio.wait_for(rt.memory_block(ctx.actor, scope, ctx.query), timeout)
        except TimeoutError:
            telemetry.retrieval_degraded.labels("timeout").inc()
            ctx.degraded = ["timeout"]
            return "degraded", None
        except UNAVAILABLE:
            telemetry.retrieval_degraded.labels("db_down").inc()
            ctx.degraded = ["db_down"]
            return "degraded", None
        except Exception:
            log.warning("retrieval failed; the request goes on without memory", exc_info=True)
            telemetry.retrieval_degraded.labels("error").inc()
            ctx.degraded = ["error"]
            return "degraded", None
        finally:
            rt.after_injection(ctx, injection)
        # a part retrieval ran without (the embedder down: lexical legs alone), told to the caller
        ctx.degraded = list(dict.fromkeys(injection.degraded))
        if not injection.text:  # nothing bore on the request: inject nothing rather than noise
            telemetry.retrieval_queries.labels("no_hit").inc()
            telemetry.injected_tokens.observe(0)
            return "none", injection
        telemetry.retrieval_queries.labels("hit").inc()
        telemetry.injected_tokens.observe(injection.tokens)
        return "injected", injection

    # ------------------------------------------------------------------ post-call

    async def async_post_call_response_headers_hook(
        self,
        data: dict[str, Any],
        user_api_key_dict: Any,
        response: Any,
        request_headers: dict[str, str] | None = None,
        litellm_call_info: dict[str, Any] | None = None,
    ) -> dict[str, str] | None:
        rt = get_runtime()
        if rt is None:
            return None
        ctx = rt.recall(data.get("litellm_call_id"), "headers")
        out: dict[str, str] = {}
        route = (ctx.route if ctx else {}) or routing_decision(data) or {}
        if route.get("model"):
            out["x-brain-route-tier"] = route.get("tier") or ""
            out["x-brain-route-model"] = route["model"]
            if ctx is not None and not ctx.route:
                ctx.route = route
            if response is not None:
                metrics.router_decisions.labels(
                    route.get("router", ""), route.get("tier", ""), route["model"]
                ).inc()
        if ctx is not None:
            out["x-brain-memory"] = ctx.memory
            if ctx.degraded:
                out["x-brain-memory-degraded"] = ",".join(ctx.degraded)
            if ctx.injected:
                out["x-brain-memory-ids"] = ",".join(ctx.injected[:20])
        return out or None

    async def async_log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        rt = get_runtime()
        if rt is None:
            return
        billed = input_tokens(response_obj)
        for cache, n in (billed or {}).items():
            if n:
                metrics.upstream_input_tokens.labels(str(kwargs.get("model") or ""), cache).inc(n)
        try:
            ctx = rt.recall(kwargs.get("litellm_call_id"), "logged")
            if ctx is None:
                return
            tracing.end(ctx.span, usage_attrs(billed, response_obj))
            rt.exposure.delivered(ctx.notices)
            rt.exposure.link(ctx.actor.name, _response_id(response_obj, ctx.api), ctx.conversation)
            answer, reasoning = response_texts(response_obj)
            rt.capture_exchange(ctx, answer, reasoning, str(kwargs.get("model") or ""))
        except Exception:
            log.warning("capture hand-off failed", exc_info=True)
            metrics.captures_filtered.labels("error").inc()

    async def async_post_call_failure_hook(
        self,
        request_data: dict[str, Any],
        original_exception: Exception,
        user_api_key_dict: Any,
        traceback_str: str | None = None,
    ) -> None:
        """The request failed for good. Not LiteLLM's failure log: that runs for every attempt its
        router retries (two by default), and when it ended the call, the retry that succeeded went
        out without x-brain-memory and its exchange was never captured."""
        rt = get_runtime()
        if rt is not None:
            ctx = rt.recall(request_data.get("litellm_call_id"), "failed")
            if ctx is not None:
                rt.exposure.undelivered(ctx.notices)  # told next time
                tracing.end(ctx.span, error="upstream_failed")


proxy_handler_instance = BrainHooks()
