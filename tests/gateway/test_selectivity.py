"""Only memories that bear on the request are injected; with none that do, nothing is."""

from __future__ import annotations

import json

from .conftest import Gateway, metric

PORT = "Staging Postgres moved to port 6543 last week."
DEPLOY = "Deploys to production need a green CI run and an approving review from the owning team."


async def _notes(gw: Gateway, ns: str, *bodies: str) -> list[str]:
    ids = []
    for body in bodies:
        r = await gw.rest("POST", "/memories", json={"body": body, "namespace": ns, "kind": "fact"})
        assert r.status_code == 201, r.text
        ids.append(str(r.json()["id"]))
    return ids


async def test_unrelated_request_gets_no_memory(gw: Gateway, ns: str) -> None:
    await _notes(gw, ns, PORT, DEPLOY)
    text = await gw.metrics()
    zero_before = metric(text, "brain_injected_tokens_bucket", le="0.0")
    for question in ("write a haiku about autumn leaves", "how do I reverse a list in Python?"):
        r = await gw.chat(question, headers={"x-brain-namespaces": ns})
        assert r.status_code == 200, r.text
        assert r.headers["x-brain-memory"] == "none", (question, r.headers.get("x-brain-memory-ids"))
        sent = json.dumps(gw.upstream_bodies()[-1]["messages"])
        assert PORT not in sent and DEPLOY not in sent and "team memory" not in sent
    # every request is counted in the injected-tokens histogram, the empty ones at 0
    assert metric(await gw.metrics(), "brain_injected_tokens_bucket", le="0.0") == zero_before + 2


async def test_related_request_gets_only_what_bears_on_it(gw: Gateway, ns: str) -> None:
    port_id, deploy_id = await _notes(gw, ns, PORT, DEPLOY)
    r = await gw.chat("which port does staging postgres use?", headers={"x-brain-namespaces": ns})
    assert r.headers["x-brain-memory"] == "injected"
    ids = r.headers["x-brain-memory-ids"].split(",")
    assert port_id in ids and deploy_id not in ids
    sent = json.dumps(gw.upstream_bodies()[-1]["messages"])
    assert PORT in sent and DEPLOY not in sent
