"""The one screening of a writer's entry, below every door that writes (memory, proposals, capture).

Every field a writer controls (title, body, tags, attrs keys and values, source_key, episode,
domain_keywords) passes the secret gate, then the instruction lint, after the model's normalisation
(one-line NFKC titles, no control or invisible characters). It sits in its own module so the
proposal queue can screen a draft without importing the memory door that writes an approved one
(the services-layers contract in .importlinter).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from brain.core import lint, tracing
from brain.core.errors import InvalidInput
from brain.core.models import MemoryIn
from brain.core.redact import SecretGate


def parse_memory(data: dict[str, Any]) -> MemoryIn:
    """Validate caller input; the error names the field and what would be accepted."""
    try:
        return MemoryIn.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "body"
        raise InvalidInput(f"{loc}: {err['msg']}", field=loc) from None


def _gate_json(value: Any, path: str, gate: SecretGate) -> Any:
    if isinstance(value, dict):
        return {gate.check(path, k): _gate_json(v, f"{path}.{k}", gate) for k, v in value.items()}
    if isinstance(value, list):
        return [_gate_json(v, path, gate) for v in value]
    return gate.check(path, value) if isinstance(value, str) else value


def _json_strings(value: Any, path: str) -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in ((path, k), *_json_strings(v, f"{path}.{k}"))]
    if isinstance(value, list):
        return [p for v in value for p in _json_strings(v, path)]
    return [(path, value)] if isinstance(value, str) else []


def gate_fields(item: MemoryIn, gate: SecretGate) -> MemoryIn:
    """The secret gate over every writer-controlled field (refuse raises; redact returns masked copies)."""
    return item.model_copy(
        update={
            "title": gate.check("title", item.title),
            "body": gate.check("body", item.body),
            "tags": [gate.check("tags", t) for t in item.tags],
            "domain_keywords": [gate.check("domain_keywords", k) for k in item.domain_keywords],
            "source_key": None if item.source_key is None else gate.check("source_key", item.source_key),
            "episode": None if item.episode is None else gate.check("episode", item.episode),
            "attrs": _gate_json(item.attrs, "attrs", gate),
        }
    )


def lint_fields(item: MemoryIn, origin: str) -> None:
    """The instruction lint over every writer-controlled field; labels get no runbook exemption."""
    lint.check("title", item.title, kind="note", origin=origin)
    lint.check("body", item.body, kind=item.kind, origin=origin)
    labels = [
        *(("tags", t) for t in item.tags),
        *(("domain_keywords", k) for k in item.domain_keywords),
        *((f, v) for f, v in (("source_key", item.source_key), ("episode", item.episode)) if v is not None),
        *_json_strings(item.attrs, "attrs"),
    ]
    for field, value in labels:
        lint.check(field, value, kind="note", origin=origin)


def screen(item: MemoryIn, gate: SecretGate, *, origin: str) -> MemoryIn:
    """The single screening of a writer's entry: gate, then lint. `origin` picks the lint's policy."""
    with tracing.leaf("memory.secret_gate"):
        item = gate_fields(item, gate)
    with tracing.leaf("memory.lint", {"brain.origin": origin}):
        lint_fields(item, origin)
    return item
