"""The operator-started model migration on the real control plane: a Brain whose gateway (a fake
health endpoint) reports the old model gets exactly one migration Job when spec.embedding.model
changes, never a second on resyncs, a failed Job shows as ReindexFailed with a Warning event, and
the Reindexing condition follows the gateway's health to Current."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.kit.poll import wait_for

from .conftest import Kubectl, Operator
from .helpers import sample

pytestmark = pytest.mark.cluster

#: The operator's resync period here (the fixture's default is 5 s). The checks that no second Job
#: appears wait RESYNC_S plus a margin per resync they need, so a faster resync keeps every check.
RESYNC_S = 2
ONE_RESYNC_S = RESYNC_S + 1

OLD = "BAAI/bge-small-en-v1.5"  # the index's model before the change (the Brain names it first)
NEW = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture
def gateway_health() -> Iterator[tuple[str, dict[str, Any]]]:
    """The gateway's /brain/v1/health, reporting an index built by OLD; tests edit `doc` live."""
    doc: dict[str, Any] = {
        "status": "ok",
        "database": "ok",
        "embedder": "ok",
        "index": {
            "entriesByKind": {"note": 4},
            "embeddedRatio": 1.0,
            "embeddingModel": OLD,
            "embeddingDim": 384,
            "liveModel": OLD,
            "reindex": None,
        },
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(doc).encode()
            self.send_response(200 if self.path == "/brain/v1/health" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/brain/v1/health", doc
    finally:
        server.shutdown()


def reindex_jobs(kc: Kubectl) -> list[dict[str, Any]]:
    jobs = kc.get("jobs", selector="brain.dev/brain=team")["items"]
    return [j for j in jobs if j["metadata"]["name"].startswith("team-reindex-")]


def reindexing(kc: Kubectl) -> dict[str, Any]:
    conds = {c["type"]: c for c in (kc.get("brain", "team").get("status") or {}).get("conditions") or []}
    return conds.get("Reindexing") or {}


def reason_is(kc: Kubectl, reason: str) -> Any:
    return lambda: reindexing(kc) if reindexing(kc).get("reason") == reason else None


def events(kc: Kubectl, reason: str) -> list[dict[str, Any]]:
    """Events about the Brain (the Job controller posts its own about the Job)."""
    items = kc.get("events")["items"]
    return [e for e in items if e["reason"] == reason and e["involvedObject"]["kind"] == "Brain"]


def no_pods(kc: Kubectl) -> None:
    """A quota of zero pods: the Job controller cannot start the migration's pod (kwok would make
    it succeed at once), so the Job stays active until its deadline fails it, for real."""
    kc.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-pods"},
              "spec": {"hard": {"pods": "0"}}})  # fmt: skip


@pytest.mark.operator_args("--resync-seconds", str(RESYNC_S), "--allow-health-url-override")
def test_a_model_change_starts_one_migration_job_and_the_condition_follows_the_gateway(
    kc: Kubectl, operator: Operator, gateway_health: tuple[str, dict[str, Any]]
) -> None:
    url, doc = gateway_health
    brain = sample("brain.yaml")
    brain["spec"]["embedding"]["model"] = OLD
    brain["metadata"]["annotations"] = {"brain.dev/health-url": url}
    kc.apply(brain)
    wait_for("Reindexing Current", reason_is(kc, "Current"))
    time.sleep(ONE_RESYNC_S)  # a resync: the gateway reports the spec's model, so no Job
    assert reindex_jobs(kc) == []

    no_pods(kc)
    kc("patch", "brain", "team", "--type=merge", "-p", json.dumps({"spec": {"embedding": {"model": NEW}}}))
    (job,) = wait_for("one migration Job", lambda: reindex_jobs(kc))
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "-m", "brain.jobs.reindex"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["BRAIN_DATABASE_URL"] == {"secretKeyRef": {"name": "team-db-role-reindex", "key": "dsn"}}
    assert (env["BRAIN_EMBEDDING_MODEL"], env["BRAIN_EMBEDDING_DIM"]) == (NEW, "384")
    assert env["BRAIN_EMBEDDER_URL"].startswith("http://team-embedder:")
    assert "BRAIN_MASTER_KEY" not in env  # the migration needs the database, not the gateway's key
    assert [o["kind"] for o in job["metadata"]["ownerReferences"]] == ["Brain"]
    pending = wait_for("ModelChangePending naming the Job", reason_is(kc, "ModelChangePending"))
    assert job["metadata"]["name"] in pending["message"] and OLD in pending["message"]

    # resyncs, and a reconcile for an unrelated change, read the one Job back
    kc("annotate", "brain", "team", "example.com/touched=1")
    time.sleep(2 * ONE_RESYNC_S)
    assert [j["metadata"]["uid"] for j in reindex_jobs(kc)] == [job["metadata"]["uid"]]

    # the Job fails (its deadline, cut to 1 s, ends it in the Job controller): the Brain says so,
    # once, and the old model keeps serving
    kc("patch", "job", job["metadata"]["name"], "--type=merge", "-p", '{"spec":{"activeDeadlineSeconds":1}}')
    failed = wait_for("ReindexFailed", reason_is(kc, "ReindexFailed"))
    assert failed["status"] == "False" and "deadline" in failed["message"] and OLD in failed["message"]
    assert f"kubectl logs job/{job['metadata']['name']}" in failed["message"]
    (warning,) = wait_for("a ReindexFailed Warning event", lambda: events(kc, "ReindexFailed"))
    assert warning["type"] == "Warning"
    time.sleep(ONE_RESYNC_S)
    assert len(events(kc, "ReindexFailed")) == 1 and len(reindex_jobs(kc)) == 1  # no retry loop

    # the owner deletes the failed Job (the documented retry): one new Job, which runs
    kc("delete", "resourcequota", "no-pods")
    kc("delete", "job", job["metadata"]["name"], "--wait=true")
    (retry,) = wait_for(
        "a new migration Job",
        lambda: [j for j in reindex_jobs(kc) if j["metadata"]["uid"] != job["metadata"]["uid"]],
    )
    assert retry["metadata"]["name"] == job["metadata"]["name"]

    # the gateway reports the migration running, then the new model live
    doc["index"]["reindex"] = {"fromModel": OLD, "toModel": NEW, "toDim": 384, "done": 2, "total": 4}
    running = wait_for("Reindexing", reason_is(kc, "Reindexing"))
    assert running["status"] == "True"
    doc["index"].update(reindex=None, liveModel=NEW, embeddingModel=NEW)
    current = wait_for("Current", reason_is(kc, "Current"))
    assert NEW in current["message"]
    time.sleep(ONE_RESYNC_S)
    assert len(reindex_jobs(kc)) == 1
