"""CronJobs (distill, digest, one ingest per MemorySource), the immediate ingest Job, the model migration Job.

Job pods have no server to probe; ``activeDeadlineSeconds`` bounds them instead. The last line a
job prints on stdout is a JSON summary the operator reads back into status.
"""

from __future__ import annotations

import json
from typing import Any

from brain.core.contract import Env
from brain_operator.api import MemorySource
from brain_operator.render import names
from brain_operator.render.common import (
    SOURCE_LABEL,
    SPEC_HASH_ANNOTATION,
    TMP_MOUNT,
    Manifest,
    RenderInput,
    container_security_context,
    labels,
    meta,
    pod_spec,
    resources,
    secret_env,
    stable_hash,
)
from brain_operator.render.gateway import data_plane_env, gateway_url
from brain_operator.render.litellm_config import MASTER_KEY_ENV
from brain_operator.render.secrets import master_key_ref

SOURCE_KEY = "source.json"
SOURCE_DIR = "/etc/brain"
JOB_DEADLINE_SECONDS = 3600
JOB_TTL_SECONDS = 86400


def _job_spec(
    inp: RenderInput,
    component: str,
    args: list[str],
    res: Any,
    *,
    env: list[dict[str, Any]] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    mounts: list[dict[str, Any]] | None = None,
    extra_labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    container = {
        "name": component,
        "image": inp.images.jobs,
        "command": ["python", "-m", *args],
        "env": [*data_plane_env(inp, component), *(env or [])],  # each job its own login
        "resources": resources("jobs", res),
        "securityContext": container_security_context(),
        "volumeMounts": [TMP_MOUNT, *(mounts or [])],
    }
    return {
        "backoffLimit": 2,
        "activeDeadlineSeconds": JOB_DEADLINE_SECONDS,
        "template": {
            "metadata": {"labels": labels(inp.name, component, **(extra_labels or {}))},
            "spec": pod_spec([container], volumes=volumes, restart_policy="Never"),
        },
    }


def cronjob(
    inp: RenderInput,
    name: str,
    component: str,
    schedule: str,
    suspend: bool,
    job: dict[str, Any],
    **extra: str,
) -> Manifest:
    """The one CronJob shape of every scheduled job (ingest, distill, digest, backup), so their
    time zone, overlap and history rules cannot drift apart."""
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": meta(inp, name, component, extra_labels=extra),
        "spec": {
            "schedule": schedule,
            "timeZone": "Etc/UTC",
            "suspend": suspend,
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 600,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {"metadata": {"labels": labels(inp.name, component, **extra)}, "spec": job},
        },
    }


def _llm_env(inp: RenderInput, model: str | None) -> list[dict[str, Any]]:
    """Distill reaches the LLM through the Brain's own gateway (keys stay in one place)."""
    secret, key = master_key_ref(inp)
    chosen = model or inp.brain.spec.gateway.models[0].name
    return [
        {"name": Env.GATEWAY_URL, "value": gateway_url(inp)},
        secret_env(MASTER_KEY_ENV, secret, key),
        {"name": Env.DISTILL_MODEL, "value": chosen},
    ]


def render_scheduled_jobs(inp: RenderInput) -> list[Manifest]:
    """Distill (which calls the LLM) gets the gateway URL, master key and model; the digest is
    computed from the database alone, so it gets no secret but the database's."""
    spec = inp.brain.spec
    distill = _job_spec(inp, "distill", ["brain.jobs.distill"], spec.distill.resources,
                        env=_llm_env(inp, spec.distill.model))  # fmt: skip
    digest = _job_spec(inp, "digest", ["brain.jobs.digest"], spec.digest.resources)
    return [
        cronjob(inp, names.cronjob(inp.name, "distill"), "distill", spec.distill.schedule,
                 spec.distill.suspend, distill),
        cronjob(inp, names.cronjob(inp.name, "digest"), "digest", spec.digest.schedule,
                 spec.digest.suspend, digest),
    ]  # fmt: skip


def source_document(source: MemorySource, brain: str) -> dict[str, Any]:
    """What the ingest job reads from ``/etc/brain/source.json``: the MemorySource spec plus identity."""
    return {"name": source.metadata.name, "brain": brain, "spec": source.spec.to_k8s()}


def source_hash(source: MemorySource) -> str:
    """Identifies one version of a MemorySource spec (names the immediate Job)."""
    return stable_hash(source.spec.to_k8s())


def _ingest_job_spec(inp: RenderInput, source: MemorySource) -> dict[str, Any]:
    src = source.metadata.name
    env = []
    creds = None
    for candidate in (source.spec.git, source.spec.skills, source.spec.personas):
        if candidate is not None and candidate.credentials_secret_ref is not None:
            creds = candidate.credentials_secret_ref
    if creds is not None:
        env.append(secret_env(Env.SOURCE_CREDENTIALS, creds.name, creds.key))
    if inp.allow_insecure_git_urls:  # the operator's test flag; without it the job refuses http/file
        env.append({"name": Env.GIT_ALLOW_INSECURE_URLS, "value": "1"})
    volumes = [{"name": "source", "configMap": {"name": names.source_config(inp.name, src)}}]
    if source.spec.inline is not None:
        volumes.append({"name": "inline", "configMap": {"name": source.spec.inline.config_map_name}})
    mounts = [{"name": "source", "mountPath": SOURCE_DIR, "readOnly": True}]
    if source.spec.inline is not None:
        mounts.append({"name": "inline", "mountPath": "/etc/brain/inline", "readOnly": True})
    return _job_spec(
        inp,
        "ingest",
        ["brain.jobs.ingest", "--source-file", f"{SOURCE_DIR}/{SOURCE_KEY}"],
        source.spec.resources,
        env=env,
        volumes=volumes,
        mounts=mounts,
        extra_labels={SOURCE_LABEL: src},
    )


def render_ingest(inp: RenderInput, source: MemorySource) -> list[Manifest]:
    """The source ConfigMap and the scheduled ingest CronJob for one MemorySource."""
    src = source.metadata.name
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(inp, names.source_config(inp.name, src), "ingest", extra_labels={SOURCE_LABEL: src}),
        "data": {SOURCE_KEY: json.dumps(source_document(source, inp.name), sort_keys=True, indent=2)},
    }
    cron = cronjob(
        inp,
        names.ingest_cronjob(inp.name, src),
        "ingest",
        source.spec.schedule,
        source.spec.suspend,
        _ingest_job_spec(inp, source),
        **{SOURCE_LABEL: src},
    )
    return [configmap, cron]


def render_ingest_job(inp: RenderInput, source: MemorySource) -> Manifest:
    """The one-off Job run when a MemorySource is created or its spec changes.

    Its name carries the spec hash, so a restarted operator re-creating it hits AlreadyExists
    instead of running the import twice.
    """
    digest = source_hash(source)
    src = source.metadata.name
    spec = _ingest_job_spec(inp, source)
    spec["ttlSecondsAfterFinished"] = JOB_TTL_SECONDS
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(
            inp,
            names.ingest_job(inp.name, src, digest),
            "ingest",
            extra_labels={SOURCE_LABEL: src},
            annotations={SPEC_HASH_ANNOTATION: digest},
        ),
        "spec": spec,
    }


REINDEX_MODEL_ANNOTATION = "brain.dev/reindex-to-model"


def reindex_model_hash(model: str, dim: int) -> str:
    """Identifies one migration target (names its Job); the dimension is part of the target."""
    return stable_hash({"model": model, "dim": dim})


def render_reindex_job(inp: RenderInput) -> Manifest:
    """The Job that migrates the index to `spec.embedding.model` (brain.jobs.reindex).

    It gets what every data-plane pod gets (the DSN Secret, the embedder Service, the spec's model
    and dimension), so the migration embeds with the very model the embedder now serves. Its name
    carries the target's hash: one Job per target, however often the Brain is reconciled. A failed
    one stays (until its TTL) rather than being retried in a loop; its failure is in the Brain's
    `Reindexing` condition. The migration itself resumes where it stopped, so the pod's own retries
    (backoffLimit) redo no finished batch.
    """
    emb = inp.brain.spec.embedding
    digest = reindex_model_hash(emb.model, emb.dim)
    spec = _job_spec(inp, "reindex", ["brain.jobs.reindex"], None)
    spec["ttlSecondsAfterFinished"] = JOB_TTL_SECONDS
    # A migration of a large brain outlasts an import: a day, not an hour (docs/performance.md).
    spec["activeDeadlineSeconds"] = 86400
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(
            inp,
            names.reindex_job(inp.name, digest),
            "reindex",
            annotations={SPEC_HASH_ANNOTATION: digest, REINDEX_MODEL_ANNOTATION: emb.model},
        ),
        "spec": spec,
    }
