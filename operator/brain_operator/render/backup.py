"""spec.backup: the `<brain>-backups` volume and the `<brain>-backup` CronJob (pg_dump, custom format).

The job runs in the database image (pgvector/pgvector:pg17: pg_dump, pg_restore and psql of the
server's major version) as its uid, with the `backup` login (brain.store.roles: reads every table,
adds and finishes its own `job_runs` row). For a managed database it reaches the StatefulSet's
Service, for CloudNativePG the `-rw` Service of the primary (the login Secret's DSN names either).
An object-store `ScheduledBackup` of CloudNativePG is not rendered (docs/operations.md).

The script is :data:`BACKUP_SCRIPT`, run with `/bin/sh -c`; tests/jobs/test_backup_job.py runs the
very same text against a real Postgres. What a run leaves:

- a dump `<dir>/<brain>-<UTC yyyymmddThhmmssZ>.dump`, written as `.dump.partial` and renamed only
  after `pg_restore --list` read it back, so a `.dump` file is always a whole, readable dump;
- the newest `keep` dumps (older ones deleted after a good run only: a failed night deletes nothing);
- one `job_runs` row, job `backup`, status `ok` (summary: file, bytes) or `failed` (summary: error,
  file), which the gateway's health reports as status.index.lastBackup/-Result/-Bytes.

A failure (pg_dump refused, the volume full, the dump unreadable) records `failed` and exits 1; the
Job's pod log has pg_dump's own words. A database it cannot reach records nothing: the missing
success is what `BrainBackupMissing` alerts on.
"""

from __future__ import annotations

from typing import Any

from brain_operator.render import names
from brain_operator.render.common import (
    POSTGRES_UID,
    TMP_MOUNT,
    Manifest,
    RenderInput,
    container_security_context,
    labels,
    meta,
    pod_spec,
    resources,
)
from brain_operator.render.gateway import data_plane_env
from brain_operator.render.jobs import JOB_DEADLINE_SECONDS, cronjob

COMPONENT = "backup"
BACKUP_DIR = "/backups"

#: POSIX sh (the image's dash). Environment: BRAIN_DATABASE_URL, BACKUP_DIR, BACKUP_KEEP, BACKUP_NAME.
#: The summary JSON is built by Postgres from psql variables (:'var' quotes them), never by the shell.
BACKUP_SCRIPT = r"""set -u
dir="$BACKUP_DIR"; keep="$BACKUP_KEEP"; name="$BACKUP_NAME"
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
file="$dir/$name-$(date -u +%Y%m%dT%H%M%SZ).dump"
partial="$file.partial"
record() {  # status error bytes
  psql -X -q -v ON_ERROR_STOP=1 -d "$BRAIN_DATABASE_URL" -v started="$started" -v status="$1" \
    -v error="$2" -v bytes="$3" -v file="$(basename "$file")" -f - <<'SQL'
INSERT INTO job_runs (job, started_at, finished_at, status, summary)
VALUES ('backup', :'started'::timestamptz, now(), :'status',
        CASE WHEN :'status' = 'ok' THEN jsonb_build_object('file', :'file', 'bytes', :'bytes'::bigint)
             ELSE jsonb_build_object('file', :'file', 'error', :'error') END);
SQL
}
fail() {
  echo "backup failed: $1" >&2
  rm -f "$partial"
  record failed "$1" 0 || echo "backup: could not record the failure in job_runs" >&2
  exit 1
}
rm -f "$dir/$name"-[0-9]*Z.dump.partial  # what an earlier killed run left
# A pod's first packets can precede its NetworkPolicy admission (kube-router adds a new pod's address
# to the database's allowed set on its next sync: refused, seen on the real node), and a database
# may be restarting: wait up to a minute for it to answer before dumping.
tries=0
until pg_isready -q -d "$BRAIN_DATABASE_URL"; do
  tries=$((tries + 1)); [ "$tries" -ge 30 ] && break; sleep 2
done
pg_dump -Fc -d "$BRAIN_DATABASE_URL" -f "$partial" || fail "pg_dump failed (the volume may be full; see this pod's log)"
pg_restore --list "$partial" >/dev/null || fail "the dump does not read back (pg_restore --list)"
mv "$partial" "$file" || fail "could not rename the dump into place"
bytes=$(wc -c < "$file" | tr -d ' ')
ls -1 "$dir/$name"-[0-9]*Z.dump 2>/dev/null | sort -r | tail -n +"$((keep + 1))" | while read -r old; do
  rm -f -- "$old" && echo "backup: deleted $old (keep $keep)"
done
record ok "" "$bytes" || { echo "backup: dump written but not recorded in job_runs" >&2; exit 1; }
echo "{\"file\": \"$(basename "$file")\", \"bytes\": $bytes}"
"""


def backup_claim(inp: RenderInput) -> str:
    """The claim the dumps go to: spec.backup.claimName, else the operator's `<brain>-backups`."""
    spec = inp.brain.spec.backup
    assert spec is not None
    return spec.claim_name or names.backups_claim(inp.name)


def _pvc(inp: RenderInput) -> Manifest:
    spec = inp.brain.spec.backup
    assert spec is not None
    volume = spec.volume
    claim: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": volume.size}},
    }
    if volume.storage_class_name:
        claim["storageClassName"] = volume.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta(inp, names.backups_claim(inp.name), COMPONENT),
        "spec": claim,
    }


def _job(inp: RenderInput) -> dict[str, Any]:
    spec = inp.brain.spec.backup
    assert spec is not None
    env = [
        # the DSN of the `backup` login; the embedder's URL and model are unused but harmless
        *[e for e in data_plane_env(inp, COMPONENT) if e["name"] in ("HOME", "BRAIN_DATABASE_URL")],
        {"name": "BACKUP_DIR", "value": BACKUP_DIR},
        {"name": "BACKUP_KEEP", "value": str(spec.keep)},
        {"name": "BACKUP_NAME", "value": inp.name},
        {"name": "PGCONNECT_TIMEOUT", "value": "10"},
    ]
    container = {
        "name": COMPONENT,
        "image": inp.images.postgres,
        "command": ["/bin/sh", "-c", BACKUP_SCRIPT],
        "env": env,
        "resources": resources("jobs", spec.resources),
        "securityContext": container_security_context(),
        "volumeMounts": [TMP_MOUNT, {"name": "backups", "mountPath": BACKUP_DIR}],
    }
    volumes = [{"name": "backups", "persistentVolumeClaim": {"claimName": backup_claim(inp)}}]
    return {
        # One retry: a second failed attempt is a second `failed` row, not a loop of them.
        "backoffLimit": 1,
        "activeDeadlineSeconds": JOB_DEADLINE_SECONDS,
        "template": {
            "metadata": {"labels": labels(inp.name, COMPONENT)},
            "spec": pod_spec([container], volumes=volumes, uid=POSTGRES_UID, restart_policy="Never"),
        },
    }


def render_backup(inp: RenderInput) -> list[Manifest]:
    """Nothing without spec.backup; else the volume (unless claimName names one) and the CronJob."""
    spec = inp.brain.spec.backup
    if spec is None or inp.brain.spec.database.mode == "external":
        return []  # the API refuses backup of an external database; render nothing if one slips by
    out: list[Manifest] = [] if spec.claim_name else [_pvc(inp)]
    out.append(
        cronjob(inp, names.cronjob(inp.name, COMPONENT), COMPONENT, spec.schedule, spec.suspend, _job(inp))
    )
    return out
