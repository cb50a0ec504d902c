"""The Brain's `Reindexing` condition and gauges, from what the gateway says about its index.

A model migration (brain/store/reindex.py) builds the new model's index beside the live one and
swaps it in when complete; until then the brain serves from the old one. This module tells a
person which of three states the brain is in: migrating (with counts), current, or configured for
a model its index is not built by yet (with the command that migrates it).
"""

from __future__ import annotations

from typing import Any

from brain_operator.api import IndexStatus
from brain_operator.metrics import REINDEX_DONE, REINDEX_TOTAL
from brain_operator.status import Check


def job_failure(job: dict[str, Any] | None) -> str | None:
    """The Failed condition's message of a migration Job, or None while it has not failed."""
    for c in ((job or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "Failed" and c.get("status") == "True":
            return str(c.get("message") or c.get("reason") or "the Job failed")
    return None


def reindex_check(spec_model: str, index: IndexStatus | None, job: dict[str, Any] | None = None) -> Check:
    """`job` is the operator's migration Job toward `spec_model` (None: not created)."""
    if index is None:
        return Check("Unknown", "NotChecked", "the gateway health endpoint has not been read yet")
    run = index.reindex
    if run is not None:
        return Check(
            "True",
            "Reindexing",
            f"embedding {run.done} of {run.total} entries with {run.to_model} ({run.to_dim} dimensions); "
            f"serving from {run.from_model or 'the live index'} until the new index is complete and swapped in",
        )
    live = index.live_model
    if live and live != spec_model and job is not None:
        name = job["metadata"]["name"]
        failed = job_failure(job)
        if failed is not None:
            return Check(
                "False",
                "ReindexFailed",
                f"Job {name} migrating the index from {live} to {spec_model} failed: {failed}; {live} "
                f"keeps serving. Read `kubectl logs job/{name}`; delete the Job to retry (the migration "
                "resumes where it stopped)",
            )
        return Check(
            "False",
            "ModelChangePending",
            f"spec.embedding.model is {spec_model} but the index is built by {live}, which keeps serving; "
            f"Job {name} is starting the migration (`kubectl logs job/{name}`)",
        )
    if live and live != spec_model:
        return Check(
            "False",
            "ModelChangePending",
            f"spec.embedding.model is {spec_model} but the index is built by {live}, which keeps serving; "
            f"the operator starts a migration Job (or run `brainctl reindex --to-model {spec_model}`)",
        )
    return Check("False", "Current", f"the index is built by {live or spec_model}")


def set_reindex_metrics(brain: str, index: IndexStatus | None) -> None:
    run = index.reindex if index is not None else None
    REINDEX_DONE.labels(brain=brain).set(run.done if run else 0)
    REINDEX_TOTAL.labels(brain=brain).set(run.total if run else 0)
