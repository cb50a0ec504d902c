"""On the real kube-apiserver, as a tenant: a user whose only rights are create/update (and get) on
Brains and MemorySources in one namespace tries a git ref and URL that would run a command in the
ingest job. Each is refused by the API server itself, the CEL message naming the field, so nothing
reaches the operator; https and ssh sources, and an http:// one (the operator's policy refuses that,
not the CRD: tests/operator/test_git_source_policy.py), are accepted."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Kubectl
from .helpers import deep_set, sample
from .tenancy import Tenant, grant

pytestmark = pytest.mark.cluster

#: (field, value): each would run `touch /tmp/pwned` if it reached `git fetch` as an option/transport.
HOSTILE = [
    ("spec.git.ref", "--upload-pack=touch /tmp/pwned"),
    ("spec.git.ref", "-c"),
    ("spec.git.url", "--upload-pack=touch /tmp/pwned"),
    ("spec.git.url", "ext::sh -c touch% /tmp/pwned"),
    ("spec.git.url", "ssh://-oProxyCommand=touch%20/tmp/pwned/x"),
    ("spec.skills.url", "-oProxyCommand=touch@host:repo"),
    ("spec.personas.ref", "--output=/tmp/pwned"),
]
ACCEPTED = [
    "https://github.com/example/team-memories.git",
    "ssh://git@github.com/example/team-memories.git",
    "git@github.com:example/team-memories.git",
    "http://git-server.team.svc:8000/team-memories.git",
]


@pytest.fixture
def tenant(kc: Kubectl) -> Iterator[Tenant]:
    yield grant(kc, f"tenant-{uuid.uuid4().hex[:6]}", verbs=("create", "update", "get"))


def _source(name: str, field: str, value: str) -> dict[str, Any]:
    doc = deep_set(sample("memorysource-git.yaml"), "metadata.name", name)
    kind = field.split(".")[1]
    if kind != "git":  # the same GitSource rules guard spec.skills and spec.personas
        doc["spec"][kind] = {"url": "https://github.com/example/skills.git"}
        del doc["spec"]["git"]
    return deep_set(doc, field, value)


def test_the_tenant_has_only_the_rights_it_was_given(tenant: Tenant) -> None:
    assert tenant.can("create", "memorysources.brain.dev") and tenant.can("update", "brains.brain.dev")
    for verb, resource in [("delete", "memorysources.brain.dev"), ("create", "jobs"), ("get", "secrets")]:
        assert not tenant.can(verb, resource), f"the tenant may {verb} {resource}"


@pytest.mark.parametrize(("field", "value"), HOSTILE, ids=[f"{f}={v}" for f, v in HOSTILE])
def test_a_ref_or_url_that_would_run_a_command_is_refused_by_the_apiserver(
    kc: Kubectl, tenant: Tenant, field: str, value: str
) -> None:
    proc = tenant.create(_source(f"hostile-{uuid.uuid4().hex[:6]}", field, value))
    assert proc.returncode != 0, f"the API server accepted {field}={value!r}"
    assert "Forbidden" not in proc.stderr, proc.stderr  # refused for its content, not for the tenant's rights
    what = (
        "ref must be a branch, tag or commit id"
        if field.endswith(".ref")
        else "url must be https://host/path"
    )
    assert f"{field}: Invalid value" in proc.stderr and what in proc.stderr, proc.stderr
    assert kc("get", "memorysources", "-o", "name").stdout.strip() == ""  # nothing was stored


def test_well_shaped_sources_are_accepted_for_the_tenant(kc: Kubectl, tenant: Tenant) -> None:
    for i, url in enumerate(ACCEPTED):
        proc = tenant.create(_source(f"ok-{i}", "spec.git.url", url))
        assert proc.returncode == 0, (url, proc.stderr)
    proc = tenant.create(_source("ok-commit", "spec.git.ref", "0123456789abcdef0123456789abcdef01234567"))
    assert proc.returncode == 0, proc.stderr
    proc = tenant.create(_source("ok-tag", "spec.git.ref", "refs/tags/v1.2.3"))
    assert proc.returncode == 0, proc.stderr
    names = kc("get", "memorysources", "-o", "name").stdout.split()
    assert len(names) == len(ACCEPTED) + 2
