"""hack/prebuild.sh: `make test` warms its builds in the background and leaves nothing running.

What a developer or CI would notice: `start` returns at once, `stop` reports each step, a build
still running at `stop` is cut off with its whole process tree (no Go compiler left spinning after
the suite), and a bad step name is refused, naming the variable and the accepted steps.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "prebuild.sh"
#: At its default nice 19 the background gets no CPU at all while the other test worker keeps both
#: cores busy, and these tests would wait on it for minutes; the niceness is not what they check.
AWAKE = {"BRAIN_PREBUILD_NICE": "0"}


def prebuild(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env={**os.environ, **env}
    )


def session_pids(sid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-s", str(sid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_a_cached_step_is_reported_done_and_nothing_keeps_running(tmp_path: Path) -> None:
    env = {"BRAIN_PREBUILD_STATE": str(tmp_path / "state"), "BRAIN_PREBUILD_STEPS": "kube-build", **AWAKE}
    started = prebuild("start", **env)
    assert started.returncode == 0, started.stderr
    assert "started" in started.stderr
    sid = int((tmp_path / "state" / "pid").read_text())
    deadline = time.monotonic() + 60  # the suite's own kube-build runs first, so the cache is warm
    while session_pids(sid) and time.monotonic() < deadline:
        time.sleep(0.2)
    stopped = prebuild("stop", **env)
    assert stopped.returncode == 0, stopped.stderr
    assert "kube-build: done in" in stopped.stderr
    assert session_pids(sid) == []


def test_stop_cuts_off_a_build_in_progress_with_its_children(tmp_path: Path) -> None:
    # An empty cache folder makes kube-build really build (Go's own caches stay warm, so it links).
    env = {
        "BRAIN_PREBUILD_STATE": str(tmp_path / "state"),
        "BRAIN_PREBUILD_STEPS": "kube-build",
        "BRAIN_CACHE": str(tmp_path / "cache"),
        **AWAKE,
    }
    assert prebuild("start", **env).returncode == 0
    sid = int((tmp_path / "state" / "pid").read_text())
    deadline = time.monotonic() + 120
    while len(session_pids(sid)) < 3 and time.monotonic() < deadline:  # bash, kube-build.sh, go
        time.sleep(0.2)
    assert len(session_pids(sid)) >= 3, "kube-build did not start"
    again = prebuild("start", **env)
    assert "already running" in again.stderr

    stopped = prebuild("stop", **env)
    assert stopped.returncode == 0, stopped.stderr
    assert "stopping what still builds" in stopped.stderr
    assert session_pids(sid) == []
    assert not list((tmp_path / "cache").glob("kube-*/bin/kube")), "a cut-off build left a binary behind"


def test_bad_input_is_refused_with_what_would_be_accepted(tmp_path: Path) -> None:
    env = {"BRAIN_PREBUILD_STATE": str(tmp_path / "state")}
    bad_step = prebuild("start", BRAIN_PREBUILD_STEPS="kube-build docker", **env)
    assert bad_step.returncode != 0
    assert (
        "BRAIN_PREBUILD_STEPS: unknown step 'docker' (accepted: kube-build otelcol-build images node-build kube-router-build)"
        in bad_step.stderr
    )
    assert not (tmp_path / "state").exists(), "a refused start left state behind"

    bad_command = prebuild("restart", **env)
    assert bad_command.returncode == 2
    assert "unknown command 'restart' (accepted: start, status, stop, around, --help)" in bad_command.stderr

    nothing = prebuild("stop", **env)
    assert nothing.returncode == 0
    assert "nothing to stop" in nothing.stderr

    bad_nice = prebuild("start", BRAIN_PREBUILD_NICE="-5", **env)
    assert bad_nice.returncode == 2
    assert "BRAIN_PREBUILD_NICE=-5: expected 0 to 19" in bad_nice.stderr

    helped = prebuild("--help")
    assert helped.returncode == 0 and "BRAIN_PREBUILD_STEPS" in helped.stdout


def test_around_stops_the_builds_however_the_command_ends_and_keeps_its_status(tmp_path: Path) -> None:
    # `make test` runs lint, typecheck and unit this way: a recipe's own `trap … EXIT` never ran,
    # because bash execs the last command of `bash -c`, and left the builds' Docker engine running.
    env = {"BRAIN_PREBUILD_STATE": str(tmp_path / "state"), "BRAIN_PREBUILD_STEPS": "kube-build", **AWAKE}
    failed = prebuild("around", "bash", "-c", "echo from-the-command; exit 3", **env)
    assert failed.returncode == 3, failed.stderr
    assert "from-the-command" in failed.stdout
    assert not (tmp_path / "state" / "pid").exists(), "stop did not run after the command"
    sid = int(re.search(r"started \(pid (\d+)\)", failed.stderr)[1])  # type: ignore[index]
    assert session_pids(sid) == []

    ok = prebuild("around", "true", **env)
    assert ok.returncode == 0 and not (tmp_path / "state" / "pid").exists()

    nothing = prebuild("around", **env)
    assert nothing.returncode != 0
    assert "around: no command given" in nothing.stderr


def test_a_dry_run_of_make_test_starts_nothing(tmp_path: Path) -> None:
    # tests/delivery/test_docs_commands.py runs `make -n test` inside the suite; had it started
    # and stopped the builds, it would have wiped the running suite's own prebuild state.
    state = tmp_path / "state"
    proc = subprocess.run(
        ["make", "--no-print-directory", "-n", "test"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BRAIN_PREBUILD_STATE": str(state)},
    )
    assert proc.returncode == 0, proc.stderr
    assert "hack/prebuild.sh around make lint typecheck unit" in proc.stdout
    assert not state.exists(), "make -n test started the background builds"
