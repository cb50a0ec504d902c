"""A model migration shows in the Brain's status: a Reindexing condition with counts, and gauges."""

from __future__ import annotations

from typing import Any

from brain_operator.config import OperatorConfig
from brain_operator.health import parse_health
from brain_operator.reconciler import Reconciler
from brain_operator.reindexing import REINDEX_DONE, REINDEX_TOTAL

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
    rec.reconcile(NS, "team")
    cond = _reindexing(kube)
    assert (cond["status"], cond["reason"]) == ("False", "ModelChangePending")
    assert OLD in cond["message"] and f"brainctl reindex --to-model {NEW}" in cond["message"]

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
