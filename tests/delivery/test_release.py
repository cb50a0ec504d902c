"""Releases (#29): one version for the package, the chart and the images; `make release` cuts one
as a platform team would pin it; every recorded release can be rebuilt from its commit."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from brain import __version__
from brain_operator.render.common import DEFAULT_IMAGES

from .conftest import CHART, ROOT

SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
RELEASES = ROOT / "hack" / "releases.txt"


def _releases() -> list[tuple[str, str]]:
    lines = [
        line.split()
        for line in RELEASES.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return [(tag, commit) for tag, commit, *_ in lines]


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def test_the_package_the_chart_and_the_images_carry_one_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert SEMVER.match(__version__), __version__
    assert chart["version"] == chart["appVersion"] == __version__, chart
    ours = {k: v for k, v in DEFAULT_IMAGES.items() if v.startswith("ghcr.io/brain-operator/")}
    assert ours and all(ref.endswith(f":{__version__}") for ref in ours.values()), ours
    install = (ROOT / "samples" / "operator" / "install.yaml").read_text()
    assert f"image: ghcr.io/brain-operator/operator:{__version__}" in install
    # main carries the next release: never behind the last one cut
    assert _key(__version__) >= max(_key(tag[1:]) for tag, _ in _releases())


def test_every_recorded_release_is_a_commit_whose_chart_says_its_version() -> None:
    releases = _releases()
    assert releases and releases[0][0] == "v0.1.0"
    for tag, commit in releases:
        assert re.fullmatch(r"[0-9a-f]{40}", commit), (tag, commit)
        chart = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{commit}:charts/brain-operator/Chart.yaml"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert yaml.safe_load(chart)["version"] == tag[1:], (tag, commit)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A clone of HEAD with this work tree's release files on top, committed (the script wants a
    clean tree), so the test runs the script as it is now, not as it was last committed."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
    for rel in ("hack/release.sh", "hack/releases.txt", "CHANGELOG.md", "operator/brain/__init__.py",
                "charts/brain-operator/Chart.yaml", "operator/brain_operator/__init__.py",
                "operator/brain_operator/render/common.py", "pyproject.toml"):  # fmt: skip
        shutil.copy(ROOT / rel, repo / rel)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "the work tree"], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.name", "t"], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.email", "t@example.invalid"], check=True)
    return repo


def _release(repo: Path, helm_bin: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "hack/release.sh", *args], cwd=repo, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PY": sys.executable, "HELM": helm_bin, "IMAGES": "0",
             "BRAIN_CACHE": str(repo.parent / "cache"), **env},
    )  # fmt: skip


def _show(repo: Path, rev: str, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"{rev}:{path}"], capture_output=True, text=True, check=True
    ).stdout


def test_make_release_sets_one_version_tags_records_and_packages(clone: Path, helm_bin: str) -> None:
    proc = _release(clone, helm_bin, VERSION="9.9.9")
    assert proc.returncode == 0, proc.stderr
    tagged = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "v9.9.9^{commit}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert '__version__ = "9.9.9"' in _show(clone, tagged, "operator/brain/__init__.py")
    chart = yaml.safe_load(_show(clone, tagged, "charts/brain-operator/Chart.yaml"))
    assert chart["version"] == chart["appVersion"] == "9.9.9"
    assert "image: ghcr.io/brain-operator/operator:9.9.9" in _show(
        clone, tagged, "samples/operator/install.yaml"
    )
    changelog = _show(clone, tagged, "CHANGELOG.md")
    unreleased, _, released = changelog.partition("## 9.9.9 (")
    assert unreleased.rstrip().endswith("## Unreleased"), unreleased[-200:]  # a fresh, empty one
    section = released.split("\n## ", 1)[0]
    # what "Unreleased" said is now the release's: its first entry, whatever it is today
    ours = (ROOT / "CHANGELOG.md").read_text().partition("## Unreleased\n")[2].split("\n## ", 1)[0]
    first = next(line for line in ours.splitlines() if line.startswith("- "))[:40]
    assert first in section and "### Commits" in section and "- the work tree (" in section
    assert "## 0.1.0 (" in released  # the older sections stay
    last = (clone / "hack" / "releases.txt").read_text().splitlines()[-1].split()
    assert last[:2] == ["v9.9.9", tagged], last
    assert subprocess.run(["git", "-C", str(clone), "status", "--porcelain"], capture_output=True,
                          text=True, check=True).stdout == ""  # fmt: skip
    packaged = clone / "dist" / "brain-operator-9.9.9.tgz"
    shown = subprocess.run(
        [helm_bin, "show", "chart", str(packaged)], capture_output=True, text=True, check=True
    )
    assert yaml.safe_load(shown.stdout)["appVersion"] == "9.9.9"

    again = _release(clone, helm_bin, VERSION="9.9.9")
    assert again.returncode != 0 and "v9.9.9 exists already" in again.stderr, again.stderr


@pytest.mark.parametrize(
    ("version", "said"),
    [
        ("1.2", "VERSION must be MAJOR.MINOR.PATCH"),
        ("v1.2.3", "VERSION must be MAJOR.MINOR.PATCH"),
        ("", "VERSION must be MAJOR.MINOR.PATCH"),
        ("0.0.9", "is not newer than the last release, v"),
    ],
)
def test_a_bad_version_is_refused_naming_what_is_accepted(
    clone: Path, helm_bin: str, version: str, said: str
) -> None:
    head = _show(clone, "HEAD", "operator/brain/__init__.py")
    proc = _release(clone, helm_bin, VERSION=version)
    assert proc.returncode != 0 and said in proc.stderr, proc.stderr
    assert (clone / "operator" / "brain" / "__init__.py").read_text() == head  # nothing was changed


def test_a_release_is_refused_on_a_dirty_tree(clone: Path, helm_bin: str) -> None:
    (clone / "README.md").write_text("local edit\n")
    proc = _release(clone, helm_bin, VERSION="9.9.9")
    assert proc.returncode != 0 and "the work tree has changes" in proc.stderr, proc.stderr


def test_an_earlier_release_is_rebuilt_from_its_commit(clone: Path, helm_bin: str) -> None:
    tag, commit = _releases()[0]
    proc = _release(clone, helm_bin, "--rebuild", tag)
    assert proc.returncode == 0, proc.stderr
    tree = Path(proc.stdout.strip().splitlines()[-1])
    assert subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip() == commit  # fmt: skip
    assert (tree / "dist" / f"brain-operator-{tag[1:]}.tgz").is_file()
    unknown = _release(clone, helm_bin, "--rebuild", "v7.7.7")
    known = " ".join(t for t, _ in _releases())
    assert (
        unknown.returncode != 0 and f"v7.7.7 is not in hack/releases.txt (known: {known})" in unknown.stderr
    )
