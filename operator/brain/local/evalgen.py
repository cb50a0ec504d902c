"""A generated eval set that nobody on the team wrote by hand (issue #28).

The team set was written by the people who tuned the retrieval, so its phrasings and the constants
grew up together. This set is drawn from templates with a seeded random generator: invented
service, tool, team and variable names (so no model or BM25 statistic has seen them), facts,
decisions and conventions in several repositories, and questions of seven kinds (paraphrase,
identifier, scoped, temporal, multi-hop, distractor and "nothing relevant"). Every kind has two
template families; family "b" is held out: its questions are the test split (the dataset's
`split` rule), so no constant is chosen on a phrasing it is reported on.

`generate(seed)` is pure: the same seed gives the same JSON, byte for byte
(hack/gen_eval.py writes tests/data/generated_eval.json; a test regenerates it and compares).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

SEED = 2028
HELD_OUT = "b"

_SYL = ["kor", "van", "tel", "mis", "dra", "lum", "pex", "sor", "nid", "qua", "bre", "hol", "zin", "fay"]
_SYL += ["tor", "wen", "gal", "rix", "mon", "sep", "ul", "cad", "vor", "ith"]
_SUFFIX = ["api", "worker", "ledger", "sync", "relay", "indexer"]
_ENVS = {"staging": "pre-production", "production": "the live environment", "dev": "local development"}
_PURPOSES = {
    "error tracking": "collecting crash reports",
    "feature flags": "toggling features at runtime",
    "CI builds": "running the pipeline on each push",
    "secret storage": "keeping credentials safe",
    "log shipping": "moving logs off the hosts",
    "load testing": "finding out how much traffic we survive",
    "issue tracking": "keeping the backlog of tickets",
    "on-call paging": "waking someone up at night",
}
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
_FEATURES = ["batch refunds", "dark mode", "request tracing", "bulk export", "rate limiting", "audit trail"]
_MEANINGS = [
    "the upstream bank timed out",
    "the idempotency key was reused with a different body",
    "the tenant's quota is exhausted",
    "the schema version is older than the reader",
    "the signing certificate expired",
    "the shard is being rebalanced",
]
_RULES = [
    (
        "pull request",
        "needs {n} approvals before it is merged",
        "how many reviews does a change need before merging?",
    ),
    (
        "database migration",
        "must be reversible and ship with a down step tested in CI",
        "can a schema change be one-way?",
    ),
    (
        "public endpoint",
        "must be rate limited to {n}00 requests a minute per client",
        "what throttle applies to our external routes?",
    ),
    (
        "release",
        "is tagged from main and announced in #{chan}",
        "where do we tell people a new version went out?",
    ),
    (
        "cron job",
        "must log a heartbeat every {n} minutes",
        "how often should a scheduled task report it is alive?",
    ),
    (
        "incident",
        "gets a written postmortem within {n} working days",
        "how soon is the incident write-up due?",
    ),
]
_NONE_A = [
    ("reverse a linked list", "C"),
    ("parse a date string", "Go"),
    ("sort a dictionary by value", "Python"),
    ("debounce a function", "JavaScript"),
    ("read a file line by line", "Rust"),
    ("center a div", "CSS"),
]
_NONE_B = [
    "what is a good recipe for {food}?",
    "who won the {sport} final in {year}?",
    "recommend a novel set in {place}",
    "how tall is the tallest tree in {place}?",
    "what should I pack for a week in {place}?",
    "tell me a fun fact about {animal}",
]
_FOOD = ["banana bread", "lentil soup", "ramen", "paella", "pancakes", "gazpacho"]
_SPORT = ["chess", "curling", "cricket", "handball", "rowing", "badminton"]
_PLACE = ["Patagonia", "Iceland", "Kyoto", "Tasmania", "Lapland", "Morocco"]
_ANIMAL = ["octopuses", "otters", "crows", "axolotls", "bats", "tardigrades"]


@dataclass
class _Builder:
    rng: random.Random
    memories: list[dict[str, Any]] = field(default_factory=list)
    queries: list[dict[str, Any]] = field(default_factory=list)
    used: set[str] = field(default_factory=set)

    def name(self, parts: int = 2) -> str:
        while True:
            n = "".join(self.rng.choice(_SYL) for _ in range(parts))
            if n not in self.used and len(n) >= 5:
                self.used.add(n)
                return n

    def memory(self, ns: str, kind: str, title: str, body: str, when: str, **extra: Any) -> str:
        mid = f"g{len(self.memories) + 1:03d}"
        self.memories.append(
            {
                "id": mid,
                "namespace": ns,
                "kind": kind,
                "title": title,
                "body": body,
                "valid_from": when,
                **extra,
            }
        )
        return mid

    def ask(self, family: str, category: str, ns: str, text: str, relevant: list[str], **extra: Any) -> None:
        self.queries.append(
            {
                "id": f"{family}{len(self.queries) + 1:03d}",
                "namespace": ns,
                "query": text,
                "relevant": relevant,
                "category": category,
                "group": family,
                **extra,
            }
        )


def generate(seed: int = SEED) -> dict[str, Any]:
    """The dataset (the format of shared/data/README.md, plus a `split` rule and query groups)."""
    b = _Builder(random.Random(seed))
    rng = b.rng
    repos = [f"repo:{b.name()}" for _ in range(3)]
    base = "2025-0{m}-01T00:00:00Z"

    # Facts: ports, with a lookalike sibling service in the same repo (the distractor).
    for i, repo in enumerate(repos):
        stem = b.name()
        a_suf, b_suf = rng.sample(_SUFFIX, 2)
        for svc, other in ((f"{stem}-{a_suf}", f"{stem}-{b_suf}"), (f"{stem}-{b_suf}", f"{stem}-{a_suf}")):
            env = rng.choice(list(_ENVS))
            port = rng.randrange(3000, 9900)
            day = rng.choice(_DAYS)
            hour = rng.randrange(8, 18)
            m_port = b.memory(
                repo,
                "fact",
                f"{svc} {env} port",
                f"{svc} listens on port {port} in {env}.",
                base.format(m=1 + i),
            )
            m_win = b.memory(
                repo,
                "convention",
                f"{svc} deploy window",
                f"Deploys of {svc} go out on {day} at {hour}:00 UTC; outside that window they need a lead's approval.",
                base.format(m=1 + i),
            )
            b.ask(
                "a",
                "paraphrase",
                repo,
                f"which socket number does {svc} accept connections on in {_ENVS[env]}?",
                [m_port],
            )
            b.ask(
                "b",
                "paraphrase",
                repo,
                f"I need to connect to {svc} running in {_ENVS[env]}: what number do I dial?",
                [m_port],
            )
            b.ask("a", "identifier", repo, f"is {port} the port of {svc}?", [m_port])
            b.ask("b", "identifier", repo, f"what listens on {port}?", [m_port])
            b.ask("a", "distractor", repo, f"when may I ship {svc}, not {other}?", [m_win])
            b.ask("b", "distractor", repo, f"on which weekday does {svc} get released?", [m_win])

    # Scoped: the same convention, a different command, in each repo; asked without naming the repo.
    tools = ["make check", "tox -e py", "npm run verify", "cargo nextest run", "just test", "pnpm vitest"]
    picked = rng.sample(tools, len(repos))
    scoped = [
        b.memory(
            repo,
            "convention",
            "running the tests",
            f"Run the test suite with `{cmd}` from the repository root.",
            base.format(m=2),
        )
        for repo, cmd in zip(repos, picked, strict=True)
    ]
    for repo, mid in zip(repos, scoped, strict=True):
        b.ask("a", "scoped", repo, "how do I run the tests?", [mid])
        b.ask("b", "scoped", repo, "what command checks my change before I push?", [mid])

    # Identifiers: environment variables and error codes.
    for repo in repos:
        svc = f"{b.name()}-{rng.choice(_SUFFIX)}"
        var = f"{b.name().upper()}_{rng.choice(['ENABLE', 'MODE', 'LIMIT'])}"
        feat = rng.choice(_FEATURES)
        val = rng.choice(["0", "1", "off", "strict"])
        m_var = b.memory(
            repo, "fact", var, f"{var} turns {feat} on in {svc}; its default is {val}.", base.format(m=3)
        )
        code = f"E{rng.randrange(1000, 9999)}"
        meaning = rng.choice(_MEANINGS)
        m_code = b.memory(
            repo, "fact", f"error {code}", f"Error {code} from {svc} means {meaning}.", base.format(m=3)
        )
        b.ask("a", "identifier", repo, f"what does {var} control?", [m_var])
        b.ask("b", "identifier", repo, f"what is the default of {var}?", [m_var])
        b.ask("a", "identifier", repo, f"what does {code} mean?", [m_code])
        b.ask("b", "identifier", repo, f"{svc} answered {code}; what went wrong?", [m_code])

    # Decisions that were later replaced: temporal questions (as_of, and "now").
    for purpose in rng.sample(list(_PURPOSES), 5):
        old, new = b.name().capitalize(), b.name().capitalize()
        m_old = b.memory(
            "shared", "decision", purpose, f"For {purpose} we use {old}.", "2024-03-01T00:00:00Z"
        )
        m_new = b.memory(
            "shared",
            "decision",
            purpose,
            f"For {purpose} we moved from {old} to {new}, which costs less at our volume.",
            "2025-02-01T00:00:00Z",
            supersedes=m_old,
        )
        syn = _PURPOSES[purpose]
        b.ask(
            "a",
            "temporal",
            "shared",
            f"what did we use for {purpose} in mid 2024?",
            [m_old],
            as_of="2024-07-01T00:00:00Z",
        )
        b.ask(
            "b",
            "temporal",
            "shared",
            f"which tool handled {syn} back then?",
            [m_old],
            as_of="2024-09-15T00:00:00Z",
        )
        b.ask("a", "paraphrase", "shared", f"which product do we rely on for {syn}?", [m_new])
        b.ask("b", "paraphrase", "shared", f"what is our current choice for {syn}?", [m_new])

    # Conventions in shared.
    for artifact, rule, question in _RULES:
        text = rule.format(n=rng.randrange(2, 6), chan=b.name())
        mid = b.memory("shared", "convention", artifact, f"Every {artifact} {text}.", base.format(m=4))
        b.ask("a", "paraphrase", "shared", question, [mid])
        b.ask("b", "paraphrase", "shared", f"what is the rule for a {artifact} here?", [mid])

    # Multi-hop: a service's owning team (in its repo) and the team's channel and lead (in shared).
    for repo in repos:
        svc = f"{b.name()}-{rng.choice(_SUFFIX)}"
        team, chan = b.name().capitalize(), b.name()
        lead = f"{b.name().capitalize()} {b.name().capitalize()}"
        m_own = b.memory(
            repo, "fact", f"{svc} owner", f"{svc} is owned by the {team} team.", base.format(m=5)
        )
        m_team = b.memory(
            "shared",
            "fact",
            f"{team} team",
            f"The {team} team takes pages in #{chan} and is led by {lead}.",
            base.format(m=5),
        )
        b.ask("a", "multi-hop", repo, f"who leads the team that owns {svc}?", [m_own, m_team])
        b.ask("b", "multi-hop", repo, f"{svc} is down: which channel reaches its owners?", [m_own, m_team])

    # Nothing relevant: questions the brain holds nothing for, from two template families.
    ns_pool = ["shared", *repos]
    for task, lang in _NONE_A:
        b.ask("a", "none", rng.choice(ns_pool), f"how do I {task} in {lang}?", [])
    for tmpl in _NONE_B:
        text = tmpl.format(
            food=rng.choice(_FOOD),
            sport=rng.choice(_SPORT),
            year=rng.randrange(1990, 2024),
            place=rng.choice(_PLACE),
            animal=rng.choice(_ANIMAL),
        )
        b.ask("b", "none", rng.choice(ns_pool), text, [])
    for family in ("a", "b"):  # near the domain: a service this brain has never heard of
        for _ in range(3):
            ghost = f"{b.name()}-{rng.choice(_SUFFIX)}"
            text = f"which port does {ghost} listen on?" if family == "a" else f"who owns {ghost}?"
            b.ask(family, "none-near", rng.choice(ns_pool), text, [])

    return {
        "name": "generated-eval",
        "source": f"brain.local.evalgen.generate(seed={seed}); template family '{HELD_OUT}' is the test split",
        "split": {"by": "group", "test": [HELD_OUT]},
        "memories": b.memories,
        "queries": b.queries,
    }
