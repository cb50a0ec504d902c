"""A real Prometheus scrapes the real gateway, embedder and operator: every metric a dashboard or an
alert rule queries is there, and every dashboard query evaluates.

tests/delivery/test_metrics_exist.py reads the source; this proves the names at run time, the way a
cluster's Prometheus would see them, and that every panel of the chart's dashboards and of the
dashboard the operator renders per Brain shows data:

- the gateway (LiteLLM proxy with the brain hooks, Postgres, the offline model behind the embedder,
  the fake upstream) is the session fixture of tests/kit/gateway.py;
- the operator is tests/operator/conftest.py's, run against the local control plane; its
  ``--health-url-template`` points at that gateway (the operator's own setting: a Brain's
  ``brain.dev/health-url`` annotation would get no master key), so the index gauges, the
  per-namespace ones included, come from the real database;
- Prometheus is Debian's server binary (hack/prometheus.sh), scraping the three ``/metrics``
  endpoints every second with the job and namespace labels a ServiceMonitor would give them.

Families that have series only after an event get the event: a REST note, a chat that hits it and
one that finds nothing,
a capture that is stored and one that is filtered, a routed request, a query carrying a secret (a
degradation), a refused key, and a reconcile the API server refuses (a ResourceQuota forbids the
second Brain's Secrets: ``brain_operator_reconcile_errors_total{reason="http403"}``).

One family cannot be driven honestly here: ``brain_capture_queue_dropped_total`` counts jobs dropped
by a full capture queue (1000 jobs, drained by two workers). For it the test asserts what Prometheus
knows without a sample: the gateway exposes the family's ``# HELP``/``# TYPE`` even with no series,
and Prometheus keeps that per target in ``/api/v1/targets/metadata`` (checked by hand with 2.42:
an empty labelled counter is listed there while ``/api/v1/series`` has nothing for it).

Skips only when no Prometheus binary can be had (no apt-get, no network, no package).

    .venv/bin/pytest -q tests/delivery/test_prometheus_scrape.py -x
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from brain.embedder import LocalEmbedder
from brain.local.devdb import free_port
from tests.kit.gateway import Gateway
from tests.kit.poll import wait_for
from tests.operator.conftest import Kubectl, Operator, cluster, crds, kc
from tests.operator.helpers import sample

from .conftest import RULES, brain_dashboard_exprs, dashboard_exprs, fetched_tool, queried_metrics, rule_exprs

__all__ = [
    "cluster",
    "crds",
    "kc",
]  # fixtures used from other suites (the gateway: a root plugin)

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(600)]

#: Families with no series unless something goes wrong that a test cannot cause honestly (see above).
METADATA_ONLY = {"brain_capture_queue_dropped_total": "team-gateway"}
#: What each scraped target is called (the job label a ServiceMonitor of the chart would give it).
JOBS = ("team-gateway", "team-embedder", "brain-operator")
SECRET = "AKIA" + "ABCDEFGHIJKLMNOP"
FIX_ANSWER = (
    "The problem was that the connection pool was exhausted by leaked transactions in the worker. "
    "The fix is to wrap every unit of work in `async with pool.acquire()` so the connection is always "
    "returned, and to set a statement timeout. This should fix the issue; restart the workers after deploying."
)
#: Grafana's variables as a dashboard with "All" selected would send them.
GRAFANA_VARS = {"$__rate_interval": "1m", "$namespace": ".*", "$gateway": ".*", "$embedder": ".*"}
GRAFANA_VARS |= {"$brain": ".*", "$kind": ".*"}


@pytest.fixture(scope="module")
def prometheus_bin() -> str:
    return fetched_tool(
        "prometheus.sh", "no Prometheus server binary and Debian's package could not be fetched"
    )


class Prometheus:
    """``prometheus`` in a subprocess with its own config, data folder and port."""

    def __init__(
        self, binary: str, tmp: Path, targets: dict[str, tuple[str, str]], rule_files: tuple[Path, ...] = ()
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / "prometheus.log"
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(f) for f in rule_files],
            "scrape_configs": [
                {
                    "job_name": job,
                    "static_configs": [{"targets": [address], "labels": {"namespace": namespace}}],
                }
                for job, (address, namespace) in targets.items()
            ],
        }
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={tmp / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=tmp,
            )

    async def api(self, path: str, **params: str) -> Any:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited {self.proc.returncode}:\n{self.tail()}")
        async with httpx.AsyncClient(timeout=10) as c:
            r = await c.get(f"{self.url}/api/v1/{path}", params=params)
        body = r.json()
        assert body["status"] == "success", f"{path} {params}: {body}"
        return body["data"]

    async def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited {self.proc.returncode}:\n{self.tail()}")
            with contextlib.suppress(httpx.HTTPError):
                async with httpx.AsyncClient(timeout=2) as c:
                    if (await c.get(f"{self.url}/-/ready")).status_code == 200:
                        return
            await asyncio.sleep(0.2)
        raise AssertionError(f"prometheus not ready after {timeout:.0f}s:\n{self.tail()}")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)


async def until(what: str, check: Any, timeout: float = 90, every: float = 0.5) -> Any:
    """Await ``check()`` until it reports nothing left (an empty collection)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if not last:
            return last
        await asyncio.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; still: {last}")


def grafana(expr: str) -> str:
    for var, value in GRAFANA_VARS.items():
        expr = expr.replace(var, value)
    assert "$" not in expr, f"a dashboard variable this test does not know: {expr}"
    return expr


async def drive_gateway(gw: Gateway, ns: str) -> None:
    """A REST note, a chat that retrieves it and one that finds nothing, a stored and a filtered capture, a routed request, a
    query with a secret, a refused key: enough for every gateway and embedder family to have series."""
    r = await gw.rest(
        "POST",
        "/memories",
        json={"body": "Staging Postgres moved to port 6543.", "kind": "fact", "namespace": ns},
    )
    assert r.status_code in (200, 201), r.text
    scoped = {"x-brain-namespaces": ns}
    r = await gw.chat("which port does staging postgres use?", headers=scoped)
    assert r.status_code == 200 and r.headers.get("x-brain-memory") == "injected", (r.headers, r.text)
    r = await gw.chat("zebra quokka narwhal", headers={"x-brain-namespaces": ns + "-empty"})
    assert r.status_code == 200 and r.headers.get("x-brain-memory") == "none", (r.headers, r.text)
    gw.script({"content": FIX_ANSWER}, {"content": FIX_ANSWER})
    r = await gw.chat("how do I fix this error: too many connections in the worker?", headers=scoped)
    assert r.status_code == 200, r.text
    r = await gw.chat("this is garbage, you useless idiot, fix the error", headers=scoped)
    assert r.status_code == 200, r.text
    r = await gw.chat(f"why is the key {SECRET} refused by staging postgres?", headers=scoped)
    assert r.status_code == 200, r.text
    r = await gw.chat("hi", model="smart-router", headers={"x-brain-memory": "off"})
    assert r.status_code == 200 and r.headers.get("x-brain-route-tier"), (r.headers, r.text)
    r = await gw.chat("hi", key="sk-not-a-key")
    assert r.status_code in (401, 403), r.text
    await gw.settle(ns, events=3)


def fail_a_backup(dsn: str, tmp: Path) -> None:
    """spec.backup's job script (render/backup.py), run for real against the gateway's database with
    its dumps' volume unusable (a file where the directory should be, as a full volume would fail
    it): it records a `failed` run, which the gateway's health reports and the operator exports as
    brain_backup_last_run_failed."""
    from brain.local.devdb import pg_tool
    from brain_operator.render.backup import BACKUP_SCRIPT

    blocked = tmp / "backups-not-a-directory"
    blocked.write_text("x")
    env = {
        "PATH": f"{Path(pg_tool('psql')).parent}:/usr/bin:/bin",
        "HOME": str(tmp),
        "BRAIN_DATABASE_URL": dsn,
        "BACKUP_DIR": str(blocked),
        "BACKUP_KEEP": "7",
        "BACKUP_NAME": "team",
    }
    proc = subprocess.run(
        ["/bin/sh", "-c", BACKUP_SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1 and "backup failed: pg_dump failed" in proc.stderr, proc.stderr


def master_key_secret(key: str) -> dict[str, Any]:
    """The Brain's master key, set in advance to this gateway's; labelled, so the operator adopts it
    (an unlabelled Secret at a generated name is not taken over: docs/security.md)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "team-master-key", "labels": {"brain.dev/secret-use": "master-key"}},
        "stringData": {"masterKey": key},
    }


@pytest.fixture
def operator(kc: Kubectl, gw: Gateway, tmp_path: Path) -> Iterator[Operator]:
    """tests/operator's operator, reading every Brain's health from this gateway through its template
    (the one URL the master key may go to, so the per-namespace counts are there)."""
    op = Operator(
        kc.cluster, kc.ns, tmp_path / "operator.log", "--health-url-template", f"{gw.url}/brain/v1/health"
    ).start()
    try:
        yield op
    finally:
        op.stop()
        for brain in (kc.get("brains") or {}).get("items", []):
            kc("patch", "brain", brain["metadata"]["name"], "--type=merge", "-p",
               '{"metadata":{"finalizers":null}}', check=False)  # fmt: skip


def refuse_a_reconcile(kc: Kubectl, op: Operator) -> None:
    """A second Brain whose Secrets a ResourceQuota forbids: the API server answers 403 and the
    operator counts a failed reconcile. (Existing Secrets are only updated, which the quota allows.)"""
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-new-secrets"},
        "spec": {"hard": {"count/secrets": "0"}},
    }
    kc.apply(quota)
    broken = sample("brain.yaml")
    broken["metadata"] = {"name": "broken"}
    kc.apply(broken)
    wait_for(
        "a refused reconcile",
        lambda: op.metric("brain_operator_reconcile_errors_total", kind="Brain", reason="http403") >= 1,
        timeout=60,
    )


async def test_prometheus_scrapes_every_metric_the_dashboards_and_alerts_query(
    gw: Gateway, kc: Kubectl, operator: Operator, prometheus_bin: str, tmp_path: Path, embedder: LocalEmbedder
) -> None:
    # The model's first inference in this process (ONNX warm-up) can pass the gateway's 2 s embedder
    # timeout on a loaded machine; the first note would then be stored without a vector and the chat
    # that should retrieve it would find nothing.
    await embedder.embed(["warm up"])
    prom = Prometheus(
        prometheus_bin,
        tmp_path,
        {
            "team-gateway": (gw.url.removeprefix("http://"), kc.ns),
            "team-embedder": (gw.embedder_server.url.removeprefix("http://"), kc.ns),
            "brain-operator": (f"127.0.0.1:{operator.port}", "brain-system"),
        },
        rule_files=(RULES,),
    )
    try:
        await prom.wait_ready()

        # The Brain: children written, status and brain_ready set, index gauges from the gateway.
        brain = sample("brain.yaml")
        brain["spec"]["backup"] = {}  # the brain_backup_* gauges; the last run failed (below)
        await asyncio.to_thread(fail_a_backup, gw.dsn, tmp_path)
        # The operator reads the per-namespace counts with the Brain's master key: this gateway's.
        await asyncio.to_thread(kc.apply, master_key_secret(gw.keys["master"]))
        await asyncio.to_thread(kc.provide_volume, "data-team-db-0")
        await asyncio.to_thread(kc.apply, brain)

        ns = f"prom:{uuid.uuid4().hex[:10]}"
        await drive_gateway(gw, ns)
        label = f"{kc.ns}/team"

        def operator_has_index() -> bool:
            text = operator.metrics()
            return (
                f'brain_ready{{brain="{label}"}}' in text and f'brain_index_entries{{brain="{label}"' in text
            )

        # Blocking waits run in a thread: the embedder and the fake upstream share this event loop.
        await asyncio.to_thread(wait_for, "index gauges for Brain team", operator_has_index, 90)
        await asyncio.to_thread(refuse_a_reconcile, kc, operator)

        async def targets_down() -> dict[str, str]:
            active = (await prom.api("targets", state="active"))["activeTargets"]
            health = {t["labels"]["job"]: f"{t['health']} {t.get('lastError', '')}" for t in active}
            return {job: health.get(job, "absent") for job in JOBS if health.get(job, "").strip() != "up"}

        await until("all three targets up", targets_down, timeout=60)

        wanted = queried_metrics()
        assert wanted, "no metric names found in the dashboards and rules"
        scraped = [n for n in wanted if n not in METADATA_ONLY]

        async def missing_series() -> dict[str, list[str]]:
            out = {}
            for name in scraped:
                if not await prom.api("series", **{"match[]": name}):
                    out[name] = wanted[name]
            return out

        await until("a series for every queried metric", missing_series, timeout=90)

        for name, job in METADATA_ONLY.items():
            assert name in wanted, f"{name} is no longer queried: drop it from METADATA_ONLY"
            meta = await prom.api("targets/metadata", metric=name, match_target=f'{{job="{job}"}}')
            assert [m["type"] for m in meta] == ["counter"], f"{job} does not expose {name}: {meta}"

        # `up`, the one built-in series the rules use (EmbedderDown: up{job=~".+-embedder"}).
        up = await prom.api("query", query='up{job=~".+-embedder"}')
        assert [s["value"][1] for s in up["result"]] == ["1"], up

        # Every dashboard query evaluates and shows something, unless all it reads is metadata-only;
        # every rule evaluates (an alert that does not fire is an empty result, which is right).
        panels = [(w, grafana(e)) for w, e in dashboard_exprs() if not e.startswith("label_values(")]

        async def empty_or_failing() -> dict[str, str]:
            out = {}
            for where, expr in panels:
                result = (await prom.api("query", query=expr))["result"]
                if not result and not set(re.findall(r"brain_[a-z0-9_]+", expr)) <= set(METADATA_ONLY):
                    out[where] = expr
            return out

        await until("data in every dashboard panel", empty_or_failing, timeout=60)

        # The dashboard the operator renders for Brain team (its own selectors, no variables).
        panels = brain_dashboard_exprs(kc.ns, "team")
        await until("data in every panel of Brain team's own dashboard", empty_or_failing, timeout=60)
        for where, expr in rule_exprs():
            try:
                await prom.api("query", query=expr)
            except AssertionError as e:
                raise AssertionError(f"rule {where} does not evaluate: {e}") from None

        # The failed backup, seen by the rules loaded from the chart's file: BrainBackupFailed fires
        # (after its `for: 1m`: a failed run is a fact), for this Brain and no other.
        async def backup_alert_not_pending() -> list[str]:
            alerts = (await prom.api("alerts"))["alerts"]
            mine = [a for a in alerts if a["labels"]["alertname"] == "BrainBackupFailed"]
            ok = [a for a in mine if a["labels"].get("brain") == label and a["state"] == "firing"]
            return [] if ok else [json.dumps(alerts)[:2000]]

        await until("BrainBackupFailed firing for Brain team", backup_alert_not_pending, timeout=150)
        print(
            json.dumps(
                {n: sorted({s["job"] for s in await prom.api("series", **{"match[]": n})}) for n in wanted},
                indent=1,
            )
        )
    except BaseException:
        print(f"--- prometheus log:\n{prom.tail()}\n--- operator log:\n{operator.log()}")
        raise
    finally:
        prom.stop()
