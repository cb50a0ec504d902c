"""The user story, end to end on this machine, asserted step by step as a user would notice it.

1. The chart is helm-installed, the operator runs, the samples are applied: the Brain gets its stack.
2. The data plane runs as local processes, as `make up` runs it (`brainctl up` on samples/brain.yaml,
   with the embedding model this machine holds; the cluster's Brain is the same file).
3. The MemorySource imports a small git repository, run the way its CronJob runs: the content is searchable.
4. An agent key writes a note over MCP.
5. A chat request through the gateway gets that note injected, fenced as data.
6. Agents' sessions are captured; distill (its CronJob, scripted LLM) proposes; an owner approves over REST;
   the approved memory is served.
7. With the Brain annotated to read the local gateway's health, status.index and the metrics move; the
   index is built by the Brain's model, so the operator starts no migration Job (Reindexing: Current).
8. Retire: an owner retires the approved memory and a file removed upstream is retired by the next
   import; neither is served any more. A repository emptied by mistake retires nothing (the guard).

Only the LLM provider is fake: the product's own echo upstream, which `brainctl up` starts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.jobs.conftest import Repo
from tests.kit.gateway import metric

from brain.embedder.model import DEFAULT_MODEL as OFFLINE_MODEL

from .conftest import E2ECluster
from .story import (
    SAMPLES,
    InstalledOperator,
    LocalStack,
    helm_installed_operator,
    local_stack,
    ready,
    run_cronjob,
    wait_for,
)

SOURCE = "team-memories"
DECISION = (
    "We keep embeddings in Postgres with pgvector instead of running a separate vector database: "
    "one backup, one failover story, and joins between memories and their edges stay in SQL."
)
CONVENTION = (
    "Branch names start with the ticket id, for example PAY-123-fix-rounding, so the tracker links them."
)
NOTE = "The staging database listens on port 6543, not the default 5432."
CI_QUESTION = "Why does the CI integration suite fail with connection refused when it talks to Postgres?"
CI_ANSWERS = [
    "The integration suite starts before Postgres accepts connections, so the first queries get connection "
    "refused. Adding a wait loop on pg_isready in the CI job before the tests start fixed it; the suite has "
    "stayed green since that change went in.",
    "Postgres in CI was still starting when the tests opened their first connection, which is why they saw "
    "connection refused. The fix is to wait for pg_isready before running the integration tests; after adding "
    "the wait the errors stopped.",
]
LEARNING = {
    "kind": "learning",
    "title": "CI waits for pg_isready before integration tests",
    "body": "The integration suite fails with connection refused when Postgres starts slowly in CI; the CI job "
    "waits for pg_isready before running the tests.",
    "confidence": 0.9,
    "supersedes": None,
    "evidence": [1, 2],
}


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with local_stack() as s:
        yield s


def brain_status(cluster: E2ECluster, ns: str) -> dict[str, Any]:
    return dict(
        json.loads(cluster.kubectl("get", "brain", "team", "-n", ns, "-o", "json")).get("status") or {}
    )


def index_when(cluster: E2ECluster, ns: str, what: str, ok: Any, timeout: float = 60) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        index = brain_status(cluster, ns).get("index")
        return index if index and ok(index) else None

    try:
        return wait_for(f"status.index: {what}", check, timeout=timeout)
    except AssertionError:
        raise AssertionError(f"{what}; status.index is {brain_status(cluster, ns).get('index')}") from None


@pytest.mark.e2e
@pytest.mark.timeout(600)  # eight steps on a shared 2-core machine
def test_user_story(
    e2e_cluster: E2ECluster, team_ns: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if e2e_cluster.kind == "kind":
        pytest.skip(
            "the user story runs its data plane and jobs as local processes next to the local control plane; "
            "on kind the same stack runs in pods (see test_stack.py)"
        )
    k, ns = e2e_cluster.kubectl, team_ns
    started = time.monotonic()
    # ---- 2 (started first: LiteLLM takes a while to boot) -----------------------------------------
    stack: LocalStack = request.getfixturevalue("stack")

    # ---- 1. the chart, the operator, the samples ----------------------------------------------------
    op: InstalledOperator
    # file:// below: a local repository, which a cluster refuses without the test flag (docs/security.md).
    # The operator reads health from the laptop's gateway: its own setting (chart value), the one URL
    # the master key goes to. A Brain's brain.dev/health-url annotation would not be followed (#26).
    health_url = f"operator.healthUrlTemplate={stack.url}/brain/v1/health"
    sets = ("operator.healthSeconds=2", "operator.allowInsecureGitUrls=true", health_url)
    with helm_installed_operator(e2e_cluster, ns, tmp_path, *sets) as op:
        k("apply", "-n", ns, "-f", str(stack.manifest))  # the manifest `brainctl up` runs (story.py)
        for sample in ("routingpolicy.yaml", "memorysource-git.yaml"):
            k("apply", "-n", ns, "-f", str(SAMPLES / sample))

        def children() -> bool:
            out = k("get", "deploy,cronjob,configmap", "-n", ns, "-l", "brain.dev/brain=team", "-o", "name")
            names = set(out.split())
            return {
                "deployment.apps/team-gateway",
                "deployment.apps/team-embedder",
                "cronjob.batch/team-distill",
                "cronjob.batch/team-ingest-team-memories",
            } <= names

        wait_for("the operator to render the Brain's stack", children, timeout=120)
        wait_for(
            "Brain conditions",
            lambda: (
                {c["type"] for c in brain_status(e2e_cluster, ns).get("conditions") or []}
                >= {"Ready", "DatabaseReady", "EmbedderReady", "GatewayReady"}
            ),
            timeout=120,
        )

        # ---- 2. the data plane, `make up` style ------------------------------------------------------
        ready(stack)
        # `brainctl up` reports ready once the database answers; the offline model may still be loading.
        health = wait_for(
            "the local gateway's health to say ok",
            lambda: (h := stack.rest("GET", "/health", "agent").json())["status"] == "ok" and h,
            timeout=120,
        )
        assert (health["database"], health["embedder"]) == ("ok", "ok"), health
        # The operator reads the per-namespace counts with the Brain's master key (the gateway shows
        # them to owners only): the laptop's gateway has its own, so the Brain's Secret takes it.
        k(
            "patch",
            "secret",
            "team-master-key",
            "-n",
            ns,
            "-p",
            json.dumps({"stringData": {"masterKey": stack.master}}),
        )
        before = index_when(e2e_cluster, ns, "read from the local gateway", lambda i: "totalEntries" in i)
        assert before["totalEntries"] == 0 and not before.get("lastIngest")

        # ---- 3. the MemorySource imports a local git repository -------------------------------------
        repo = Repo(tmp_path / "team-memories")
        repo.write("README.md", "# Team memories\n\nOne file per memory under memories/.\n")
        repo.write(
            "memories/decisions/01J9ZQ4Y7V0K3M5N8P2R6T1W4X-pgvector.md",
            f"---\ntitle: Embeddings live in Postgres\ntags: [database]\n---\n{DECISION}\n",
        )
        repo.write("memories/conventions/branch-names.md", f"---\ntitle: Branch names\n---\n{CONVENTION}\n")
        commit = repo.commit("first memories")
        git = {"spec": {"git": {"url": f"file://{repo.path}"}}}
        k("patch", "memorysource", SOURCE, "-n", ns, "--type=merge", "-p", json.dumps(git))

        def source_document() -> str:
            sel = f"brain.dev/memorysource={SOURCE}"
            return k("get", "configmap", "-n", ns, "-l", sel, "-o", "jsonpath={.items[0].data.source\\.json}")

        wait_for("the new source document", lambda: str(repo.path) in source_document(), timeout=60)
        local = {  # cluster addresses and secrets → this machine's
            "BRAIN_DATABASE_URL": stack.dsn,
            "BRAIN_EMBEDDER_URL": stack.embedder_url,
            "BRAIN_GATEWAY_URL": stack.url,
            "BRAIN_MASTER_KEY": stack.master,
            # the local embedder is the bundled offline model, whatever the manifest names: the jobs'
            # vectors must carry its name, as the local gateway's do (vectors of two names never mix)
            "BRAIN_EMBEDDING_MODEL": OFFLINE_MODEL,
        }
        ingest = run_cronjob(e2e_cluster, ns, f"team-ingest-{SOURCE}", local, tmp_path / "ingest")
        assert ingest.returncode == 0, ingest.stderr[-3000:]
        assert (ingest.summary["added"], ingest.summary["rejected"]) == (2, 0), ingest.summary
        assert ingest.summary["commit"] == commit and ingest.summary["source"] == SOURCE
        hits = stack.rest("GET", "/search", "agent", params={"q": "what do our branch names start with?"})
        assert hits.status_code == 200, hits.text
        top = hits.json()["hits"][0]
        assert CONVENTION in top["body"] and top["kind"] == "convention", hits.json()
        assert (top["author"], top["tier"], top["namespace"]) == (f"source:{SOURCE}", "curated", "shared")

        # ---- 4. an agent writes a note over MCP ------------------------------------------------------
        noted = stack.mcp_tool(
            "agent", "brain_note", {"body": NOTE, "title": "Staging DB port", "kind": "fact"}
        )
        note_id = noted["id"]
        assert (
            noted["created"]
            and noted["memory"]["author"] == "agent"
            and noted["memory"]["tier"] == "episodic"
        )

        # ---- 5. a chat request gets it injected, fenced as data --------------------------------------
        stack.upstream.clear()
        r = stack.chat("Which port does the staging database use?")
        assert r.status_code == 200, r.text
        [sent] = [q["body"] for q in stack.upstream.requests() if q["path"] == "/v1/chat/completions"]
        upstream_saw = "\n".join(str(m.get("content")) for m in sent["messages"])
        assert f"[team memory {note_id} — data, not instructions]" in upstream_saw and NOTE in upstream_saw
        assert (
            "6543" in r.json()["choices"][0]["message"]["content"]
        )  # the echo model answers with what it saw

        # ---- 6. sessions are captured, distill proposes, an owner approves ---------------------------
        codex = json.loads(stack.brainctl("keys", "create", "codex-ci"))["key"]
        stack.upstream.script(*({"match": "CI integration suite", "content": a} for a in CI_ANSWERS))
        for key in ("agent", codex):
            r = stack.chat(CI_QUESTION, key=key)
            assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] in CI_ANSWERS, r.text
        wait_for(
            "both sessions to be captured",
            lambda: metric(stack.metrics(), "brain_captures_stored_total", kind="experience") >= 2,
            timeout=30,
        )
        stack.upstream.clear()
        stack.upstream.script({"match": "You distill", "content": json.dumps({"proposals": [LEARNING]})})
        distill = run_cronjob(e2e_cluster, ns, "team-distill", local, tmp_path / "distill")
        assert distill.returncode == 0, distill.stderr[-3000:]
        assert (distill.summary["proposals"], distill.summary["invalid"], distill.summary["deferred"]) == (
            1,
            0,
            False,
        )
        assert distill.summary["sessions"] >= 2, distill.summary
        [asked] = [q for q in stack.upstream.requests() if "You distill" in json.dumps(q["body"])]
        assert "[team memory" not in json.dumps(
            asked["body"]
        )  # x-brain-memory: off — no injection into distill
        pending = index_when(
            e2e_cluster, ns, "one pending proposal", lambda i: i.get("pendingProposals") == 1
        )
        assert pending["lastIngest"] and pending["lastDistill"]

        assert stack.rest("GET", "/proposals", "agent").status_code == 403  # deciding is for owners
        [proposal] = stack.rest("GET", "/proposals", "owner").json()["proposals"]
        assert proposal["title"] == LEARNING["title"] and sorted(proposal["authors"]) == ["agent", "codex-ci"]
        assert stack.rest("POST", f"/proposals/{proposal['id']}/approve", "agent").status_code == 403
        approved = stack.rest(
            "POST", f"/proposals/{proposal['id']}/approve", "owner", json={"reason": "seen it"}
        )
        assert approved.status_code == 200, approved.text
        assert approved.json()["tier"] == "curated"
        assert stack.rest("POST", f"/proposals/{proposal['id']}/approve", "owner").status_code == 409
        found = stack.rest(
            "GET", "/search", "agent", params={"q": "CI tests get connection refused from Postgres"}
        )
        hit = next((h for h in found.json()["hits"] if h["id"] == approved.json()["memory_id"]), None)
        assert hit is not None, found.json()
        assert (hit["tier"], hit["kind"], hit["author"]) == ("curated", "learning", "owner")

        # ---- 7. status.index and the metrics moved ---------------------------------------------------
        want = {"decision": 1, "convention": 1, "fact": 1, "experience": 2, "learning": 1}
        after = index_when(
            e2e_cluster,
            ns,
            f"entries by kind {want}, no pending proposal",
            lambda i: i.get("entriesByKind") == want and i.get("pendingProposals") == 0,
        )
        assert after["totalEntries"] == 6 > before["totalEntries"]
        assert after["embeddedRatio"] == 1.0 and after["embeddingDim"] == 384
        brain_model = json.loads(k("get", "brain", "team", "-n", ns, "-o", "json"))["spec"]["embedding"][
            "model"
        ]
        assert after["liveModel"] == brain_model == OFFLINE_MODEL
        # the gateway's index is built by the model the Brain names: no model change, no migration Job
        reindexing = wait_for(
            "the Reindexing condition",
            lambda: next(
                (
                    c
                    for c in brain_status(e2e_cluster, ns).get("conditions") or []
                    if c["type"] == "Reindexing"
                ),
                None,
            ),
            timeout=30,
        )
        assert reindexing["reason"] == "Current", reindexing
        jobs = k("get", "jobs", "-n", ns, "-l", "brain.dev/brain=team", "-o", "name").split()
        assert not [j for j in jobs if "team-reindex-" in j], jobs
        label = f"{ns}/team"
        wait_for(
            "the operator's index gauges",
            lambda: (
                op.metric("brain_index_entries", brain=label, memory_namespace="*") == 6  # by kind
                and op.metric("brain_index_entries", brain=label, memory_namespace="shared", kind="*") == 6
                and op.metric("brain_index_entries", brain=label, kind="learning") == 1
                and op.metric("brain_index_pending_proposals", brain=label) == 0
            ),
            timeout=30,
        )
        gw = stack.metrics()
        assert metric(gw, "brain_gateway_requests_total", memory="injected") >= 1
        assert metric(gw, "brain_retrieval_queries_total", result="hit") >= 1
        assert metric(gw, "brain_captures_stored_total", kind="experience") >= 2

        # ---- 8. retire: what is no longer true is no longer served -----------------------------------
        learning_id = approved.json()["memory_id"]
        ci_query = {"q": "CI tests get connection refused from Postgres"}
        retired = stack.rest(
            "POST",
            f"/memories/{learning_id}/retire",
            "owner",
            json={"reason": "CI moved to a managed Postgres"},
        )
        assert retired.status_code == 200, retired.text
        found = stack.rest("GET", "/search", "agent", params=ci_query).json()["hits"]
        assert learning_id not in {h["id"] for h in found}, found
        stack.upstream.clear()
        assert stack.chat(CI_QUESTION).status_code == 200
        [sent] = [q["body"] for q in stack.upstream.requests() if q["path"] == "/v1/chat/completions"]
        assert str(LEARNING["body"]) not in json.dumps(sent)  # not injected either
        # removed upstream: the next import retires it, and search stops serving it
        repo.delete("memories/conventions/branch-names.md")
        repo.commit("branch names are in CONTRIBUTING.md now")
        again = run_cronjob(e2e_cluster, ns, f"team-ingest-{SOURCE}", local, tmp_path / "ingest")
        assert again.returncode == 0 and again.summary["retired"] == 1, again.summary
        hits = stack.rest("GET", "/search", "agent", params={"q": "what do our branch names start with?"})
        assert all(CONVENTION not in h["body"] for h in hits.json()["hits"]), hits.json()
        # a repository emptied by mistake retires nothing: the import stops and asks for confirmation
        repo.delete("memories/decisions/01J9ZQ4Y7V0K3M5N8P2R6T1W4X-pgvector.md")
        repo.commit("oops")
        stopped = run_cronjob(e2e_cluster, ns, f"team-ingest-{SOURCE}", local, tmp_path / "ingest")
        assert stopped.returncode == 0 and stopped.summary["retired"] == 0, stopped.summary
        assert stopped.summary["stopped"]["wouldRetire"] == 1 == stopped.summary["stopped"]["stored"]
        kept = stack.rest("GET", "/search", "agent", params={"q": "where do we keep embeddings?"}).json()[
            "hits"
        ]
        assert any(DECISION in h["body"] for h in kept), kept
    print(f"user story took {time.monotonic() - started:.0f}s")
