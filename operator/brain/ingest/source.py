"""A MemorySource as the ingest job sees it, and the walk from a checked-out tree to items and edges.

The job reads `/etc/brain/source.json` (written by the operator: `{"name", "brain", "spec"}` with
the MemorySource spec in its camelCase wire form). Exactly one of git / skills / personas / inline
is set; `origin: untrusted` marks text written outside the team.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brain.core.gitrefs import check_ref, check_url
from brain.core.models import MAX_BODY, bad_identifier, check_namespace
from brain.ingest import code
from brain.ingest.frontmatter import FrontMatterError
from brain.ingest.items import Item, Parsed, Reject, shown_name
from brain.ingest.markdown import is_memory_file, parse_memory
from brain.ingest.personas import is_persona_file, parse_persona
from brain.ingest.retireguard import RetireGuard
from brain.ingest.skills import is_skill_file, parse_skill
from brain.services.plan import Edge

SKIP_DIRS = frozenset(
    {".git", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache", ".ruff_cache", "dist",
     "build", "target", ".pytest_cache", ".idea", ".vscode"}
)  # fmt: skip
MAX_DOC_FILE = 512_000
MIN_SUMMARY_WORDS = 8
MAX_CALLS = 30
#: What a code chunk is embedded as is cut here ($BRAIN_CHUNK_EMBED_CHARS, brain.jobs.settings).
EMBED_CHARS = 400
DEFAULT_INLINE_DIR = "/etc/brain/inline"  # where the ingest job mounts the inline ConfigMap


@dataclass(frozen=True)
class SourceSpec:
    name: str
    kind: str  # git | skills | personas | inline
    namespace: str = "shared"
    origin: str = "import"  # import | untrusted
    url: str | None = None
    ref: str = "main"
    paths: tuple[str, ...] = ()
    format: str = "markdown"  # git only: markdown | code
    inline_dir: str = DEFAULT_INLINE_DIR
    brain: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    retire_guard: RetireGuard = field(default_factory=RetireGuard)

    @property
    def key_prefix(self) -> str:
        return f"{self.name}:"


def parse_source(doc: dict[str, Any], *, inline_dir: str | None = None) -> SourceSpec:
    """The operator's source document → SourceSpec. Raises ValueError naming the bad field."""
    spec = doc.get("spec", doc)
    name = str(doc.get("name") or spec.get("name") or "").strip()
    if not name:
        raise ValueError("source.name is missing: the source document needs the MemorySource's name")
    kinds = [k for k in ("git", "skills", "personas", "inline") if spec.get(k)]
    if len(kinds) != 1:
        raise ValueError("exactly one of spec.git, spec.skills, spec.personas or spec.inline must be set")
    kind = kinds[0]
    origin = str(spec.get("origin", "import"))
    if origin not in ("import", "untrusted"):
        raise ValueError(f"spec.origin is import or untrusted, not {origin!r}")
    namespace = check_namespace(str(spec.get("namespace", "shared")))
    guard = RetireGuard.from_spec(spec.get("retireGuard"))
    body = spec[kind]
    if kind == "inline":
        return SourceSpec(
            name, kind, namespace, origin, inline_dir=inline_dir or DEFAULT_INLINE_DIR,
            brain=doc.get("brain"), extra={"configMapName": body.get("configMapName")},
            retire_guard=guard,
        )  # fmt: skip
    if not body.get("url"):
        raise ValueError(f"spec.{kind}.url is missing")
    # The shape again, before anything connects: a document not written by the API server (a
    # hand-run job, an older operator) meets the CRD's rule here; the scheme policy is checkout's.
    check_url(str(body["url"]), f"spec.{kind}.url", allow_insecure=True, allow_path=True)
    check_ref(str(body.get("ref") or "main"), f"spec.{kind}.ref")
    return SourceSpec(
        name,
        kind,
        namespace,
        origin,
        url=str(body["url"]),
        ref=str(body.get("ref") or "main"),
        paths=tuple(body.get("paths") or ()),
        format=str(body.get("format") or "markdown") if kind == "git" else kind,
        brain=doc.get("brain"),
        retire_guard=guard,
    )


def load_source_file(path: str | Path, *, inline_dir: str | None = None) -> SourceSpec:
    """The mounted source document; an inline source's folder is `inline_dir` ($BRAIN_INLINE_DIR)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read source file {path}: {e}") from None
    return parse_source(doc, inline_dir=inline_dir)


# ---------------------------------------------------------------------- walking


def _matches(rel: str, patterns: tuple[str, ...]) -> bool:
    if not patterns:
        return True
    for p in patterns:
        p = p.strip("/")
        if not p or p == ".":
            return True
        if any(ch in p for ch in "*?["):
            if fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(rel, p.rstrip("/*") + "/*"):
                return True
        elif rel == p or rel.startswith(p + "/"):
            return True
    return False


def walk_files(root: Path, patterns: tuple[str, ...] = ()) -> Iterator[str]:
    """Relative POSIX paths of files under root, sorted, skipping VCS and build folders. Symlinked
    folders are not descended; a symlinked file is yielded and judged by `unsafe_file` on reading."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".."))
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        for f in sorted(filenames):
            if f.startswith(".."):
                continue
            rel = f if rel_dir == "." else f"{rel_dir}/{f}"
            if _matches(rel, patterns):
                yield rel


def unsafe_file(root: Path, rel: str) -> str | None:
    """Why `rel` is skipped rather than read, or None. A hostile repository must not abort the
    import with one odd name, nor make it read what is not its tree: a symlink out of the work
    tree, or into `.git` (whose config holds the remote URL), is never followed."""
    if bad_identifier(rel):
        return "file name has a control character (tab, line break) or is not UTF-8; file skipped"
    full = root / rel
    if full.is_symlink():
        base = root.resolve()
        try:
            target = full.resolve()
        except (OSError, RuntimeError):  # a loop (RuntimeError before Python 3.13)
            return "symlink that cannot be resolved (a loop?); not followed"
        if not target.is_relative_to(base):
            return "symlink pointing outside the repository; not followed"
        if ".git" in target.relative_to(base).parts:
            return "symlink pointing into .git; not followed"
        if not target.is_file():
            return "symlink to something that is not a file; not followed"
    elif not full.is_file():
        return "not a regular file; skipped"
    return None


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    if len(data) > MAX_DOC_FILE:
        raise ValueError(f"file is {len(data)} bytes; at most {MAX_DOC_FILE} are imported")
    return data.decode("utf-8")


def parse_documents(
    root: Path, rels: list[str], parse: Callable[[str, str], Item | None], prefix_keys: str = ""
) -> Parsed:
    out = Parsed()
    for rel in rels:
        if (why := unsafe_file(root, rel)) is not None:
            out.rejects.append(Reject(shown_name(rel), why))
            continue
        try:
            item = parse(rel, _read_text(root / rel))
        except (FrontMatterError, ValueError, UnicodeDecodeError, OSError) as e:
            out.rejects.append(Reject(rel, f"unreadable: {e}"))
            continue
        if item is None:
            continue
        if len(item.body) > MAX_BODY:
            out.rejects.append(Reject(rel, f"body is {len(item.body)} characters; at most {MAX_BODY}"))
            continue
        item.key = prefix_keys + item.key
        out.items.append(item)
    return out


def parse_tree(
    spec: SourceSpec,
    root: Path,
    progress: Callable[[int, int], None] | None = None,
    *,
    embed_chars: int = EMBED_CHARS,
) -> Parsed:
    """Everything a checked-out source (or the inline ConfigMap folder) yields; a code chunk is
    embedded as its first `embed_chars` characters (its card)."""
    if spec.kind == "inline":
        rels = [r for r in walk_files(root) if "/" not in r]
        return parse_documents(root, rels, _inline_memory)
    rels = list(walk_files(root, spec.paths))
    if spec.kind == "skills":
        return parse_documents(root, [r for r in rels if is_skill_file(r)], parse_skill)
    if spec.kind == "personas":
        return parse_documents(root, [r for r in rels if is_persona_file(r)], parse_persona)
    if spec.format == "code":
        return parse_code(root, [r for r in rels if code.language_for(r)], progress, embed_chars)
    return parse_documents(root, [r for r in rels if is_memory_file(r)], parse_memory)


def _inline_memory(rel: str, text: str) -> Item | None:
    """A ConfigMap key is one Markdown memory; keys need not end in .md."""
    return parse_memory(rel, text)


# ---------------------------------------------------------------------- code


def _first_paragraph(doc: str) -> str:
    return doc.strip().split("\n\n", 1)[0].replace("\n", " ").strip()


def _code_body(sym: code.Symbol, fc: code.FileChunks) -> str:
    fence = "```"
    while fence in sym.text:
        fence += "`"
    head = f"{fc.path}:{sym.start_line}-{sym.end_line} · {sym.kind} `{sym.name}` ({fc.language})"
    text = sym.text if len(sym.text) < MAX_BODY - 400 else sym.text[: MAX_BODY - 420] + "\n… (truncated)"
    return f"{head}\n\n{fence}{fc.language}\n{text}\n{fence}"


def _card(sym: code.Symbol, embed_chars: int = EMBED_CHARS) -> str:
    """What a chunk is embedded as: name, docstring gist, then the code's start, cut at `embed_chars`.

    The encoder's cost grows with tokens (2000 characters of code cost ~7x what 300 do) while the
    full body stays searchable through the lexical and identifier legs; the card carries the
    meaning the vector leg needs.
    """
    doc = _first_paragraph(sym.doc)[:200] if sym.doc else ""
    return f"{sym.name} ({sym.kind})\n{doc}\n{sym.text}"[:embed_chars]


def code_items(files: list[code.FileChunks], embed_chars: int = EMBED_CHARS) -> Parsed:
    """Chunks, file map entries, docstring summaries and the contains / calls / imports edges."""
    out = Parsed()
    index = code.PathIndex(fc.path for fc in files)
    by_name: dict[str, list[tuple[str, str]]] = {}  # simple name → (path, item key)
    for fc in files:
        for sym in fc.symbols:
            simple = sym.name.rsplit("~", 1)[0].rsplit(".", 1)[-1]
            by_name.setdefault(simple, []).append((fc.path, f"{fc.path}#{sym.name}"))
    imported: dict[str, set[str]] = {fc.path: set(code.resolve_imports(fc, index)) for fc in files}
    for fc in files:
        defines = ", ".join(f"{s.name} ({s.kind})" for s in fc.symbols if s.parent is None)[:4000]
        imports = sorted(imported[fc.path])
        lines = [f"{fc.path} — {fc.language} source, {fc.lines} lines."]
        if fc.doc:
            lines.append(_first_paragraph(fc.doc)[:1500])
        if defines:
            lines.append(f"Defines: {defines}")
        if imports:
            lines.append("Imports: " + ", ".join(imports[:40]))
        out.items.append(
            Item(
                key=fc.path,
                kind="map",
                title=fc.path[-200:],
                body="\n".join(lines),
                tags=["code-map", fc.language],
                attrs={"path": fc.path, "language": fc.language, "symbols": len(fc.symbols)},
                importance=0.4,
            )
        )
        out.edges.extend(Edge(fc.path, target, "imports") for target in imports)
        for sym in fc.symbols:
            key = f"{fc.path}#{sym.name}"
            out.items.append(
                Item(
                    key=key,
                    kind="code",
                    title=f"{sym.name} ({sym.kind}) — {fc.path}"[:200],
                    body=_code_body(sym, fc),
                    tags=["code", fc.language, sym.kind],
                    attrs={
                        "path": fc.path,
                        "language": fc.language,
                        "symbol": sym.name,
                        "symbol_kind": sym.kind,
                        "lines": [sym.start_line, sym.end_line],
                    },
                    importance=0.4,
                    graded=True,
                    raw=sym.text,
                    embed_text=_card(sym, embed_chars),
                )
            )
            parent_key = f"{fc.path}#{sym.parent}" if sym.parent else fc.path
            out.edges.append(Edge(parent_key, key, "contains"))
            if sym.doc and len(sym.doc.split()) >= MIN_SUMMARY_WORDS:
                first = _first_paragraph(sym.doc)
                out.items.append(
                    Item(
                        key=f"{key}:doc",
                        kind="summary",
                        title=f"{sym.name}: {first}"[:200],
                        body=f"{sym.doc.strip()[:6000]}\n\n(docstring of {sym.kind} `{sym.name}` in {fc.path})",
                        tags=["docstring", fc.language],
                        attrs={"path": fc.path, "symbol": sym.name},
                        importance=0.45,
                    )
                )
                out.edges.append(Edge(f"{key}:doc", key, "rationale_for"))
            for callee in sym.calls[:MAX_CALLS]:
                cands = by_name.get(callee, [])
                local = [k for p, k in cands if p == fc.path]
                via_import = [k for p, k in cands if p in imported[fc.path]]
                if len(local) == 1 and local[0] != key:
                    out.edges.append(Edge(key, local[0], "calls", 1.0))
                elif not local and len(via_import) == 1:
                    out.edges.append(Edge(key, via_import[0], "calls", 0.9))
                elif not local and len(cands) == 1 and cands[0][1] != key:
                    out.edges.append(Edge(key, cands[0][1], "calls", 0.7))
    return out


def parse_code(
    root: Path,
    rels: list[str],
    progress: Callable[[int, int], None] | None = None,
    embed_chars: int = EMBED_CHARS,
) -> Parsed:
    files: list[code.FileChunks] = []
    rejects: list[Reject] = []
    for i, rel in enumerate(rels):
        if (why := unsafe_file(root, rel)) is not None:
            rejects.append(Reject(shown_name(rel), why))
            continue
        try:
            fc = code.chunk_file(rel, (root / rel).read_bytes())
        except Exception as e:  # a grammar crash on one file must not stop the import
            rejects.append(Reject(rel, f"unparseable: {type(e).__name__}: {e}"))
            continue
        if fc is not None:
            files.append(fc)
        if progress and (i % 50 == 0 or i == len(rels) - 1):
            progress(i + 1, len(rels))
    out = code_items(files, embed_chars)
    out.rejects.extend(rejects)
    return out
