"""A hostile spec.git.ref / spec.git.url never reaches git as an option (the real git CLI, git 2.39+),
and a cluster job refuses http:// and file:// unless the operator's test flag told it otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from brain.core.contract import Env
from brain.core.errors import BrainError
from brain.embedder.model import Embedder
from brain.ingest.gitsrc import GitError, checkout
from brain.ingest.source import parse_source
from brain.jobs.common import Progress
from brain.jobs.ingest import run_ingest
from brain.store import Store

#: Each would run `touch MARKER` (or write it) if it reached git as an option or a transport.
HOSTILE_REFS = ["--upload-pack=touch {m}", "-c", "-c core.sshCommand=touch {m}", "--output={m}"]
HOSTILE_URLS = [
    "--upload-pack=touch {m}",
    "ext::sh -c touch% {m}",
    "ssh://-oProxyCommand=touch {m}/x",
    "-oProxyCommand=touch {m}@host:repo",
    "fd::17",
]
#: The CRD (RE2: `$` is the end of the text) refuses these; the job's check used Python's `$`, which
#: also matches before a final newline, and let them through to git (session 14).
TRAILING_NEWLINE = [("ref", "main\n"), ("url", "file://{repo}\n"), ("url", "{repo}\n")]
#: (url, what the refusal says): http:// and file:// pass the CRD's shape, a local path does not.
INSECURE_URLS = [
    ("file://{repo}", r"spec\.git\.url is refused: file:// .*--allow-insecure-git-urls"),
    ("http://example.invalid/r.git", r"spec\.git\.url is refused: http:// .*clear text.*--allow-insecure"),
    ("{repo}", r"spec\.git\.url must be https://host/path"),
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


def test_the_old_command_line_did_run_the_ref(repo: Path, tmp_path: Path) -> None:
    """Why this file exists: without `--end-of-options`, git 2.39 runs a ref of `--upload-pack=…`."""
    marker = tmp_path / "MARKER"
    work = tmp_path / "old"
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    subprocess.run(["git", "-C", str(work), "remote", "add", "origin", f"file://{repo}"], check=True)
    subprocess.run(
        ["git", "-C", str(work), "fetch", "-q", "--depth", "1", "origin", f"--upload-pack=touch {marker}"],
        capture_output=True,
    )
    assert marker.exists()


@pytest.mark.parametrize("ref", HOSTILE_REFS)
def test_hostile_ref_refused_before_git_runs(repo: Path, tmp_path: Path, ref: str) -> None:
    marker = tmp_path / "MARKER"
    with pytest.raises(ValueError, match=r"spec\.git\.ref must be a branch, tag or commit id"):
        checkout(f"file://{repo}", ref.format(m=marker), tmp_path / "w", allow_insecure=True)
    assert not marker.exists()
    assert not (tmp_path / "w").exists()  # refused before anything was written


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_hostile_url_refused_even_with_the_insecure_allowance(repo: Path, tmp_path: Path, url: str) -> None:
    marker = tmp_path / "MARKER"
    with pytest.raises(ValueError, match=r"spec\.skills\.url must be https://host/path"):
        checkout(url.format(m=marker), "main", tmp_path / "w", allow_insecure=True, field="spec.skills")
    assert not marker.exists()


@pytest.mark.parametrize(("what", "value"), TRAILING_NEWLINE, ids=["ref", "file-url", "local-path"])
def test_a_trailing_newline_is_refused_as_the_crd_refuses_it(
    repo: Path, tmp_path: Path, what: str, value: str
) -> None:
    ref, url = ("main", value.format(repo=repo)) if what == "url" else (value, f"file://{repo}")
    with pytest.raises(ValueError, match=rf"spec\.git\.{what} must be"):
        checkout(url, ref, tmp_path / "w", allow_insecure=True)
    assert not (tmp_path / "w").exists()
    with pytest.raises(ValueError, match=rf"spec\.git\.{what} must be"):
        parse_source({"name": "s", "spec": {"git": {"url": url, "ref": ref}}})


@pytest.mark.parametrize(("url", "says"), INSECURE_URLS)
def test_insecure_url_refused_by_default(repo: Path, tmp_path: Path, url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        checkout(url.format(repo=repo), "main", tmp_path / "w")
    assert not (tmp_path / "w").exists()


def test_insecure_allowance_still_fetches_a_branch_and_a_commit(repo: Path, tmp_path: Path) -> None:
    co = checkout(f"file://{repo}", "main", tmp_path / "w", allow_insecure=True)
    assert (co.path / "a.md").read_text() == "hello\n" and len(co.commit) == 40
    again = checkout(str(repo), co.commit[:12], tmp_path / "w2", allow_insecure=True)  # local path, short id
    assert again.commit == co.commit


def test_token_refused_over_plain_http(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"spec\.git\.url: a token credential is sent only over https"):
        checkout(
            "http://example.invalid/r.git", "main", tmp_path / "w", "secret-token-123", allow_insecure=True
        )


def test_token_header_is_scoped_to_the_source_host() -> None:
    """The token rides on `http.https://<host>/.extraHeader`: git sends it to that host only, and with
    http.followRedirects=false a redirect elsewhere is not followed at all."""
    from brain.ingest.gitsrc import _env

    env = _env(
        "tok-123456", Path("/nonexistent"), "https://git.example.com/team/r.git", False, "spec.git.url", {}
    )
    config = {
        env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"] for i in range(int(env["GIT_CONFIG_COUNT"]))
    }
    assert config["http.followRedirects"] == "false"
    assert set(k for k in config if k.endswith("extraHeader")) == {
        "http.https://git.example.com/.extraHeader"
    }
    assert env["GIT_ALLOW_PROTOCOL"] == "https:ssh"


def test_the_job_names_the_field_and_leaves_no_marker(repo: Path, tmp_path: Path) -> None:
    """`python -m brain.jobs.ingest` as the CronJob runs it, with a source document whose ref would run
    a command: exit 1, the summary line names spec.git.ref, the command never ran."""
    marker = tmp_path / "MARKER"
    doc = {
        "name": "hostile",
        "brain": "team",
        "spec": {"git": {"url": f"file://{repo}", "ref": f"--upload-pack=touch {marker}"}},
    }
    source = tmp_path / "source.json"
    source.write_text(json.dumps(doc))
    env = {Env.GIT_ALLOW_INSECURE_URLS: "1", Env.DATABASE_URL: "postgresql://nobody@127.0.0.1:1/none"}
    proc = subprocess.run(
        [sys.executable, "-m", "brain.jobs.ingest", "--source-file", str(source)],
        capture_output=True,
        text=True,
        env={**_base_env(), **env},
        timeout=120,
    )
    assert not marker.exists()
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode != 0 and "spec.git.ref must be a branch, tag or commit id" in summary["error"], (
        proc.stdout,
        proc.stderr,
    )


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != Env.GIT_ALLOW_INSECURE_URLS}


async def test_a_cluster_job_refuses_file_urls_and_records_why(
    store: Store, embedder: Embedder, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without BRAIN_GIT_ALLOW_INSECURE_URLS (an operator without the test flag) the import fails with
    the field named, in the job_runs row the brain's status reads, and nothing is imported."""
    monkeypatch.delenv(Env.GIT_ALLOW_INSECURE_URLS, raising=False)
    spec = parse_source({"name": "local-src", "spec": {"git": {"url": f"file://{repo}"}}})
    with pytest.raises(BrainError, match=r"spec\.git\.url is refused: file:// and local paths"):
        await run_ingest(store, embedder, spec, workdir=tmp_path / "w", progress=Progress(enabled=False))
    row = await store.pool_for_tests.fetchrow(
        "SELECT status, summary FROM job_runs WHERE job = 'ingest' AND source = 'local-src' ORDER BY id DESC"
    )
    assert row is not None and row["status"] == "failed"
    assert "spec.git.url is refused" in json.loads(row["summary"])["error"]
    assert not (tmp_path / "w").exists()


def test_a_redirect_to_another_host_is_not_followed(tmp_path: Path) -> None:
    """The real git against two local HTTP servers: the source answers every request with a redirect
    to the other; git stops there and the other never sees a request (so no credential either)."""
    import http.server
    import threading

    seen: list[str] = []

    class Other(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Other)
    target = f"http://localhost:{other.server_address[1]}"

    class Source(Other):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", target + self.path)
            self.end_headers()

    source = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Source)
    for server in (other, source):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{source.server_address[1]}/team.git"
        with pytest.raises(GitError, match="returned error: 302"):
            checkout(url, "main", tmp_path / "w", allow_insecure=True)
    finally:
        source.shutdown()
        other.shutdown()
    assert seen == []
