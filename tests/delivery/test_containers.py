"""The images as real containers, hardened as the chart runs them: read-only root, /tmp as the
only writable path, a non-root uid, no capabilities, no privilege escalation. The images are built
by the repo's own scripts (hack/images.sh, which starts Docker through hack/docker-up.sh; cached,
so a rerun is seconds). Containers live on an internal Docker network of this test's own: they
reach each other and this host, nothing beyond (the engine runs with --ip-forward=false and no
NAT). Every container and the network are removed, pass or fail.

What a user would notice is asserted: the database starts Postgres with pgvector; the embedder
answers /readyz and embeds, and refuses a model it does not hold; the gateway answers /readyz and a
chat through the echo upstream gets a stored memory injected; the jobs image has git and ssh and
runs its jobs' --help; the operator image runs its --help.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from .conftest import HACK

# The first test builds the images when the cache is cold (about 12 minutes here): past the 300 s default.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

UID = "65532:65532"
HARDENED = ["--read-only", "--tmpfs", "/tmp:rw,size=256m", "--cap-drop", "ALL"]
HARDENED += ["--security-opt", "no-new-privileges"]
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
MASTER = "sk-container-test-" + uuid.uuid4().hex
DB_PASSWORD = "pw-" + uuid.uuid4().hex[:12]
FACT = "The staging Postgres for payments listens on port 6543 behind pgbouncer."


def docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode:
        raise AssertionError(f"docker {' '.join(args[:3])}: {proc.stderr.strip()[-2000:]}")
    return proc


@pytest.fixture(scope="module")
def refs() -> Iterator[dict[str, str]]:
    """image → reference, built (or found in the layer cache) by hack/images.sh.

    An engine that was not running before is stopped afterwards (hack/docker-down.sh stops only one
    hack/docker-up.sh started), so a test run leaves no dockerd behind; images stay cached.
    """
    engine_was_up = shutil.which("docker") is not None and docker("info", check=False).returncode == 0
    try:
        yield _build()
    finally:
        if not engine_was_up:
            subprocess.run(["bash", str(HACK / "docker-down.sh")], capture_output=True, timeout=60)


def test_the_engine_holds_none_of_the_build_locks(refs: dict[str, str]) -> None:
    """dockerd starts from inside docker-up's lock, and often from inside images.sh's too. A lock
    descriptor it inherited stays held for the engine's life, and the next images.sh (the background
    build's, or the other worker's) waited on it until the run was killed (a fresh machine's CI)."""
    cache = Path(os.environ.get("BRAIN_CACHE") or Path.home() / ".cache" / "brain-operator")
    pidfile = Path(os.environ.get("DOCKER_DATA_ROOT") or cache / "docker-v1") / "run" / "dockerd.pid"
    if not pidfile.is_file():
        pytest.skip("this engine was not started by hack/docker-up.sh")
    fds = Path(f"/proc/{pidfile.read_text().strip()}/fd")
    ours = [Path(os.readlink(fd)) for fd in fds.iterdir()]
    # The scripts' locks sit in the cache's top folder (docker-up.lock, images-build.lock, apt.lock…);
    # the engine's own files (its data root is in the cache too) may end in .lock as well.
    assert not [path for path in ours if path.parent == cache and path.suffix == ".lock"], ours


def _build() -> dict[str, str]:
    proc = subprocess.run(["bash", str(HACK / "images.sh")], capture_output=True, text=True, timeout=1800)
    if proc.returncode:
        pytest.fail(
            "the images could not be built here (bash hack/images.sh; Docker comes from "
            f"hack/docker-up.sh):\n{proc.stderr.strip()[-3000:]}",
            pytrace=False,
        )
    out = {}
    for line in proc.stdout.splitlines():
        name, ref, *_ = line.split("\t")
        out[name] = ref
    assert set(out) == {"operator", "gateway", "embedder", "jobs", "database", "cloudflared"}, proc.stdout
    return out


@dataclass
class Box:
    """A running container: its id and its address on the test network."""

    id: str
    ip: str

    def logs(self) -> str:
        p = docker("logs", "--tail", "60", self.id, check=False)
        return p.stdout + p.stderr


@dataclass
class Lab:
    network: str
    boxes: list[str] = field(default_factory=list)

    def start(self, ref: str, *args: str, user: str = UID, env: dict[str, str] | None = None,
              flags: tuple[str, ...] = ()) -> Box:  # fmt: skip
        envs = [x for k, v in (env or {}).items() for x in ("-e", f"{k}={v}")]
        cid = docker(
            "run", "-d", "--network", self.network, "--user", user, *HARDENED, *envs, *flags, ref, *args
        ).stdout.strip()
        self.boxes.append(cid)
        ip = docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", cid)
        return Box(cid, ip.stdout.strip())

    def once(self, ref: str, *args: str, user: str = UID, entrypoint: str | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:  # fmt: skip
        """Run to completion, as a Job would (no network at all)."""
        ep = ["--entrypoint", entrypoint] if entrypoint else []
        return docker(
            "run", "--rm", "--network", "none", "--user", user, *HARDENED, *ep, ref, *args,
            check=False, timeout=timeout,
        )  # fmt: skip


@pytest.fixture(scope="module")
def lab(refs: dict[str, str]) -> Iterator[Lab]:
    name = f"brain-test-{uuid.uuid4().hex[:8]}"
    docker("network", "create", "--internal", name)
    lab = Lab(name)
    try:
        yield lab
    finally:
        if lab.boxes:
            docker("rm", "-f", "-v", *lab.boxes, check=False)
        docker("network", "rm", name, check=False)


def wait_for(what: str, probe: Callable[[], bool], box: Box, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if probe():
                return
        except (httpx.HTTPError, OSError):
            pass
        state = docker("inspect", "-f", "{{.State.Running}}", box.id, check=False).stdout.strip()
        if state != "true":
            pytest.fail(f"{what}: the container exited:\n{box.logs()}")
        time.sleep(0.5)
    pytest.fail(f"{what}: not ready in {timeout:.0f}s:\n{box.logs()}")


def healthy(url: str) -> Callable[[], bool]:
    def probe() -> bool:
        health = httpx.get(f"{url}/brain/v1/health", timeout=10).json()
        return bool(health["database"] == "ok" and health["embedder"] == "ok")

    return probe


def http_ok(url: str) -> Callable[[], bool]:
    return lambda: httpx.get(url, timeout=2).status_code == 200


# ------------------------------------------------------------------------------------ images


@pytest.mark.parametrize("image", ["operator", "gateway", "embedder", "jobs", "database", "cloudflared"])
def test_every_image_is_non_root_and_labelled(refs: dict[str, str], image: str) -> None:
    cfg = json.loads(docker("image", "inspect", refs[image]).stdout)[0]["Config"]
    assert cfg["User"] in {UID, "999:999"} and not cfg["User"].startswith("0"), cfg["User"]
    labels = cfg["Labels"] or {}
    for key in ("title", "source", "licenses", "version", "revision", "created"):
        assert labels.get(f"org.opencontainers.image.{key}"), key


def test_root_filesystem_is_read_only_and_tmp_writable(refs: dict[str, str], lab: Lab) -> None:
    code = "open('/tmp/ok', 'w').write('x'); open('/opt/venv/x', 'w')"
    proc = lab.once(refs["gateway"], "-c", code, entrypoint="python")
    assert proc.returncode != 0 and "Read-only file system" in proc.stderr, proc.stderr


def test_operator_image_runs_its_help(refs: dict[str, str], lab: Lab) -> None:
    proc = lab.once(refs["operator"], "--help")
    assert proc.returncode == 0, proc.stderr
    assert "usage: python -m brain_operator" in proc.stdout and "--peering" in proc.stdout


def test_jobs_image_has_git_and_ssh_and_runs_its_jobs(refs: dict[str, str], lab: Lab) -> None:
    git = lab.once(refs["jobs"], "--version", entrypoint="git")
    assert git.returncode == 0 and git.stdout.startswith("git version"), git.stderr
    ssh = lab.once(refs["jobs"], "-V", entrypoint="ssh")
    assert ssh.returncode == 0 and "OpenSSH" in ssh.stderr, ssh.stderr
    for job in ("brain.jobs.ingest", "brain.jobs.distill", "brain.jobs.digest", "brain.jobs.reindex"):
        proc = lab.once(refs["jobs"], job, "--help")
        assert proc.returncode == 0 and "usage:" in proc.stdout, f"{job}: {proc.stderr[-1500:]}"
    # A git clone as uid 65532 on the read-only root, into /tmp, as the ingest Job does.
    clone = lab.once(
        refs["jobs"], "-c", "git init -q /tmp/r && git -C /tmp/r -c user.email=a@b -c user.name=a "
        "commit -q --allow-empty -m one && git clone -q /tmp/r /tmp/c && git -C /tmp/c log --oneline",
        entrypoint="sh",
    )  # fmt: skip
    assert clone.returncode == 0 and "one" in clone.stdout, clone.stderr


# --------------------------------------------------------------------------------- database


@pytest.fixture(scope="module")
def database(refs: dict[str, str], lab: Lab) -> Box:
    box = lab.start(
        refs["database"],
        user="999:999",
        env={"POSTGRES_USER": "brain", "POSTGRES_PASSWORD": DB_PASSWORD, "POSTGRES_DB": "brain"},
        flags=(
            "--tmpfs", "/var/lib/postgresql/data:rw,uid=999,gid=999,mode=0700",
            "--tmpfs", "/var/run/postgresql:rw,uid=999,gid=999",
        ),
    )  # fmt: skip

    def ready() -> bool:
        probe = ["pg_isready", "-h", "127.0.0.1", "-U", "brain", "-d", "brain"]  # the StatefulSet's probe
        return docker("exec", box.id, *probe, check=False).returncode == 0

    wait_for("database", ready, box, timeout=120)
    return box


def dsn(box: Box) -> str:
    return f"postgresql://brain:{DB_PASSWORD}@{box.ip}:5432/brain"


def test_database_serves_pgvector(database: Box) -> None:
    import asyncpg

    async def check() -> tuple[str, float]:
        conn = await asyncpg.connect(dsn(database), timeout=10)
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            version = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            distance = await conn.fetchval("SELECT '[1,0,0]'::vector <=> '[0,1,0]'::vector")
            return str(version), float(distance)
        finally:
            await conn.close()

    version, distance = asyncio.run(check())
    assert tuple(int(x) for x in version.split(".")[:2]) >= (0, 8), version  # hnsw.iterative_scan
    assert distance == pytest.approx(1.0)
    wrong = docker("exec", database.id, "psql", "-h", database.ip, "-U", "brain", "-d", "brain", "-c", "select 1",
                   check=False)  # fmt: skip
    assert wrong.returncode != 0, "password auth over TCP"


# --------------------------------------------------------------------------------- embedder


@pytest.fixture(scope="module")
def embedder(refs: dict[str, str], lab: Lab) -> Box:
    box = lab.start(refs["embedder"], "--host", "0.0.0.0", "--port", "8080", "--model", MINILM)
    wait_for("embedder", http_ok(f"http://{box.ip}:8080/readyz"), box)
    return box


def test_embedder_is_ready_and_embeds(embedder: Box) -> None:
    ready = httpx.get(f"http://{embedder.ip}:8080/readyz", timeout=5).json()
    assert ready == {"status": "ready", "model": MINILM, "dim": 384}
    rsp = httpx.post(
        f"http://{embedder.ip}:8080/v1/embeddings", json={"input": ["hello", "the staging db"]}, timeout=30
    )
    assert rsp.status_code == 200, rsp.text
    vectors = [d["embedding"] for d in rsp.json()["data"]]
    assert len(vectors) == 2 and all(len(v) == 384 for v in vectors)
    assert abs(sum(x * x for x in vectors[0]) - 1.0) < 1e-3  # normalised, as MiniLM's pooling does


def test_embedder_refuses_a_model_it_does_not_hold(refs: dict[str, str], lab: Lab) -> None:
    proc = lab.once(refs["embedder"], "--host", "0.0.0.0", "--model", "BAAI/bge-small-en-v1.5", timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "'BAAI/bge-small-en-v1.5'" in proc.stderr and f"holds only '{MINILM}'" in proc.stderr


# ---------------------------------------------------------------------------------- gateway


@pytest.fixture(scope="module")
def gateway(refs: dict[str, str], lab: Lab, database: Box, embedder: Box, tmp_path_factory: Any) -> Box:
    from brain_operator.api import BrainSpec
    from brain_operator.render.litellm_config import render_litellm_config

    # The echo upstream: brain.local.fakeupstream, shipped in the gateway image, as its own container.
    fake = lab.start(refs["gateway"], "-m", "brain.local.fakeupstream", "--host", "0.0.0.0", "--port", "4001",
                     flags=("--entrypoint", "python"))  # fmt: skip
    wait_for("echo upstream", http_ok(f"http://{fake.ip}:4001/healthz"), fake, timeout=60)
    spec = BrainSpec.model_validate(
        {
            "gateway": {
                "models": [{"name": "echo", "model": "openai/echo", "apiBase": f"http://{fake.ip}:4001/v1"}]
            },
            "embedding": {"model": MINILM, "dim": 384},
        }
    )
    config = tmp_path_factory.mktemp("gateway-config") / "litellm.yaml"
    config.write_text(yaml.safe_dump(render_litellm_config(spec, []), sort_keys=False))
    config.chmod(0o644)
    config.parent.chmod(0o755)
    box = lab.start(
        refs["gateway"],
        env={
            "BRAIN_NAME": "team",
            "BRAIN_DATABASE_URL": dsn(database),
            "BRAIN_EMBEDDER_URL": f"http://{embedder.ip}:8080",
            "BRAIN_EMBEDDING_MODEL": MINILM,
            "BRAIN_EMBEDDING_DIM": "384",
            "BRAIN_MASTER_KEY": MASTER,
        },
        flags=("-v", f"{Path(config).parent}:/etc/brain:ro"),
    )
    wait_for("gateway", http_ok(f"http://{box.ip}:4000/readyz"), box, timeout=300)
    return box


def test_gateway_chat_gets_a_stored_memory_injected(gateway: Box) -> None:
    url = f"http://{gateway.ip}:4000"
    auth = {"authorization": f"Bearer {MASTER}"}
    # /readyz does not wait for the database; health reads the index's counts within 3 s, which a
    # cold Postgres container on a loaded machine missed once (CI: "database": "down", then fine).
    # What counts is that the stack gets there, as a probe would see it, and then serves memory.
    wait_for("database and embedder ok in /brain/v1/health", healthy(url), gateway, timeout=120)
    ns = f"test:{uuid.uuid4().hex[:8]}"
    note = httpx.post(
        f"{url}/brain/v1/memories",
        headers=auth,
        json={"body": FACT, "namespace": ns, "kind": "fact"},
        timeout=30,
    )
    assert note.status_code == 201, note.text
    body = {
        "model": "echo",
        "messages": [{"role": "user", "content": "which port does payments staging use?"}],
    }
    chat = httpx.post(
        f"{url}/v1/chat/completions", headers={**auth, "x-brain-namespaces": ns}, json=body, timeout=60
    )
    assert chat.status_code == 200, chat.text
    echoed = chat.json()["choices"][0]["message"]["content"]
    assert FACT in echoed, echoed[:2000]  # the echo upstream received the injected memory
