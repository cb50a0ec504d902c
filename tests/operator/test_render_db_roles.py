"""Issue #26, one Postgres login per job, as rendered: which Secret each pod's DSN comes from.

A managed database's superuser DSN reaches exactly one container, the gateway pod's `migrate` init
container (brain.store.roles: logins, migrations as the owner, grants). The gateway and every job
connect with their own login; tests/security/test_db_roles.py shows what those logins may do on a
real Postgres.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlsplit

from brain.core.contract import DB_ROLES, DB_WORKLOAD_ROLES
from brain_operator.render import RenderInput, names
from brain_operator.render.jobs import render_ingest_job, render_reindex_job

from .helpers import SECRETS, brain, by_key, deep_set, pod_templates, render, sample, source

SUPERUSER_SECRET = "team-db-credentials"


def _all() -> list[dict[str, Any]]:
    with_backup = brain(deep_set(sample("brain.yaml"), "spec.backup", {}))
    out = render(with_backup, sources=(source(),))
    inp = RenderInput(brain=with_backup, memory_sources=(source(),), secrets=SECRETS)
    return [*out, render_ingest_job(inp, source()), render_reindex_job(inp)]


def _secret_refs(container: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {
        e["name"]: (e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
        for e in container.get("env", [])
        if "secretKeyRef" in (e.get("valueFrom") or {})
    }


def _data(secret: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def test_gateway_connects_as_its_own_login_not_the_superuser() -> None:
    dep = by_key(render())[("Deployment", "team-gateway")]
    (gateway,) = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "gateway"]
    assert _secret_refs(gateway)["BRAIN_DATABASE_URL"] == ("team-db-role-gateway", "dsn")
    secret = _data(by_key(render())[("Secret", "team-db-role-gateway")])
    dsn = urlsplit(secret["dsn"])
    assert dsn.username == secret["username"] == "brain_gateway" != "brain"
    assert dsn.password == secret["password"] == SECRETS.db_role_passwords["gateway"]
    assert dsn.hostname == "team-db.team-ns.svc" and dsn.path == "/brain"


def test_each_job_connects_as_the_login_of_its_job() -> None:
    seen = set()
    for ref, tpl in pod_templates(_all()):
        for c in tpl["spec"]["containers"]:
            url = _secret_refs(c).get("BRAIN_DATABASE_URL")
            if url is None:
                continue
            component = tpl["metadata"]["labels"]["app.kubernetes.io/component"]
            assert url == (names.db_role("team", component), "dsn"), ref
            seen.add(component)
    assert seen == set(
        DB_WORKLOAD_ROLES
    )  # gateway, ingest (CronJob and Job), distill, digest, reindex, backup


def test_only_the_migration_step_gets_the_superuser() -> None:
    users = []
    for ref, tpl in pod_templates(_all()):
        spec = tpl["spec"]
        for c in [*spec.get("initContainers", []), *spec["containers"]]:
            if any(name == SUPERUSER_SECRET for name, _ in _secret_refs(c).values()):
                users.append(f"{ref}/{c['name']}")
        for v in spec.get("volumes", []):
            assert SUPERUSER_SECRET not in str(v), ref
    # the database itself (POSTGRES_PASSWORD) and the gateway's migrate init container, nothing else
    assert sorted(users) == ["Deployment/team-gateway/migrate", "StatefulSet/team-db/postgres"]


def test_migration_step_runs_the_roles_bootstrap_with_every_login_password() -> None:
    pod = by_key(render())[("Deployment", "team-gateway")]["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    gateway = next(c for c in pod["containers"] if c["name"] == "gateway")
    assert init["image"] == gateway["image"]  # the schema it migrates to is the gateway's own
    assert init["command"][:3] == ["python", "-m", "brain.store.roles"]
    from brain.store.roles import main  # the flags it is given are flags it accepts

    folder = init["command"][init["command"].index("--passwords-dir") + 1]
    assert _secret_refs(init) == {"BRAIN_DATABASE_URL": (SUPERUSER_SECRET, "dsn")}
    assert {"name": "BRAIN_EMBEDDING_DIM", "value": "384"} in init["env"]
    (mount,) = [m for m in init["volumeMounts"] if m["mountPath"] == folder]
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    files = {
        item["path"]: (src["secret"]["name"], item["key"])
        for src in volume["projected"]["sources"]
        for item in src["secret"]["items"]
    }
    assert files == {r: (names.db_role("team", r), "password") for r in DB_ROLES}
    assert volume["projected"]["defaultMode"] == 0o440  # fsGroup-readable: the pod's uid, nobody else
    assert all(mount["name"] not in str(c.get("volumeMounts")) for c in pod["containers"])
    assert callable(main)


def test_login_secrets_are_generated_secrets_read_back_by_name() -> None:
    """The reconcile reads generated Secrets back by name (it may not list them): every login's
    Secret must be among names.generated_secrets, or a restarted operator would rotate its password."""
    rendered = {m["metadata"]["name"] for m in render() if m["kind"] == "Secret"}
    assert {names.db_role("team", r) for r in DB_ROLES} <= rendered
    assert rendered <= set(names.generated_secrets("team"))
    for role in DB_ROLES:
        secret = by_key(render())[("Secret", names.db_role("team", role))]
        assert secret["type"] == "kubernetes.io/basic-auth"
        assert _data(secret)["username"] == f"brain_{role}"


def test_an_external_database_keeps_its_one_dsn() -> None:
    """The operator holds no credentials of an external database: no logins rendered, no
    migration step; every pod uses the user's DSN as before."""
    doc = deep_set(
        sample("brain.yaml"), "spec.database", {"external": {"secretRef": {"name": "pg", "key": "url"}}}
    )
    out = render(brain(doc))
    assert not [m for m in out if m["metadata"]["name"].startswith("team-db-role-")]
    pod = by_key(out)[("Deployment", "team-gateway")]["spec"]["template"]["spec"]
    assert "initContainers" not in pod
    gateway = next(c for c in pod["containers"] if c["name"] == "gateway")
    assert _secret_refs(gateway)["BRAIN_DATABASE_URL"] == ("pg", "url")


def _cnpg() -> list[dict[str, Any]]:
    doc = deep_set(sample("brain.yaml"), "spec.database", {"cloudNativePG": {"instances": 2}})
    return render(brain(doc))


def test_cloudnativepg_creates_each_workload_login_from_its_secret() -> None:
    """On CloudNativePG the logins are CNPG's managed roles, their passwords from the Secrets the
    operator generated; its application user `brain` stays the schema's owner (no owner login)."""
    out = by_key(_cnpg())
    cluster = out[("Cluster", "team-db")]["spec"]
    managed = {r["name"]: r for r in cluster["managed"]["roles"]}
    assert set(managed) == {f"brain_{r}" for r in DB_WORKLOAD_ROLES}
    for role in DB_WORKLOAD_ROLES:
        spec = managed[f"brain_{role}"]
        assert spec["passwordSecret"] == {"name": f"team-db-role-{role}"}
        assert spec["login"] is True and spec["ensure"] == "present"
        assert not any(spec[k] for k in ("superuser", "createdb", "createrole", "replication", "bypassrls"))
        secret = out[("Secret", f"team-db-role-{role}")]
        assert secret["type"] == "kubernetes.io/basic-auth"  # what CNPG's passwordSecret reads
        data = _data(secret)
        assert data["username"] == spec["name"]  # CNPG requires the Secret's username be the role
        dsn = urlsplit(data["dsn"])
        assert dsn.username == spec["name"] and dsn.hostname == "team-db-rw.team-ns.svc"
    assert managed["brain_reindex"]["inRoles"] == ["brain"]  # the schema owner: it alters `memories`
    assert all("inRoles" not in r for n, r in managed.items() if n != "brain_reindex")
    assert ("Secret", "team-db-role-owner") not in out


def test_cloudnativepg_pods_use_their_logins_and_the_migration_step_the_owner() -> None:
    out = _cnpg()
    pod = by_key(out)[("Deployment", "team-gateway")]["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    assert init["command"] == ["python", "-m", "brain.store.roles", "--as-owner"]
    assert _secret_refs(init) == {"BRAIN_DATABASE_URL": ("team-db-app", "uri")}
    for ref, tpl in pod_templates(out):
        for c in tpl["spec"]["containers"]:
            url = _secret_refs(c).get("BRAIN_DATABASE_URL")
            if url is not None:
                component = tpl["metadata"]["labels"]["app.kubernetes.io/component"]
                assert url == (f"team-db-role-{component}", "dsn"), ref
