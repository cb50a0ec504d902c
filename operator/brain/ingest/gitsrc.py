"""Fetching a repository at a ref with the git CLI: https or ssh (http://, file:// and local paths
only when the caller allows insecure URLs: the operator's test flag, brainctl on a laptop).

Credentials come from the Secret the operator mounts as `BRAIN_SOURCE_CREDENTIALS`: an SSH
private key (written to a 0600 file for `GIT_SSH_COMMAND`) or a token (sent as an HTTP header
through `GIT_CONFIG_*` variables, so it never appears in a process listing or a URL). Git's own
error text is scrubbed of the credential before it is shown to anyone.
"""

from __future__ import annotations

import base64
import re
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from brain.core.errors import BrainError
from brain.core.gitrefs import check_ref, check_url, is_local_path, is_plain_http
from brain.ingest.settings import git_base_env


class GitError(BrainError):
    code = "git_failed"
    status = 502


@dataclass(frozen=True)
class Checkout:
    path: Path
    commit: str


def normalize_url(
    url: str, *, allow_insecure: bool = False, allow_path: bool = False, field: str = "spec.git.url"
) -> str:
    """The checked URL; a plain local path (only with `allow_path`) becomes a file:// URL, so
    shallow fetches work the same way for it. Raises ValueError naming `field`."""
    check_url(url, field, allow_insecure=allow_insecure, allow_path=allow_path)
    if not is_local_path(url):
        return url
    return Path(url).expanduser().resolve().as_uri()


def _protocols(allow_insecure: bool) -> str:
    """GIT_ALLOW_PROTOCOL: every other transport (ext::, fd::, git://) is refused by git itself."""
    return "https:ssh:http:file" if allow_insecure else "https:ssh"


def _env(
    credentials: str | None,
    scratch: Path,
    remote: str,
    allow_insecure: bool,
    field: str,
    base: Mapping[str, str],
) -> dict[str, str]:
    """Git's environment: no prompts, only the allowed transports, redirects never followed (a
    redirect could carry the credential to another host), and the credential scoped to `remote`'s
    host: the token header is `http.<scheme://host/>.extraHeader`, never a global one."""
    env = {**base, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "LC_ALL": "C"}
    env["GIT_ALLOW_PROTOCOL"] = _protocols(allow_insecure)
    config = [("http.followRedirects", "false"), ("protocol.ext.allow", "never")]
    for i, (k, v) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = k, v
    env["GIT_CONFIG_COUNT"] = str(len(config))
    if not credentials:
        return env
    secret = credentials.strip()
    if secret.startswith("-----BEGIN"):
        key = scratch / "id_key"
        key.write_text(secret + "\n")
        key.chmod(0o600)
        env["GIT_SSH_COMMAND"] = (
            f"ssh -i {key} -o IdentitiesOnly=yes -o ProxyCommand=none -o StrictHostKeyChecking=accept-new "
            f"-o UserKnownHostsFile={scratch / 'known_hosts'}"
        )
    else:
        m = re.match(r"^https://([^/@]+)", remote)
        if not m:
            why = (
                "plain http:// would send it in clear text"
                if is_plain_http(remote)
                else "it is not an https:// URL"
            )
            raise ValueError(f"{field}: a token credential is sent only over https://, and {why}")
        user, _, token = secret.rpartition(":") if ":" in secret else ("x-access-token", "", secret)
        basic = base64.b64encode(f"{user or 'x-access-token'}:{token}".encode()).decode()
        n = len(config)
        env[f"GIT_CONFIG_KEY_{n}"] = f"http.https://{m.group(1)}/.extraHeader"
        env[f"GIT_CONFIG_VALUE_{n}"] = f"Authorization: Basic {basic}"
        env["GIT_CONFIG_COUNT"] = str(n + 1)
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


def checkout(
    url: str,
    ref: str,
    dest: Path | None = None,
    credentials: str | None = None,
    *,
    allow_insecure: bool = False,
    field: str = "spec.git",
    base_env: Mapping[str, str] | None = None,
) -> Checkout:
    """Fetch `ref` (branch, tag or commit) of `url` into `dest` (reused when it already holds a clone).

    `ref` and `url` are checked before any git runs (ValueError naming `<field>.ref` / `<field>.url`),
    and every value passed to git follows `--end-of-options` or `--`, so none is read as an option.
    `allow_insecure` (the operator's test flag, brainctl's local commands) also accepts http://,
    file:// and a plain local path (which only brainctl's manifests can name: the CRD refuses one).
    Git runs in `base_env` (None: this process's, brain.ingest.settings) with the overrides of `_env`."""
    check_ref(ref, f"{field}.ref")
    remote = normalize_url(
        url, allow_insecure=allow_insecure, allow_path=allow_insecure, field=f"{field}.url"
    )
    target = Path(dest) if dest else Path(tempfile.mkdtemp(prefix="brain-src-"))
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="brain-git-") as scratch:
        base = base_env if base_env is not None else git_base_env()
        env = _env(credentials, Path(scratch), remote, allow_insecure, f"{field}.url", base)
        if not (target / ".git").exists():
            _run(["init", "-q"], target, env, credentials)
            _run(["remote", "add", "--", "origin", remote], target, env, credentials)
        else:
            _run(["remote", "set-url", "--", "origin", remote], target, env, credentials)
        try:
            _run(["fetch", "-q", "--depth", "1", "--end-of-options", "origin", ref], target, env, credentials)
        except GitError:
            if not re.fullmatch(r"[0-9a-fA-F]{7,40}", ref):
                raise
            # a commit the server will not serve alone: fetch everything, then check it out
            _run(["fetch", "-q", "--end-of-options", "origin"], target, env, credentials)
            sha = _run(
                ["rev-parse", "--verify", "--end-of-options", f"{ref}^{{commit}}"], target, env, credentials
            )
            _run(["checkout", "-q", "--force", sha, "--"], target, env, credentials)  # hex: never an option
        else:
            _run(["checkout", "-q", "--force", "FETCH_HEAD", "--"], target, env, credentials)
        _run(["clean", "-q", "-fdx"], target, env, credentials)
        commit = _run(["rev-parse", "--verify", "--end-of-options", "HEAD"], target, env, credentials)
    return Checkout(target, commit)
