"""Helpers for high availability on real pods (e2e/pods/test_ha.py, hack/bench/ha.py): a Brain on a
real 2-instance CloudNativePG Cluster, and a bounded stream of chats and memory writes whose every
outcome is recorded with its time, so a test can say what a user saw during a failover.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from tests.kit.client import GatewayClient

from .conftest import RealNode
from .story_pods import REG, TAG, brain_manifest

ROOT = Path(__file__).resolve().parents[2]
#: The operand image hack/images.sh builds (cnpg-postgres); CNPG reads the major from its tag.
CNPG_POSTGRES_IMAGE = f"{REG}/cnpg-postgres:17-pgvector-{TAG}"
CNPG_OPERATOR_IMAGE = f"{REG}/cloudnative-pg:1.27.1-{TAG}"
#: What a chat carries when retrieval served the stored note (the echo model repeats its prompt).
NOTE = "The staging database listens on port 6543, not 5432."
ASK = "Which port does the staging database use?"


def install_cnpg(node: RealNode) -> float:
    """hack/cnpg-install.sh against the node; returns seconds until CNPG's webhook answered."""
    t = time.monotonic()
    proc = subprocess.run(
        ["bash", str(ROOT / "hack" / "cnpg-install.sh")],
        capture_output=True,
        text=True,
        env=node.env,
        timeout=600,
    )
    assert proc.returncode == 0, f"hack/cnpg-install.sh failed:\n{proc.stderr[-4000:]}"
    return time.monotonic() - t


def cnpg_brain_manifest(ns: str, instances: int = 2) -> str:
    brain = yaml.safe_load(brain_manifest(ns))
    brain["spec"]["database"] = {"cloudNativePG": {"instances": instances, "storage": "1Gi"}}
    # The sample's 500 ms retrieval budget is for a quiet machine; on this shared 2-CPU node under
    # a load of 10+ the first retrievals took longer and went on without memory ("timeout"), which
    # a failover figure would wrongly count as the database's gap.
    brain["spec"]["gateway"]["retrieval"]["timeoutMs"] = 3000
    return yaml.safe_dump(brain, sort_keys=False)


def cluster(node: RealNode, ns: str, name: str = "team-db") -> dict[str, Any]:
    return dict(node.json("get", "clusters.postgresql.cnpg.io", name, "-n", ns))


def cluster_healthy(node: RealNode, ns: str, instances: int = 2) -> bool:
    st = cluster(node, ns).get("status") or {}
    return (
        st.get("readyInstances") == instances
        and st.get("phase") == "Cluster in healthy state"
        and st.get("currentPrimary") == st.get("targetPrimary")
    )


def psql(node: RealNode, ns: str, pod: str, sql: str) -> str:
    """psql inside an instance pod, over its socket as the superuser (CNPG's peer auth)."""
    return node.kubectl(
        "exec", pod, "-n", ns, "-c", "postgres", "--", "psql", "-X", "-qtA", "-d", "brain", "-c", sql
    ).strip()


@dataclass
class Outcome:
    kind: str  # "chat" or "write"
    started: float
    ended: float
    status: int | str  # HTTP status, or the exception's name when no answer came
    memory: bool = False  # chat: the stored note reached the upstream (retrieval worked)
    memory_id: str | None = None  # write: the id the gateway acknowledged
    body: str = ""  # write: what was written; chat or write: the first 200 characters of the answer


@dataclass
class Stream:
    """`chats` chat workers and `writers` memory writers against the gateway Service, until stop()."""

    gw: GatewayClient
    chats: int = 2
    writers: int = 1
    key: str = "agent"
    outcomes: list[Outcome] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _record(self, o: Outcome) -> None:
        with self._lock:
            self.outcomes.append(o)

    def _chat(self, worker: int) -> None:
        i = 0
        while not self._stop.is_set():
            i += 1
            t = time.monotonic()
            try:
                r = self.gw.chat(f"{ASK} (chat {worker}.{i})", key=self.key, timeout=30)
                text = r.text
                self._record(
                    Outcome("chat", t, time.monotonic(), r.status_code, "6543" in text, body=text[:200])
                )
            except httpx.HTTPError as e:
                self._record(Outcome("chat", t, time.monotonic(), type(e).__name__))
            time.sleep(0.2)

    def _write(self, worker: int) -> None:
        i = 0
        run = uuid.uuid4().hex[:8]
        while not self._stop.is_set():
            i += 1
            body = f"Failover drill {run} write {worker}.{i}: the on-call rota file is rota-{run}-{i}.md."
            t = time.monotonic()
            try:
                r = self.gw.rest("POST", "/memories", self.key, json={"body": body, "kind": "fact"})
                mid = r.json().get("id") if r.status_code == 201 else None
                self._record(
                    Outcome(
                        "write",
                        t,
                        time.monotonic(),
                        r.status_code,
                        memory_id=mid,
                        body=r.text[:200] if r.status_code != 201 else body,
                    )
                )
            except (httpx.HTTPError, json.JSONDecodeError) as e:
                self._record(Outcome("write", t, time.monotonic(), type(e).__name__, body=body))
            time.sleep(0.2)

    def start(self) -> Stream:
        for w in range(self.chats):
            self._threads.append(threading.Thread(target=self._chat, args=(w,), daemon=True))
        for w in range(self.writers):
            self._threads.append(threading.Thread(target=self._write, args=(w,), daemon=True))
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> list[Outcome]:
        self._stop.set()
        for t in self._threads:
            t.join(60)
        with self._lock:
            return sorted(self.outcomes, key=lambda o: o.started)

    def snapshot(self) -> list[Outcome]:
        with self._lock:
            return list(self.outcomes)


@dataclass(frozen=True)
class FailoverFigures:
    chats: int
    chats_without_memory: int
    chats_broken: int
    writes: int
    writes_acknowledged: int
    writes_refused_503: int
    writes_other: int
    #: first chat answered without memory → last one (seconds, 0 when retrieval never missed)
    window_without_memory_s: float
    #: primary deleted → first acknowledged write that started after the first refused one
    first_write_after_failover_s: float
    #: primary deleted → a new primary named in the Cluster's status
    promoted_after_s: float

    def line(self) -> str:
        return (
            f"{self.chats} chats ({self.chats_without_memory} without memory, {self.chats_broken} broken), "
            f"{self.writes} writes ({self.writes_acknowledged} acknowledged, {self.writes_refused_503} refused "
            f"with 503, {self.writes_other} other); window without memory {self.window_without_memory_s:.1f} s, "
            f"first write after failover {self.first_write_after_failover_s:.1f} s, "
            f"new primary after {self.promoted_after_s:.1f} s"
        )


def failover_figures(outcomes: list[Outcome], t_delete: float, t_promoted: float) -> FailoverFigures:
    """Pure: what the stream saw around the primary's deletion at `t_delete`."""
    chats = [o for o in outcomes if o.kind == "chat"]
    writes = [o for o in outcomes if o.kind == "write"]
    without = [o for o in chats if o.status == 200 and not o.memory]
    window = (max(o.ended for o in without) - min(o.started for o in without)) if without else 0.0
    after = [o for o in writes if o.started >= t_delete]
    refused = [o for o in after if o.status != 201]
    first_refused = min((o.started for o in refused), default=t_delete)
    acked_after = [o.ended for o in after if o.status == 201 and o.started >= first_refused]
    first_write = (min(acked_after) - t_delete) if acked_after else float("inf")
    return FailoverFigures(
        chats=len(chats),
        chats_without_memory=len(without),
        chats_broken=sum(1 for o in chats if o.status != 200),
        writes=len(writes),
        writes_acknowledged=sum(1 for o in writes if o.status == 201),
        writes_refused_503=sum(1 for o in writes if o.status == 503),
        writes_other=sum(1 for o in writes if o.status not in (201, 503)),
        window_without_memory_s=window,
        first_write_after_failover_s=first_write,
        promoted_after_s=t_promoted - t_delete,
    )


def save_figures(name: str, figures: dict[str, Any]) -> None:
    """hack/bench/ha.py reads these (BRAIN_HA_FIGURES=<folder>); a plain test run writes nothing."""
    folder = os.environ.get("BRAIN_HA_FIGURES")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}.json").write_text(json.dumps(figures, indent=1))
