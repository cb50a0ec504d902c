"""Reading the question out of, and putting memory into, OpenAI and Anthropic request bodies (pure).

The memory block goes *after* the client's own system prompt (a second system message for chat
completions, an extra text block for /v1/messages): the client's long, stable prompt stays a cache
prefix at the provider, and only our part varies.
"""

from __future__ import annotations

from typing import Any

from brain.retrieval.query import shape_query

ANTHROPIC = "anthropic_messages"
CHAT = ("acompletion", "completion")


def api_of(call_type: str) -> str | None:
    if call_type in CHAT:
        return "chat"
    if call_type == ANTHROPIC:
        return "messages"
    return None


def text_of(content: Any) -> str:
    """The text parts of a message's content (string, OpenAI parts, Anthropic blocks); tool results excluded."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and part.get("type") in ("text", "input_text") and part.get("text"):
                out.append(str(part["text"]))
        return "\n".join(out)
    return ""


def last_user_text(messages: Any) -> str:
    """The latest user turn that has text; agent loops end with tool results, so we look back past them."""
    if not isinstance(messages, list):
        return ""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            text = text_of(m.get("content")).strip()
            if text:
                return text
    return ""


def query_of(data: dict[str, Any]) -> str:
    return shape_query(last_user_text(data.get("messages")))


def inject(data: dict[str, Any], api: str, block: str) -> None:
    """Put `block` into the request in place: after the client's system prompt, before the conversation."""
    if not block:
        return
    if api == "messages":
        system = data.get("system")
        if isinstance(system, list):
            data["system"] = [*system, {"type": "text", "text": block}]
        elif isinstance(system, str) and system.strip():
            data["system"] = f"{system}\n\n{block}"
        else:
            data["system"] = block
        return
    messages = list(data.get("messages") or [])
    i = 0
    while (
        i < len(messages)
        and isinstance(messages[i], dict)
        and messages[i].get("role") in ("system", "developer")
    ):
        i += 1
    messages.insert(i, {"role": "system", "content": block})
    data["messages"] = messages


def response_texts(response: Any) -> tuple[str, str]:
    """(answer, reasoning) of a finished response: a LiteLLM ModelResponse or an Anthropic message dict."""
    if response is None:
        return "", ""
    if isinstance(response, dict):
        if isinstance(response.get("content"), list):  # Anthropic message
            text = [
                b.get("text", "")
                for b in response["content"]
                if isinstance(b, dict) and b.get("type") == "text"
            ]
            think = [
                b.get("thinking", "")
                for b in response["content"]
                if isinstance(b, dict) and b.get("type") == "thinking"
            ]
            return "\n".join(text), "\n".join(think)
        choices = response.get("choices") or []
        if choices:
            msg = choices[0].get("message") or {}
            return str(msg.get("content") or ""), str(msg.get("reasoning_content") or "")
        return "", ""
    choices = getattr(response, "choices", None) or []
    if choices:
        msg = getattr(choices[0], "message", None)
        if msg is not None:
            content = getattr(msg, "content", None)
            reasoning = getattr(msg, "reasoning_content", None)
            return text_of(content) if not isinstance(content, str) else content, str(reasoning or "")
    content = getattr(response, "content", None)
    if isinstance(content, list):
        return response_texts({"content": [c if isinstance(c, dict) else dict(c) for c in content]})
    return "", ""
