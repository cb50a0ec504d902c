"""A hostile spec.git.ref / spec.git.url never reaches git as an option (the real git CLI)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from brain.ingest.gitsrc import checkout

HOSTILE_REFS = ["--upload-pack=touch {m}", "-c", "-c core.sshCommand=touch {m}", "--output={m}"]
HOSTILE_URLS = [
    "--upload-pack=touch {m}",
    "ext::sh -c touch% {m}",
    "ssh://-oProxyCommand=touch {m}/x",
    "-oProxyCommand=touch {m}@host:repo",
    "file://{repo}",
    "http://example.com/r.git",
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(r)], check=True)
    (r / "a.md").write_text("hello\n")
    git = ["git", "-C", str(r), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    return r


@pytest.mark.parametrize("ref", HOSTILE_REFS)
def test_hostile_ref_refused_before_git_runs(repo: Path, tmp_path: Path, ref: str) -> None:
    marker = tmp_path / "MARKER"
    with pytest.raises(ValueError, match=r"spec\.git\.ref must be a branch, tag or commit id"):
        checkout(f"file://{repo}", ref.format(m=marker), tmp_path / "w", allow_local=True)
    assert not marker.exists()
    assert not (tmp_path / "w").exists()  # refused before anything was written


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_hostile_or_local_url_refused_in_a_cluster_job(repo: Path, tmp_path: Path, url: str) -> None:
    marker = tmp_path / "MARKER"
    with pytest.raises(ValueError, match=r"spec\.git\.url must be https://"):
        checkout(url.format(m=marker, repo=repo), "main", tmp_path / "w")
    assert not marker.exists()


def test_local_allowance_still_fetches(repo: Path, tmp_path: Path) -> None:
    co = checkout(f"file://{repo}", "main", tmp_path / "w", allow_local=True)
    assert (co.path / "a.md").read_text() == "hello\n" and len(co.commit) == 40


def test_token_refused_over_plain_http(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"spec\.git\.url: a token credential is sent only over https"):
        checkout("http://example.invalid/r.git", "main", tmp_path / "w", "secret-token-123", allow_local=True)
