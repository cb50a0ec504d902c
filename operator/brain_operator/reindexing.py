"""The Brain's `Reindexing` condition and gauges, from what the gateway says about its index.

A model migration (brain/store/reindex.py) builds the new model's index beside the live one and
swaps it in when complete; until then the brain serves from the old one. This module tells a
person which of three states the brain is in: migrating (with counts), current, or configured for
a model its index is not built by yet (with the command that migrates it).
"""

from __future__ import annotations

from prometheus_client import Gauge

from brain_operator.api import IndexStatus
from brain_operator.status import Check

REINDEX_DONE = Gauge(
    "brain_index_reindex_done", "Entries a running model migration has embedded so far.", ["brain"]
)
REINDEX_TOTAL = Gauge(
    "brain_index_reindex_total", "Entries a running model migration must embed (0: none runs).", ["brain"]
)


def reindex_check(spec_model: str, index: IndexStatus | None) -> Check:
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
    if live and live != spec_model:
        return Check(
            "False",
            "ModelChangePending",
            f"spec.embedding.model is {spec_model} but the index is built by {live}, which keeps serving; "
            f"migrate it with `brainctl reindex --to-model {spec_model}`",
        )
    return Check("False", "Current", f"the index is built by {live or spec_model}")


def set_reindex_metrics(brain: str, index: IndexStatus | None) -> None:
    run = index.reindex if index is not None else None
    REINDEX_DONE.labels(brain=brain).set(run.done if run else 0)
    REINDEX_TOTAL.labels(brain=brain).set(run.total if run else 0)
