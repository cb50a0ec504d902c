"""spec.backup as rendered: the `<brain>-backups` volume and the `<brain>-backup` pg_dump CronJob.

What the script does on a real Postgres is tests/jobs/test_backup_job.py; what the backup login
may do is tests/security/test_db_roles.py.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlsplit

from brain_operator.render import names
from brain_operator.render.backup import BACKUP_DIR, BACKUP_SCRIPT
from brain_operator.render.common import DEFAULT_IMAGES, POSTGRES_UID

from .helpers import brain, by_key, deep_set, render, sample


def _with(backup: dict[str, Any], database: dict[str, Any] | None = None) -> dict[tuple[str, str], Any]:
    doc = deep_set(sample("brain.yaml"), "spec.backup", backup)
    if database is not None:
        doc = deep_set(doc, "spec.database", database)
    return by_key(render(brain(doc)))


def _pod(out: dict[tuple[str, str], Any]) -> dict[str, Any]:
    cron = out[("CronJob", "team-backup")]
    pod: dict[str, Any] = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return pod


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_no_backup_renders_nothing() -> None:
    out = by_key(render())
    assert ("CronJob", "team-backup") not in out
    assert not [k for k in out if k[0] == "PersistentVolumeClaim"]


def test_the_cronjob_dumps_with_the_database_image_as_its_uid_into_the_backups_volume() -> None:
    out = _with({"schedule": "30 2 * * *", "keep": 3})
    cron = out[("CronJob", "team-backup")]
    assert cron["spec"]["schedule"] == "30 2 * * *" and cron["spec"]["timeZone"] == "Etc/UTC"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"  # two dumps never race on one volume
    assert cron["metadata"]["labels"]["app.kubernetes.io/component"] == "backup"
    pod = _pod(out)
    (c,) = pod["containers"]
    assert c["image"] == DEFAULT_IMAGES["postgres"]  # pg_dump of the server's major version
    assert c["command"] == ["/bin/sh", "-c", BACKUP_SCRIPT]
    assert pod["securityContext"]["runAsUser"] == POSTGRES_UID and pod["securityContext"]["runAsNonRoot"]
    assert pod["securityContext"]["fsGroup"] == POSTGRES_UID  # the volume is writable by that uid
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["automountServiceAccountToken"] is False and pod["restartPolicy"] == "Never"
    assert c["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
    env = _env(c)
    assert env["BRAIN_DATABASE_URL"] == {"secretKeyRef": {"name": "team-db-role-backup", "key": "dsn"}}
    assert (env["BACKUP_DIR"], env["BACKUP_KEEP"], env["BACKUP_NAME"]) == (BACKUP_DIR, "3", "team")
    assert "BRAIN_EMBEDDER_URL" not in env  # it never embeds (nor may it reach the embedder)
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts[BACKUP_DIR]]["persistentVolumeClaim"] == {"claimName": "team-backups"}
    assert "/tmp" in mounts
    pvc = out[("PersistentVolumeClaim", "team-backups")]
    assert pvc["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    assert pvc["metadata"]["labels"]["brain.dev/brain"] == "team"


def test_storage_size_and_class_and_an_existing_claim() -> None:
    out = _with({"storage": {"size": "50Gi", "storageClassName": "fast"}})
    pvc = out[("PersistentVolumeClaim", "team-backups")]["spec"]
    assert pvc["resources"]["requests"]["storage"] == "50Gi" and pvc["storageClassName"] == "fast"
    out = _with({"claimName": "offsite"})
    assert not [k for k in out if k[0] == "PersistentVolumeClaim"]  # the user's claim: not ours
    (vol,) = [v for v in _pod(out)["volumes"] if "persistentVolumeClaim" in v]
    assert vol["persistentVolumeClaim"] == {"claimName": "offsite"}


def test_suspend_and_the_backup_secret_is_a_login_of_its_own() -> None:
    out = _with({"suspend": True})
    assert out[("CronJob", "team-backup")]["spec"]["suspend"] is True
    secret = out[("Secret", names.db_role("team", "backup"))]
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data["username"] == "brain_backup" == urlsplit(data["dsn"]).username
    assert urlsplit(data["dsn"]).hostname == "team-db.team-ns.svc"


def test_cloudnativepg_dumps_the_primary_through_the_rw_service() -> None:
    out = _with({}, {"cloudNativePG": {"instances": 2}})
    (c,) = _pod(out)["containers"]
    assert _env(c)["BRAIN_DATABASE_URL"] == {"secretKeyRef": {"name": "team-db-role-backup", "key": "dsn"}}
    secret = out[("Secret", "team-db-role-backup")]
    dsn = base64.b64decode(secret["data"]["dsn"]).decode()
    assert urlsplit(dsn).hostname == "team-db-rw.team-ns.svc"
    roles = {r["name"] for r in out[("Cluster", "team-db")]["spec"]["managed"]["roles"]}
    assert "brain_backup" in roles  # CloudNativePG creates the login from the Secret
    assert not [k for k in out if k[0] in ("Backup", "ScheduledBackup")]  # object stores: out of scope


def test_the_names_fit_every_brain_name_the_crd_allows() -> None:
    longest = "b" * names.MAX_BRAIN_NAME
    assert names.cronjob(longest, "backup") == f"{longest}-backup"
    assert names.backups_claim(longest) == f"{longest}-backups"
