"""The scheme policy at reconcile (in-memory API server): a MemorySource whose git URL is http:// or
file:// passes the CRD's shape but gets no CronJob and no Job, and its status names the field, unless
the operator runs with --allow-insecure-git-urls, which it then passes on to the ingest job."""

from __future__ import annotations

from typing import Any

import pytest

from brain.core.contract import Env
from brain_operator.config import OperatorConfig
from brain_operator.main import config_from_args, parse_args
from brain_operator.reconciler import Reconciler

from .fakekube import FakeKube
from .helpers import deep_set, sample

NS = "team-ns"


def _reconcile(url: str, cfg: OperatorConfig) -> tuple[FakeKube, Any, list[tuple[str, str, str]]]:
    kube = FakeKube()
    for doc in (sample("brain.yaml"), deep_set(sample("memorysource-git.yaml"), "spec.git.url", url)):
        doc["metadata"]["namespace"] = NS
        kube.put(doc)
    events: list[tuple[str, str, str]] = []
    rec = Reconciler(kube, cfg)  # type: ignore[arg-type]
    result = rec.reconcile(NS, "team", lambda body, etype, reason, msg: events.append((etype, reason, msg)))
    return kube, result, events


def _ingest_objects(kube: FakeKube) -> list[str]:
    return sorted(f"{k}/{n}" for (k, _, n) in kube.objects if k in ("CronJob", "Job") and "ingest" in n)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://git.example.com/team.git", "clear text"),
        ("file:///srv/git/team.git", "the job pod's own disk"),
    ],
)
def test_insecure_url_gets_no_job_and_a_condition_naming_the_field(url: str, why: str) -> None:
    kube, result, events = _reconcile(url, OperatorConfig())
    assert result is not None and result.error is None  # the Brain itself reconciles
    assert _ingest_objects(kube) == [] and result.jobs_created == []
    ready = {c["type"]: c for c in kube.obj("MemorySource", "team-memories")["status"]["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "InsecureGitURL")
    assert ready["message"].startswith("spec.git.url is refused: ") and why in ready["message"]
    assert "--allow-insecure-git-urls" in ready["message"] and "https://" in ready["message"]
    assert [e[:2] for e in events if e[1] == "InsecureGitURL"] == [("Warning", "InsecureGitURL")]


def test_the_refusal_is_announced_once_not_on_every_resync() -> None:
    kube, _, _ = _reconcile("http://git.example.com/team.git", OperatorConfig())
    events: list[str] = []
    again = Reconciler(kube, OperatorConfig()).reconcile(  # type: ignore[arg-type]
        NS, "team", lambda body, etype, reason, msg: events.append(reason)
    )
    assert again is not None and again.jobs_created == [] and "InsecureGitURL" not in events


def test_https_source_is_rendered_without_the_allowance() -> None:
    kube, result, _ = _reconcile("https://git.example.com/team.git", OperatorConfig())
    assert result is not None and len(result.jobs_created) == 1
    [job] = [o for (k, _, n), o in kube.objects.items() if k == "Job"]
    env = {e["name"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert Env.GIT_ALLOW_INSECURE_URLS not in env


def test_the_test_flag_renders_it_and_tells_the_job() -> None:
    cfg = config_from_args(parse_args(["--allow-insecure-git-urls", "--standalone"]))
    assert cfg.allow_insecure_git_urls
    kube, result, events = _reconcile("http://git-server.team.svc:8000/team.git", cfg)
    assert result is not None and len(result.jobs_created) == 1
    assert _ingest_objects(kube) == sorted(["CronJob/team-ingest-team-memories", result.jobs_created[0]])
    for (kind, _, _name), obj in kube.objects.items():
        if kind in ("Job", "CronJob"):
            pod = obj["spec"] if kind == "Job" else obj["spec"]["jobTemplate"]["spec"]
            env = {e["name"]: e.get("value") for e in pod["template"]["spec"]["containers"][0]["env"]}
            if "ingest" in _name:
                assert env[Env.GIT_ALLOW_INSECURE_URLS] == "1"
    assert not [e for e in events if e[1] == "InsecureGitURL"]
    assert not config_from_args(parse_args(["--standalone"])).allow_insecure_git_urls
