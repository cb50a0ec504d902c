"""An ingest Job stopped by the retire guard shows in its MemorySource: status, condition, event."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from brain_operator.api import MemorySource
from brain_operator.config import OperatorConfig
from brain_operator.reconciler import Reconciler

from .fakekube import FakeKube
from .helpers import deep_set, sample

NS = "team-ns"
STOP = {
    "wouldRetire": 12,
    "stored": 12,
    "confirm": "0123456789ab",
    "message": "the import would retire 12 of 12 stored entries, every entry; nothing was written.",
}


def _finished_job(kube: FakeKube, rec: Reconciler, summary: dict[str, Any], when: str) -> dict[str, Any]:
    result = rec.reconcile(NS, "team")
    assert result is not None
    name = result.jobs_created[0].split("/")[1] if result.jobs_created else None
    job = kube.obj("Job", name) if name else next(o for (k, _, _), o in kube.objects.items() if k == "Job")
    job["status"] = {"conditions": [{"type": "Complete", "status": "True"}], "completionTime": when}
    pod = f"ingest-pod-{when[-3:-1]}"
    kube.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod, "labels": {"job-name": job["metadata"]["name"]}},
        }
    )
    kube.logs[pod] = json.dumps(summary)
    return job


def test_stopped_import_names_the_token_in_status_and_an_event() -> None:
    kube = FakeKube()
    for doc in (sample("brain.yaml"), sample("memorysource-git.yaml")):
        doc["metadata"]["namespace"] = NS
        kube.put(doc)
    rec = Reconciler(kube, OperatorConfig())  # type: ignore[arg-type]
    events: list[tuple[str, str, str]] = []
    zero = {"added": 0, "superseded": 0, "skipped": 0, "retired": 0, "rejected": 0}
    job = _finished_job(kube, rec, {**zero, "stopped": STOP}, "2026-01-01T00:00:00Z")
    assert rec.record_ingest(job, lambda body, t, reason, msg: events.append((t, reason, msg))) is True
    status = kube.obj("MemorySource", "team-memories")["status"]
    assert status["retireGuard"]["confirm"] == "0123456789ab" and status["retireGuard"]["wouldRetire"] == 12
    synced = {c["type"]: c for c in status["conditions"]}["Synced"]
    assert (synced["status"], synced["reason"]) == ("False", "MassRetireStopped")
    assert "12 of 12" in synced["message"]
    assert events == [("Warning", "MassRetireStopped", STOP["message"])]

    # the next import that goes through clears the stop
    job["status"]["completionTime"] = "2026-01-01T01:00:00Z"
    kube.logs[next(iter(kube.logs))] = json.dumps({**zero, "retired": 12})
    assert rec.record_ingest(job) is True
    status = kube.obj("MemorySource", "team-memories")["status"]
    assert status.get("retireGuard") is None
    assert {c["type"]: c for c in status["conditions"]}["Synced"]["status"] == "True"


def test_a_forged_stop_line_is_not_copied_into_status() -> None:
    kube = FakeKube()
    for doc in (sample("brain.yaml"), sample("memorysource-git.yaml")):
        doc["metadata"]["namespace"] = NS
        kube.put(doc)
    rec = Reconciler(kube, OperatorConfig())  # type: ignore[arg-type]
    zero = {"added": 0, "superseded": 0, "skipped": 0, "retired": 0, "rejected": 0}
    job = _finished_job(
        kube, rec, {**zero, "stopped": {**STOP, "confirm": "x; rm -rf"}}, "2026-01-01T00:00:00Z"
    )
    assert rec.record_ingest(job) is True
    status = kube.obj("MemorySource", "team-memories")["status"]
    assert status.get("retireGuard") is None


def test_retire_guard_spec_is_validated() -> None:
    ok = deep_set(
        sample("memorysource-git.yaml"), "spec.retireGuard", {"maxShare": 0.2, "confirm": "0123456789ab"}
    )
    assert MemorySource.model_validate(ok).spec.retire_guard.max_share == 0.2
    assert MemorySource.model_validate(sample("memorysource-git.yaml")).spec.retire_guard.max_share == 0.5
    for bad in ({"maxShare": 0}, {"maxShare": 1.5}, {"confirm": "yes"}):
        with pytest.raises(ValidationError, match=r"retire_guard|retireGuard"):
            MemorySource.model_validate(deep_set(sample("memorysource-git.yaml"), "spec.retireGuard", bad))
