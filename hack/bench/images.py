"""`make bench` part: the images' sizes (and how long a cached rebuild takes), as Markdown.

Builds through hack/images.sh (Docker from hack/docker-up.sh; a cached rebuild is seconds), then
reads each image's size and its base's from the engine, so the table shows what each image adds
on top of the shared base. Run alone: `python -m hack.bench.images`.
"""

from __future__ import annotations

import json
import subprocess
import sys

from hack.bench import ROOT, parser, results


def inspect(ref: str) -> dict[str, object]:
    out = subprocess.run(["docker", "image", "inspect", ref], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout)[0])


def mb(n: object) -> str:
    return f"{int(str(n)) / 1e6:.0f}"


def section(lines: list[str]) -> str:
    rows = [
        "## Images",
        "",
        "Built by `make images` (`bash hack/images.sh`) on this machine; sizes as `docker image inspect` "
        "reports them (uncompressed). *Own* is what the image adds on top of its base. *Rebuild* is "
        "this run's build time with Docker's layer cache warm.",
        "",
        "| image | reference | size MB | base | base MB | own MB | rebuild s |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for line in lines:
        name, ref, secs, _, base = line.split("\t")
        size = inspect(ref)["Size"]
        base_size = inspect(base)["Size"]
        own = int(str(size)) - int(str(base_size))
        rows.append(
            f"| {name} | `{ref}` | {mb(size)} | `{base}` | {mb(base_size)} | {mb(own)} | {secs.rstrip('s')} |"
        )
    return "\n".join(rows) + "\n"


def main() -> int:
    parser(__spec__.name, __doc__).parse_args()
    proc = subprocess.run(
        ["bash", str(ROOT / "hack" / "images.sh")], capture_output=True, text=True, cwd=ROOT
    )
    if proc.returncode:
        print(f"## Images\n\nFAILED: {proc.stderr[-2000:]}")
        return 1
    text = section([line for line in proc.stdout.splitlines() if line.strip()])
    results.emit("images", {}, markdown=text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
