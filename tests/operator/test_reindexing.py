"""A model migration shows in the Brain's status: a Reindexing condition with counts, and gauges."""

from __future__ import annotations

from typing import Any

from prometheus_client import generate_latest

from brain_operator.config import OperatorConfig
from brain_operator.health import parse_health
from brain_operator.metrics import REINDEX_DONE, REINDEX_TOTAL
from brain_operator.reconciler import Reconciler

from .fakekube import FakeKube
from .helpers import sample

NS = "team-ns"
OLD, NEW = "BAAI/bge-small-en-v1.5", "sentence-transformers/all-MiniLM-L6-v2"  # samples/brain.yaml: NEW


def _health(live: str, reindex: dict[str, Any] | None) -> Any:
    index = {"entriesByKind": {"note": 10}, "embeddingModel": NEW, "embeddingDim": 384, "liveModel": live}
    if reindex is not None:
        index["reindex"] = reindex
    return parse_health({"status": "ok", "database": "ok", "embedder": "ok", "index": index})


def _reindexing(kube: FakeKube) -> dict[str, Any]:
    return {c["type"]: c for c in kube.obj("Brain", "team")["status"]["conditions"]}["Reindexing"]


def test_reindexing_condition_moves_from_pending_to_running_to_current() -> None:
    kube = FakeKube()
    brain = sample("brain.yaml")
    brain["metadata"]["namespace"] = NS
    kube.put(brain)
    rec = Reconciler(kube, OperatorConfig())  # type: ignore[arg-type]
    assert kube is not None and brain["spec"].get("embedding", {}).get("model", NEW) == NEW

    rec.health[(NS, "team")] = _health(OLD, None)  # the spec names a model the index is not built by
    first = rec.reconcile(NS, "team")
    cond = _reindexing(kube)
    assert (cond["status"], cond["reason"]) == ("False", "ModelChangePending")
    jobs = [name for (kind, _, name) in kube.objects if kind == "Job"]
    assert first is not None and first.jobs_created == [f"Job/{jobs[0]}"] and len(jobs) == 1
    assert OLD in cond["message"] and f"Job {jobs[0]} is starting the migration" in cond["message"]
    job = kube.obj("Job", jobs[0])
    assert job["metadata"]["ownerReferences"][0]["kind"] == "Brain"
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "python",
        "-m",
        "brain.jobs.reindex",
    ]
    kube.reset_writes()
    rec.reconcile(NS, "team")  # a resync (or a second replica) starts no second migration
    assert not [w for w in kube.writes if "Job/" in w]
    assert [name for (kind, _, name) in kube.objects if kind == "Job"] == jobs

    run = {
        "id": 1,
        "fromModel": OLD,
        "toModel": NEW,
        "toDim": 384,
        "done": 40,
        "total": 100,
        "updatedAt": "x",
    }
    rec.health[(NS, "team")] = _health(OLD, run)
    rec.reconcile(NS, "team")
    cond = _reindexing(kube)
    assert (cond["status"], cond["reason"]) == ("True", "Reindexing")
    assert "40 of 100" in cond["message"] and f"serving from {OLD}" in cond["message"]
    status = kube.obj("Brain", "team")["status"]
    assert status["index"]["reindex"]["done"] == 40 and status["index"]["liveModel"] == OLD
    assert REINDEX_DONE.labels(brain=f"{NS}/team")._value.get() == 40
    assert REINDEX_TOTAL.labels(brain=f"{NS}/team")._value.get() == 100

    rec.health[(NS, "team")] = _health(NEW, None)  # swapped
    rec.reconcile(NS, "team")
    cond = _reindexing(kube)
    assert (cond["status"], cond["reason"]) == ("False", "Current") and NEW in cond["message"]
    assert REINDEX_TOTAL.labels(brain=f"{NS}/team")._value.get() == 0
    assert "reindex" not in kube.obj("Brain", "team")["status"]["index"]

    del kube.objects[("Brain", NS, "team")]  # deleted: its migration gauges go with its other series
    rec.reconcile(NS, "team")
    assert f'brain="{NS}/team"' not in generate_latest().decode()


def test_a_failed_migration_job_shows_in_the_condition_and_an_event() -> None:
    kube = FakeKube()
    brain = sample("brain.yaml")
    brain["metadata"]["namespace"] = NS
    kube.put(brain)
    rec = Reconciler(kube, OperatorConfig())  # type: ignore[arg-type]
    rec.health[(NS, "team")] = _health(OLD, None)
    rec.reconcile(NS, "team")
    (name,) = [n for (kind, _, n) in kube.objects if kind == "Job"]
    kube.obj("Job", name)["status"] = {
        "conditions": [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
             "message": "Job has reached the specified backoff limit"}
        ]
    }  # fmt: skip
    events: list[tuple[str, str, str]] = []
    kube.reset_writes()
    rec.reconcile(NS, "team", emit=lambda _o, etype, reason, msg: events.append((etype, reason, msg)))
    cond = _reindexing(kube)
    assert (cond["status"], cond["reason"]) == ("False", "ReindexFailed")
    assert "backoff limit" in cond["message"] and f"kubectl logs job/{name}" in cond["message"]
    assert OLD in cond["message"]  # the old index keeps serving, and the message says so
    assert [e[:2] for e in events if e[1] == "ReindexFailed"] == [("Warning", "ReindexFailed")]
    assert not [w for w in kube.writes if "Job/" in w]  # a failed migration is not retried in a loop
    events.clear()
    rec.reconcile(NS, "team", emit=lambda _o, etype, reason, msg: events.append((etype, reason, msg)))
    assert not [e for e in events if e[1] == "ReindexFailed"]  # one Event per failure, not per resync
