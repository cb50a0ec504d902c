"""Reading the question out of, and the answer out of, OpenAI and Anthropic bodies (pure).

Three wire APIs: chat completions (`messages`), Anthropic messages (`system` + `messages`) and the
OpenAI Responses API (`instructions` + `input`, what Codex speaks). The question is what the person
asked, with the agent's harness text cut away (`brain.gateway.harness`). Where the memory goes is
`brain.gateway.placement`'s job: into the person's newest message, so the provider's prompt cache
of everything before it holds.
"""

from __future__ import annotations

from typing import Any

from brain.gateway.harness import question_of
from brain.retrieval.query import shape_query

ANTHROPIC = "anthropic_messages"
CHAT = ("acompletion", "completion")
RESPONSES = ("aresponses", "responses")


def api_of(call_type: str) -> str | None:
    if call_type in CHAT:
        return "chat"
    if call_type == ANTHROPIC:
        return "messages"
    if call_type in RESPONSES:
        return "responses"
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


def query_of(data: dict[str, Any], api: str = "chat") -> str:
    """The retrieval query of a request: the person's latest question, harness and tool output cut away."""
    return shape_query(question_of(data, api))


def _responses_output(output: list[Any]) -> tuple[str, str]:
    """(answer, reasoning) of a Responses API `output` list: output_text parts, reasoning summaries."""
    text, think = [], []
    for item in output:
        item = item if isinstance(item, dict) else _as_dict(item)
        if item.get("type") == "message":
            for part in item.get("content") or []:
                part = part if isinstance(part, dict) else _as_dict(part)
                if part.get("type") == "output_text" and part.get("text"):
                    text.append(str(part["text"]))
        elif item.get("type") == "reasoning":
            for part in [*(item.get("summary") or []), *(item.get("content") or [])]:
                part = part if isinstance(part, dict) else _as_dict(part)
                if part.get("text"):
                    think.append(str(part["text"]))
    return "\n".join(text), "\n".join(think)


def _as_dict(obj: Any) -> dict[str, Any]:
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        out = dump()
        return out if isinstance(out, dict) else {}
    return dict(obj) if isinstance(obj, dict) else {}


def response_texts(response: Any) -> tuple[str, str]:
    """(answer, reasoning) of a finished response: a LiteLLM ModelResponse or an Anthropic message dict."""
    if response is None:
        return "", ""
    output = response.get("output") if isinstance(response, dict) else getattr(response, "output", None)
    if isinstance(output, list):  # Responses API (dict or litellm's ResponsesAPIResponse)
        return _responses_output(output)
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
