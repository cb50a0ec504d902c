"""The direction of the walls that `.importlinter` states, pinned from the import graph itself.

One writer (issue #30): the `Store` facade every room holds only reads; `brain.store.writer` is
imported by `brain.services` alone, so ingest, eval, the jobs and the surfaces write by handing the
door a plan or a call. `make lint` enforces the rooms (contract only-services-write); this test
also covers a module that does not exist yet (any new module of `brain` or `brain.store` that
imports the writer fails here), and that no contract waves an import through.
"""

from __future__ import annotations

import configparser
from pathlib import Path

import grimp
import pytest

from brain.store.store import Store
from brain.store.writer import StoreWriter

ROOT = Path(__file__).resolve().parents[1]
WRITER = "brain.store.writer"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("brain", "brain_operator")


def test_only_services_import_the_writer(graph: grimp.ImportGraph) -> None:
    importers = graph.find_modules_that_directly_import(WRITER)
    assert importers, "the door no longer holds the writer"
    assert all(m == "brain.services" or m.startswith("brain.services.") for m in importers), importers


def test_the_rooms_that_plan_reach_the_writer_only_through_services(graph: grimp.ImportGraph) -> None:
    """Ingest and eval plan; every chain from them to the writer passes through brain.services."""
    for room in ("brain.ingest.sync", "brain.local.eval", "brain.gateway.runtime", "brain.jobs.ingest"):
        chains = graph.find_shortest_chains(importer=room, imported=WRITER)
        assert chains, f"{room} no longer reaches the writer at all (through the door)"
        for chain in chains:
            assert any(m.startswith("brain.services") for m in chain[1:-1]), chain


def test_the_store_facade_cannot_write() -> None:
    """Holding a Store gives no write: every write method is the writer's, none is the facade's."""
    writes = {n for n in vars(StoreWriter) if not n.startswith("_")}
    assert {"note", "note_many", "supersede", "set_status", "restore", "purge", "promote"} <= writes
    assert {"set_flags", "add_edge", "replace_edges"} <= writes
    assert not {n for n in writes if hasattr(Store, n)}


def test_the_contract_says_only_services_write_and_waves_nothing_through() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / ".importlinter")
    contract = cfg["importlinter:contract:only-services-write"]
    assert contract["type"] == "forbidden"
    assert contract["forbidden_modules"].split() == [WRITER]
    sources = set(contract["source_modules"].split())
    rooms = {"core", "embedder", "retrieval", "ingest", "jobs", "gateway", "local", "cli"}
    assert {f"brain.{r}" for r in rooms} | {"brain.store.store", "brain_operator"} <= sources
    assert "brain.services" not in sources
    assert not [s for s in cfg.sections() if cfg.has_option(s, "ignore_imports")]


def test_no_module_outside_services_calls_the_doors_private_writes() -> None:
    """`plan.apply` admits and then calls the door's private writes; nothing else may skip admission."""
    private = ("_note_admitted", "_supersede_admitted")
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "operator").rglob("*.py")
        if "brain/services/" not in p.as_posix() and any(name in p.read_text() for name in private)
    ]
    assert offenders == []


def test_the_environment_is_read_only_in_settings_modules() -> None:
    """`make lint` bans os.environ / os.getenv (ruff TID251) under operator/ outside a settings
    module or a `python -m` entry (docs/architecture.md, "Settings"); the rule stays configured."""
    import tomllib

    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert "TID251" in lint["select"]
    banned = lint["flake8-tidy-imports"]["banned-api"]
    assert {"os.environ", "os.getenv", "os.putenv"} <= set(banned)
    assert all("settings.py" in banned[name]["msg"] for name in banned)
    waived = {glob for glob, codes in lint["per-file-ignores"].items() if "TID251" in codes}
    under_operator = {g for g in waived if g.startswith("operator/")}
    assert under_operator == {
        "operator/**/settings.py",
        "operator/**/settings/*.py",
        "operator/**/__main__.py",
    }
    assert all(g.startswith(("operator/", "tests/", "e2e/", "hack/")) for g in waived), waived


def test_no_module_imports_its_way_back_to_itself(graph: grimp.ImportGraph) -> None:
    """A cycle hidden by a function-level import (the memory door and the proposal queue had one,
    `store.base` and `store.lexical_weights` another) is a wall a layers contract cannot state for a
    room it does not list; this holds every room to it, including rooms added later."""
    ours = ("brain", "brain_operator")
    cycles = [
        f"{m} -> {d} -> … -> {m}"
        for m in sorted(graph.modules)
        for d in sorted(graph.find_modules_directly_imported_by(m))
        if d.split(".")[0] in ours and d != m and graph.chain_exists(d, m)
    ]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_every_room_with_modules_of_its_own_has_inner_walls() -> None:
    """The rooms whose modules call each other the most keep a layers contract each (#30 item 3)."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / ".importlinter")
    walled = {
        cfg[s]["containers"].strip()
        for s in cfg.sections()
        if s.startswith("importlinter:contract:")
        and cfg[s].get("type") == "layers"
        and "containers" in cfg[s]
    }
    assert {"brain.store", "brain.services", "brain.gateway", "brain.jobs"} <= walled


def test_no_module_of_ours_is_imported_under_another_name() -> None:
    """A name that needs an alias to be told apart (`proposals` ×4 once, `metrics as gm`) says the
    modules are named for their room, not for what they hold; the store's table modules are
    `*_rows` so the door's `proposals` and the rows' `proposal_rows` read apart as they are."""
    import ast

    aliased = []
    for path in sorted((ROOT / "operator").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
                "brain",
                "brain_operator",
            ):
                names = node.names
            elif isinstance(node, ast.Import):
                names = [a for a in node.names if a.name.split(".")[0] in ("brain", "brain_operator")]
            else:
                continue
            aliased += [
                f"{path.relative_to(ROOT)}:{node.lineno} {a.name} as {a.asname}" for a in names if a.asname
            ]
    assert not aliased, "\n".join(aliased)


def test_only_litellms_entry_points_read_the_process_wide_runtime() -> None:
    """LiteLLM imports the hooks and the key check by dotted path, so they alone may read the global
    runtime; REST, MCP, the review page and the proposals API are handed `Tools` (#30 item 4)."""
    import ast

    readers = []
    for path in sorted((ROOT / "operator" / "brain").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", "")) == "get_runtime"
            ):
                readers.append(path.relative_to(ROOT / "operator").as_posix())
    assert sorted(set(readers)) == ["brain/gateway/auth.py", "brain/gateway/hooks.py"]
