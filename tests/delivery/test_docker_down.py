"""hack/docker-down.sh leaves the cache folder removable: dockerd bind-mounts the host's network
namespace under its exec root for host-network builds and leaves that mount behind when it stops,
and a left mount made ``rm -rf`` of the cache fail with "Device or resource busy". No engine runs
here: the script is given a data root of its own, with the mount dockerd would have left."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import HACK

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="bind mounts need root")


def mounted_under(root: Path) -> list[str]:
    prefix = f"{root}/"
    return [
        line.split()[1]
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if line.split()[1].startswith(prefix)
    ]


@pytest.mark.parametrize("pidfile", ["none", "dead"], ids=["no pidfile", "pidfile of a dead engine"])
def test_a_stopped_engine_leaves_no_mount_in_the_cache(tmp_path: Path, pidfile: str) -> None:
    data_root = tmp_path / "docker-v1"
    netns = data_root / "run" / "exec" / "netns" / "default"
    netns.parent.mkdir(parents=True)
    netns.touch()
    subprocess.run(["mount", "--bind", "/proc/self/ns/net", str(netns)], check=True)
    if pidfile == "dead":
        dead = subprocess.Popen(["true"])
        dead.wait()
        (data_root / "run" / "dockerd.pid").write_text(f"{dead.pid}\n")
    try:
        assert mounted_under(data_root) == [str(netns)]
        proc = subprocess.run(
            ["bash", str(HACK / "docker-down.sh")],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "DOCKER_DATA_ROOT": str(data_root)},
        )
        assert proc.returncode == 0, proc.stderr
        assert "no dockerd started by hack/docker-up.sh is running" in proc.stderr
        assert mounted_under(data_root) == []
        shutil.rmtree(data_root)  # what failed before: the cache folder can be removed
    finally:
        subprocess.run(["umount", "-l", str(netns)], capture_output=True, check=False)
