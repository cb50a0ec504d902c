"""Write a one-layer image archive (the `docker save` layout) holding one static binary.

The node's two own images (the pause sandbox and CoreDNS) are made this way so that neither a
registry nor a Docker engine is needed; `ctr -n k8s.io images import` reads the archive.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tarfile
from pathlib import Path

EPOCH = 0  # reproducible: fixed mtimes, so the same binary gives the same image id


def _layer(binary: Path, entrypoint: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for d in ("etc", "tmp"):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755, EPOCH
            tar.addfile(info)
        data = binary.read_bytes()
        info = tarfile.TarInfo(entrypoint.lstrip("/"))
        info.size, info.mode, info.mtime = len(data), 0o755, EPOCH
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def build(binary: Path, name: str, entrypoint: str, user: str | None) -> bytes:
    layer = _layer(binary, entrypoint)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config: dict[str, object] = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": [entrypoint], **({"User": user} if user else {})},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": f"hack/node/oci-image.py {binary.name}"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    layer_name = diff_id.removeprefix("sha256:") + "/layer.tar"
    manifest = [{"Config": config_name, "RepoTags": [name], "Layers": [layer_name]}]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for member, data in (
            (config_name, config_bytes),
            (layer_name, layer),
            ("manifest.json", json.dumps(manifest).encode()),
        ):
            info = tarfile.TarInfo(member)
            info.size, info.mode, info.mtime = len(data), 0o644, EPOCH
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--binary", type=Path, required=True)
    p.add_argument("--name", required=True, help="image reference, e.g. registry.k8s.io/pause:3.10")
    p.add_argument("--entrypoint", required=True)
    p.add_argument("--user")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    a.out.write_bytes(build(a.binary, a.name, a.entrypoint, a.user))


if __name__ == "__main__":
    main()
