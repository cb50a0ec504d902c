"""What a platform engineer checks first: every pod is hardened, sized, probed and labelled."""

from __future__ import annotations

from typing import Any

import pytest

from brain_operator.api import Brain, Resources
from brain_operator.render import Capabilities
from brain_operator.render.common import RenderInput, resources
from brain_operator.render.gateway import DRAIN_SECONDS
from brain_operator.render.jobs import render_ingest_job, render_reindex_job

from .helpers import (
    SECRETS,
    brain,
    by_key,
    deep_set,
    everything_on,
    pod_templates,
    policy,
    render,
    sample,
    source,
)

LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/managed-by",
)


def _variants() -> list[tuple[str, Brain, Capabilities]]:
    external = brain(
        deep_set(
            sample("brain.yaml"), "spec.database", {"external": {"secretRef": {"name": "db", "key": "dsn"}}}
        )
    )
    cnpg = brain(deep_set(sample("brain.yaml"), "spec.database", {"cloudNativePG": {"instances": 2}}))
    caps = Capabilities(service_monitor=True, cnpg=True)
    return [
        ("sample", brain(), Capabilities()),
        ("everything", everything_on(), caps),
        ("external", external, caps),
        ("cnpg", cnpg, caps),
    ]


def _all(b: Brain, caps: Capabilities) -> list[dict[str, Any]]:
    out = render(b, policies=(policy(),), sources=(source(),), caps=caps)
    out.append(render_ingest_job(RenderInput(brain=b, memory_sources=(source(),), secrets=SECRETS), source()))
    out.append(render_reindex_job(RenderInput(brain=b, secrets=SECRETS)))
    return out


@pytest.mark.parametrize(("variant", "b", "caps"), _variants(), ids=[v[0] for v in _variants()])
def test_every_pod_is_hardened_and_sized(variant: str, b: Brain, caps: Capabilities) -> None:
    templates = pod_templates(_all(b, caps))
    assert templates
    for ref, tpl in templates:
        spec = tpl["spec"]
        psc = spec["securityContext"]
        assert psc["runAsNonRoot"] is True and psc["seccompProfile"] == {"type": "RuntimeDefault"}, ref
        assert spec["automountServiceAccountToken"] is False, ref
        assert {"name": "tmp", "emptyDir": {}} in spec["volumes"], ref
        for c in [*spec.get("initContainers", []), *spec["containers"]]:
            where = f"{ref}/{c['name']}"
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["capabilities"] == {"drop": ["ALL"]}, where
            assert sc["runAsNonRoot"] is True, where
            assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"], where
            assert set(c["resources"]["requests"]) == {"cpu", "memory"}, where
            assert set(c["resources"]["limits"]) == {"cpu", "memory"}, where
            # The tunnel sidecar is probe-free on purpose (see the test after the next one).
            init = c in spec.get("initContainers", [])  # runs to completion before the probes start
            if not ref.startswith(("Job/", "CronJob/")) and c["name"] != "cloudflared" and not init:
                assert "livenessProbe" in c and "readinessProbe" in c, where
        for key in LABELS:
            assert key in tpl["metadata"]["labels"], f"{ref} pod lacks {key}"


@pytest.mark.parametrize(("variant", "b", "caps"), _variants(), ids=[v[0] for v in _variants()])
def test_every_child_is_labelled_and_named_within_limits(variant: str, b: Brain, caps: Capabilities) -> None:
    for m in _all(b, caps):
        meta = m["metadata"]
        ref = f"{m['kind']}/{meta['name']}"
        assert meta["namespace"] == "team-ns", ref
        assert meta["labels"]["app.kubernetes.io/part-of"] == "brain-operator", ref
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "brain-operator", ref
        assert meta["labels"]["app.kubernetes.io/instance"] == "team", ref
        assert len(meta["name"]) <= (52 if m["kind"] == "CronJob" else 63), ref


def test_long_names_are_shortened_deterministically() -> None:
    name = "a-very-long-brain-name-that-goes-on-and-on-and-on-forever"
    doc = sample("brain.yaml")
    doc["metadata"]["name"] = name
    src_doc = sample("memorysource-git.yaml")
    src_doc["metadata"]["name"] = "another-quite-long-memory-source-name"
    src_doc["spec"]["brainRef"]["name"] = name
    first = render(brain(doc), sources=(source(src_doc),))
    second = render(brain(doc), sources=(source(src_doc),))
    assert first == second
    for m in first:
        assert len(m["metadata"]["name"]) <= (52 if m["kind"] == "CronJob" else 63)


def test_data_plane_contract() -> None:
    out = {(m["kind"], m["metadata"]["name"]): m for m in render(sources=(source(),))}
    emb = out[("Deployment", "team-embedder")]["spec"]["template"]["spec"]["containers"][0]
    assert emb["command"] + emb["args"] == [
        "python",
        "-m",
        "brain.embedder",
        "--host",
        "0.0.0.0",
        "--port",
        "8080",
        "--model",
        "sentence-transformers/all-MiniLM-L6-v2",
    ]
    gw = out[("Deployment", "team-gateway")]["spec"]["template"]["spec"]["containers"][0]
    assert gw["command"] + gw["args"] == [
        "python",
        "-m",
        "brain.gateway",
        "--config",
        "/etc/brain/litellm.yaml",
        "--host",
        "0.0.0.0",
        "--port",
        "4000",
    ]
    env = {e["name"]: e for e in gw["env"]}
    assert env["BRAIN_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {  # its own login (issue #26)
        "name": "team-db-role-gateway",
        "key": "dsn",
    }
    assert env["BRAIN_EMBEDDER_URL"]["value"] == "http://team-embedder:8080"
    assert env["BRAIN_MASTER_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "team-master-key",
        "key": "masterKey",
    }
    assert env["BRAIN_EMBEDDING_DIM"]["value"] == "384"
    ingest = out[("CronJob", "team-ingest-team-memories")]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert ingest["containers"][0]["command"] == [
        "python",
        "-m",
        "brain.jobs.ingest",
        "--source-file",
        "/etc/brain/source.json",
    ]
    distill = out[("CronJob", "team-distill")]["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert distill["command"] == ["python", "-m", "brain.jobs.distill"]
    assert (
        out[("StatefulSet", "team-db")]["spec"]["template"]["spec"]["containers"][0]["image"]
        == "pgvector/pgvector:pg17"
    )


@pytest.mark.parametrize(("variant", "b", "caps"), _variants(), ids=[v[0] for v in _variants()])
def test_slow_starts_are_not_killed_by_liveness(variant: str, b: Brain, caps: Capabilities) -> None:
    """Found on a real node (e2e/pods): three gateways booting LiteLLM on 2 busy CPUs took longer than
    liveness allowed (10 s + 6 x 10 s) and were restarted in a loop, so the Brain never became Ready.
    Every HTTP-probed container has a startup probe on its liveness path with a budget of 5 minutes."""
    for ref, tpl in pod_templates(_all(b, caps)):
        for c in tpl["spec"]["containers"]:
            live = c.get("livenessProbe", {}).get("httpGet")
            if not live:
                continue
            startup = c.get("startupProbe")
            assert startup and startup["httpGet"] == live, f"{ref}/{c['name']} has no startup probe"
            assert startup["periodSeconds"] * startup["failureThreshold"] >= 300, f"{ref}/{c['name']}"


def test_the_tunnel_sidecar_can_never_take_the_gateway_out_of_its_service() -> None:
    """A pod is Ready only if every container is: a readiness probe on cloudflared's /ready (503
    until Cloudflare answers), or a liveness/startup probe that restarts it into CrashLoopBackOff,
    would take the gateway out of its Service wherever the tunnel cannot connect. The sidecar has no
    probe of any kind (our image restarts cloudflared in place), while the gateway keeps all three."""
    dep = by_key(render(everything_on()))[("Deployment", "team-gateway")]
    containers = {c["name"]: c for c in dep["spec"]["template"]["spec"]["containers"]}
    assert set(containers) == {"gateway", "cloudflared"}
    probes = {"readinessProbe", "livenessProbe", "startupProbe"}
    assert not probes & set(containers["cloudflared"]), sorted(probes & set(containers["cloudflared"]))
    assert probes <= set(containers["gateway"])
    # Our image (restart loop in its entrypoint) by default: the rendered args, not a command, so
    # the entrypoint runs. The upstream image would exit and crash-loop (docs/operations.md).
    assert containers["cloudflared"]["image"].startswith("ghcr.io/brain-operator/cloudflared:")
    assert "command" not in containers["cloudflared"]
    assert containers["cloudflared"]["ports"] == [{"name": "tunnel-metrics", "containerPort": 2000}]


@pytest.mark.parametrize(("variant", "b", "caps"), _variants(), ids=[v[0] for v in _variants()])
def test_a_terminating_gateway_keeps_serving_while_it_leaves_the_service(
    variant: str, b: Brain, caps: Capabilities
) -> None:
    """Found in the upgrade e2e (#29): chats routed to a gateway pod in the second between its
    deletion and the proxies' update were refused (uvicorn stops listening at SIGTERM). The gateway
    pauses in preStop, within the grace period, with what its image has (python)."""
    [(ref, tpl)] = [(r, t) for r, t in pod_templates(_all(b, caps)) if r.endswith("-gateway")]
    [gw] = [c for c in tpl["spec"]["containers"] if c["name"] == "gateway"]
    command = gw["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "python" and f"time.sleep({DRAIN_SECONDS})" in command[-1], (ref, command)
    assert 3 <= DRAIN_SECONDS < tpl["spec"].get("terminationGracePeriodSeconds", 30) - 10, ref


def test_a_request_above_the_default_limit_raises_that_limit_only() -> None:
    """Session 14: a MemorySource's `requests.memory: 4Gi` (default limit 1Gi) made an invalid CronJob,
    and its Brain's apply stopped there; a limit the spec sets is kept as written."""
    asked = Resources.model_validate({"requests": {"memory": "4Gi", "cpu": "100m"}})
    assert resources("jobs", asked) == {
        "requests": {"cpu": "100m", "memory": "4Gi"},
        "limits": {"cpu": "1", "memory": "4Gi"},
    }
    both = Resources.model_validate({"requests": {"memory": "4Gi"}, "limits": {"memory": "2Gi"}})
    assert resources("jobs", both)["limits"]["memory"] == "2Gi"


def test_the_network_policies_are_applied_before_anything_that_listens() -> None:
    kinds = [m["kind"] for m in render()]
    first_workload = min(kinds.index(k) for k in ("StatefulSet", "Deployment", "Service", "CronJob"))
    assert kinds.index("NetworkPolicy") < first_workload
    assert kinds.count("NetworkPolicy") == len([k for k in kinds[:first_workload] if k == "NetworkPolicy"])
