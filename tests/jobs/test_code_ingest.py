"""Code → tree-sitter chunks with edges and the three-tier grading, end to end and as pure functions."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from brain.embedder.model import DEFAULT_MODEL
from brain.embedder.variants import load_embedder
from brain.ingest.code import PathIndex, chunk_file, resolve_imports
from brain.ingest.grading import GradingConfig, batch_duplicates, score_chunk, tuned_threshold
from brain.ingest.source import parse_source
from brain.jobs.common import Progress
from brain.jobs.ingest import run_ingest
from brain.store import Store
from brain.store.store import embed_text
from tests.jobs.conftest import Repo

STORE_PY = '''"""Storage helpers for the billing service."""
from billing.util import retry


class Ledger:
    """The ledger keeps every posted entry and refuses to post the same entry twice in a row."""

    def post(self, entry):
        """Post one entry, retrying transient database failures before giving up for good."""
        for attempt in range(3):
            try:
                return self._write(entry)
            except TimeoutError:
                if attempt == 2:
                    raise
                retry(attempt)
        return None

    def _write(self, entry):
        if entry is None:
            raise ValueError("no entry")
        while not self.ready():
            continue
        return entry

    def get_x(self):
        return self.x
'''
UTIL_PY = '''def retry(attempt):
    """Sleep a little longer after each failed attempt (exponential backoff with a cap)."""
    delay = min(2 ** attempt, 30)
    if delay > 10:
        return delay
    for _ in range(delay):
        pass
    return delay
'''
COPY_PY = UTIL_PY.replace("min(2 ** attempt, 30)", "min(2 ** attempt, 32)")  # copy-pasted, then nudged


def test_chunker_languages_edges_and_docstrings() -> None:
    ts = chunk_file(
        "web/a.ts",
        b'import { b } from "./b";\n/** Adds numbers together. */\nexport function add(x: number) { return b(x); }\n',
    )
    go = chunk_file(
        "svc/main.go",
        b"package main\n// Run runs.\nfunc (s *Server) Run() error { return helper() }\nfunc helper() error { return nil }\n",
    )
    rs = chunk_file(
        "src/lib.rs", b"use crate::store::Store;\n/// Make one.\npub fn make() -> Store { Store::new() }\n"
    )
    java = chunk_file(
        "W.java", b"import com.x.Util;\n/** Widget. */\nclass W { int size() { return Util.compute(); } }\n"
    )
    js = chunk_file("b.js", b"export const b = (x) => x * 2;\n")
    assert ts and go and rs and java and js
    assert (
        [s.name for s in ts.symbols] == ["add"]
        and ts.symbols[0].doc == "Adds numbers together."
        and ts.imports == ["./b"]
    )
    assert [s.name for s in go.symbols] == ["Server.Run", "helper"] and go.symbols[0].calls == ["helper"]
    assert rs.symbols[0].doc == "Make one." and rs.imports == ["crate::store::Store"]
    assert [s.name for s in java.symbols] == ["W", "W.size"] and java.symbols[1].calls == ["compute"]
    assert [s.name for s in js.symbols] == ["b"]
    index = PathIndex(["web/a.ts", "web/b.ts", "src/store.rs", "src/lib.rs"])
    assert resolve_imports(ts, index) == ["web/b.ts"]
    assert resolve_imports(rs, index) == ["src/store.rs"]


def test_grading_tiers() -> None:
    assert score_chunk("import os\nimport re\nimport sys\n", "imports") < 0.3  # tier 1 drops import blocks
    assert score_chunk("def get_x(self):\n    return self.x\n", "get_x") < 0.3  # and trivial getters
    assert score_chunk(STORE_PY, "Ledger.post") >= 0.6
    v = np.array([[1.0, 0.0], [0.999, 0.04], [0.0, 1.0]], dtype=np.float32)
    assert batch_duplicates(v, 0.95) == [None, 0, None]
    cfg = GradingConfig(tuning=True)
    assert tuned_threshold(cfg, 0.8, 5) < cfg.min_score < tuned_threshold(cfg, 0.8, 0)
    assert tuned_threshold(cfg, 0.5, 0) == cfg.min_score  # too distant to learn from
    assert tuned_threshold(GradingConfig(), 0.9, 0) == 0.3  # tier 3 is opt-in


async def test_code_ingest_chunks_edges_grading(store: Store, embedder, repo: Repo, tmp_path: Path) -> None:
    repo.write("billing/store.py", STORE_PY)
    repo.write("billing/util.py", UTIL_PY)
    repo.write("billing/vendored_copy.py", COPY_PY)
    repo.write("billing/__init__.py", "")
    repo.commit()
    spec = parse_source({"name": "code", "spec": {"git": {"url": str(repo.path), "format": "code"}}})
    quiet = Progress(enabled=False)
    s = await run_ingest(store, embedder, spec, workdir=tmp_path / "w", progress=quiet)
    g = s["grading"]
    assert g["tier1_dropped"] >= 1  # get_x
    assert (
        g["tier2_dropped"] == 1
    )  # vendored_copy.retry (walked after util.py) is a near-duplicate of util.retry
    rows = {
        r["source_key"]: r
        for r in await store.pool_for_tests.fetch("SELECT * FROM memories WHERE status = 'active'")
    }
    assert "code:billing/store.py#Ledger.post" in rows and "code:billing/store.py#Ledger.get_x" not in rows
    assert rows["code:billing/store.py#Ledger"]["body"].count("...") >= 2  # skeleton
    assert rows["code:billing/store.py#Ledger.post:doc"]["kind"] == "summary"
    assert rows["code:billing/store.py"]["kind"] == "map"
    lin = {k.removeprefix("code:"): r["lineage_id"] for k, r in rows.items()}
    edges = {
        (r["source_id"], r["target_id"], r["relation"])
        for r in await store.pool_for_tests.fetch("SELECT source_id, target_id, relation FROM edges")
    }
    assert (lin["billing/store.py"], lin["billing/util.py"], "imports") in edges
    assert (lin["billing/store.py#Ledger"], lin["billing/store.py#Ledger.post"], "contains") in edges
    assert (lin["billing/store.py#Ledger.post"], lin["billing/store.py#Ledger._write"], "calls") in edges
    assert (lin["billing/store.py#Ledger.post"], lin["billing/util.py#retry"], "calls") in edges
    assert (
        lin["billing/store.py#Ledger.post:doc"],
        lin["billing/store.py#Ledger.post"],
        "rationale_for",
    ) in edges

    # a small edit supersedes its own chunk: the previous version must not count as its near-duplicate
    repo.write("billing/util.py", UTIL_PY.replace("min(2 ** attempt, 30)", "min(2 ** attempt, 60)"))
    repo.commit()
    s2 = await run_ingest(store, embedder, spec, workdir=tmp_path / "w", progress=quiet)
    assert (s2["superseded"], s2["retired"]) == (1, 0)
    assert s2["grading"]["tier2_dropped"] == 1  # only the vendored copy, graded again (it was never stored)


async def test_a_model_migration_embeds_code_as_its_card_again(
    store: Store, embedder, repo: Repo, tmp_path: Path
) -> None:
    """A code chunk is embedded as its card (name, docstring gist, the code's start), not its whole
    body. A model migration and the gateway's mend used to embed title and body instead, so after a
    migration code was ranked by other text than before (migration 0007 keeps what was embedded)."""
    repo.write("billing/store.py", STORE_PY)
    repo.commit()
    spec = parse_source({"name": "code", "spec": {"git": {"url": str(repo.path), "format": "code"}}})
    await run_ingest(store, embedder, spec, workdir=tmp_path / "w", progress=Progress(enabled=False))
    key = "code:billing/store.py#Ledger.post"
    sql = "SELECT id, title, body, embed_input, embedding FROM memories WHERE source_key = $1 AND status = 'active'"
    row = await store.pool_for_tests.fetchrow(sql, key)
    card = row["embed_input"]
    assert card.startswith("Ledger.post (method)\nPost one entry") and len(card) <= 400
    assert np.allclose(np.asarray(row["embedding"].to_numpy()), (await embedder.embed([card]))[0], atol=1e-5)

    new = load_embedder(f"{DEFAULT_MODEL}@rp384", base=embedder)
    await store.migrate_model(new)
    row = await store.pool_for_tests.fetchrow(sql, key)
    want, whole = await new.embed([card, embed_text(row["title"], row["body"])])
    got = np.asarray(row["embedding"].to_numpy())
    assert np.allclose(got, want, atol=1e-5) and not np.allclose(got, whole, atol=1e-2)
    # the gateway's mend (for an entry stored while the embedder was away) embeds the card too
    await store.pool_for_tests.execute("UPDATE memories SET embedding = NULL WHERE id = $1", row["id"])
    assert await store.fill_live(new) == 1
    row = await store.pool_for_tests.fetchrow(sql, key)
    assert np.allclose(np.asarray(row["embedding"].to_numpy()), want, atol=1e-5)


async def test_a_card_that_cuts_a_long_token_does_not_stop_the_import(
    store: Store, embedder, repo: Repo, tmp_path: Path
) -> None:
    # The gate lets a random-looking token longer than 63 characters pass (it is no key format), but
    # the card's 400-character cut can shorten it into one that looks like a secret. The card is
    # stored masked; refusing it aborted the whole import.
    token = "yNR2NdreahEyULUFq9p-KNm-7IWsUHSRYZsfek7Ole7ehUt7Tv6JbJxK3mQ_aZ81pLr4Wq2TnV6yBcD0"
    pad = "    # a comment line that moves the literal up to the card's cut\n" * 4
    repo.write("fx/blobs.py", f'def blob():\n    """Return the fixture blob."""\n{pad}    return "{token}"\n')
    repo.commit()
    spec = parse_source({"name": "code", "spec": {"git": {"url": str(repo.path), "format": "code"}}})
    s = await run_ingest(store, embedder, spec, workdir=tmp_path / "w", progress=Progress(enabled=False))
    assert s["rejected"] == 0 and s["added"] >= 1, s
    card = await store.pool_for_tests.fetchval(
        "SELECT embed_input FROM memories WHERE source_key = 'code:fx/blobs.py#blob' AND status = 'active'"
    )
    assert card.startswith("blob (function)") and token[:40] not in card
