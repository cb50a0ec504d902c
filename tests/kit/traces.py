"""Pytest plugin: a real OpenTelemetry Collector on loopback, so tests send OTLP and read the spans back.

Register it once, in tests/conftest.py (``pytest_plugins = [..., "tests.kit.traces"]``).

The collector is ``otelcol-brain`` (hack/otelcol: the OTLP receiver over HTTP and gRPC, the batch
processor, the file and debug exporters, collector v0.161.0), built once per machine by
hack/otelcol-build.sh (cache folder, flock: parallel workers and hack/prebuild.sh build it once).

Fixtures
- ``otel_collector`` (function): a started :class:`Collector` of its own (free ports, its own
  files under ``tmp_path``), stopped afterwards. Function-scoped: each test reads only its own
  spans, and may stop, restart or pause it. It starts in well under a second once built.

The one-time build runs in ``pytest_collection_modifyitems`` when a collected test uses the
fixture, so it is not charged to any test's pytest-timeout. A failed build makes every test that
uses the fixture ERROR (never skip: tests/kit/skip_budget.py), with the build's output.

:class:`Collector` is usable without pytest too (``with Collector(binary, folder) as c: ...``).
"""

from __future__ import annotations

import base64
import collections
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypedDict

import pytest
import yaml

from brain.local.devdb import free_port

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "hack" / "otelcol-build.sh"
_FIXTURES = {"otel_collector"}
#: what the collection-time build gave: the binary's path, or the build's failure
_BUILT = pytest.StashKey["Path | CollectorBuildError"]()

SPAN_KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
STATUS_CODES = {0: "UNSET", 1: "OK", 2: "ERROR"}


class CollectorError(RuntimeError):
    """The collector did not start, or did not stop."""


class CollectorBuildError(CollectorError):
    """hack/otelcol-build.sh failed."""


class Span(TypedDict):
    """One span as the collector wrote it, flattened (ids hex, attributes as Python values)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None  # None for a root span
    name: str
    service: str | None  # the resource's service.name
    attributes: dict[str, Any]
    status: str  # UNSET, OK or ERROR
    status_message: str
    kind: str  # UNSPECIFIED, INTERNAL, SERVER, CLIENT, PRODUCER or CONSUMER
    resource: dict[str, Any]
    scope: str
    start_time_unix_nano: int
    end_time_unix_nano: int


def build_collector() -> Path:
    """The otelcol-brain binary, built first if this machine has none (hack/otelcol-build.sh)."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True)
    sys.stderr.write(proc.stderr)
    path = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode != 0 or not path or not os.access(path, os.X_OK):
        raise CollectorBuildError(
            f"hack/otelcol-build.sh exited {proc.returncode} (stdout {proc.stdout!r}):\n{proc.stderr[-4000:]}"
        )
    return Path(path)


def _any_value(v: dict[str, Any]) -> Any:
    """An OTLP/JSON AnyValue as a Python value."""
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        return int(v["intValue"])  # a string in OTLP/JSON (int64)
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "arrayValue" in v:
        return [_any_value(x) for x in v["arrayValue"].get("values", [])]
    if "kvlistValue" in v:
        return _attributes(v["kvlistValue"].get("values", []))
    if "bytesValue" in v:
        return base64.b64decode(v["bytesValue"])
    return None  # an empty AnyValue


def _attributes(kvs: list[dict[str, Any]]) -> dict[str, Any]:
    return {kv["key"]: _any_value(kv.get("value", {})) for kv in kvs}


def _enum(value: Any, names: dict[int, str], prefix: str) -> str:
    if isinstance(value, str):  # a proto enum name, e.g. SPAN_KIND_SERVER
        return value.removeprefix(prefix)
    return names.get(int(value or 0), str(value))


def parse_traces(request: dict[str, Any]) -> list[Span]:
    """The spans of one OTLP/JSON ExportTraceServiceRequest (one line of the file exporter)."""
    out: list[Span] = []
    for rs in request.get("resourceSpans", []):
        resource = _attributes(rs.get("resource", {}).get("attributes", []))
        service = resource.get("service.name")
        for ss in rs.get("scopeSpans", []):
            scope = ss.get("scope", {}).get("name", "")
            for s in ss.get("spans", []):
                status = s.get("status", {})
                out.append(
                    Span(
                        trace_id=s.get("traceId", ""),
                        span_id=s.get("spanId", ""),
                        parent_span_id=s.get("parentSpanId") or None,
                        name=s.get("name", ""),
                        service=service if isinstance(service, str) else None,
                        attributes=_attributes(s.get("attributes", [])),
                        status=_enum(status.get("code", 0), STATUS_CODES, "STATUS_CODE_"),
                        status_message=status.get("message", ""),
                        kind=_enum(s.get("kind", 0), SPAN_KINDS, "SPAN_KIND_"),
                        resource=resource,
                        scope=scope,
                        start_time_unix_nano=int(s.get("startTimeUnixNano", 0)),
                        end_time_unix_nano=int(s.get("endTimeUnixNano", 0)),
                    )
                )
    return out


def _listening_inodes(pid: int) -> set[str]:
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _hex_addr(h: str) -> str:
    """/proc/net/tcp{,6}'s address: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(h)
    swapped = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(swapped))


class Collector:
    """One otelcol-brain process on 127.0.0.1, writing the spans it receives to a JSON-lines file.

    ``endpoint`` is the OTLP/HTTP base URL (POST ``/v1/traces``), ``grpc_endpoint`` the OTLP/gRPC
    ``host:port`` (None with ``grpc=False``). Metrics and logs are accepted too (so an SDK sending
    them gets no 404) and go to the debug exporter, which the quiet log level keeps silent. The
    collector's own telemetry: logs at ``log_level`` to ``log_path``, metrics off (nothing listens
    but the receivers, on loopback; :meth:`listening` shows it). The ports stay the same across
    :meth:`stop` and :meth:`start`, and the spans file is appended to, so a restart keeps the
    spans already written.
    """

    def __init__(
        self,
        binary: str | os.PathLike[str],
        folder: str | os.PathLike[str],
        *,
        grpc: bool = True,
        host: str = "127.0.0.1",
        flush_interval: str = "50ms",
        batch_timeout: str = "50ms",
        log_level: str = "warn",
    ) -> None:
        self.binary = Path(binary)
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.config_path = self.folder / "otelcol.yaml"
        self.spans_path = self.folder / "spans.jsonl"
        self.log_path = self.folder / "otelcol.log"
        self.grpc = grpc
        # the receivers' address: loopback, or the host's end of the real node's veth, which pods
        # reach (e2e/pods), never a wildcard
        self.host = host
        self.flush_interval = flush_interval
        self.batch_timeout = batch_timeout
        self.log_level = log_level
        self.http_port = 0
        self.grpc_port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._paused = False
        self._pick_ports()

    # -- addresses -------------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The OTLP/HTTP base URL, e.g. ``http://127.0.0.1:PORT`` (traces at ``/v1/traces``)."""
        return f"http://{self.host}:{self.http_port}"

    @property
    def traces_url(self) -> str:
        return f"{self.endpoint}/v1/traces"

    @property
    def grpc_endpoint(self) -> str | None:
        return f"{self.host}:{self.grpc_port}" if self.grpc_port else None

    def env(self) -> dict[str, str]:
        """The standard SDK variables that point an OTLP/HTTP exporter at this collector."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _pick_ports(self) -> None:
        self.http_port = free_port()
        self.grpc_port = free_port() if self.grpc else None
        while self.grpc_port == self.http_port:
            self.grpc_port = free_port()

    # -- config ------------------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        protocols: dict[str, Any] = {"http": {"endpoint": f"{self.host}:{self.http_port}"}}
        if self.grpc_port:
            protocols["grpc"] = {"endpoint": f"{self.host}:{self.grpc_port}"}
        return {
            "receivers": {"otlp": {"protocols": protocols}},
            "processors": {"batch": {"timeout": self.batch_timeout}},
            "exporters": {
                "file": {
                    "path": str(self.spans_path),
                    "format": "json",
                    "append": True,
                    "flush_interval": self.flush_interval,
                },
                "debug": {"verbosity": "basic"},
            },
            "service": {
                "telemetry": {
                    "logs": {"level": self.log_level, "encoding": "console"},
                    "metrics": {"level": "none"},
                },
                "pipelines": {
                    "traces": {"receivers": ["otlp"], "processors": ["batch"], "exporters": ["file"]},
                    "metrics": {"receivers": ["otlp"], "exporters": ["debug"]},
                    "logs": {"receivers": ["otlp"], "exporters": ["debug"]},
                },
            },
        }

    def write_config(self) -> Path:
        self.config_path.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        return self.config_path

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> Collector:
        """Start the collector (again, on the same ports) and wait until its receivers listen."""
        if self.running():
            return self
        first = not self.config_path.exists()
        for attempt in range(3):
            self.write_config()
            self._spawn()
            try:
                self._wait_listening(timeout)
                return self
            except CollectorError:
                log = self.log_tail()
                self.stop()
                # Another process took a port between free_port() and the bind (first start only:
                # a restart keeps its ports, which its callers already use).
                if first and attempt < 2 and "address already in use" in log:
                    self._pick_ports()
                    continue
                raise
        raise AssertionError("unreachable")

    def _spawn(self) -> None:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop())
        argv = [str(self.binary), "--config", f"file:{self.config_path}"]
        if shutil.which("setpriv"):  # a killed test process takes its collector with it
            argv = ["setpriv", "--pdeathsig", "KILL", *argv]
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, cwd=self.folder
        )
        self._paused = False

    def _wait_listening(self, timeout: float) -> None:
        want = {self.http_port} | ({self.grpc_port} if self.grpc_port else set())
        deadline = time.monotonic() + timeout
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise CollectorError(
                    f"otelcol-brain exited {self._proc.returncode} while starting; log:\n{self.log_tail()}"
                )
            if want <= {port for _, port in self.listening()}:
                return
            if time.monotonic() > deadline:
                raise CollectorError(
                    f"otelcol-brain did not listen on {sorted(want)} within {timeout} s; log:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def stop(self, timeout: float = 15.0) -> None:
        """Stop it (SIGTERM: the batch and the file are flushed; SIGKILL after ``timeout``)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            if self._paused:
                proc.send_signal(signal.SIGCONT)
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self._paused = False
        if self._log is not None:
            self._log.close()
            self._log = None

    def pause(self) -> None:
        """SIGSTOP: the ports still accept connections (the kernel's backlog) but nothing answers."""
        if not self.running():
            raise CollectorError("pause(): the collector is not running")
        assert self._proc is not None
        self._proc.send_signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        if self._proc is not None:
            self._proc.send_signal(signal.SIGCONT)
        self._paused = False

    def __enter__(self) -> Collector:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- what it received ------------------------------------------------------------------------

    def spans(self) -> list[Span]:
        """Every span written so far, in arrival order (the file exporter flushes every ``flush_interval``)."""
        try:
            data = self.spans_path.read_bytes()
        except FileNotFoundError:
            return []
        out: list[Span] = []
        complete, _, _ = data.rpartition(b"\n")  # a line still being written is read next time
        for line in complete.splitlines():
            if line.strip():
                out.extend(parse_traces(json.loads(line)))
        return out

    def wait_spans(
        self, predicate: Callable[[Span], bool] = lambda _s: True, timeout: float = 10.0, count: int = 1
    ) -> list[Span]:
        """The spans matching ``predicate`` once at least ``count`` have arrived; AssertionError
        after ``timeout`` seconds, naming the spans that did arrive."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            matched = [s for s in spans if predicate(s)]
            if len(matched) >= count:
                return matched
            if time.monotonic() > deadline:
                seen = [(s["service"], s["name"]) for s in spans]
                raise AssertionError(
                    f"{len(matched)} of {count} matching spans after {timeout} s; all spans seen: {seen}\n"
                    f"collector log:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def wait_until(self, holds: Callable[[list[Span]], bool], timeout: float = 10.0) -> list[Span]:
        """Every span received, once ``holds(spans)`` is true of them all together (a whole trace
        arrived, say); AssertionError after ``timeout`` seconds, naming what did arrive."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if holds(spans):
                return spans
            if time.monotonic() > deadline:
                seen = sorted({(s["service"] or "", s["name"]) for s in spans})
                raise AssertionError(
                    f"not there after {timeout} s; spans seen: {seen}\ncollector log:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def listening(self) -> list[tuple[str, int]]:
        """The (address, port) pairs the collector process listens on (TCP, from /proc)."""
        if self._proc is None:
            return []
        pid = self._proc.pid
        try:
            inodes = _listening_inodes(pid)
        except OSError:
            return []
        out = []
        for table in ("tcp", "tcp6"):
            try:
                lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
            except OSError:
                continue
            for line in lines:
                f = line.split()
                if f[3] != "0A" or f[9] not in inodes:  # 0A: LISTEN
                    continue
                addr, port = f[1].split(":")
                out.append((_hex_addr(addr), int(port, 16)))
        return out

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""


# -- pytest wiring ---------------------------------------------------------------------------------


def _uses_collector(item: pytest.Item) -> bool:
    return bool(_FIXTURES & set(getattr(item, "fixturenames", ())))


@pytest.hookimpl(trylast=True)  # after `-m`/`-k` deselection
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    # Build (first run on a machine: minutes) before any test starts its timeout clock.
    if config.option.collectonly or not any(_uses_collector(i) for i in items):
        return
    try:
        config.stash[_BUILT] = build_collector()
    except CollectorBuildError as e:
        config.stash[_BUILT] = e  # each test that needs it errors with this, once per test


def _binary(config: pytest.Config) -> Path:
    built = config.stash.get(_BUILT, None)
    if built is None:
        try:
            built = build_collector()
        except CollectorBuildError as e:
            built = e
        config.stash[_BUILT] = built
    if isinstance(built, CollectorBuildError):
        pytest.fail(f"the OpenTelemetry Collector could not be built: {built}", pytrace=False)
    return built


@pytest.fixture
def otel_collector(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Collector]:
    collector = Collector(_binary(request.config), tmp_path / "otelcol")
    try:
        collector.start()
    except CollectorError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield collector
    finally:
        collector.stop()


@pytest.fixture
def span_fates(otel_collector: Collector) -> Iterator[collections.Counter[str]]:
    """Tracing on in this process (brain.core.tracing), into the test's collector, every span's fate
    counted (exported, queue_full, export_failed); off again afterwards, for the tests after it."""
    from brain.core import tracing
    from brain.core.tracing import TraceSettings

    fates: collections.Counter[str] = collections.Counter()
    settings = TraceSettings(endpoint=otel_collector.traces_url, service="brain-test", interval_s=0.1)
    assert tracing.configure(settings, counted=lambda reason, n: fates.update({reason: n}))
    yield fates
    tracing.configure(TraceSettings())
