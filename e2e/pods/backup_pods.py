"""Issue #29's restore drill on the real node (test_pods_story.py::test_scheduled_backup_and_restore_drill_on_real_pods).

What docs/operations.md "Database backups" tells a platform team to do, step by step:

1. `spec.backup` on the running Brain: the operator makes `team-backups` and the `team-backup`
   CronJob; a run of it (`kubectl create job --from=cronjob/team-backup`) dumps the database in
   the database image, as the `brain_backup` login, into the volume;
2. status.index.lastBackup/-Result/-Bytes show it, and the operator's `brain_backup_*` series;
3. the dump comes off the volume the documented way (a pod mounting the claim, `kubectl cp`), and
   `brainctl restore` (through `kubectl port-forward` to a new Brain's database, as its superuser)
   puts it into a new Brain `restored`, whose chat is then served a memory written before the
   backup, with no gateway restart (the restore grants the logins their tables again);
4. a backup that fails (the backup login refused a table, as a broken grant would) shows as
   `failed` in status and in `brain_backup_last_run_failed`, and the last good backup stays.

Everything it adds is removed again (the `restored` Brain and its volume, spec.backup and its
volume): test_helm_uninstall_leaves_what_the_docs_say counts the namespace's claims.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import yaml
from tests.kit.client import GatewayClient
from tests.kit.gateway import metric
from tests.kit.poll import wait_for

from .story_pods import (
    REG,
    TAG,
    brain_manifest,
    run_job,
    service_url,
)

NS = "team"
OPERATOR_NS = "brain-system"
READER = "backup-reader"
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _index(node: Any, brain: str = "team") -> dict[str, Any]:
    return dict((node.json("get", "brain", brain, "-n", NS).get("status") or {}).get("index") or {})


def _operator_metric(node: Any, name: str, label: str) -> list[float]:
    """`name{brain=label}` from every operator replica that has it (the standby may have none)."""
    found = []
    for pod in node.json("get", "pods", "-n", OPERATOR_NS, "-l", "app.kubernetes.io/name=brain-operator")[
        "items"
    ]:
        ip = pod["status"].get("podIP")
        if not ip:
            continue
        try:
            body = httpx.get(f"http://{ip}:8080/metrics", timeout=5).text
        except httpx.HTTPError:
            continue
        if f'{name}{{brain="{label}"' in body:
            found.append(metric(body, name, brain=label))
    return found


def _every_replica_says(node: Any, name: str, label: str, value: float) -> list[float]:
    """`name{brain=label}` is `value` on every operator replica that exports it, and one does. The
    check before wanted exactly one answer, so two replicas holding the series at once failed it;
    CI at 44ec0d8 timed out on it once without saying what it read, so a timeout now quotes the
    answer of each replica."""
    found = _operator_metric(node, name, label)
    assert found and all(v == value for v in found), f"{name}{{brain={label!r}}} per replica: {found}"
    return found


def _reader_pod(node: Any) -> None:
    """A pod mounting the backups volume (docs/operations.md: how to get a dump off it)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": READER, "namespace": NS},
        "spec": {
            "securityContext": {
                "runAsUser": 999,
                "runAsGroup": 999,
                "runAsNonRoot": True,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": READER,
                    "image": f"{REG}/postgres:17-pgvector-{TAG}",  # the database image the node has
                    "command": ["sleep", "3600"],
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                    "volumeMounts": [{"name": "backups", "mountPath": "/backups", "readOnly": True}],
                }
            ],
            "volumes": [{"name": "backups", "persistentVolumeClaim": {"claimName": "team-backups"}}],
        },
    }
    node.kubectl("apply", "-f", "-", input=json.dumps(pod))
    node.kubectl("wait", f"pod/{READER}", "-n", NS, "--for=condition=Ready", "--timeout=180s", timeout=200)


def _psql(node: Any, sql: str) -> str:
    return node.kubectl("exec", "team-db-0", "-n", NS, "-c", "postgres", "--", "psql", "-U", "brain", "-d", "brain",
                        "-v", "ON_ERROR_STOP=1", "-Atc", sql)  # fmt: skip


def drill(node: Any, gw: GatewayClient, tmp: Path) -> list[str]:
    """The whole drill; returns the figures for the test output."""
    figures: list[str] = []
    marker = f"drill-{uuid.uuid4().hex[:6]}"
    note = f"The restore drill's canary word is {marker}: it was written before the backup."
    noted = gw.mcp_tool(
        "agent", "brain_note", {"body": note, "title": "Restore drill canary", "kind": "fact"}
    )
    assert noted.get("id"), noted
    brain = yaml.safe_load(brain_manifest(NS))
    node.kubectl("patch", "brain", "team", "-n", NS, "--type=merge", "-p",
                 json.dumps({"spec": {"backup": {"keep": 2, "storage": {"size": "1Gi"}, "maxAgeHours": 26}}}))  # fmt: skip
    pf: subprocess.Popen[bytes] | None = None
    try:
        wait_for("the backup CronJob", lambda: node.kubectl("get", "cronjob", "team-backup", "-n", NS, check=False),
                 timeout=120)  # fmt: skip
        t0 = time.monotonic()
        log = run_job(node, NS, "team-backup")[1]
        summary = json.loads(log.strip().splitlines()[-1])
        figures.append(
            f"backup Job: {time.monotonic() - t0:.0f} s, {summary['bytes']} bytes ({summary['file']})"
        )

        def recorded() -> dict[str, Any] | None:
            index = _index(node)
            ok = index.get("lastBackupResult") == "ok" and index.get("lastBackupBytes") == summary["bytes"]
            return index if ok else None

        index = wait_for("status.index shows the backup", recorded, timeout=180, every=3)
        assert index["lastBackup"]
        label = f"{NS}/team"
        wait_for("brain_backup_last_run_failed 0", lambda: _every_replica_says(node, "brain_backup_last_run_failed", label, 0.0), timeout=120)  # fmt: skip
        assert _operator_metric(node, "brain_backup_max_age_seconds", label)[0] == 26 * 3600

        # ---- the dump off the volume, into a new Brain, by brainctl restore -----------------------------
        _reader_pod(node)
        listed = node.kubectl("exec", READER, "-n", NS, "--", "ls", "/backups").split()
        assert listed == [summary["file"]], listed
        dump = tmp / summary["file"]
        node.kubectl("cp", f"{NS}/{READER}:/backups/{summary['file']}", str(dump), timeout=300)
        assert dump.stat().st_size == summary["bytes"]
        restored = dict(brain)
        restored["metadata"] = {"name": "restored", "namespace": NS}
        restored["spec"]["gateway"]["replicas"] = 1
        node.kubectl("apply", "-f", "-", input=yaml.safe_dump(restored))
        node.kubectl(
            "wait", "brain/restored", "-n", NS, "--for=condition=Ready", "--timeout=900s", timeout=920
        )
        password = base64.b64decode(
            node.kubectl(
                "get", "secret", "restored-db-credentials", "-n", NS, "-o", "jsonpath={.data.password}"
            )
        ).decode()
        port = _free_port()
        pf = subprocess.Popen(
            ["kubectl", "port-forward", "-n", NS, "svc/restored-db", f"{port}:5432"],
            env=node.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        dsn = f"postgresql://brain:{password}@127.0.0.1:{port}/brain"

        def restore() -> subprocess.CompletedProcess[str] | None:
            proc = subprocess.run(
                [str(ROOT / ".venv" / "bin" / "brainctl"), "restore", "--from", str(dump), "--into", dsn],
                capture_output=True, text=True, timeout=600, env={**os.environ, "BRAIN_DATABASE_URL": ""},
            )  # fmt: skip
            return proc if "cannot connect" not in proc.stderr else None  # the port-forward still starting

        t0 = time.monotonic()
        proc = wait_for("brainctl restore through the port-forward", restore, timeout=120, every=3)
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        figures.append(f"brainctl restore: {time.monotonic() - t0:.0f} s, {result['activeEntries']} entries")
        master = node.kubectl(
            "get", "secret", "restored-master-key", "-n", NS, "-o", "jsonpath={.data.masterKey}"
        )
        new = GatewayClient(
            service_url(node, NS, "restored-gateway", 4000), base64.b64decode(master).decode()
        )
        new.keys["agent"] = gw.keys["agent"]  # keys live in the database: restored with it

        def served() -> bool:
            r = new.chat("What is the restore drill's canary word?", session=marker)
            return r.status_code == 200 and marker in r.text

        wait_for("a chat on the restored Brain served the note written before the backup", served,
                 timeout=180, every=3)  # fmt: skip
        got = new.rest("GET", f"/memories/{noted['id']}", "agent")
        assert got.status_code == 200 and got.json()["memory"]["body"] == note, got.text

        # ---- a failed backup: the login refused a table (as a broken grant would) ----------------------
        _psql(node, "REVOKE SELECT ON memories FROM brain_backup")
        try:
            log = run_job(node, NS, "team-backup", expect="Failed")[1]
            assert "backup failed: pg_dump failed" in log, log[-2000:]
            failed = wait_for("status.index shows the failed run",
                              lambda: (i := _index(node)).get("lastBackupResult") == "failed" and i, timeout=180, every=3)  # fmt: skip
            assert failed["lastBackup"] == index["lastBackup"]  # the last good one is still named
            wait_for("brain_backup_last_run_failed 1", lambda: _every_replica_says(node, "brain_backup_last_run_failed", label, 1.0), timeout=120)  # fmt: skip
        finally:
            _psql(node, "GRANT SELECT ON memories TO brain_backup")
        listed = node.kubectl("exec", READER, "-n", NS, "--", "ls", "/backups").split()
        assert listed == [summary["file"]], listed  # a failed run deletes nothing and leaves no partial file
    finally:
        if pf is not None:
            pf.terminate()
        node.kubectl("delete", "pod", READER, "-n", NS, "--wait=true", check=False, timeout=180)
        node.kubectl("delete", "brain", "restored", "-n", NS, "--wait=true", check=False, timeout=300)
        node.kubectl("delete", "pvc", "data-restored-db-0", "-n", NS, "--wait=true", check=False, timeout=180)
        node.kubectl("patch", "brain", "team", "-n", NS, "--type=json", "-p",
                     '[{"op": "remove", "path": "/spec/backup"}]', check=False)  # fmt: skip
        wait_for("the backups volume pruned with spec.backup",
                 lambda: "team-backups" not in node.kubectl("get", "pvc", "-n", NS, "-o", "name"), timeout=180)  # fmt: skip
    return figures
