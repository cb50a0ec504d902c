"""hack/daemon-lib.sh: a daemon that is still being exec'd is not taken for one that died.

The control plane's and the node's start scripts check that a daemon is alive by its binary
(/proc/PID/exe), against a reused pid. Right after `setsid … &` the process is still the forked
shell or setsid; under load a cluster start was stopped with "etcd exited while waiting for etcd"
and an empty log (fresh-clone CI, sessions 22 and 23). Here a prefix holds the process in bash for
half a second before it execs the daemon, as a loaded machine would.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .conftest import HACK

SCRIPT = """
set -euo pipefail
DAEMON_DIR=$1 DAEMON_BIN=$2
mkdir -p "$DAEMON_DIR/logs" "$DAEMON_DIR/pids"
DAEMON_NAMES=(fakeetcd)
DAEMON_PREFIX=(bash -c 'sleep 0.5; exec "$@"' prefix)
die() { echo "DIED: $*" >&2; exit 1; }
daemon_alive() {
  local pid exe
  pid=$(<"$DAEMON_DIR/pids/$1.pid")
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [[ $exe == */sleep ]]
}
source "$3"
(sleep 1.5; touch "$DAEMON_DIR/ready") &
start fakeetcd 30
wait_for fakeetcd 5 test -e "$DAEMON_DIR/ready"
pid=$(<"$DAEMON_DIR/pids/fakeetcd.pid")
daemon_alive fakeetcd && echo "ALIVE $(readlink /proc/$pid/exe)"
kill "$pid"
"""


def test_a_daemon_still_starting_is_waited_for_not_called_dead(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "fakeetcd").symlink_to(str(shutil.which("sleep")))
    out = subprocess.run(
        ["bash", "-c", SCRIPT, "test", str(tmp_path / "state"), str(bin_dir), str(HACK / "daemon-lib.sh")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0 and "ALIVE" in out.stdout and out.stdout.strip().endswith("/sleep"), (
        out.stdout,
        out.stderr,
    )
