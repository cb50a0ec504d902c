"""The model migration Job: what the operator runs when spec.embedding.model changes (pure render)."""

from __future__ import annotations

from typing import Any

from brain_operator.api import Brain
from brain_operator.render.common import RenderInput
from brain_operator.render.jobs import REINDEX_MODEL_ANNOTATION, render_reindex_job

from .helpers import SECRETS, brain, deep_set, sample

NEW = "BAAI/bge-small-en-v1.5"


def target(doc: dict[str, Any] | None = None) -> Brain:
    """A Brain whose spec names NEW (the sample names the offline MiniLM, the live model here)."""
    return brain(deep_set(doc or sample("brain.yaml"), "spec.embedding.model", NEW))


def _job(b: Brain) -> dict[str, Any]:
    return render_reindex_job(RenderInput(brain=b, secrets=SECRETS))


def _env(job: dict[str, Any]) -> dict[str, Any]:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_the_job_migrates_to_the_spec_model_through_the_embedder_service_and_the_dsn_secret() -> None:
    job = _job(target())
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "-m", "brain.jobs.reindex"]
    assert container["image"] == RenderInput(brain=target(), secrets=SECRETS).images.jobs
    env = _env(job)
    # its own login, a member of the schema owner (it renames columns): not the superuser
    assert env["BRAIN_DATABASE_URL"] == {"secretKeyRef": {"name": "team-db-role-reindex", "key": "dsn"}}
    assert env["BRAIN_EMBEDDER_URL"].startswith("http://team-embedder:")
    assert (env["BRAIN_EMBEDDING_MODEL"], env["BRAIN_EMBEDDING_DIM"]) == (NEW, "384")
    assert job["metadata"]["annotations"][REINDEX_MODEL_ANNOTATION] == NEW
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert job["metadata"]["name"].startswith("team-reindex-")
    assert job == _job(target())  # pure: the same Brain renders the same Job (and name)


def test_the_name_is_one_per_target_model_and_valid_for_long_brain_names() -> None:
    other = brain(
        deep_set(sample("brain.yaml"), "spec.embedding.model", "sentence-transformers/all-MiniLM-L6-v2")
    )
    assert _job(other)["metadata"]["name"] != _job(target())["metadata"]["name"]
    long = sample("brain.yaml")
    long["metadata"]["name"] = "b" * 63
    name = _job(target(long))["metadata"]["name"]
    assert len(name) <= 63 and name.endswith(_job(target())["metadata"]["name"][-8:])


def test_an_external_database_secret_is_what_the_job_reads() -> None:
    ext = brain(
        deep_set(
            sample("brain.yaml"), "spec.database", {"external": {"secretRef": {"name": "pg", "key": "url"}}}
        )
    )
    assert _env(_job(ext))["BRAIN_DATABASE_URL"] == {"secretKeyRef": {"name": "pg", "key": "url"}}
