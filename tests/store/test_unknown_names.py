"""Store.unknown_names answers as its trigram lookups alone did, against a real Postgres.

The check reads a name or head the brain holds as a word through the tsvector index first (a
trigram bitmap of common words' trigrams grew with the brain, #33); what a user would notice is a
different answer: a question turned away, or one let through, that the trigram lookups decided
otherwise. So each case here is compared with those lookups, run as they were."""

from __future__ import annotations

import pytest

from brain.core.models import Actor, MemoryIn
from brain.store import Store
from brain.store.writer import StoreWriter

# The check as it was before the tsvector lookups: the reference.
TRIGRAM_ONLY = """SELECT p.name FROM unnest($1::text[], $2::text[], $3::text[]) AS p(name, head, kind)
 WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.status <> 'forgotten' AND m.body ILIKE '%' || p.name || '%')
   AND EXISTS (SELECT 1 FROM memories m WHERE m.status <> 'forgotten'
               AND m.body ~* ('[[:alnum:]]-' || p.kind || '($|[^[:alnum:]-])'))
   AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.status <> 'forgotten'
               AND m.body ~* ('(^|[^[:alnum:]-])' || p.head || '($|[^[:alnum:]-])'))"""

BODIES = [
    "nidlum-worker is owned by the Pexbre team; page them in #pexbre-oncall.",
    "cadnid-relay is owned by the Harbor team. Self-care matters on call.",
    "The faydra-relay drains at night.",  # faydra only inside a name
    "Our superself-carefully tuned cache.",  # self-care as a substring of a longer word only
    "Deploys run through k8s-runner-v2; the runner pool is autoscaled.",
    "A mid-july freeze; August is quiet.",
    "Zorbel is a word of its own here, and so is the.",
]
NAMES = [
    "korfay-worker",  # unknown: no memory holds it or "korfay"
    "nidlum-worker",  # held as a word
    "faydra-worker",  # head held only inside faydra-relay: unknown
    "zorbel-worker",  # head used as a word: not unknown
    "self-care",  # held (in other case)
    "superself-care",  # held only inside a longer word (ILIKE finds it)
    "elf-care",  # a substring of held words, no kind "-care"... held by ILIKE
    "quux-relay",  # unknown relay
    "the-relay",  # a stop word as head, used as a word
    "k8s-worker",  # digits
    "mid-august",  # August is a word of its own
    "one-way",  # no "-way" name
    "runner-v2",  # held inside k8s-runner-v2
    "pexbre-oncall",  # held
]


@pytest.mark.parametrize("forget", [False, True])
async def test_the_answer_is_the_trigram_lookups(store: Store, owner: Actor, forget: bool) -> None:
    written = await StoreWriter(store).note_many(
        [(MemoryIn(body=b, namespace="shared"), None) for b in BODIES], actor=owner
    )
    if forget:  # a forgotten memory holds nothing: Zorbel's and faydra's sentences go
        ids = [w.id for w in written if "Zorbel" in w.body or "faydra" in w.body]
        await store.pool_for_tests.execute("UPDATE memories SET status = 'forgotten' WHERE id = ANY($1)", ids)
    got = await same_as_trigram_only(store, NAMES)
    assert {"korfay-worker", "faydra-worker"} <= set(got) and "nidlum-worker" not in got
    assert ("zorbel-worker" in got) == forget


async def same_as_trigram_only(store: Store, names: list[str]) -> list[str]:
    """The check's answer for `names`, asserted equal to the trigram lookups' alone."""
    got = sorted(await store.unknown_names(names))
    want = sorted(
        r["name"]
        for r in await store.pool_for_tests.fetch(
            TRIGRAM_ONLY, names, [n.split("-")[0] for n in names], [n.rsplit("-", 1)[1] for n in names]
        )
    )
    assert got == want
    return got
