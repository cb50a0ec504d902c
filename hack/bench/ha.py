"""`make bench` part: a CloudNativePG failover on the real node, as Markdown.

Runs e2e/pods/test_ha.py's failover case (`FAILOVER`, BRAIN_E2E_HA=1; hack/node-up.sh with the CNPG images, a
Brain on a 2-instance Cluster, the primary deleted under 2 chat streams and 1 writer) and reports
what that stream saw: the window answered without memory, the time to the first acknowledged write
after the failover, and when the Cluster named a new primary. Then node-down (the fixture's).
Run alone: `python -m hack.bench.ha`. Not root: the section says so and measures nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from hack.bench import ROOT, on_the_real_node, parser, results

IMAGES = ("operator", "gateway", "embedder", "jobs", "database", "cnpg", "cnpg-postgres")
#: the case this part repeats, by node id: the `-k failover` it used before never matched the case's
#: name, so the part selected nothing and failed without measuring
FAILOVER = "e2e/pods/test_ha.py::test_primary_deleted_under_traffic"


def main() -> None:
    parser(__spec__.name, __doc__).parse_args()
    if not on_the_real_node("High availability (CloudNativePG failover on the real node)"):
        return
    head = ["## High availability (CloudNativePG failover on the real node)", ""]
    subprocess.run(
        ["bash", "hack/images.sh", "cnpg", "cnpg-postgres"], cwd=ROOT, capture_output=True, check=True
    )
    refs = [
        subprocess.run(
            ["bash", "hack/images.sh", "--ref", i], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        for i in IMAGES
    ]
    with tempfile.TemporaryDirectory() as out:
        env = {
            **os.environ,
            "BRAIN_E2E_HA": "1",
            "BRAIN_HA_FIGURES": out,
            "BRAIN_NODE_IMAGES": " ".join(refs),
        }
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", FAILOVER],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=5400,
        )  # fmt: skip
        figures = Path(out) / "failover.json"
        if done.returncode or not figures.exists():
            sys.exit(f"the failover e2e failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
        f = json.loads(figures.read_text())
    load = Path("/proc/loadavg").read_text().split()[:3]
    rows = [
        ("primary deleted → new primary in the Cluster's status", f"{f['promoted_after_s']:.1f} s"),
        ("window answered without memory (first → last such chat)", f"{f['window_without_memory_s']:.1f} s"),
        ("primary deleted → first acknowledged write after a refused one", f"{f['first_write_after_failover_s']:.1f} s"),
        ("chats (without memory / broken)", f"{f['chats']} ({f['chats_without_memory']} / {f['chats_broken']})"),
        ("writes (acknowledged / 503 / other)", f"{f['writes']} ({f['writes_acknowledged']} / {f['writes_refused_503']} / {f['writes_other']})"),
    ]  # fmt: skip
    text = "\n".join(
        [
            *head,
            f"One run, 2 instances with quorum commit, load average {' '.join(load)} at the end.",
            "",
            "| what | figure |",
            "| --- | --- |",
            *(f"| {a} | {b} |" for a, b in rows),
            "",
        ]
    )
    results.emit("ha", f, markdown=text)
    print(text)


if __name__ == "__main__":
    main()
