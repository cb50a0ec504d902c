"""`make test`'s two workers never share a control plane, and the real node's tests stay on one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit.workers import kube_env_for_worker, schedule_order, work_unit, worker_number

ROOT = Path(__file__).resolve().parents[2]
KUBE_KEYS = (
    "BRAIN_KUBE_STATE",
    "BRAIN_KUBE_ETCD_PORT",
    "BRAIN_KUBE_ETCD_PEER_PORT",
    "BRAIN_KUBE_APISERVER_PORT",
)
#: the real node's control plane (hack/node-lib.sh)
NODE_PORTS = {"23379", "23380", "27443"}


def test_worker_numbers_come_from_xdist_ids() -> None:
    assert worker_number(None) is None and worker_number("") is None
    assert worker_number("gw0") == 0 and worker_number("gw12") == 12
    with pytest.raises(ValueError, match=r"PYTEST_XDIST_WORKER='master'.*gw<number>"):
        worker_number("master")


def test_two_workers_on_the_defaults_meet_neither_each_other_nor_the_node() -> None:
    gw0, gw1 = kube_env_for_worker({}, 0), kube_env_for_worker({}, 1)
    assert gw0 == {
        "BRAIN_KUBE_STATE": "/tmp/brain-kube",
        "BRAIN_KUBE_ETCD_PORT": "22379",
        "BRAIN_KUBE_ETCD_PEER_PORT": "22380",
        "BRAIN_KUBE_APISERVER_PORT": "26443",
    }
    assert gw1["BRAIN_KUBE_STATE"] == "/tmp/brain-kube-gw1"
    ports = [g[k] for g in (gw0, gw1) for k in KUBE_KEYS[1:]]
    assert len(set(ports)) == 6 and not NODE_PORTS & set(ports)


def test_the_fixed_ports_lie_outside_the_ephemeral_range() -> None:
    """A fixed port inside Linux's ephemeral range can be held for a moment by any outgoing
    connection, and cluster-up then fails "already in use" (seen once, on 38580). The scripts'
    defaults, and what four workers add to them, stay below this machine's range."""
    defaults = {}
    for script in ("cluster-up.sh", "node-lib.sh", "images.sh"):
        text = (ROOT / "hack" / script).read_text()
        defaults.update({f"{script}:{m[0]}": int(m[1]) for m in re.findall(r"\$\{(\w*PORT):-(\d+)\}", text)})
    assert len(defaults) == 7, defaults  # cluster-up's three, the node's three, the wheel server
    cluster = {k.split(":")[1]: str(v) for k, v in defaults.items() if k.startswith("cluster-up.sh:")}
    assert kube_env_for_worker({}, 0) == {"BRAIN_KUBE_STATE": "/tmp/brain-kube", **cluster}
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    workers = [int(p) for n in range(4) for p in list(kube_env_for_worker({}, n).values())[1:]]
    assert max([*defaults.values(), *workers]) < low, (defaults, low)


def test_a_workers_cluster_follows_the_state_and_ports_it_was_given() -> None:
    env = {
        "BRAIN_KUBE_STATE": "/tmp/kube-suite/",
        "BRAIN_KUBE_ETCD_PORT": "38379",
        "BRAIN_KUBE_ETCD_PEER_PORT": "38380",
        "BRAIN_KUBE_APISERVER_PORT": "38443",
    }
    assert kube_env_for_worker(env, 2) == {
        "BRAIN_KUBE_STATE": "/tmp/kube-suite-gw2",
        "BRAIN_KUBE_ETCD_PORT": "38399",
        "BRAIN_KUBE_ETCD_PEER_PORT": "38400",
        "BRAIN_KUBE_APISERVER_PORT": "38463",
    }


def test_a_bad_inherited_port_is_named() -> None:
    with pytest.raises(ValueError, match="BRAIN_KUBE_APISERVER_PORT='https': expected a port number"):
        kube_env_for_worker({"BRAIN_KUBE_APISERVER_PORT": "https"}, 1)
    with pytest.raises(ValueError, match=r"BRAIN_KUBE_ETCD_PORT=65530 \+ 10 \(worker gw1\) is not a port"):
        kube_env_for_worker({"BRAIN_KUBE_ETCD_PORT": "65530"}, 1)


def test_the_real_nodes_tests_are_one_unit_and_the_rest_go_by_module() -> None:
    assert work_unit("e2e/pods/test_pods_story.py::test_story") == "real-node"
    assert work_unit("tests/delivery/test_containers.py::test_x[gateway]") == "real-node"
    assert work_unit("tests/delivery/test_chart.py::test_x") == "tests/delivery/test_chart.py"
    assert work_unit("e2e/test_user_story.py::test_story[local]") == "e2e/test_user_story.py"


def test_the_node_goes_first_then_the_slowest_modules_of_the_last_run() -> None:
    ids = [
        "tests/test_a.py::x",
        "tests/test_b.py::x",
        "tests/test_b.py::y",
        "e2e/pods/test_pods_story.py::story",
        "tests/test_c.py::x",
        "tests/delivery/test_containers.py::c",
        "tests/test_a.py::y",
    ]
    last = {"tests/test_b.py": 90.0, "tests/test_c.py": 300.0, "real-node": 1.0}
    assert [ids[i] for i in schedule_order(ids, last)] == [
        "e2e/pods/test_pods_story.py::story",
        "tests/delivery/test_containers.py::c",
        "tests/test_c.py::x",
        "tests/test_b.py::x",
        "tests/test_b.py::y",
        "tests/test_a.py::x",  # no figure yet: after those that have one, a module kept whole
        "tests/test_a.py::y",
    ]
    assert [ids[i] for i in schedule_order(ids, {})][2:] == [
        "tests/test_a.py::x",
        "tests/test_a.py::y",
        "tests/test_b.py::x",
        "tests/test_b.py::y",
        "tests/test_c.py::x",
    ], "a fresh clone: collection order, modules kept whole"


RECORD = """
import json, os, pathlib

def test_{name}():
    out = pathlib.Path(os.environ["RECORD_DIR"]) / "{name}.json"
    env = {{k: os.environ.get(k) for k in {keys!r}}}
    out.write_text(json.dumps({{"worker": os.environ.get("PYTEST_XDIST_WORKER"), **env}}))
"""


def _run_tree(tmp_path: Path, *args: str) -> dict[str, dict[str, str | None]]:
    """pytest over a small tree laid out like ours; per test: the worker it ran on and its env."""
    tests = {
        "tests/delivery/test_containers.py": ["containers_a", "containers_b"],
        "e2e/pods/test_pods_story.py": ["story_a", "story_b"],
        **{f"tests/test_m{i}.py": [f"m{i}_a", f"m{i}_b"] for i in range(6)},
    }
    for path, names in tests.items():
        f = tmp_path / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("\n".join(RECORD.format(name=n, keys=KUBE_KEYS) for n in names))
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.kit.workers"]\n')
    records = tmp_path / "records"
    records.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BRAIN_KUBE_", "PYTEST_"))}
    env.update(RECORD_DIR=str(records), PYTHONPATH=str(ROOT), BRAIN_KUBE_ETCD_PORT="38379")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--rootdir", str(tmp_path), "-c", "/dev/null",
         "-o", f"cache_dir={tmp_path / 'cache'}", *args, str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ran = {p.stem: json.loads(p.read_text()) for p in records.glob("*.json")}
    assert len(ran) == 16, sorted(ran)
    return ran


def test_under_two_workers_each_has_its_own_cluster_and_one_runs_every_node_test(tmp_path: Path) -> None:
    ran = _run_tree(tmp_path, "-n", "2")
    node = {ran[n]["worker"] for n in ("containers_a", "containers_b", "story_a", "story_b")}
    assert len(node) == 1, f"the real node's tests ran on {node}"
    by_worker = {r["worker"]: {k: r[k] for k in KUBE_KEYS} for r in ran.values()}
    assert set(by_worker) == {"gw0", "gw1"}, "both workers got work"
    assert by_worker["gw0"] == {
        "BRAIN_KUBE_STATE": "/tmp/brain-kube",
        "BRAIN_KUBE_ETCD_PORT": "38379",
        "BRAIN_KUBE_ETCD_PEER_PORT": "22380",
        "BRAIN_KUBE_APISERVER_PORT": "26443",
    }
    assert by_worker["gw1"] == {
        "BRAIN_KUBE_STATE": "/tmp/brain-kube-gw1",
        "BRAIN_KUBE_ETCD_PORT": "38389",
        "BRAIN_KUBE_ETCD_PEER_PORT": "22390",
        "BRAIN_KUBE_APISERVER_PORT": "26453",
    }
    for module in (f"m{i}" for i in range(6)):
        assert ran[f"{module}_a"]["worker"] == ran[f"{module}_b"]["worker"], f"{module} was split"


def test_a_serial_run_keeps_the_environment_it_was_given_and_times_each_unit(tmp_path: Path) -> None:
    ran = _run_tree(tmp_path)
    assert {r["worker"] for r in ran.values()} == {None}
    assert {r["BRAIN_KUBE_ETCD_PORT"] for r in ran.values()} == {"38379"}
    assert {r["BRAIN_KUBE_STATE"] for r in ran.values()} == {None}
    seconds = json.loads((tmp_path / "cache" / "v" / "brain" / "unit-seconds").read_text())
    assert set(seconds) == {"real-node", *(f"tests/test_m{i}.py" for i in range(6))}
