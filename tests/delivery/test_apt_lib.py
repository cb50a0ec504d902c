"""hack/apt-lib.sh: an install that meets another apt waits for it instead of failing. On a fresh
machine a CI run's every container test failed with "Could not get lock
/var/lib/dpkg/lock-frontend" while the browser test's chromium install held dpkg's lock, and
docker-up's `apt-get install docker.io` gave up at once.

The package installed is one that is already there (``bash``): apt still takes both locks for it,
so the waits are real, and nothing on the machine changes."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from .conftest import HACK

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("apt-get") is None, reason="needs root and Debian's apt-get"
)
DPKG_FRONTEND_LOCK = Path("/var/lib/dpkg/lock-frontend")


@contextmanager
def held(path: Path) -> Iterator[None]:
    """Hold ``path`` the way its owner does: apt and dpkg take fcntl record locks, flock(1) takes
    flock locks; both kinds are held here, so either kind of waiter waits."""
    with path.open("a") as f:
        fcntl.lockf(f, fcntl.LOCK_EX)
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def start_install(cache: Path, wait: int = 120) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["bash", "-c", f"source {HACK / 'apt-lib.sh'} && apt_install bash"],
        env={**os.environ, "BRAIN_CACHE": str(cache), "APT_WAIT": str(wait)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def still_waiting_after(proc: subprocess.Popen[str], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        time.sleep(0.2)
    return True


@pytest.mark.parametrize("holder", ["another hack script", "an apt that is not ours"])
def test_an_install_waits_for_the_install_before_it(tmp_path: Path, holder: str) -> None:
    lock = tmp_path / "apt.lock" if holder == "another hack script" else DPKG_FRONTEND_LOCK
    with held(lock):
        proc = start_install(tmp_path)
        try:
            assert still_waiting_after(proc, 3), f"gave up while the lock was held: {proc.communicate()[0]}"
        except BaseException:
            proc.kill()
            raise
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out


def test_an_install_that_waited_too_long_says_which_lock(tmp_path: Path) -> None:
    with held(tmp_path / "apt.lock"):
        proc = start_install(tmp_path, wait=1)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert f"held {tmp_path / 'apt.lock'} for 1s (APT_WAIT)" in out
