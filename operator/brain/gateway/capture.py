"""Capture and learn: decide what of a finished exchange is worth keeping, and keep it off the request path.

The heuristics are the seed's: code blocks of ≥ `min_code_lines` lines become `code` entries,
architectural insight becomes a `summary`, and a problem with a substantive answer becomes an
`experience` whose outcome (resolved / uncertain / failed) is inferred from the answer's own
language. Two quality gates come first: venting prompts and noisy answers (self-corrections, stack
traces, hedging) are not training data. Reasoning content counts, so reasoning-heavy models are not
excluded. A response that echoes injected memory is never captured (that would be a feedback loop).
Model output is never turned into executable instructions for other agents: shell code blocks are
not captured at all, and every entry passes the service's door with the strict lint policy (origin
`gateway`: no runbook exemption), so a `curl … | bash` in an answer is dropped and counted.

Capture keeps only what is new (#32):

- *Laundering*: a note an attacker planted is injected into a victim's request, the model restates it,
  and the answer would be captured again under the victim's key. The hooks know what was injected, so
  an item whose text is mostly the injected text is dropped (`restates_injected`): it is not the
  caller's knowledge. Two tests, each against every injected passage (`injected_passages`): the share
  of the item's word 3-grams found in it (`restates`, a near-verbatim copy), and, for a paraphrase,
  the cosine of their embeddings by the gateway's own model (`restated_by_meaning`, ≥ 0.85; a new
  answer on the same topic scores ~0.65 with all-MiniLM-L6-v2, a paraphrase of the note ~0.9).
- *Download-then-run*: a code block that fetches from a host outside `capture.trustedHosts` and runs
  something (`untrusted_fetch`: curl | sh, `RUN pip install --index-url …`, a Makefile target, a
  Python `urlopen` + `exec`, a `terminal` transcript) is marked for review; the write path queues it
  as a proposal for an owner instead of storing it (`brain.services.capture.write`).

`CaptureQueue` is a bounded queue drained by a few workers: `submit` never waits; a full queue
drops the job and counts it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from brain.core.sanitize import longest_backtick_run
from brain.gateway import metrics
from brain.gateway.harness import own_words

log = logging.getLogger("brain.gateway.capture")

_FENCE = re.compile(r"^(`{3,}|~{3,})([^\n`]*)\n(.*?)^\1[ \t]*$", re.S | re.M)
_ARCH_MARKERS = re.compile(
    r"(?i)\b(design pattern|best practice|the reason is|the reason why|trade-?offs?|architectur\w*|convention|"
    r"we (?:chose|decided)|invariant|root cause|rule of thumb|under the hood|this works because)\b"
)
_PROBLEM_MARKERS = re.compile(
    r"(?i)\b(error|errors|bug|fix|fixes|fixing|why does|why is|how do i fix|exception|traceback|crash\w*|fails?|"
    r"failing|failed|broken|doesn't work|does not work|not working|panic|segfault|regression|stack ?trace)\b"
)
_VENTING = re.compile(
    r"(?i)\b(fuck\w*|shit\w*|cunt|bitch\w*|bastard|idiot\w*|stupid|useless|moron\w*|dumbass|crap|garbage|"
    r"you suck|you're terrible|you are terrible|wtf|shut up|pathetic|incompetent)\b"
)
_NOISE = re.compile(
    r"(?i)(I apologi[sz]e|my apologies|let me correct (?:that|myself)|I made a mistake|as an AI (?:language )?model|"
    r"I'm not sure (?:about|if|whether)|I am not sure (?:about|if|whether)|I cannot help with|I can't help with|"
    r"Traceback \(most recent call last\)|^\s+at [\w.$]+\(.*:\d+\)$|I (?:don't|do not) have access to)",
    re.M,
)
_RESOLVED = re.compile(
    r"(?i)\b(this (?:should|will) (?:fix|resolve|solve)|that (?:should|will) (?:fix|resolve)|fixed by|the fix is|"
    r"resolves? the|solves? the|the solution is|the problem was|the issue was|root cause (?:is|was)|works now)\b"
)
_UNCERTAIN = re.compile(
    r"(?i)\b(might|maybe|perhaps|possibly|one (?:approach|option) (?:is|might)|another option|could try|"
    r"it depends|not certain|hard to say)\b"
)
_FAILED = re.compile(
    r"(?i)\b(unfortunately[^.]{0,60}(?:doesn't|does not|won't|will not|can't|cannot)|no (?:known )?(?:way|fix|"
    r"workaround)|isn't possible|is not possible|there is no solution|I couldn't find)\b"
)
MEMORY_MARKER = "[team memory "
PERSONA_MARKER = "[team persona "
# Shell code in model output is an executable instruction, not knowledge: it is never captured.
SHELL_LANGS = frozenset(
    {
        "bash",
        "sh",
        "zsh",
        "shell",
        "console",
        "shell-session",
        "fish",
        "ksh",
        "powershell",
        "ps1",
        "pwsh",
        "bat",
        "cmd",
        "batch",
    }
)
# Downloads: a URL (or git/pip/npm source) in a code block, and its host.
_URL_HOST = re.compile(r"(?i)\b(?:https?|ftp|git\+https?|s3)://(?:[^@/\s'\"`]+@)?([a-z0-9.-]+)")
# Running something: a pipe into an interpreter, an installer (install scripts run code), an exec of
# fetched bytes, a Dockerfile RUN, a make recipe, chmod +x then the file.
_RUNS = re.compile(
    r"(?im)(?:\|\s*(?:sudo\s+)?(?:ba|z|k|da|fi)?sh\b|\|\s*(?:sudo\s+)?(?:python\d?|node|perl|ruby|php|iex)\b|"
    r"^\s*(?:\$\s*)?(?:sudo\s+)?(?:ba|z)?sh\s+\S|\bsource\s+|\.\s+<\(|<\(\s*(?:curl|wget)|"
    r"\b(?:pip3?|uv pip|pipx|npm|pnpm|yarn|gem|cargo|go)\s+(?:install|add|get)\b|"
    r"\b(?:exec|eval|compile)\s*\(|\bsubprocess\.|\bos\.(?:system|popen|exec\w*)\s*\(|"
    r"\b(?:Invoke-Expression|IEX)\b|^\s*RUN\s|^\t\S|\bchmod\s+\+?[0-7]*x|\bbash\s+-c\b)"
)


def fetched_hosts(code: str) -> list[str]:
    """The hosts a code block downloads from (lower case, in order, once each)."""
    return list(dict.fromkeys(h.lower().rstrip(".") for h in _URL_HOST.findall(code)))


def trusted(host: str, hosts: Sequence[str]) -> bool:
    """`host` is one of `hosts` or a subdomain of one (pkg.example.com under example.com)."""
    host = host.lower().rstrip(".")
    return any(host == t or host.endswith("." + t) for t in (h.lower().rstrip(".") for h in hosts))


def untrusted_fetch(code: str, trusted_hosts: Sequence[str]) -> list[str]:
    """The untrusted hosts a block downloads from, when it also runs something; [] when it is data."""
    hosts = [h for h in fetched_hosts(code) if not trusted(h, trusted_hosts)]
    return hosts if hosts and _RUNS.search(code) else []


_PASSAGE = re.compile(r"^(`{3,})\n(.*?)\n\1$", re.S | re.M)
RESTATES_COSINE = 0.85


def injected_passages(block: str) -> list[str]:
    """The writer text of each memory in a rendered injection: what is inside its fence (pure)."""
    return [m.group(2) for m in _PASSAGE.finditer(block)]


def restated_by_meaning(
    items: np.ndarray, passages: np.ndarray, cosine: float = RESTATES_COSINE
) -> list[bool]:
    """Per item vector: whether it is as close as a paraphrase to any passage vector (pure)."""
    if not len(items) or not len(passages):
        return [False] * len(items)
    a = items / np.maximum(np.linalg.norm(items, axis=1, keepdims=True), 1e-12)
    b = passages / np.maximum(np.linalg.norm(passages, axis=1, keepdims=True), 1e-12)
    return [bool(x >= cosine) for x in (a @ b.T).max(axis=1)]


_WORD = re.compile(r"[^\W_]+")


def _shingles(text: str, n: int = 3) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return {tuple(words[i : i + n]) for i in range(max(0, len(words) - n + 1))}


RESTATES_SHARE = 0.5


def restates(text: str, injected: str, share: float = RESTATES_SHARE) -> bool:
    """Whether most of `text` (its word 3-grams) is already in `injected`: a restatement, not news."""
    if not injected or not text:
        return False
    own = _shingles(text)
    if not own:
        return False
    return len(own & _shingles(injected)) / len(own) >= share


MIN_RESPONSE_CHARS = 80
MAX_BODY = 6000
MAX_CODE_BLOCKS = 3


@dataclass
class Item:
    """One entry to store: fields of `MemoryIn` (namespace and author are set by the caller)."""

    kind: str
    title: str
    body: str
    tags: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    importance: float = 0.3
    review: list[str] = field(default_factory=list)  # untrusted hosts it downloads from: an owner decides


@dataclass
class Decision:
    items: list[Item]
    filtered: str | None = None  # why nothing was kept, when a gate refused the exchange


def infer_outcome(answer: str) -> str:
    """resolved / uncertain / failed, from the answer's own language (the seed's `_infer_outcome`)."""
    if _FAILED.search(answer):
        return "failed"
    resolved = len(_RESOLVED.findall(answer))
    uncertain = len(_UNCERTAIN.findall(answer))
    if resolved and resolved >= uncertain:
        return "resolved"
    if uncertain >= 2 or not resolved:
        return "uncertain"
    return "resolved"


def _title(query: str, prefix: str = "") -> str:
    """A capture's title: the person's own words (never pasted markup, code or quotes: `own_words`)."""
    first = " ".join(own_words(query).split()) or "captured exchange"
    return (prefix + first)[:120]


def _paragraphs_with_markers(text: str, limit: int = 1500) -> str:
    out, used = [], 0
    for para in re.split(r"\n\s*\n", _FENCE.sub("", text)):
        p = para.strip()
        if p and _ARCH_MARKERS.search(p) and used + len(p) <= limit:
            out.append(p)
            used += len(p)
    return "\n\n".join(out)


def analyse(
    query: str,
    answer: str,
    reasoning: str = "",
    *,
    min_code_lines: int = 10,
    venting: bool = True,
    noise: bool = True,
    trusted_hosts: Sequence[str] = (),
) -> Decision:
    """Pure: what this exchange would store (or send to review), or why nothing."""
    text = answer or ""
    if not (text.strip() or reasoning.strip()):
        return Decision([], "empty")
    if MEMORY_MARKER in text or PERSONA_MARKER in text:
        return Decision([], "echo_of_memory")
    if venting and _VENTING.search(query):
        return Decision([], "venting")
    if noise and _NOISE.search(text):
        return Decision([], "noise")
    if len(text.strip()) + len(reasoning.strip()) < MIN_RESPONSE_CHARS:
        return Decision([], "too_short")

    items: list[Item] = []
    for m in _FENCE.finditer(text):
        code = m.group(3).rstrip("\n")
        lines = [ln for ln in code.splitlines() if ln.strip()]
        lang = m.group(2).strip().split()[0] if m.group(2).strip() else ""
        if lang.lower() in SHELL_LANGS:
            continue
        if len(lines) >= min_code_lines and len(items) < MAX_CODE_BLOCKS:
            fence = "`" * max(3, longest_backtick_run(code) + 1)
            body = f"From an answer to: {_title(query)}\n\n{fence}{lang}\n{code}\n{fence}"
            items.append(
                Item(
                    "code",
                    _title(query, "code: "),
                    body[:MAX_BODY],
                    ["captured", "code", *([lang] if lang else [])],
                    {"language": lang, "lines": len(lines)},
                    review=untrusted_fetch(code, trusted_hosts),
                )
            )

    insight = _paragraphs_with_markers(text) or _paragraphs_with_markers(reasoning)
    if insight:
        items.append(Item("summary", _title(query, "insight: "), insight[:MAX_BODY], ["captured", "summary"]))

    prose = _FENCE.sub("[code]", text).strip() or reasoning.strip()
    if _PROBLEM_MARKERS.search(query) and len(prose) >= 200:
        outcome = infer_outcome(text or reasoning)
        body = f"Problem: {query.strip()[:1500]}\n\nSolution: {prose[:3500]}\n\nOutcome: {outcome}"
        items.append(
            Item(
                "experience",
                _title(query, "experience: "),
                body[:MAX_BODY],
                ["captured", "experience", outcome],
                {"outcome": outcome},
                importance={"resolved": 0.5, "uncertain": 0.3, "failed": 0.2}[outcome],
            )
        )
    return Decision(items, None if items else "nothing_worth_keeping")


Job = Callable[[], Awaitable[None]]


class CaptureQueue:
    """A bounded queue with workers. `submit` never blocks a response: a full queue drops and counts."""

    def __init__(self, size: int = 1000, workers: int = 2) -> None:
        self.size = size
        self.workers = workers
        self._queue: asyncio.Queue[Job] = asyncio.Queue(maxsize=size)
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._queue = asyncio.Queue(maxsize=self.size)
        self._tasks = [
            asyncio.create_task(self._work(), name=f"brain-capture-{i}") for i in range(self.workers)
        ]

    def submit(self, job: Job, what: str = "capture") -> bool:
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            metrics.queue_dropped.labels(what).inc()
            return False
        metrics.queue_depth.set(self._queue.qsize())
        return True

    @property
    def depth(self) -> int:
        return self._queue.qsize()

    async def join(self, timeout: float = 10.0) -> None:
        """Wait until the queued jobs are done (tests, shutdown)."""
        await asyncio.wait_for(self._queue.join(), timeout)

    async def _work(self) -> None:
        while True:
            job = await self._queue.get()
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("a capture job failed", exc_info=True)
                metrics.capture_errors.inc()
            finally:
                self._queue.task_done()
                metrics.queue_depth.set(self._queue.qsize())

    async def stop(self, drain: float = 5.0) -> None:
        try:
            await asyncio.wait_for(self._queue.join(), drain)
        except TimeoutError:
            log.warning("capture queue not drained at shutdown; %d jobs dropped", self._queue.qsize())
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
