"""Every command in the docs is executed by a test.

The commands are every line of the fenced code blocks tagged ``bash``/``sh``/``shell`` (and the
``$ `` lines of ``console`` blocks) in README.md and docs/**/*.md. Each one is either

- in ``RUN``: executed here, in a sandbox that makes it real, and its exit status and output
  checked, or
- in ``CANNOT_RUN``: one small table saying why it cannot run on this machine.

A docs command in neither table fails ``test_every_docs_command_is_run_or_excused`` with its file,
line and text; a table entry no doc contains any more fails ``test_tables_name_only_docs_commands``.
An untagged block that looks like shell fails too: tag it ``sh`` (then it is run) or ``text``.

Sandboxes (everything real, nothing mocked):

- ``stack``: ``make up``'s command (``brainctl up -f samples/brain.yaml -f samples/routingpolicy.yaml``,
  read from ``make -n up``) on a free port with a private state directory and echo upstream;
  ``127.0.0.1:4000`` in a command becomes its URL, ``$BRAIN_KEY``/``$OWNER_KEY``/``$DSN`` its keys and
  database, ``/etc/brain/source.json`` a MemorySource of a local git repository.
- ``cluster``: the local control plane (tests/kit/cluster.py). Namespaces and Helm releases are
  renamed per doc file (``team``, ``brain-system``, release ``brain-operator`` → ``docs-<id>-…``);
  the runbooks' ``$NS``/``$B`` are a namespace where ``python -m brain_operator`` reconciles the
  samples (health read from the ``stack`` gateway) next to one where a ResourceQuota makes its
  reconcile fail. Applies of cluster-scoped objects the other suites share (CRDs,
  samples/operator/install.yaml) get ``--dry-run=server``: the API server validates and admits every
  object without changing the shared cluster.
- ``local``: make targets and the control plane's own commands; ``make crds`` runs in a copy of the
  tree so it can never rewrite the working tree.

Also here: ``--help`` of every entrypoint, and the MCP endpoint the documented agent commands register.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from brain.local.devdb import free_port
from tests.kit.cluster import KubeCluster, run_tool

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
SHELL_TAGS = {"bash", "sh", "shell", "console"}
#: an untagged block whose line starts with one of these is probably a command nobody runs
COMMAND_WORDS = {
    "brainctl", "kubectl", "helm", "make", "curl", "python", "python3", "docker", "kind", "git", "bash",
    "export", "claude", "codex", "pip", "pytest", ".venv/bin/pytest", "eval",
}  # fmt: skip
DIAGRAM = re.compile("[─│▶►▼◀└┬┼┐┘]")  # box drawing: a diagram, not a command


# ---------------------------------------------------------------------- collecting the commands


@dataclass(frozen=True)
class DocCommand:
    path: str  # relative to the repository root
    line: int
    text: str  # continuation lines joined, trailing comment removed

    @property
    def key(self) -> str:
        return " ".join(self.text.split())

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.key}"


def _strip_comment(line: str) -> str:
    """The line without an unquoted trailing ``# comment``."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def collect() -> tuple[list[DocCommand], list[str]]:
    """(commands, problems): problems are untagged blocks that look like shell."""
    commands: list[DocCommand] = []
    problems: list[str] = []
    fence = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
    for path in doc_files():
        rel = str(path.relative_to(ROOT))
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            m = fence.match(lines[i])
            if not m:
                i += 1
                continue
            marker, tag = m.group(1), m.group(2).lower()
            body: list[tuple[int, str]] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                body.append((i + 1, lines[i]))
                i += 1
            i += 1  # the closing fence
            if tag in SHELL_TAGS:
                commands += _block_commands(rel, tag, body)
            elif tag == "":
                for no, raw in body:
                    words = raw.split()
                    if words and words[0] in COMMAND_WORDS and not DIAGRAM.search(raw):
                        problems.append(
                            f"{rel}:{no}: untagged code block looks like shell ({raw.strip()!r}): tag it "
                            "```sh (this test then runs it) or ```text"
                        )
                        break
    return commands, problems


def _block_commands(rel: str, tag: str, body: list[tuple[int, str]]) -> list[DocCommand]:
    out: list[DocCommand] = []
    pending: tuple[int, str] | None = None
    for no, raw in body:
        line = raw
        if tag == "console" and pending is None:
            if not line.lstrip().startswith("$ "):
                continue
            line = line.lstrip()[2:]
        line = _strip_comment(line) if pending is None or not line.lstrip().startswith("#") else ""
        if pending is not None:
            start, text = pending
            if line.endswith("\\"):
                pending = (start, text + " " + line[:-1].strip())
            else:
                out.append(DocCommand(rel, start, (text + " " + line.strip()).strip()))
                pending = None
            continue
        if not line.strip():
            continue
        if line.endswith("\\"):
            pending = (no, line[:-1].strip())
        else:
            out.append(DocCommand(rel, no, line.strip()))
    if pending is not None:
        out.append(DocCommand(rel, pending[0], pending[1]))
    return out


COMMANDS, UNTAGGED = collect()


# ---------------------------------------------------------------------- results and checks


@dataclass
class Result:
    cmd: DocCommand
    ran: str
    rc: int | None
    out: str
    err: str

    def fail(self, why: str) -> None:
        raise AssertionError(
            f"{self.cmd}\n  ran: {self.ran}\n  exit: {self.rc}\n  {why}\n"
            f"--- stdout (tail)\n{self.out[-3000:]}\n--- stderr (tail)\n{self.err[-3000:]}"
        )

    def has(self, *needles: str) -> None:
        for n in needles:
            if n not in self.out:
                self.fail(f"expected {n!r} in the output")

    def matches(self, pattern: str) -> re.Match[str]:
        m = re.search(pattern, self.out, re.MULTILINE)
        if m is None:
            self.fail(f"expected a line matching {pattern!r}")
        assert m is not None
        return m

    def json(self, last_line: bool = False) -> Any:
        text = self.out.strip().splitlines()[-1] if last_line and self.out.strip() else self.out
        try:
            return json.loads(text)
        except ValueError:
            self.fail("expected JSON" + (" on the last line" if last_line else ""))


Check = Callable[[Result, Any], None]


@dataclass(frozen=True)
class Case:
    box: str  # "local" | "stack" | "cluster"
    check: Check
    after: tuple[str, ...] = ()  # docs commands of the same file that must have run first
    then: str = ""  # shell run in the same process afterwards, to look at the command's effect
    rc: int = 0
    timeout: float = 180


def has(*needles: str) -> Check:
    return lambda r, box: r.has(*needles)


def lines(*patterns: str) -> Check:
    """Each pattern matches a line of the output (re.MULTILINE)."""

    def check(r: Result, box: Any) -> None:
        for pattern in patterns:
            r.matches(pattern)

    return check


# ---------------------------------------------------------------------- checks needing more than `has`


def check_make_up(r: Result, stack: Stack) -> None:
    r.has("brain is up", f"{stack.url}/mcp", "owner key", "agent key", "echo upstream on :")
    health = httpx.get(stack.url + "/brain/v1/health", timeout=10).json()
    assert health["database"] == "ok", health
    # The sample names the bundled MiniLM; locally it embeds, and vectors are labelled with it.
    assert health["index"]["embeddingModel"] == "sentence-transformers/all-MiniLM-L6-v2", health
    # ... so `brainctl up` runs it as shipped, with no "the manifest names another model" notice.
    assert "the manifest names" not in (stack.tmp / "up.err").read_text()


def check_export(r: Result, stack: Stack) -> None:
    if r.out.strip() != stack.agent_key:
        r.fail("the export did not leave BRAIN_KEY set to the agent key from the banner")


def check_rest_write(r: Result, stack: Stack) -> None:
    doc = r.json()
    if not str(doc.get("id", "")):
        r.fail("POST /brain/v1/memories answered without an id")


def check_chat(r: Result, stack: Stack) -> None:
    doc = r.json()
    text = json.dumps(doc)
    if "6543" not in text:  # the echo model answers with what it received: the injected memory
        r.fail("the memory written before was not injected into the chat request")


def check_key_created(role: str, namespaces: list[str] | None, expires: bool) -> Check:
    def check(r: Result, stack: Stack) -> None:
        doc = r.json()
        if not str(doc.get("key", "")).startswith("brk_") or doc.get("role") != role:
            r.fail(f"expected a brk_ key with role {role}")
        if namespaces is not None and doc.get("namespaces") != namespaces:
            r.fail(f"expected namespaces {namespaces}")
        if expires != bool(doc.get("expires_at")):
            r.fail("expires_at " + ("missing" if expires else "unexpected"))
        ctx = httpx.get(
            stack.url + "/brain/v1/context", headers={"authorization": f"Bearer {doc['key']}"}, timeout=30
        )
        assert ctx.status_code == 200, (ctx.status_code, ctx.text)

    return check


def check_keys_list(r: Result, stack: Stack) -> None:
    r.matches(r"^owner\s+owner\s+active")
    r.matches(r"^agent\s+agent\s+active")


def check_revoked(r: Result, stack: Stack) -> None:
    doc = r.json()
    if doc.get("name") != "claude-mac" or doc.get("state") != "revoked":
        r.fail("expected claude-mac revoked")


def agents_bin() -> Path:
    """Where hack/agents.sh installed the pinned `claude` and `codex` (it installs them when missing)."""
    r = subprocess.run(
        ["bash", str(ROOT / "hack" / "agents.sh")], capture_output=True, text=True, timeout=900
    )
    assert r.returncode == 0, f"hack/agents.sh failed:\n{r.stderr[-3000:]}"
    return Path(r.stdout.strip().splitlines()[-1])


def agent_cli_env(home: Path) -> dict[str, str]:
    """An isolated HOME for the agent CLIs, their telemetry, updaters and nonessential traffic off."""
    (home / ".codex").mkdir(parents=True, exist_ok=True)  # Codex refuses a CODEX_HOME that does not exist
    return {
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def check_claude_mcp(r: Result, stack: Stack) -> None:
    """`claude mcp list` (run after the add) health-checks the server: it must report it Connected."""
    r.matches(rf"^brain: {re.escape(stack.url)}/mcp \(HTTP\) - .*Connected")
    config = json.loads((stack.tmp / "agent-home" / ".claude.json").read_text())
    assert config["mcpServers"]["brain"]["headers"] == {"Authorization": f"Bearer {stack.agent_key}"}


def check_codex_mcp(r: Result, stack: Stack) -> None:
    """`codex mcp get brain --json` (run after the add) shows the URL and the key's env var, as registered."""
    doc = json.loads(r.out[r.out.index("{") :])
    transport = doc.get("transport", doc)
    if transport.get("url") != f"{stack.url}/mcp" or transport.get("bearer_token_env_var") != "BRAIN_KEY":
        r.fail(f"codex registered {doc}")


def check_doctor(r: Result, stack: Stack) -> None:
    r.matches(r"^ok\s+database\s+[1-9]\d* active entries")
    r.matches(r"^ok\s+embedded\s+100\.0% of entries have vectors")


def check_list(r: Result, stack: Stack) -> None:
    r.matches(r"^\S+\s+\d{4}-\d\d-\d\d\s+fact\s+shared\s+")


def check_proposals(r: Result, stack: Stack) -> None:
    doc = r.json()
    if not isinstance(doc.get("proposals"), list):
        r.fail('expected {"proposals": [...]}')


def check_job(**expect: Callable[[Any], bool]) -> Check:
    def check(r: Result, stack: Stack) -> None:
        summary = r.json(last_line=True)
        for k, ok in expect.items():
            if not ok(summary.get(k)):
                r.fail(f"summary field {k!r} is {summary.get(k)!r}")

    return check


def check_helm_install(r: Result, box: ClusterBox) -> None:
    """The documented install watches the team namespace only (issue #26): NOTES.txt says so, the
    operator may write there and nowhere else, and it is told to watch just that namespace."""
    names = box.names(r.cmd.path)
    team, system = names["team"], names["system"]
    r.has("STATUS: deployed", f"NAMESPACE: {system}", f"It watches only: {team} ")
    r.has(f"kubectl apply -n {team} -f samples/brain.yaml")
    dep = json.loads(box.kubectl("get", "deployment", names["release"], "-n", system, "-o", "json"))
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    if f"--namespace={team}" not in args or "--all-namespaces" in args:
        r.fail(f"the operator is not told to watch {team} only: {args}")
    sa = f"system:serviceaccount:{system}:{names['release']}"
    for ns, want in ((team, "yes"), ("default", "no")):
        got = box.kubectl("auth", "can-i", "create", "secrets", "--as", sa, "-n", ns, check=False).strip()
        if got != want:
            r.fail(f"can the operator create Secrets in {ns}? {got!r}, expected {want!r}")


def check_samples_applied(r: Result, box: ClusterBox) -> None:
    r.has("brain.brain.dev/team created", "memorysource.brain.dev/team-memories created")
    r.has("routingpolicy.brain.dev/smart-router created")


def check_brain_listed(r: Result, box: ClusterBox) -> None:
    r.matches(r"^NAME\s+READY\s+PHASE")
    r.matches(r"^team\s")


def check_dry_run_crds(r: Result, box: ClusterBox) -> None:
    for crd in ("brains.brain.dev", "memorysources.brain.dev", "routingpolicies.brain.dev"):
        r.matches(rf"customresourcedefinition\.apiextensions\.k8s\.io/{re.escape(crd)} .*\(server dry run\)")


def check_preflight(r: Result, box: ClusterBox) -> None:
    """Every object the suites have stored was admitted by HEAD's CRDs, so all are valid under them."""
    if not re.search(r"preflight: (\d+) of \1 stored brain\.dev objects valid", r.err):
        r.fail("expected every stored object valid")


def check_install_yaml(r: Result, box: ClusterBox) -> None:
    for obj in ("clusterrole.rbac.authorization.k8s.io/brain-operator", "deployment.apps/brain-operator"):
        r.matches(rf"^{re.escape(obj)} .*\(server dry run\)")


def check_watch(r: Result, box: ClusterBox) -> None:
    r.matches(r"^team\s")


def check_events(r: Result, box: ClusterBox) -> None:
    lines = [ln for ln in r.out.splitlines()[1:] if ln.strip()]
    if not all(" Warning " in ln for ln in lines):
        r.fail("the field selector let through events that are not warnings")
    if not any(ln.startswith(box.broken_ns) and "ApplyFailed" in ln for ln in lines) and len(lines) < 10:
        r.fail(f"the operator's failed reconcile in {box.broken_ns} (ApplyFailed) is not listed")


def check_peering(r: Result, box: ClusterBox) -> None:
    doc = yaml.safe_load(r.out)
    names = {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in doc.get("items", [])}
    readme = box.names("README.md")
    if (readme["team"], readme["release"]) not in names:
        r.fail("the README release's KopfPeering (in its watched namespace) is not listed")


def check_index(r: Result, box: ClusterBox) -> None:
    index = r.json()
    if index.get("embeddingDim") != 384 or not index.get("totalEntries"):
        r.fail("expected the index the gateway reports (embeddingDim 384, entries > 0)")


def check_describe_brain(r: Result, box: ClusterBox) -> None:
    r.has("Kind:         Brain", "Conditions:", "Observed Generation:", "DatabaseReady", "GatewayReady")


def check_brain_children(r: Result, box: ClusterBox) -> None:
    r.has("deployment.apps/team-gateway", "deployment.apps/team-embedder", "statefulset.apps/team-db")
    r.matches(r"^pod/team-gateway-\S+\s+1/1\s+Running")


def check_make_crds(r: Result, box: LocalBox) -> None:
    assert box.copy is not None
    drift = [
        str(p.relative_to(box.copy))
        for p in sorted(box.copy.rglob("*"))
        if p.is_file()
        and ".venv" not in p.parts
        and "__pycache__" not in p.parts
        and (
            not (ROOT / p.relative_to(box.copy)).exists()
            or (ROOT / p.relative_to(box.copy)).read_bytes() != p.read_bytes()
        )
    ]
    if drift:
        r.fail(f"make crds changed committed files (they drift from the models): {drift}")
    r.has("-m brain_operator.crdgen crds", "hack/chart-sync.py")
    if "install.sh" in r.out:
        r.fail("make crds reinstalled the project (.venv/.installed out of date?)")
    assert len(list((box.copy / "crds").glob("*.yaml"))) >= 3


def check_cluster_up(r: Result, box: LocalBox) -> None:
    r.has(f"export KUBECONFIG={box.cluster.kubeconfig}", "export PATH=")


def check_eval_cluster_up(r: Result, box: LocalBox) -> None:
    kubeconfig, *tools = r.out.split()
    if kubeconfig != box.cluster.kubeconfig or len(tools) != 3:
        r.fail("expected KUBECONFIG and kubectl, helm, kind on PATH after the eval")
    for t in tools:
        if Path(t).parent != Path(box.cluster.bin_dir):
            r.fail(f"{t} is not the control plane's")


def check_nodes(r: Result, box: LocalBox) -> None:
    r.matches(r"^kwok-node-0\s+Ready\s")


# ---------------------------------------------------------------------- the tables

README = "README.md"
OPERATOR_MD = "docs/operator.md"

#: docs command (whitespace collapsed) → how it is run and checked here
RUN: dict[str, Case] = {
    # README.md
    "make up": Case("stack", check_make_up),
    "export BRAIN_KEY=<the agent key from the banner>": Case(
        "stack", check_export, then='printf "%s" "$BRAIN_KEY"'
    ),
    'curl -s http://127.0.0.1:4000/brain/v1/memories -H "Authorization: Bearer $BRAIN_KEY" -H '
    '\'content-type: application/json\' -d \'{"body": "Staging Postgres moved to port 6543.", "kind": '
    '"fact"}\'': Case("stack", check_rest_write),
    'curl -s http://127.0.0.1:4000/v1/chat/completions -H "Authorization: Bearer $BRAIN_KEY" -H '
    '\'content-type: application/json\' -d \'{"model": "echo", "messages": [{"role": "user", '
    '"content": "which port does staging postgres use?"}]}\'': Case(
        "stack",
        check_chat,
        after=(
            'curl -s http://127.0.0.1:4000/brain/v1/memories -H "Authorization: Bearer $BRAIN_KEY" -H '
            '\'content-type: application/json\' -d \'{"body": "Staging Postgres moved to port 6543.", '
            '"kind": "fact"}\'',
        ),
    ),
    "helm install brain-operator charts/brain-operator -n brain-system --create-namespace --set "
    "'watch.namespaces={team}'": Case(
        "cluster", check_helm_install, after=("kubectl create namespace team",)
    ),
    "kubectl apply -n team -f samples/": Case(
        "cluster", check_samples_applied, after=("kubectl create namespace team",)
    ),
    "kubectl get brains -n team": Case(
        "cluster", check_brain_listed, after=("kubectl apply -n team -f samples/",)
    ),
    # docs/control-plane.md
    "make cluster-up": Case("local", check_cluster_up),
    'eval "$(bash hack/cluster-up.sh)"': Case(
        "local", check_eval_cluster_up, then='echo "$KUBECONFIG"; command -v kubectl helm kind'
    ),
    "kubectl get nodes": Case("local", check_nodes),
    # docs/operator.md (no -n: the sandbox kubeconfig's namespace is this file's team namespace)
    "make crds": Case("local", check_make_crds),
    "kubectl apply --server-side -f crds/": Case("cluster", check_dry_run_crds),
    "kubectl apply -f samples/operator/install.yaml": Case("cluster", check_install_yaml),
    "kubectl apply -f samples/brain.yaml -f samples/routingpolicy.yaml -f samples/memorysource-git.yaml": Case(
        "cluster", check_samples_applied
    ),
    "kubectl get brain": Case(
        "cluster",
        check_brain_listed,
        after=(
            "kubectl apply -f samples/brain.yaml -f samples/routingpolicy.yaml -f samples/memorysource-git.yaml",
        ),
    ),
    # docs/operations.md
    "helm install brain-operator charts/brain-operator --namespace brain-system --create-namespace --set "
    "'watch.namespaces={team}'": Case(
        "cluster", check_helm_install, after=("kubectl create namespace team",)
    ),
    "kubectl create namespace team": Case("cluster", lines(r"^namespace/\S+ created")),
    "kubectl apply -n team -f samples/brain.yaml": Case(
        "cluster", has("brain.brain.dev/team created"), after=("kubectl create namespace team",)
    ),
    "kubectl -n team get brain team -w": Case(  # a watch, stopped (after 5 s) as a person would
        "cluster", check_watch, after=("kubectl apply -n team -f samples/brain.yaml",), rc=124
    ),
    "kubectl apply --server-side -f charts/brain-operator/crds/": Case("cluster", check_dry_run_crds),
    "kubectl apply --server-side --force-conflicts --dry-run=server -f charts/brain-operator/crds/": Case(
        "cluster", check_dry_run_crds
    ),
    "python -m brain_operator.preflight charts/brain-operator/crds/": Case("cluster", check_preflight),
    "helm upgrade brain-operator charts/brain-operator -n brain-system --reuse-values --dry-run=server": Case(
        "cluster",
        lines(r"^STATUS: pending-upgrade"),
        after=(
            "helm install brain-operator charts/brain-operator --namespace brain-system --create-namespace "
            "--set 'watch.namespaces={team}'",
        ),
    ),
    # docs/tracing.md: the chart's default collector reaches the operator as --traces-endpoint
    "helm upgrade brain-operator charts/brain-operator --install -n brain-system --create-namespace --reuse-values "
    "--set observability.traces.endpoint=http://otel-collector.monitoring:4318": Case(
        "cluster",
        has("--traces-endpoint=http://otel-collector.monitoring:4318"),
        # `then` is not renamed: every operator Deployment's args (only this one's has the flag)
        then="kubectl get deploy -A -l app.kubernetes.io/name=brain-operator "
        "-o jsonpath='{.items[*].spec.template.spec.containers[0].args}'",
    ),
    # docs/gateway.md
    "brainctl keys create claude-mac --role agent": Case("stack", check_key_created("agent", None, False)),
    "brainctl keys create ci --role read --namespace repo:web --expires-days 30": Case(
        "stack", check_key_created("read", ["repo:web"], True)
    ),
    "brainctl keys list": Case("stack", check_keys_list),
    "brainctl keys revoke claude-mac": Case(
        "stack", check_revoked, after=("brainctl keys create claude-mac --role agent",)
    ),
    # README "Connect an agent": the real CLIs (hack/agents.sh, pinned), an isolated HOME (Stack.env)
    'claude mcp add --scope user --transport http brain http://127.0.0.1:4000/mcp --header "Authorization: '
    'Bearer $BRAIN_KEY"': Case("stack", check_claude_mcp, then="claude mcp list", timeout=240),
    "codex mcp add brain --url http://127.0.0.1:4000/mcp --bearer-token-env-var BRAIN_KEY": Case(
        "stack", check_codex_mcp, then="codex mcp get brain --json", timeout=240
    ),
    # docs/jobs.md (the CronJobs' commands; the stack's database, gateway and master key)
    "python -m brain.jobs.ingest --source-file /etc/brain/source.json": Case(
        "stack", check_job(added=lambda n: n == 1, rejected=lambda n: n == 0)
    ),
    "python -m brain.jobs.distill": Case("stack", check_job(proposals=lambda n: isinstance(n, int))),
    "python -m brain.jobs.digest": Case(
        "stack", check_job(week=lambda w: bool(re.fullmatch(r"\d{4}-W\d\d", str(w))))
    ),
    # docs/runbooks/
    "kubectl get events -A --field-selector type=Warning,reportingComponent=kopf --sort-by=.lastTimestamp "
    "| tail": Case("cluster", check_events),
    "kubectl get kopfpeering -A -o yaml": Case("cluster", check_peering),
    'brainctl --dsn "$DSN" doctor': Case("stack", check_doctor),  # Stack.seed wrote a memory
    'brainctl --dsn "$DSN" list --limit 50': Case("stack", check_list),
    "kubectl -n $NS get brain $B -o jsonpath='{.status.index}'": Case("cluster", check_index),
    "curl -s -H \"Authorization: Bearer $OWNER_KEY\" 'http://127.0.0.1:4000/brain/v1/proposals?limit=50'": Case(
        "stack", check_proposals
    ),
    # docs/review.md: the page and its policy, served by `make up`'s gateway
    "curl -sI http://127.0.0.1:4000/review": Case(
        "stack",
        lines(
            r"^HTTP/1\.1 200 OK",
            r"^content-security-policy: default-src 'none'; script-src 'self'; ",
            r"^content-type: text/html",
        ),
    ),
    "kubectl -n $NS get deploy,pods -l app.kubernetes.io/component=embedder": Case(
        "cluster",
        lines(r"^deployment\.apps/team-embedder\s+1/1", r"^pod/team-embedder-\S+\s+1/1\s+Running"),
    ),
    "kubectl -n $NS describe pod -l app.kubernetes.io/component=embedder": Case(
        "cluster", lines(r"^Name:\s+team-embedder-", r"^Status:\s+Running")
    ),
    "kubectl -n $NS get brain $B -o wide": Case("cluster", check_brain_listed),
    "kubectl -n $NS describe brain $B": Case("cluster", check_describe_brain),
    "kubectl -n $NS get deploy,sts,pods -l brain.dev/brain=$B": Case("cluster", check_brain_children),
    "kubectl -n $NS get events --sort-by=.lastTimestamp | tail -20": Case(
        "cluster", lines(r"^\S+\s+(Normal|Warning)\s+\S+\s+\S*team")
    ),
}

KUBELET = "pods on the local control plane are kwok's: no containers and no kubelet to serve {}"
BACKUP_DRILL = "e2e/pods/backup_pods.py does it on the real node"
#: docs command → why it cannot run here. Keep it small and honest.
CANNOT_RUN: dict[str, str] = {
    "make release VERSION=0.3.0": (
        "commits, tags and builds images in this checkout; tests/delivery/test_release.py runs "
        "hack/release.sh in a clone"
    ),
    "make release VERSION=0.3.0 IMAGES=0": (
        "commits and tags in this checkout; tests/delivery/test_release.py runs it in a clone"
    ),
    "bash hack/release.sh --rebuild v0.1.0": (
        "builds six images from an old commit; tests/delivery/test_release.py rebuilds the chart "
        "in a clone, make e2e-upgrade the images"
    ),
    "make test": "the whole suite (lint, mypy, every test, this file included); CI runs it",
    "make cluster-down": "stops the control plane every cluster test on this machine shares",
    ".venv/bin/pytest -q tests/delivery/test_prometheus_scrape.py -x": (
        "a test file of its own (about a minute); the suite runs it"
    ),
    'kubectl -n brain-system logs deploy/brain-operator --since=30m | grep -iE "error|forbidden"': KUBELET.format(
        "logs"
    ),
    "kubectl -n $NS logs deploy/$B-embedder": KUBELET.format("logs"),
    "kubectl -n team exec team-db-0 -- pg_dump -U brain -Fc brain > brain-$(date +%F).dump": KUBELET.format(
        "an exec into Postgres"
    ),
    "kubectl -n team exec -i team-db-0 -- pg_restore -U brain -d brain --clean --if-exists < "
    "brain-2026-01-01.dump": KUBELET.format("an exec into Postgres"),
    "primary=$(kubectl -n team get cluster team-db -o jsonpath='{.status.currentPrimary}')": (
        "a CloudNativePG Cluster's status; e2e/pods/test_ha.py reads it on the real node"
    ),
    'kubectl -n team exec "$primary" -c postgres -- pg_dump -Fc -d brain > brain-$(date +%F).dump': KUBELET.format(
        "an exec into a CloudNativePG instance (e2e/pods/test_ha.py does it on the real node)"
    ),
    "kubectl -n restored exec -i team-db-0 -c postgres -- pg_restore -U brain -d brain --clean --if-exists "
    "--no-owner --single-transaction < brain-2026-01-01.dump": KUBELET.format(
        "an exec into Postgres (e2e/pods/test_ha.py does it on the real node)"
    ),
    "kubectl -n $NS port-forward svc/$B-gateway 4000:4000 &": KUBELET.format("a port-forward"),
    "kubectl -n restored rollout restart deploy/team-gateway": (
        "follows the pg_restore above (an exec into Postgres); e2e/pods/test_ha.py does both on the real node"
    ),
    # docs/operations.md "Database backups" and the backup runbooks (issue #29)
    "kubectl -n team create job --from=cronjob/team-backup team-backup-now": KUBELET.format(
        f"the backup Job's pg_dump ({BACKUP_DRILL})"
    ),
    "kubectl -n $NS create job --from=cronjob/$B-backup $B-backup-now": KUBELET.format(
        f"the backup Job's pg_dump ({BACKUP_DRILL})"
    ),
    "kubectl -n team run backup-reader --image=pgvector/pgvector:pg17 --restart=Never --overrides='"
    '{"spec":{"securityContext":{"runAsUser":999,"runAsNonRoot":true},"containers":[{"name":"backup-reader",'
    '"image":"pgvector/pgvector:pg17","command":["sleep","3600"],"volumeMounts":[{"name":"b","mountPath":'
    '"/backups"}]}],"volumes":[{"name":"b","persistentVolumeClaim":{"claimName":"team-backups"}}]}}\'': KUBELET.format(
        f"a pod reading the backups volume ({BACKUP_DRILL})"
    ),
    "kubectl -n team exec backup-reader -- ls /backups": KUBELET.format(f"an exec ({BACKUP_DRILL})"),
    "kubectl cp team/backup-reader:/backups/team-20260101T030000Z.dump team.dump": KUBELET.format(
        f"kubectl cp ({BACKUP_DRILL})"
    ),
    "kubectl -n team port-forward svc/restored-db 15432:5432 &": KUBELET.format(
        f"a port-forward ({BACKUP_DRILL})"
    ),
    'brainctl restore --from team.dump --into "postgresql://brain:$PW@127.0.0.1:15432/brain"': (
        "follows the port-forward above; tests/store/test_restore.py runs brainctl restore on a real Postgres, "
        f"{BACKUP_DRILL}"
    ),
    "kubectl -n $NS get cronjob,jobs,pvc -l app.kubernetes.io/instance=$B,app.kubernetes.io/component=backup": (
        f"the runbooks' Brain has no spec.backup, so this lists nothing; {BACKUP_DRILL}"
    ),
    "kubectl -n $NS logs -l app.kubernetes.io/instance=$B,app.kubernetes.io/component=backup --tail=20": (
        KUBELET.format("logs")
    ),
    ".venv/bin/pytest -q tests/gateway/test_review.py tests/gateway/test_review_browser.py": (
        "test files of their own (a real gateway and a headless browser); the suite runs them"
    ),
    "BRAIN_REVIEW_SCREENSHOTS=docs/img .venv/bin/pytest -q tests/gateway/test_review_browser.py": (
        "rewrites the committed screenshots in docs/img; run by hand when the page changes"
    ),
}


def _commands(box: str) -> list[Any]:
    return [
        pytest.param(c, id=f"{c.path}:{c.line} {c.key[:60]}")
        for c in COMMANDS
        if c.key in RUN and RUN[c.key].box == box
    ]


# ---------------------------------------------------------------------- sandboxes


class Box:
    """Runs docs commands (each at most once, memoized) in a sandbox."""

    name = ""

    def __init__(self) -> None:
        self.done: dict[tuple[str, str], Result] = {}

    def rewrite(self, cmd: DocCommand) -> str:
        return cmd.text

    def env(self, cmd: DocCommand) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env['PATH']}"
        return env

    def prepare(self, cmd: DocCommand) -> None:
        """Anything the command needs that is not another docs command."""

    def run(self, cmd: DocCommand) -> Result:
        key = (cmd.path, cmd.key)
        if key in self.done:
            return self.done[key]
        case = RUN[cmd.key]
        for dep in case.after:
            (before,) = [c for c in COMMANDS if c.path == cmd.path and c.key == dep]
            res = self.run(before)
            if res.rc != RUN[dep].rc:
                res.fail(f"(needed by {cmd.key!r}) exited {res.rc}")
        self.prepare(cmd)
        ran = self.rewrite(cmd)
        script = ran + (f"\n{case.then}" if case.then else "")
        try:
            proc = subprocess.run(
                ["bash", "-o", "pipefail", "-c", script],
                cwd=ROOT,
                env=self.env(cmd),
                capture_output=True,
                text=True,
                timeout=case.timeout,
            )
            res = Result(cmd, ran, proc.returncode, proc.stdout, proc.stderr)
        except subprocess.TimeoutExpired as e:
            res = Result(cmd, ran, None, str(e.stdout or ""), f"timed out after {case.timeout:.0f}s")
        self.done[key] = res
        return res


def _check(box: Box, cmd: DocCommand) -> None:
    case = RUN[cmd.key]
    res = box.run(cmd)
    if res.rc != case.rc:
        res.fail(f"expected exit status {case.rc}")
    case.check(res, box)


class LocalBox(Box):
    name = "local"

    def __init__(self, cluster: KubeCluster, tmp: Path) -> None:
        super().__init__()
        self.cluster = cluster
        self.tmp = tmp
        self.copy: Path | None = None

    def env(self, cmd: DocCommand) -> dict[str, str]:
        env = super().env(cmd)
        if cmd.key.startswith("eval "):  # a fresh shell: not yet pointed at the cluster
            env.pop("KUBECONFIG", None)
            env["PATH"] = os.pathsep.join(
                p for p in env["PATH"].split(os.pathsep) if p != self.cluster.bin_dir
            )
        else:
            env.update(self.cluster.env)
        return env

    def rewrite(self, cmd: DocCommand) -> str:
        if cmd.key == "make crds":
            assert self.copy is not None
            return f"cd {self.copy} && {cmd.text}"
        return cmd.text

    def prepare(self, cmd: DocCommand) -> None:
        if cmd.key == "make crds" and self.copy is None:
            self.copy = self.tmp / "tree"
            for part in (
                "Makefile",
                "pyproject.toml",
                "hack",
                "operator",
                "crds",
                "charts",
                "samples",
                "docs",
            ):
                src = ROOT / part
                if src.is_dir():
                    shutil.copytree(
                        src, self.copy / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
                    )
                else:
                    self.copy.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, self.copy / part)
            # A stand-in .venv: its python is the real one, and it has no pip, so `make install`
            # (should make think it due) fails here instead of reinstalling the shared .venv.
            (self.copy / ".venv" / "bin").mkdir(parents=True)
            python = self.copy / ".venv" / "bin" / "python"
            python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
            python.chmod(0o755)
            (self.copy / ".venv" / ".installed").touch()


class Stack(Box):
    """`make up`'s command on a free port with a private state dir; docs commands run against it."""

    name = "stack"

    def __init__(self, tmp: Path) -> None:
        super().__init__()
        self.tmp = tmp
        self.port = free_port()
        self.echo_port = free_port()
        self.state = tmp / "state"
        self.proc: subprocess.Popen[bytes] | None = None
        self.banner = ""
        self.up_cmd = ""
        self.source_file = tmp / "source.json"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        plan = subprocess.run(
            ["make", "--no-print-directory", "-n", "up"], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert plan.returncode == 0, plan.stderr
        line = plan.stdout.strip().splitlines()[-1]
        expected = "bin/brainctl up -f samples/brain.yaml -f samples/routingpolicy.yaml"
        assert line.endswith(expected), f"make -n up prints {line!r}; this sandbox runs {expected!r}"
        manifest = (ROOT / "samples" / "brain.yaml").read_text()
        assert "http://127.0.0.1:4001/v1" in manifest, "samples/brain.yaml's echo apiBase moved"
        brain = self.tmp / "brain.yaml"
        brain.write_text(manifest.replace("127.0.0.1:4001", f"127.0.0.1:{self.echo_port}"))
        args = [
            str(VENV_BIN / "brainctl"), "up", "-f", str(brain), "-f", "samples/routingpolicy.yaml",
            "--port", str(self.port), "--state-dir", str(self.state),
        ]  # fmt: skip
        self.up_cmd = " ".join(args)
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}  # echo only
        log = self.tmp / "up.out"
        with log.open("wb") as out, (self.tmp / "up.err").open("wb") as err:
            self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=err)
        deadline = time.monotonic() + 300
        while "Ctrl-C stops everything" not in self.banner:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.up_cmd} did not come up (exit {self.proc.poll()}):\n"
                    f"{(self.tmp / 'up.err').read_text()[-3000:]}\n"
                    f"{(self.state / 'gateway.log').read_text()[-3000:] if (self.state / 'gateway.log').exists() else ''}"
                )
            time.sleep(0.3)
            self.banner = log.read_text()
        keys = json.loads((self.state / "keys.json").read_text())
        self.agent_key, self.owner_key = keys["agent"], keys["owner"]
        # the banner's DSN carries the generated Postgres password (brain.local.devdb: scram, not trust)
        self.dsn = re.search(r"^  database +(\S+)", self.banner, re.M).group(1)  # type: ignore[union-attr]
        self.master_key = (self.state / "master.key").read_text().strip()
        self.done[(README, "make up")] = Result(
            _doc(README, "make up"),
            self.up_cmd,
            0 if self.proc.poll() is None else self.proc.poll(),
            self.banner,
            "",
        )
        self.seed()

    def seed(self) -> None:
        """One memory, written with the owner key (the runbook commands look at a non-empty brain)."""
        r = httpx.post(
            self.url + "/brain/v1/memories",
            headers={"authorization": f"Bearer {self.owner_key}"},
            json={"body": "Release trains leave every Tuesday at 10:00 UTC.", "kind": "fact"},
            timeout=60,
        )
        assert r.status_code in (200, 201), r.text

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # what Ctrl-C does: stops the gateway and Postgres
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def rewrite(self, cmd: DocCommand) -> str:
        return (
            cmd.text.replace("http://127.0.0.1:4000", self.url)
            .replace("<the agent key from the banner>", self.agent_key)
            .replace("/etc/brain/source.json", str(self.source_file))
        )

    def env(self, cmd: DocCommand) -> dict[str, str]:
        env = super().env(cmd)
        env.pop("BRAIN_EMBEDDER_URL", None)
        env.update(
            DSN=self.dsn,
            OWNER_KEY=self.owner_key,
            BRAIN_DATABASE_URL=self.dsn,
            BRAIN_GATEWAY_URL=self.url,
            BRAIN_MASTER_KEY=self.master_key,
            BRAIN_DISTILL_MODEL="echo",
        )
        if "/etc/brain/source.json" in cmd.text:  # its git URL is a local repository (file://): as
            env["BRAIN_GIT_ALLOW_INSECURE_URLS"] = "1"  # an operator with --allow-insecure-git-urls runs it
        if not cmd.key.startswith("export "):
            env["BRAIN_KEY"] = self.agent_key  # what the README's export leaves in the reader's shell
        else:
            env.pop("BRAIN_KEY", None)
        if cmd.key.startswith(("claude ", "codex ")):  # the real CLIs, never the reader's own config
            env.update(
                agent_cli_env(self.tmp / "agent-home"), PATH=f"{agents_bin()}{os.pathsep}{env['PATH']}"
            )
        return env

    def prepare(self, cmd: DocCommand) -> None:
        if "/etc/brain/source.json" in cmd.text and not self.source_file.exists():
            self._write_source()

    def _write_source(self) -> None:
        """samples/memorysource-git.yaml as the operator writes it, its git URL a local repository."""
        repo = self.tmp / "team-memories"
        (repo / "memories").mkdir(parents=True)
        (repo / "memories" / "friday-deploys.md").write_text(
            "---\ntitle: No deploys on Friday afternoons\ntags: [process]\n---\n"
            "Production deploys stop at 15:00 on Fridays; hotfixes need two approvals.\n"
        )
        git = ["git", "-c", "user.name=docs", "-c", "user.email=docs@example.com", "-C", str(repo)]
        for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "memories"]):
            subprocess.run([*git, *args], check=True, capture_output=True)
        source = yaml.safe_load((ROOT / "samples" / "memorysource-git.yaml").read_text())
        source["spec"]["git"]["url"] = f"file://{repo}"
        self.source_file.write_text(
            json.dumps({"name": source["metadata"]["name"], "brain": "team", "spec": source["spec"]})
        )


class ClusterBox(Box):
    name = "cluster"
    #: applies of cluster-scoped objects the other suites share: validated, not persisted
    DRY_RUN = frozenset(
        {
            "kubectl apply --server-side -f crds/",
            "kubectl apply --server-side -f charts/brain-operator/crds/",
            "kubectl apply -f samples/operator/install.yaml",
        }
    )

    def __init__(self, cluster: KubeCluster, stack: Stack, tmp: Path) -> None:
        super().__init__()
        self.cluster = cluster
        self.stack = stack
        self.tmp = tmp
        self.uid = uuid.uuid4().hex[:6]
        self._names: dict[str, dict[str, str]] = {}
        self.created: list[str] = []
        self.releases: list[tuple[str, str]] = []
        self.operator: subprocess.Popen[bytes] | None = None
        self.ns = f"docs-{self.uid}-runbook"
        self.broken_ns = f"docs-{self.uid}-broken"
        self.kubeconfig = tmp / "kubeconfig"
        shutil.copy(cluster.kubeconfig, self.kubeconfig)
        cluster.ensure_crds()  # the samples, the operator and the preflight need them
        op_ns = self.names(OPERATOR_MD)["team"]
        self.kubectl("create", "namespace", op_ns)
        self.created.append(op_ns)
        self.kubectl("config", "set-context", "--current", f"--namespace={op_ns}")

    def names(self, path: str) -> dict[str, str]:
        """Per doc file: its team namespace, its operator namespace and its Helm release."""
        if path not in self._names:
            stem = Path(path).stem.lower().replace("_", "-")[:12]
            base = f"docs-{self.uid}-{stem}"
            self._names[path] = {
                "team": base,
                "system": f"{base}-system",
                "release": f"{base}-brain-operator",
            }
        return self._names[path]

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> str:
        env = {**self.cluster.env, "KUBECONFIG": str(self.kubeconfig)}
        return run_tool(self.cluster.tool("kubectl"), *args, env=env, input=input, check=check).stdout

    def rewrite(self, cmd: DocCommand) -> str:
        n = self.names(cmd.path)
        text = cmd.text
        text = re.sub(r"(-n|--namespace|namespace) team\b", rf"\1 {n['team']}", text)
        for verb in ("install", "upgrade"):
            text = text.replace(f"helm {verb} brain-operator ", f"helm {verb} {n['release']} ")
        text = text.replace("watch.namespaces={team}", f"watch.namespaces={{{n['team']}}}")
        text = text.replace("brain-system", n["system"])
        if cmd.key in self.DRY_RUN:
            text = text.replace("samples/operator/install.yaml", str(self._install_yaml(n["system"])))
            text += " --dry-run=server"
        if text.split()[-1] == "-w":  # the first line is all check_watch reads: it comes within a second
            text = "timeout 5 " + text
        return text

    def env(self, cmd: DocCommand) -> dict[str, str]:
        env = super().env(cmd)
        env.update(self.cluster.env)
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env['PATH']}"
        env.update(KUBECONFIG=str(self.kubeconfig), NS=self.ns, B="team")
        return env

    def prepare(self, cmd: DocCommand) -> None:
        n = self.names(cmd.path)
        if cmd.key.startswith("helm install"):
            self.releases.append((n["release"], n["system"]))
            self.created.append(n["system"])
        elif "create namespace team" in cmd.key:
            self.created.append(n["team"])
        elif cmd.key == "kubectl apply -f samples/operator/install.yaml" and n["system"] not in self.created:
            # a server dry run: the namespace of the file's objects must exist
            self.kubectl("create", "namespace", n["system"])
            self.created.append(n["system"])
        if "$NS" in cmd.text or "reportingComponent=kopf" in cmd.text:
            self.start_operator()
        if "kopfpeering" in cmd.key:
            (install,) = [c for c in COMMANDS if c.path == README and c.key.startswith("helm install")]
            r = self.run(install)
            if r.rc != 0:
                r.fail("(needed by kubectl get kopfpeering)")

    def _install_yaml(self, system_ns: str) -> Path:
        path = self.tmp / "install.yaml"
        if not path.exists():
            text = (ROOT / "samples" / "operator" / "install.yaml").read_text()
            assert "namespace: brain-system" in text
            path.write_text(text.replace("brain-system", system_ns))
        return path

    def start_operator(self) -> None:
        """`python -m brain_operator` (docs/operator.md) on the runbook namespaces, as on a laptop."""
        if self.operator is not None:
            return
        for ns in (self.ns, self.broken_ns):
            self.kubectl("create", "namespace", ns)
            self.created.append(ns)
        self.kubectl("-n", self.broken_ns, "create", "quota", "no-secrets", "--hard=count/secrets=0")
        self.kubectl("apply", "-n", self.ns, "-f", str(ROOT / "samples"))
        self.kubectl("apply", "-n", self.broken_ns, "-f", str(ROOT / "samples" / "brain.yaml"))
        env = {**self.cluster.env, "KUBECONFIG": str(self.kubeconfig), "PYTHONUNBUFFERED": "1"}
        args = [
            sys.executable, "-m", "brain_operator", "--namespace", self.ns, "--namespace", self.broken_ns,
            "--standalone", "--metrics-port", "0", "--health-seconds", "1", "--resync-seconds", "5",
            "--health-url-template", self.stack.url + "/brain/v1/health",
        ]  # fmt: skip
        with (self.tmp / "operator.log").open("ab") as log:
            self.operator = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 240  # two namespaces on a loaded CI machine
        while True:
            index = self.kubectl(
                "-n", self.ns, "get", "brain", "team", "-o", "jsonpath={.status.index}", check=False
            )
            pods = self.kubectl("-n", self.ns, "get", "pods", "-l", "brain.dev/brain=team", check=False)
            failed = self.kubectl(
                "-n", self.broken_ns, "get", "events", "--field-selector", "reason=ApplyFailed", check=False
            )
            if "totalEntries" in index and "Running" in pods and "ApplyFailed" in failed:
                return
            if self.operator.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(self._why_not_reconciled(index, pods, failed))
            time.sleep(1)

    def _why_not_reconciled(self, index: str, pods: str, failed: str) -> str:
        """What a reader needs when the runbook namespaces never settle: the three checks, both
        Brains' status and events, and the operator's log without its per-second timer lines."""
        log = (self.tmp / "operator.log").read_text().splitlines()
        quiet = [x for x in log if "Timer '" not in x and "/brain/v1/health" not in x]
        lines = [
            f"the operator did not reconcile the runbook namespaces (exit {self.operator and self.operator.poll()}):",
            f"status.index in {self.ns}: {index[:300]!r}",
            f"pods in {self.ns}: {pods[-300:]!r}",
            f"ApplyFailed events in {self.broken_ns}: {failed[-300:]!r}",
        ]
        for ns in (self.ns, self.broken_ns):
            lines.append(f"--- {ns}: Brain status, events")
            lines.append(
                self.kubectl("-n", ns, "get", "brain", "team", "-o", "jsonpath={.status}", check=False)
            )
            lines.append(self.kubectl("-n", ns, "get", "events", check=False)[-1500:])
        lines.append(f"--- operator log, {len(log) - len(quiet)} timer lines left out")
        lines.extend(quiet[-60:])
        return "\n".join(lines)

    def close(self) -> None:
        if self.operator is not None:
            for ns in (self.ns, self.broken_ns):  # the operator removes its finalizers
                self.kubectl(
                    "-n", ns, "delete", "brain", "--all", "--wait=true", "--timeout=60s", check=False
                )
            self.operator.terminate()
            try:
                self.operator.wait(20)
            except subprocess.TimeoutExpired:
                self.operator.kill()
                self.operator.wait(10)
        for release, ns in self.releases:
            subprocess.run(
                [self.cluster.tool("helm"), "uninstall", release, "-n", ns, "--wait=false"],
                env={**self.cluster.env, "KUBECONFIG": str(self.kubeconfig)},
                capture_output=True,
                timeout=120,
            )
        for path in {c.path for c in COMMANDS} | {OPERATOR_MD}:
            team = self.names(path)["team"]
            if team not in self.created:
                self.created.append(team)
        self.kubectl(
            "delete", "namespace", *set(self.created), "--wait=false", "--ignore-not-found", check=False
        )


def _doc(path: str, key: str) -> DocCommand:
    found = [c for c in COMMANDS if c.path == path and c.key == key]
    return found[0] if found else DocCommand(path, 0, key)


# ---------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def tmp_docs() -> Iterator[Path]:
    # Under /tmp and world-readable: Postgres runs as `nobody` when the tests run as root.
    path = Path(tempfile.mkdtemp(prefix="docs-cmds-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def stack(tmp_docs: Path) -> Iterator[Stack]:
    tmp = tmp_docs / "stack"
    tmp.mkdir()
    tmp.chmod(0o755)
    box = Stack(tmp)
    try:
        box.start()
        yield box
    finally:
        box.stop()


@pytest.fixture(scope="module")
def local_box(kube_cluster: KubeCluster, tmp_docs: Path) -> LocalBox:
    tmp = tmp_docs / "local"
    tmp.mkdir()
    return LocalBox(kube_cluster, tmp)


@pytest.fixture(scope="module")
def cluster_box(kube_cluster: KubeCluster, stack: Stack, tmp_docs: Path) -> Iterator[ClusterBox]:
    tmp = tmp_docs / "cluster"
    tmp.mkdir()
    box = ClusterBox(kube_cluster, stack, tmp)
    try:
        yield box
    finally:
        box.close()


# ---------------------------------------------------------------------- coverage of the docs


def test_docs_have_commands() -> None:
    assert len(COMMANDS) > 30, [str(c) for c in COMMANDS]


def test_docs_have_no_untagged_shell_blocks() -> None:
    assert not UNTAGGED, "\n".join(UNTAGGED)


@pytest.mark.parametrize("cmd", [pytest.param(c, id=f"{c.path}:{c.line}") for c in COMMANDS])
def test_every_docs_command_is_run_or_excused(cmd: DocCommand) -> None:
    assert cmd.key in RUN or cmd.key in CANNOT_RUN, (
        f"{cmd.path}:{cmd.line}: `{cmd.key}` is a docs command nothing runs. Add it to RUN in "
        f"tests/delivery/test_docs_commands.py (how to run and check it), or, if it really cannot run "
        f"here, to CANNOT_RUN with the reason."
    )


def test_tables_name_only_docs_commands() -> None:
    in_docs = {c.key for c in COMMANDS}
    assert not set(RUN) & set(CANNOT_RUN)
    stale = sorted((set(RUN) | set(CANNOT_RUN)) - in_docs)
    assert not stale, f"no doc contains these any more; drop them from the tables: {stale}"
    for key, case in RUN.items():
        for dep in case.after:
            assert dep in RUN, f"{key!r} runs after {dep!r}, which is not in RUN"


@pytest.mark.parametrize("target", sorted({k.split()[1] for k in CANNOT_RUN if k.startswith("make ")}))
def test_excused_make_targets_exist(target: str) -> None:
    proc = subprocess.run(
        ["make", "--no-print-directory", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------------- running them


@pytest.mark.parametrize("cmd", _commands("local"))
def test_local_command(local_box: LocalBox, cmd: DocCommand) -> None:
    _check(local_box, cmd)


@pytest.mark.parametrize("cmd", _commands("stack"))
def test_stack_command(stack: Stack, cmd: DocCommand) -> None:
    _check(stack, cmd)


@pytest.mark.cluster
@pytest.mark.parametrize("cmd", _commands("cluster"))
def test_cluster_command(cluster_box: ClusterBox, cmd: DocCommand) -> None:
    _check(cluster_box, cmd)


async def test_mcp_endpoint_the_agent_commands_register(stack: Stack) -> None:
    """The URL and header `claude mcp add` / `codex mcp add` register, used by a real MCP client."""
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    (claude,) = {c.key for c in COMMANDS if c.key.startswith("claude mcp add")}
    m = re.search(r"(http://127\.0\.0\.1:4000/mcp) --header \"(Authorization): Bearer \$BRAIN_KEY\"", claude)
    assert m, claude
    url = m.group(1).replace("http://127.0.0.1:4000", stack.url)
    async with (
        httpx2.AsyncClient(headers={m.group(2): f"Bearer {stack.agent_key}"}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = {t.name for t in (await session.list_tools()).tools}
    assert {"brain_context", "brain_search", "brain_note"} <= tools, tools


# ---------------------------------------------------------------------- --help of every entrypoint


def _entrypoints() -> list[list[str]]:
    from brain.cli.main import build_parser

    found: list[list[str]] = [["brainctl"]]

    def walk(parser: Any, prefix: list[str]) -> None:
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for name, sub in action.choices.items():
                    found.append(["brainctl", *prefix, name])
                    walk(sub, [*prefix, name])

    walk(build_parser(), [])
    modules = set()
    for path in (ROOT / "operator").rglob("*.py"):
        rel = path.relative_to(ROOT / "operator").with_suffix("")
        if path.name == "__main__.py":
            modules.add(".".join(rel.parts[:-1]))
        elif 'if __name__ == "__main__"' in path.read_text():
            modules.add(".".join(rel.parts))
    modules.discard("brain.cli.main")  # that is brainctl
    return found + [["python", "-m", m] for m in sorted(modules)]


@pytest.mark.parametrize("argv", _entrypoints(), ids=" ".join)
def test_entrypoint_help(argv: list[str]) -> None:
    exe = str(VENV_BIN / argv[0]) if argv[0] == "brainctl" else sys.executable
    proc = subprocess.run([exe, *argv[1:], "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    prog = " ".join(argv) if argv[0] == "brainctl" else " ".join(["python", *argv[1:]])
    assert proc.stdout.startswith(f"usage: {prog}"), proc.stdout[:300]
    assert "-h, --help" in proc.stdout
