"""The reconcile loop against an in-memory API server: writes only what changed, restores drift,
prunes what is no longer rendered, reports status with conditions and observedGeneration."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from brain.core.contract import DB_ROLES
from brain_operator.config import OperatorConfig
from brain_operator.health import Health, parse_health
from brain_operator.metrics import BRAIN_READY, INDEX_ENTRIES
from brain_operator.reconciler import Reconciler

from .fakekube import FakeKube
from .helpers import deep_set, sample

NS = "team-ns"


def _setup(*extra: dict[str, Any]) -> tuple[FakeKube, Reconciler]:
    kube = FakeKube()
    for doc in (sample("brain.yaml"), *extra):
        doc["metadata"]["namespace"] = NS
        kube.put(doc)
    return kube, Reconciler(kube, OperatorConfig())  # type: ignore[arg-type]


def _make_ready(kube: FakeKube) -> None:
    for (kind, _ns, _name), obj in kube.objects.items():
        if kind in ("Deployment", "StatefulSet"):
            n = obj["spec"]["replicas"]
            obj["status"] = {
                "observedGeneration": obj["metadata"]["generation"],
                "replicas": n,
                "readyReplicas": n,
                "updatedReplicas": n,
                "availableReplicas": n,
            }


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in obj["status"]["conditions"]}


def _secret(name: str, use: str | None, **data: str) -> dict[str, Any]:
    """A Secret in NS; ``use`` is its brain.dev/secret-use label (None: unlabelled)."""
    labels = {"brain.dev/secret-use": use} if use else {}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def test_first_reconcile_creates_the_stack_and_the_second_writes_nothing() -> None:
    kube, rec = _setup()
    first = rec.reconcile(NS, "team")
    assert first is not None and first.error is None
    assert "Deployment/team-gateway" in first.applied and "StatefulSet/team-db" in first.applied
    assert first.phase == "Pending" and first.status_written
    brain_uid = kube.obj("Brain", "team")["metadata"]["uid"]
    for (kind, _, name), obj in kube.objects.items():
        if kind != "Brain":
            refs = obj["metadata"]["ownerReferences"]
            assert refs == [
                {
                    "apiVersion": "brain.dev/v1alpha1",
                    "kind": "Brain",
                    "name": "team",
                    "uid": brain_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ], f"{kind}/{name}"
    kube.reset_writes()
    second = rec.reconcile(NS, "team")
    assert second is not None and not second.wrote and kube.writes == []


def test_ready_when_workloads_are_ready() -> None:
    kube, rec = _setup()
    rec.reconcile(NS, "team")
    _make_ready(kube)
    result = rec.reconcile(NS, "team")
    assert result is not None and result.ready and result.phase == "Ready"
    status = kube.obj("Brain", "team")["status"]
    conds = _conditions(kube.obj("Brain", "team"))
    for ctype in ("Ready", "DatabaseReady", "EmbedderReady", "GatewayReady"):
        assert conds[ctype]["status"] == "True", conds[ctype]
        assert conds[ctype]["observedGeneration"] == 1
    assert conds["IndexHealthy"]["status"] == "Unknown"
    assert status["observedGeneration"] == 1
    assert status["endpoints"] == {
        "gateway": "http://team-gateway.team-ns.svc:4000",
        "mcp": "http://team-gateway.team-ns.svc:4000/mcp",
    }
    assert BRAIN_READY.labels(brain="team-ns/team")._value.get() == 1
    kube.reset_writes()
    rec.reconcile(NS, "team")
    assert kube.writes == []


def test_spec_change_touches_only_the_affected_child() -> None:
    kube, rec = _setup()
    rec.reconcile(NS, "team")
    _make_ready(kube)
    rec.reconcile(NS, "team")
    brain = kube.obj("Brain", "team")
    brain["spec"]["gateway"]["replicas"] = 4
    brain["metadata"]["generation"] = 2
    kube.reset_writes()
    result = rec.reconcile(NS, "team")
    assert result is not None
    assert result.applied == ["Deployment/team-gateway"]
    assert kube.obj("Brain", "team")["status"]["observedGeneration"] == 2
    assert _conditions(kube.obj("Brain", "team"))["GatewayReady"]["status"] == "False"  # 2/4 ready now


def test_deleted_and_edited_children_are_restored() -> None:
    kube, rec = _setup()
    rec.reconcile(NS, "team")
    del kube.objects[("Service", NS, "team-gateway")]
    kube.obj("Deployment", "team-embedder")["spec"]["replicas"] = 7
    kube.obj("ConfigMap", "team-gateway-config")["data"]["litellm.yaml"] = "tampered"
    kube.reset_writes()
    result = rec.reconcile(NS, "team")
    assert result is not None
    assert sorted(result.applied) == [
        "ConfigMap/team-gateway-config",
        "Deployment/team-embedder",
        "Service/team-gateway",
    ]
    assert kube.obj("Deployment", "team-embedder")["spec"]["replicas"] == 1


def test_generated_secrets_are_stable() -> None:
    """A re-generated password would lock the pods out of their database: every login's password
    (issue #26) is generated once, each different, and read back by name on every reconcile."""
    kube, rec = _setup()
    rec.reconcile(NS, "team")
    secrets = ["team-db-credentials", *(f"team-db-role-{r}" for r in DB_ROLES)]
    before = {n: kube.obj("Secret", n)["data"]["password"] for n in secrets}
    assert len(set(before.values())) == len(secrets)
    rec.reconcile(NS, "team")
    rec2 = Reconciler(kube, OperatorConfig())  # type: ignore[arg-type]  # a restarted operator
    rec2.reconcile(NS, "team")
    assert {n: kube.obj("Secret", n)["data"]["password"] for n in secrets} == before


def test_memory_source_lifecycle() -> None:
    kube, rec = _setup(sample("memorysource-git.yaml"))
    result = rec.reconcile(NS, "team")
    assert result is not None
    assert "CronJob/team-ingest-team-memories" in result.applied
    assert len(result.jobs_created) == 1 and result.jobs_created[0].startswith(
        "Job/team-ingest-team-memories-"
    )
    src = kube.obj("MemorySource", "team-memories")
    assert src["status"]["lastJob"] == result.jobs_created[0].split("/")[1]
    assert _conditions(src)["Ready"]["status"] == "True"
    kube.reset_writes()
    again = rec.reconcile(NS, "team")
    assert again is not None and not again.wrote, kube.writes  # no second immediate import
    # a spec change launches exactly one new import
    src["spec"]["git"]["ref"] = "v2"
    src["metadata"]["generation"] = 2
    third = rec.reconcile(NS, "team")
    assert third is not None and len(third.jobs_created) == 1
    # deleting the source prunes its CronJob and ConfigMap
    del kube.objects[("MemorySource", NS, "team-memories")]
    fourth = rec.reconcile(NS, "team")
    assert fourth is not None
    assert sorted(fourth.deleted) == [
        "ConfigMap/team-source-team-memories",
        "CronJob/team-ingest-team-memories",
    ]


def test_ingest_summary_lands_in_memory_source_status() -> None:
    kube, rec = _setup(sample("memorysource-git.yaml"))
    result = rec.reconcile(NS, "team")
    assert result is not None
    job = kube.obj("Job", result.jobs_created[0].split("/")[1])
    job["status"] = {
        "conditions": [{"type": "Complete", "status": "True"}],
        "completionTime": "2026-01-01T00:00:00Z",
    }
    kube.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "ingest-pod", "labels": {"job-name": job["metadata"]["name"]}},
        }
    )
    kube.logs["ingest-pod"] = "cloning...\n" + json.dumps(
        {"added": 3, "superseded": 1, "skipped": 2, "retired": 0, "rejected": 1}
    )
    assert rec.record_ingest(job) is True
    status = kube.obj("MemorySource", "team-memories")["status"]
    assert status["counts"] == {"added": 3, "superseded": 1, "skipped": 2, "retired": 0, "rejected": 1}
    assert status["lastSync"] == "2026-01-01T00:00:00Z"
    assert _conditions(kube.obj("MemorySource", "team-memories"))["Synced"]["status"] == "True"
    assert rec.record_ingest(job) is False  # already recorded


def test_routing_policy_status_and_rejection() -> None:
    bad = deep_set(sample("routingpolicy.yaml"), "spec.tiers.reasoning", "o3")
    bad["metadata"]["name"] = "bad"
    kube, rec = _setup(sample("routingpolicy.yaml"), bad)
    rec.reconcile(NS, "team")
    good = kube.obj("RoutingPolicy", "smart-router")["status"]
    assert good["brain"] == "team" and good["configHash"] == kube.obj("Brain", "team")["status"]["configHash"]
    assert _conditions(kube.obj("RoutingPolicy", "smart-router"))["Applied"]["status"] == "True"
    rejected = _conditions(kube.obj("RoutingPolicy", "bad"))["Applied"]
    assert rejected["status"] == "False" and "o3" in rejected["message"]


def test_index_health_flows_into_status_and_metrics() -> None:
    kube, rec = _setup()
    doc = {
        "status": "ok",
        "database": "ok",
        "embedder": "ok",
        "index": {
            "entriesByKind": {"note": 3, "skill": 2},
            "entriesByNamespace": {"shared": 5},
            "embeddedRatio": 1.0,
            "staleEntries": 1,
            "pendingProposals": 4,
            "lastIngest": "2026-01-01T00:00:00Z",
            "lastDistill": None,
            "lastDigest": None,
            "embeddingModel": "sentence-transformers/all-MiniLM-L6-v2",
            "embeddingDim": 384,
        },
    }
    rec.health[(NS, "team")] = parse_health(doc)
    rec.reconcile(NS, "team")
    index = kube.obj("Brain", "team")["status"]["index"]
    assert index["totalEntries"] == 5 and index["entriesByKind"] == {"note": 3, "skill": 2}
    assert index["pendingProposals"] == 4 and index["embeddingDim"] == 384 and "lastDistill" not in index
    assert _conditions(kube.obj("Brain", "team"))["IndexHealthy"]["status"] == "True"
    assert INDEX_ENTRIES.labels(brain="team-ns/team", memory_namespace="*", kind="note")._value.get() == 3
    rec.health[(NS, "team")] = Health(error="ConnectError from http://x")
    rec.reconcile(NS, "team")
    assert _conditions(kube.obj("Brain", "team"))["IndexHealthy"]["reason"] == "HealthUnreachable"


def test_backup_results_flow_into_status_and_the_backup_metrics() -> None:
    """spec.backup: the volume and CronJob are applied (and pruned when it goes); the gateway's last
    backup reaches status.index and the three series the alerts read; without spec.backup, none."""
    from brain_operator.metrics import BACKUP_LAST_FAILED, BACKUP_LAST_SUCCESS, BACKUP_MAX_AGE

    doc = deep_set(sample("brain.yaml"), "spec.backup", {"maxAgeHours": 30})
    doc["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    kube, rec = _setup()
    kube.put({**doc, "metadata": {**doc["metadata"], "namespace": NS}})
    label = f"{NS}/team"
    rec.health[(NS, "team")] = parse_health({"status": "ok", "database": "ok", "embedder": "ok", "index": {}})
    rec.reconcile(NS, "team")
    assert kube.obj("CronJob", "team-backup") and kube.obj("PersistentVolumeClaim", "team-backups")
    assert BACKUP_MAX_AGE.labels(brain=label)._value.get() == 30 * 3600
    assert BACKUP_LAST_SUCCESS.labels(brain=label)._value.get() == 1767225600  # never: from creation
    assert BACKUP_LAST_FAILED.labels(brain=label)._value.get() == 0
    index = {"lastBackup": "2026-03-01T03:00:05+00:00", "lastBackupResult": "failed", "lastBackupBytes": 4096}
    rec.health[(NS, "team")] = parse_health(
        {"status": "ok", "database": "ok", "embedder": "ok", "index": index}
    )
    rec.reconcile(NS, "team")
    status = kube.obj("Brain", "team")["status"]["index"]
    assert (status["lastBackup"], status["lastBackupResult"], status["lastBackupBytes"]) == tuple(
        index.values()
    )
    assert BACKUP_LAST_SUCCESS.labels(brain=label)._value.get() == 1772334005
    assert BACKUP_LAST_FAILED.labels(brain=label)._value.get() == 1
    del kube.obj("Brain", "team")["spec"]["backup"]
    rec.reconcile(NS, "team")
    assert ("CronJob", NS, "team-backup") not in kube.objects
    assert ("PersistentVolumeClaim", NS, "team-backups") not in kube.objects
    assert label not in {labels[0] for labels in BACKUP_MAX_AGE._metrics}


def test_invalid_spec_in_the_cluster_fails_with_the_field_named() -> None:
    kube, rec = _setup()
    kube.obj("Brain", "team")["spec"]["distill"] = {"schedule": "whenever"}
    result = rec.reconcile(NS, "team")
    assert result is not None and result.phase == "Failed"
    ready = _conditions(kube.obj("Brain", "team"))["Ready"]
    assert ready["reason"] == "InvalidSpec" and "schedule" in ready["message"]


@pytest.mark.parametrize("mode", ["external", "cloudNativePG"])
def test_database_modes_report_readiness(mode: str) -> None:
    db = (
        {"external": {"secretRef": {"name": "pg", "key": "dsn"}}}
        if mode == "external"
        else {"cloudNativePG": {}}
    )
    kube, rec = _setup()
    if mode == "external":  # labelled for its use (secret_use.py), but without the key named
        kube.put(_secret("pg", "database-url", other="x"))
    kube.obj("Brain", "team")["spec"]["database"] = db
    rec.reconcile(NS, "team")
    cond = _conditions(kube.obj("Brain", "team"))["DatabaseReady"]
    assert cond["status"] == "False"
    assert cond["reason"] == ("SecretKeyMissing" if mode == "external" else "CloudNativePGNotInstalled")


def test_reconcile_never_lists_secrets_and_still_prunes_a_generated_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The operator's RBAC has no `list` on Secrets (issue #26): a list would be a 403 in a cluster.
    It reads its generated Secrets by name, so one it stops rendering is still found and deleted."""
    kube, rec = _setup()
    listed: list[str] = []
    real_list = kube.list
    monkeypatch.setattr(
        kube, "list", lambda kind, *a, **k: listed.append(kind.kind) or real_list(kind, *a, **k)
    )
    rec.reconcile(NS, "team")
    assert "Secret" not in listed and listed, listed
    assert kube.obj("Secret", "team-db-credentials")
    brain = kube.obj("Brain", "team")
    brain["spec"]["database"] = {"external": {"secretRef": {"name": "ext-db", "key": "dsn"}}}
    kube.put(brain)
    kube.put(_secret("ext-db", "database-url", dsn="postgresql://u:p@db/brain"))
    rec.reconcile(NS, "team")
    assert kube.objects.get(("Secret", NS, "team-db-credentials")) is None
    for role in DB_ROLES:  # the logins' Secrets too: found by name, never listed
        assert kube.objects.get(("Secret", NS, f"team-db-role-{role}")) is None
    assert "Secret" not in listed


# -- Secrets opt in by label (issue #26; the tenant's view on the real API server is in
# test_cluster_tenant_secrets.py) ------------------------------------------------------------------


def _events() -> tuple[list[tuple[str, str, str, str]], Any]:
    seen: list[tuple[str, str, str, str]] = []

    def emit(body: dict[str, Any], etype: str, reason: str, message: str) -> None:
        seen.append((body["kind"], etype, reason, message))

    return seen, emit


def _gateway_env(kube: FakeKube) -> dict[str, Any]:
    (gw,) = [c for c in kube.obj("Deployment", "team-gateway")["spec"]["template"]["spec"]["containers"]
             if c["name"] == "gateway"]  # fmt: skip
    return {e["name"]: (e.get("valueFrom") or {}).get("secretKeyRef") for e in gw["env"]}


@pytest.mark.parametrize("label", [None, "git-credentials", "absent"])  # unlabelled, another use, no Secret
def test_a_model_key_is_used_only_from_a_secret_labelled_for_model_keys(label: str | None) -> None:
    keys = [] if label == "absent" else [_secret("keys", label, openai="sk-x")]
    kube, rec = _setup(*keys, _secret("good", "model-api-key", openai="sk-y"))
    brain = kube.obj("Brain", "team")
    brain["spec"]["gateway"]["models"] += [
        {"name": "refused", "model": "openai/gpt-4o", "apiKeySecretRef": {"name": "keys", "key": "openai"}},
        {"name": "kept", "model": "openai/gpt-4o", "apiKeySecretRef": {"name": "good", "key": "openai"}},
    ]
    seen, emit = _events()
    rec.reconcile(NS, "team", emit)
    refs = [r for r in _gateway_env(kube).values() if r]
    assert {"name": "good", "key": "openai"} in refs and not [r for r in refs if r["name"] == "keys"]
    cond = _conditions(kube.obj("Brain", "team"))["SecretsPermitted"]
    assert (cond["status"], cond["reason"]) == ("False", "SecretNotPermitted")
    # the same words whatever the Secret has instead: the tenant learns nothing about it
    assert cond["message"] == (
        "spec.gateway.models[1].apiKeySecretRef: Secret keys (key 'openai') is not labelled "
        "brain.dev/secret-use=model-api-key, so it is not used; its owner opts in with: "
        "kubectl label secret keys brain.dev/secret-use=model-api-key"
    )
    assert [e for e in seen if e[2] == "SecretNotPermitted"] == [
        ("Brain", "Warning", "SecretNotPermitted", cond["message"])
    ]
    assert _conditions(kube.obj("Brain", "team"))["Ready"]["reason"] != "SecretNotPermitted"  # still served

    seen.clear()
    rec.reconcile(NS, "team", emit)  # a resync that finds the same refusal: no second Event
    assert [e for e in seen if e[2] == "SecretNotPermitted"] == []
    kube.put(_secret("keys", "model-api-key", openai="sk-x"))
    rec.reconcile(NS, "team", emit)  # the owner opts in: used from the next reconcile on
    assert {"name": "keys", "key": "openai"} in _gateway_env(kube).values()
    assert _conditions(kube.obj("Brain", "team"))["SecretsPermitted"]["status"] == "True"


def test_a_refused_master_key_falls_back_to_the_generated_one_for_the_gateway_and_the_health_poll() -> None:
    kube, rec = _setup(_secret("admin", None, key="sk-admin-value"))
    kube.obj("Brain", "team")["spec"]["gateway"]["auth"] = {
        "masterKeySecretRef": {"name": "admin", "key": "key"}
    }
    rec.reconcile(NS, "team")
    assert _gateway_env(kube)["BRAIN_MASTER_KEY"] == {"name": "team-master-key", "key": "masterKey"}
    generated = kube.obj("Secret", "team-master-key")
    assert generated["metadata"]["labels"]["brain.dev/secret-use"] == "master-key"
    assert (
        kube.obj("Secret", "team-db-credentials")["metadata"]["labels"]["brain.dev/secret-use"]
        == "database-superuser"
    )
    key = rec.master_key(kube.obj("Brain", "team"))
    assert key == base64.b64decode(generated["data"]["masterKey"]).decode() and key != "sk-admin-value"


def test_a_brain_may_name_its_own_generated_secret() -> None:
    kube, rec = _setup()
    rec.reconcile(NS, "team")  # generates team-master-key, labelled master-key
    kube.obj("Brain", "team")["spec"]["gateway"]["auth"] = {
        "masterKeySecretRef": {"name": "team-master-key", "key": "masterKey"}
    }
    rec.reconcile(NS, "team")
    assert _conditions(kube.obj("Brain", "team"))["SecretsPermitted"]["status"] == "True"


def test_a_refused_tunnel_token_means_no_tunnel() -> None:
    kube, rec = _setup(_secret("cf", None, token="t"))
    kube.obj("Brain", "team")["spec"]["tunnel"] = {
        "tokenSecretRef": {"name": "cf", "key": "token"},
        "hostname": "b.example.com",
    }
    rec.reconcile(NS, "team")
    containers = kube.obj("Deployment", "team-gateway")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["gateway"]
    assert kube.obj("Brain", "team")["status"]["endpoints"]["gateway"].startswith("http://team-gateway.")
    assert (
        "spec.tunnel.tokenSecretRef: Secret cf"
        in _conditions(kube.obj("Brain", "team"))["SecretsPermitted"]["message"]
    )


def test_a_refused_database_secret_applies_nothing() -> None:
    kube, rec = _setup(_secret("pg", None, dsn="postgresql://u:p@h/db"))
    kube.obj("Brain", "team")["spec"]["database"] = {"external": {"secretRef": {"name": "pg", "key": "dsn"}}}
    seen, emit = _events()
    result = rec.reconcile(NS, "team", emit)
    assert result is not None and result.applied == [] and result.phase == "Failed"
    assert [k for k in kube.objects if k[0] not in ("Brain", "Secret")] == []
    brain = kube.obj("Brain", "team")
    conds = _conditions(brain)
    assert conds["Ready"]["reason"] == conds["SecretsPermitted"]["reason"] == "SecretNotPermitted"
    assert "spec.database.external.secretRef: Secret pg" in conds["Ready"]["message"]
    assert [e[:3] for e in seen] == [("Brain", "Warning", "SecretNotPermitted")]
    assert "postgresql://u:p" not in json.dumps(brain["status"]) + json.dumps(seen)


def test_a_refused_git_credential_means_no_import_of_that_source() -> None:
    source = sample("memorysource-git.yaml")
    source["spec"]["git"]["credentialsSecretRef"] = {"name": "deploy-key", "key": "ssh"}
    kube, rec = _setup(source, _secret("deploy-key", "model-api-key", ssh="k"))
    seen, emit = _events()
    result = rec.reconcile(NS, "team", emit)
    assert result is not None and result.jobs_created == []
    assert not [k for k in kube.objects if k[0] == "CronJob" and "ingest" in k[2]]
    src = _conditions(kube.obj("MemorySource", "team-memories"))
    assert (src["Ready"]["status"], src["Ready"]["reason"]) == ("False", "SecretNotPermitted")
    assert (
        "spec.git.credentialsSecretRef: Secret deploy-key (key 'ssh') is not labelled brain.dev/secret-use=git-credentials"
        in src["SecretsPermitted"]["message"]
    )
    assert ("MemorySource", "Warning", "SecretNotPermitted") in [e[:3] for e in seen]
    kube.obj("Secret", "deploy-key")["metadata"]["labels"]["brain.dev/secret-use"] = "git-credentials"
    result = rec.reconcile(NS, "team", emit)
    assert result is not None and len(result.jobs_created) == 1
    assert _conditions(kube.obj("MemorySource", "team-memories"))["Ready"]["reason"] == "Scheduled"


def test_a_secret_at_a_generated_name_is_taken_over_only_when_labelled() -> None:
    """A tenant picks the Brain's name, so `<brain>-master-key` is a reference too: an unrelated
    Secret there is neither read as the key nor owned (and garbage-collected) by the Brain."""
    foreign = _secret("team-master-key", None, masterKey="sk-someone-elses")
    kube, rec = _setup(foreign)
    seen, emit = _events()
    result = rec.reconcile(NS, "team", emit)
    assert result is not None and result.applied == [] and result.phase == "Failed"
    live = kube.obj("Secret", "team-master-key")
    assert "ownerReferences" not in live["metadata"] and live["data"] == foreign["data"]
    ready = _conditions(kube.obj("Brain", "team"))["Ready"]
    assert ready["reason"] == "SecretNotPermitted"
    assert "Secret team-master-key exists and was not generated for Brain team" in ready["message"]
    assert "kubectl label secret team-master-key brain.dev/secret-use=master-key" in ready["message"]
    assert [e[:3] for e in seen] == [("Brain", "Warning", "SecretNotPermitted")]
    assert rec.master_key(kube.obj("Brain", "team")) is None  # the health poll does not send it either

    kube.obj("Secret", "team-master-key")["metadata"]["labels"] = {"brain.dev/secret-use": "master-key"}
    result = rec.reconcile(NS, "team", emit)  # its owner opted in: adopted, value kept
    assert result is not None and "Secret/team-master-key" in result.applied
    assert kube.obj("Secret", "team-master-key")["data"] == foreign["data"]
    assert rec.master_key(kube.obj("Brain", "team")) == "sk-someone-elses"


def test_an_object_at_a_child_name_that_the_brain_does_not_own_is_not_taken_over() -> None:
    """Session 14: the Brain's name picks every child's name, not only the Secrets'. Another team's
    Service and ConfigMap there are neither applied over nor owned, and the master key is not sent
    to a Service the Brain does not own (the health poll's default URL is the Service's name)."""
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "team-gateway", "namespace": NS},
               "spec": {"selector": {"app": "theirs"}, "ports": [{"name": "http", "port": 4000}]}}  # fmt: skip
    config = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"litellm.yaml": "theirs"},
              "metadata": {"name": "team-gateway-config", "namespace": NS}}  # fmt: skip
    kube, rec = _setup(service, config)
    seen, emit = _events()
    result = rec.reconcile(NS, "team", emit)
    assert result is not None and result.applied == [] and result.phase == "Failed"
    assert kube.obj("Service", "team-gateway")["spec"]["selector"] == {"app": "theirs"}
    assert "ownerReferences" not in kube.obj("ConfigMap", "team-gateway-config")["metadata"]
    ready = _conditions(kube.obj("Brain", "team"))["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "ChildNotOwned")
    assert "ConfigMap/team-gateway-config, Service/team-gateway: already exist" in ready["message"]
    assert [e[:3] for e in seen] == [("Brain", "Warning", "ChildNotOwned")]
    assert rec.master_key(kube.obj("Brain", "team")) is None

    del kube.objects[("Service", NS, "team-gateway")]
    del kube.objects[("ConfigMap", NS, "team-gateway-config")]
    result = rec.reconcile(NS, "team", emit)  # out of the way: the whole stack is applied
    assert result is not None and "Service/team-gateway" in result.applied
    assert rec.master_key(kube.obj("Brain", "team"))
    assert rec.reconcile(NS, "team", emit).wrote is False  # type: ignore[union-attr]


def test_another_brains_child_is_not_taken_over() -> None:
    """Brain `team` with a MemorySource `gateway-config` renders ConfigMap `team-source-gateway-config`,
    the gateway config of a Brain called `team-source`: the second to come is refused."""
    other = deep_set(sample("brain.yaml"), "metadata.name", "team-source")
    source = deep_set(sample("memorysource-git.yaml"), "metadata.name", "gateway-config")
    kube, rec = _setup(other)
    rec.reconcile(NS, "team-source")
    mine = kube.obj("ConfigMap", "team-source-gateway-config")
    source["metadata"]["namespace"] = NS
    kube.put(source)
    result = rec.reconcile(NS, "team")
    assert result is not None and result.phase == "Failed"
    assert kube.obj("ConfigMap", "team-source-gateway-config") == mine
    assert (
        "ConfigMap/team-source-gateway-config" in _conditions(kube.obj("Brain", "team"))["Ready"]["message"]
    )


def test_another_brain_cannot_name_the_managed_superuser_secret() -> None:
    """Session 14: `<brain>-db-credentials` (the managed database's superuser, for the migration
    step alone) was labelled `database-url`, so a second Brain of the namespace could name it as its
    external database and run its gateway and every job as that superuser. Its label is now a use no
    spec field has; each workload login's Secret stays nameable."""
    kube, rec = _setup()
    rec.reconcile(NS, "team")
    other = deep_set(sample("brain.yaml"), "metadata.name", "other")
    other["metadata"]["namespace"] = NS
    other["spec"]["database"] = {"external": {"secretRef": {"name": "team-db-credentials", "key": "dsn"}}}
    kube.put(other)
    result = rec.reconcile(NS, "other")
    assert result is not None and result.phase == "Failed" and result.applied == []
    ready = _conditions(kube.obj("Brain", "other"))["Ready"]
    assert ready["reason"] == "SecretNotPermitted"
    assert "spec.database.external.secretRef: Secret team-db-credentials" in ready["message"]
    assert rec.reconcile(NS, "team").wrote is False  # type: ignore[union-attr]
