"""Fetching a repository at a ref with the git CLI: https, ssh, a local path or file://.

Credentials come from the Secret the operator mounts as `BRAIN_SOURCE_CREDENTIALS`: an SSH
private key (written to a 0600 file for `GIT_SSH_COMMAND`) or a token (sent as an HTTP header
through `GIT_CONFIG_*` variables, so it never appears in a process listing or a URL). Git's own
error text is scrubbed of the credential before it is shown to anyone.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from brain.core.errors import BrainError


class GitError(BrainError):
    code = "git_failed"
    status = 502


@dataclass(frozen=True)
class Checkout:
    path: Path
    commit: str


def normalize_url(url: str) -> str:
    """A plain local path becomes a file:// URL, so shallow fetches work the same way for it."""
    if re.match(r"^(https?|ssh|file)://", url) or re.match(r"^[\w.-]+@[\w.-]+:", url):
        return url
    return Path(url).expanduser().resolve().as_uri()


def _env(credentials: str | None, scratch: Path) -> dict[str, str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "LC_ALL": "C"}
    if not credentials:
        return env
    secret = credentials.strip()
    if secret.startswith("-----BEGIN"):
        key = scratch / "id_key"
        key.write_text(secret + "\n")
        key.chmod(0o600)
        env["GIT_SSH_COMMAND"] = (
            f"ssh -i {key} -o IdentitiesOnly=yes -o StrictHostKeyChecking=accept-new "
            f"-o UserKnownHostsFile={scratch / 'known_hosts'}"
        )
    else:
        user, _, token = secret.rpartition(":") if ":" in secret else ("x-access-token", "", secret)
        basic = base64.b64encode(f"{user or 'x-access-token'}:{token}".encode()).decode()
        env.update(
            {
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "http.extraHeader",
                "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
            }
        )
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str], secret: str | None) -> str:
    p = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        msg = (p.stderr or p.stdout).strip().splitlines()
        text = "; ".join(m for m in msg if m)[-500:] or f"exit {p.returncode}"
        if secret:
            for part in {secret.strip(), *secret.strip().split(":")}:
                if len(part) >= 6:
                    text = text.replace(part, "«REDACTED»")
        raise GitError(f"git {args[0]} failed: {text}")
    return p.stdout.strip()


def checkout(url: str, ref: str, dest: Path | None = None, credentials: str | None = None) -> Checkout:
    """Fetch `ref` (branch, tag or commit) of `url` into `dest` (reused when it already holds a clone)."""
    target = Path(dest) if dest else Path(tempfile.mkdtemp(prefix="brain-src-"))
    target.mkdir(parents=True, exist_ok=True)
    remote = normalize_url(url)
    with tempfile.TemporaryDirectory(prefix="brain-git-") as scratch:
        env = _env(credentials, Path(scratch))
        if not (target / ".git").exists():
            _run(["init", "-q"], target, env, credentials)
            _run(["remote", "add", "origin", remote], target, env, credentials)
        else:
            _run(["remote", "set-url", "origin", remote], target, env, credentials)
        try:
            _run(["fetch", "-q", "--depth", "1", "origin", ref], target, env, credentials)
        except GitError:
            if not re.fullmatch(r"[0-9a-fA-F]{7,40}", ref):
                raise
            _run(["fetch", "-q", "origin"], target, env, credentials)  # a commit the server won't serve alone
            _run(["checkout", "-q", "--force", ref], target, env, credentials)
        else:
            _run(["checkout", "-q", "--force", "FETCH_HEAD"], target, env, credentials)
        _run(["clean", "-q", "-fdx"], target, env, credentials)
        commit = _run(["rev-parse", "HEAD"], target, env, credentials)
    return Checkout(target, commit)
