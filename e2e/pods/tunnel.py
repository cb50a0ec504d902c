"""The tunnel part of the pods story: a Brain with ``spec.tunnel`` on a node with no route to
Cloudflare. The token is well-formed (what ``cloudflared tunnel token`` prints: base64 of a JSON
object with the account tag, tunnel id and secret) but names no real tunnel, so cloudflared gets as
far as it can here (edge discovery, which fails without DNS for the outside) and is restarted in
place by its image's entrypoint (images/cloudflared/supervise.sh).
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import uuid
from typing import Any

import yaml

SECRET = "team-tunnel"
KEY = "token"
#: the restart line of images/cloudflared/supervise.sh
RESTART = re.compile(r"cloudflared-supervise: cloudflared exited with code (\d+); restart (\d+) in")


def fake_token() -> str:
    body = {
        "a": secrets.token_hex(16),
        "t": str(uuid.uuid4()),
        "s": base64.b64encode(secrets.token_bytes(32)).decode(),
    }
    return base64.b64encode(json.dumps(body).encode()).decode()


def secret_manifest() -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Secret",
        # the owner's opt-in: the operator uses a Secret only for the use its label names (#26)
        "metadata": {"name": SECRET, "labels": {"brain.dev/secret-use": "tunnel-token"}},
        "stringData": {KEY: fake_token()},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def with_tunnel(brain_yaml: str) -> str:
    brain: dict[str, Any] = yaml.safe_load(brain_yaml)
    brain["spec"]["tunnel"] = {
        "tokenSecretRef": {"name": SECRET, "key": KEY},
        "hostname": "brain.example.com",
    }
    return yaml.safe_dump(brain, sort_keys=False)


def supervised_restarts(log: str) -> list[int]:
    """The exit codes of the cloudflared runs the entrypoint restarted, oldest first."""
    return [int(m.group(1)) for m in RESTART.finditer(log)]
