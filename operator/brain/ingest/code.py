"""Source code → chunks at syntax-tree boundaries (tree-sitter), with the facts edges are built from.

One chunk per function, method and type. A class with methods is stored as a skeleton (method
bodies elided) so its chunk says what it holds without repeating every method, which has its own
chunk. Calls and imports are found with tree-sitter queries (run in C over the whole file) and
assigned to the innermost enclosing symbol by byte offset, which keeps a large repository fast.

Grammars come from the per-language PyPI wheels (`tree-sitter-python`, …), which carry compiled
parsers and so work offline; `tree-sitter-language-pack` is a fallback where it has them cached.
"""

from __future__ import annotations

import ast
import bisect
import importlib
import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import tree_sitter as ts

MAX_FILE_BYTES = 1_000_000


@dataclass(frozen=True)
class LangSpec:
    name: str
    module: str  # PyPI grammar module
    attr: str  # function in it returning the language pointer
    extensions: tuple[str, ...]
    defs: dict[str, str]  # node type → symbol kind
    containers: frozenset[str]  # defs whose body holds methods
    wrappers: frozenset[str]  # nodes that wrap a def (decorators, export)
    calls: str  # query capturing callee names as @c
    imports: str  # query capturing module specifiers as @m
    doc: str = "comment"  # "python": first string in the body; "comment": comments right above


_JS_DEFS = {
    "function_declaration": "function",
    "generator_function_declaration": "function",
    "class_declaration": "class",
    "abstract_class_declaration": "class",
    "method_definition": "method",
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
    "lexical_declaration": "function",  # only `const f = () => …` (checked in _name)
}
_JS_CALLS = (
    "(call_expression function: [(identifier) @c (member_expression property: (property_identifier) @c)]) "
    "(new_expression constructor: (identifier) @c)"
)
_JS_IMPORTS = "(import_statement source: (string) @m) (export_statement source: (string) @m)"


def _js(name: str, attr: str, ext: tuple[str, ...], module: str) -> LangSpec:
    return LangSpec(
        name,
        module,
        attr,
        ext,
        _JS_DEFS,
        frozenset({"class_declaration", "abstract_class_declaration"}),
        frozenset({"export_statement"}),
        _JS_CALLS,
        _JS_IMPORTS,
    )


LANGUAGES: tuple[LangSpec, ...] = (
    LangSpec(
        "python",
        "tree_sitter_python",
        "language",
        (".py", ".pyi"),
        {"function_definition": "function", "class_definition": "class"},
        frozenset({"class_definition"}),
        frozenset({"decorated_definition"}),
        "(call function: [(identifier) @c (attribute attribute: (identifier) @c)])",
        "(import_statement name: [(dotted_name) @m (aliased_import name: (dotted_name) @m)]) "
        "(import_from_statement module_name: [(dotted_name) (relative_import)] @m)",
        doc="python",
    ),
    _js("javascript", "language", (".js", ".jsx", ".mjs", ".cjs"), "tree_sitter_javascript"),
    _js("typescript", "language_typescript", (".ts", ".mts", ".cts"), "tree_sitter_typescript"),
    _js("tsx", "language_tsx", (".tsx",), "tree_sitter_typescript"),
    LangSpec(
        "go",
        "tree_sitter_go",
        "language",
        (".go",),
        {"function_declaration": "function", "method_declaration": "method", "type_declaration": "type"},
        frozenset(),
        frozenset(),
        "(call_expression function: [(identifier) @c (selector_expression field: (field_identifier) @c)])",
        "(import_spec path: (interpreted_string_literal) @m)",
    ),
    LangSpec(
        "rust",
        "tree_sitter_rust",
        "language",
        (".rs",),
        {
            "function_item": "function",
            "function_signature_item": "method",
            "struct_item": "struct",
            "enum_item": "enum",
            "trait_item": "trait",
            "impl_item": "impl",
        },
        frozenset({"trait_item", "impl_item"}),
        frozenset(),
        "(call_expression function: [(identifier) @c (field_expression field: (field_identifier) @c) "
        "(scoped_identifier name: (identifier) @c)])",
        "(use_declaration argument: (_) @m)",
    ),
    LangSpec(
        "java",
        "tree_sitter_java",
        "language",
        (".java",),
        {
            "class_declaration": "class",
            "interface_declaration": "interface",
            "enum_declaration": "enum",
            "record_declaration": "class",
            "method_declaration": "method",
            "constructor_declaration": "method",
        },
        frozenset({"class_declaration", "interface_declaration", "enum_declaration", "record_declaration"}),
        frozenset(),
        "(method_invocation name: (identifier) @c) (object_creation_expression type: (type_identifier) @c)",
        "(import_declaration (scoped_identifier) @m)",
    ),
)
_BY_EXT = {ext: spec for spec in LANGUAGES for ext in spec.extensions}
_SKIP_DESCENT = re.compile(
    r"(expression|literal|string|arguments|argument_list|dictionary|list|object|array|comment|parameters)$"
)


def language_for(path: str) -> LangSpec | None:
    return _BY_EXT.get(posixpath.splitext(path)[1].lower())


@cache
def _compiled(name: str) -> tuple[ts.Language, ts.Parser, ts.Query, ts.Query] | None:
    spec = next(s for s in LANGUAGES if s.name == name)
    try:  # one PyPI wheel per grammar (pyproject): offline, unlike language packs that download
        lang = ts.Language(getattr(importlib.import_module(spec.module), spec.attr)())
    except (ImportError, AttributeError):
        return None
    return lang, ts.Parser(lang), ts.Query(lang, spec.calls), ts.Query(lang, spec.imports)


@dataclass
class Symbol:
    name: str  # qualified: Class.method
    kind: str
    start_line: int  # 1-based
    end_line: int
    start_byte: int
    end_byte: int
    text: str
    doc: str | None = None
    parent: str | None = None
    calls: list[str] = field(default_factory=list)


@dataclass
class FileChunks:
    path: str
    language: str
    doc: str | None
    symbols: list[Symbol]
    imports: list[str]
    lines: int


# ---------------------------------------------------------------------- docstrings


def _clean_comment(text: str) -> str:
    out = []
    for line in text.splitlines():
        line = line.strip()
        line = re.sub(r"^(/\*\*?|\*/|\*|///?!?|#)\s?", "", line)
        line = re.sub(r"\s*\*/$", "", line)
        out.append(line)
    return "\n".join(out).strip()


def _python_doc(body: ts.Node | None) -> str | None:
    if body is None:
        return None
    first = next((c for c in body.named_children if c.type != "comment"), None)
    if first is None or first.type != "expression_statement" or not first.named_children:
        return None
    node = first.named_children[0]
    if node.type != "string" or node.text is None:
        return None
    raw = node.text.decode(errors="replace")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError):
        value = raw.strip("\"'rbuRBU")
    return value.strip() if isinstance(value, str) and value.strip() else None


def _comment_doc(node: ts.Node) -> str | None:
    parts: list[str] = []
    prev = node.prev_named_sibling
    line = node.start_point[0]
    while prev is not None and prev.type in ("comment", "line_comment", "block_comment"):
        if prev.end_point[0] < line - 1:
            break
        parts.append(_clean_comment((prev.text or b"").decode(errors="replace")))
        line = prev.start_point[0]
        prev = prev.prev_named_sibling
    doc = "\n".join(reversed(parts)).strip()
    return doc or None


# ---------------------------------------------------------------------- symbols


def _text(node: ts.Node | None) -> str:
    return (node.text or b"").decode(errors="replace") if node is not None else ""


def _name(node: ts.Node, spec: LangSpec) -> str | None:
    t = node.type
    if t == "lexical_declaration":
        for decl in node.named_children:
            value = decl.child_by_field_name("value")
            if (
                decl.type == "variable_declarator"
                and value is not None
                and value.type
                in (
                    "arrow_function",
                    "function_expression",
                    "function",
                )
            ):
                return _text(decl.child_by_field_name("name")) or None
        return None
    if t == "type_declaration":
        spec_node = next((c for c in node.named_children if c.type in ("type_spec", "type_alias")), None)
        return _text(spec_node.child_by_field_name("name")) if spec_node is not None else None
    if t == "impl_item":
        ty = _text(node.child_by_field_name("type"))
        trait = _text(node.child_by_field_name("trait"))
        return (f"impl {trait} for {ty}" if trait else f"impl {ty}") if ty else None
    name = node.child_by_field_name("name")
    return _text(name) or None


def _body(node: ts.Node) -> ts.Node | None:
    if node.type == "lexical_declaration":
        for decl in node.named_children:
            value = decl.child_by_field_name("value")
            if value is not None:
                return value.child_by_field_name("body")
        return None
    return node.child_by_field_name("body")


def _receiver(node: ts.Node) -> str | None:
    """Go: `func (s *Server) Run()` belongs to Server."""
    recv = node.child_by_field_name("receiver")
    if recv is None:
        return None
    m = re.search(r"\*?\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[[^\]]*\])?\s*\)\s*$", _text(recv))
    return m.group(1) if m else None


def _owner_name(name: str) -> str:
    """Rust `impl Trait for Type` holds methods of Type."""
    if name.startswith("impl "):
        return name.split(" for ")[-1].removeprefix("impl ")
    return name


class _Walker:
    def __init__(self, spec: LangSpec, source: bytes) -> None:
        self.spec = spec
        self.source = source
        self.symbols: list[Symbol] = []

    def walk(self, node: ts.Node, parent: Symbol | None) -> None:
        for child in node.named_children:
            self.visit(child, parent)

    def visit(self, node: ts.Node, parent: Symbol | None, outer: ts.Node | None = None) -> None:
        spec = self.spec
        if node.type in spec.wrappers:
            inner = node.child_by_field_name("definition") or node.child_by_field_name("declaration")
            if inner is None:
                inner = next((c for c in node.named_children if c.type in spec.defs), None)
            if inner is not None:
                self.visit(inner, parent, outer=node)
            return
        if node.type in spec.defs:
            name = _name(node, spec)
            if name:
                self.add(node, outer or node, name, parent)
                return
        if node.type in ("mod_item", "namespace_declaration", "internal_module"):
            body = node.child_by_field_name("body")
            if body is not None:
                self.walk(body, parent)
            return
        if not _SKIP_DESCENT.search(node.type) and node.named_child_count:
            self.walk(node, parent)

    def add(self, node: ts.Node, span: ts.Node, name: str, parent: Symbol | None) -> None:
        spec = self.spec
        kind = spec.defs[node.type]
        if parent is not None and kind == "function":
            kind = "method"
        owner = _owner_name(parent.name) if parent is not None else None
        if owner is None and node.type == "method_declaration":
            owner = _receiver(node)
        qualified = f"{owner}.{name}" if owner else name
        body = _body(node)
        doc = _python_doc(body) if spec.doc == "python" else _comment_doc(span)
        sym = Symbol(
            name=qualified,
            kind=kind,
            start_line=span.start_point[0] + 1,
            end_line=span.end_point[0] + 1,
            start_byte=span.start_byte,
            end_byte=span.end_byte,
            text=self.source[span.start_byte : span.end_byte].decode(errors="replace"),
            doc=doc,
            parent=parent.name if parent is not None else owner,
        )
        self.symbols.append(sym)
        if node.type in spec.containers and body is not None:
            before = len(self.symbols)
            self.walk(body, sym)
            methods = [s for s in self.symbols[before:] if s.parent == sym.name]
            if methods:
                sym.text = self.skeleton(span, methods)

    def skeleton(self, span: ts.Node, methods: list[Symbol]) -> str:
        """The class with each method's body replaced by `...`: what it holds, not how."""
        out, pos = [], span.start_byte
        for m in sorted(methods, key=lambda s: s.start_byte):
            cut = self._body_start(m)
            if cut is None or cut < pos:
                continue
            out.append(self.source[pos:cut])
            out.append(b" ...")
            pos = m.end_byte
        out.append(self.source[pos : span.end_byte])
        return b"".join(out).decode(errors="replace")

    def _body_start(self, m: Symbol) -> int | None:
        # the first `{` or `:` line end after the signature, found from the symbol's own text
        text = self.source[m.start_byte : m.end_byte]
        if self.spec.doc == "python":
            mt = re.search(rb"\)\s*(?:->[^:]+)?:", text)
            return m.start_byte + mt.end() if mt else None
        idx = text.find(b"{")
        return m.start_byte + idx if idx >= 0 else None


def chunk_file(path: str, source: bytes) -> FileChunks | None:
    """Parse one file. None when the language is unknown, its grammar missing, or the file too large."""
    spec = language_for(path)
    if spec is None or len(source) > MAX_FILE_BYTES or b"\x00" in source[:8192]:
        return None
    compiled = _compiled(spec.name)
    if compiled is None:
        return None
    _, parser, calls_q, imports_q = compiled
    tree = parser.parse(source)
    root = tree.root_node
    walker = _Walker(spec, source)
    walker.walk(root, None)
    symbols = walker.symbols
    seen: dict[str, int] = {}
    for sym in symbols:  # overloads, Go `init`s, repeated impls: keep identities unique within the file
        n = seen[sym.name] = seen.get(sym.name, 0) + 1
        if n > 1:
            sym.name = f"{sym.name}~{n}"
    # Calls: assign each callee to the innermost symbol containing it (symbols are nested or disjoint).
    ordered = sorted(symbols, key=lambda s: (s.start_byte, -s.end_byte))
    starts = [s.start_byte for s in ordered]
    for node in ts.QueryCursor(calls_q).captures(root).get("c", []):
        i = bisect.bisect_right(starts, node.start_byte) - 1
        while i >= 0 and ordered[i].end_byte < node.end_byte:
            i -= 1
        if i >= 0:
            callee = _text(node)
            if callee and callee not in ordered[i].calls:
                ordered[i].calls.append(callee)
    imports = []
    for node in ts.QueryCursor(imports_q).captures(root).get("m", []):
        spec_text = _text(node).strip().strip("\"'`")
        if spec_text and spec_text not in imports:
            imports.append(spec_text)
    doc = None
    if spec.doc == "python":
        doc = _python_doc(root)
    else:
        first = root.named_children[0] if root.named_children else None
        if first is not None and first.type in ("comment", "line_comment", "block_comment"):
            doc = _clean_comment(_text(first))
    return FileChunks(path, spec.name, doc, symbols, imports, source.count(b"\n") + 1)


# ---------------------------------------------------------------------- import resolution


class PathIndex:
    """Every path suffix → paths, so `brain.store.store` finds `operator/brain/store/store.py`."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = set(paths)
        self.suffix: dict[str, list[str]] = {}
        self.dirs: dict[str, list[str]] = {}
        for p in self.paths:
            parts = p.split("/")
            for i in range(len(parts)):
                self.suffix.setdefault("/".join(parts[i:]), []).append(p)
            d = parts[:-1]
            for i in range(len(d)):
                self.dirs.setdefault("/".join(d[i:]), []).append(p)

    def unique(self, *candidates: str) -> str | None:
        for c in candidates:
            hits = self.suffix.get(c, [])
            if len(hits) == 1:
                return hits[0]
        return None


def _py_targets(from_path: str, spec: str, index: PathIndex) -> list[str]:
    if spec.startswith("."):
        dots = len(spec) - len(spec.lstrip("."))
        base = posixpath.dirname(from_path)
        for _ in range(dots - 1):
            base = posixpath.dirname(base)
        rest = spec.lstrip(".").replace(".", "/")
        stem = posixpath.join(base, rest) if rest else base
        cands = [f"{stem}.py", f"{stem}/__init__.py"]
        return [c for c in cands if c in index.paths][:1]
    parts = spec.split(".")
    for n in range(len(parts), 0, -1):
        stem = "/".join(parts[:n])
        hit = index.unique(f"{stem}.py", f"{stem}/__init__.py")
        if hit:
            return [hit]
    return []


def _js_targets(from_path: str, spec: str, index: PathIndex) -> list[str]:
    if not spec.startswith("."):
        return []
    stem = posixpath.normpath(posixpath.join(posixpath.dirname(from_path), spec))
    stem = re.sub(r"\.(js|mjs|cjs|jsx)$", "", stem) if stem not in index.paths else stem
    for ext in ("", ".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", "/index.ts", "/index.tsx", "/index.js"):
        if stem + ext in index.paths:
            return [stem + ext]
    return []


def _go_targets(_from: str, spec: str, index: PathIndex) -> list[str]:
    parts = spec.split("/")
    for n in (3, 2, 1):
        if len(parts) >= n:
            files = [p for p in index.dirs.get("/".join(parts[-n:]), []) if p.endswith(".go")]
            files = [p for p in files if posixpath.dirname(p).endswith("/".join(parts[-n:]))]
            if files and len({posixpath.dirname(p) for p in files}) == 1:
                return sorted(f for f in files if not f.endswith("_test.go"))[:10]
    return []


def _rust_targets(from_path: str, spec: str, index: PathIndex) -> list[str]:
    parts = [p for p in re.split(r"::", spec.split("{")[0]) if p and p not in ("self",)]
    if not parts or parts[0] not in ("crate", "super"):
        return []
    base = parts[1:]
    for n in range(len(base), 0, -1):
        stem = "/".join(base[:n])
        hit = index.unique(f"src/{stem}.rs", f"src/{stem}/mod.rs", f"{stem}.rs", f"{stem}/mod.rs")
        if hit and hit != from_path:
            return [hit]
    return []


def _java_targets(_from: str, spec: str, index: PathIndex) -> list[str]:
    hit = index.unique(spec.replace(".", "/") + ".java")
    return [hit] if hit else []


_RESOLVERS: dict[str, Callable[[str, str, PathIndex], list[str]]] = {
    "python": _py_targets,
    "javascript": _js_targets,
    "typescript": _js_targets,
    "tsx": _js_targets,
    "go": _go_targets,
    "rust": _rust_targets,
    "java": _java_targets,
}


def resolve_imports(fc: FileChunks, index: PathIndex) -> list[str]:
    """Files of this repository the file imports (external packages are not edges)."""
    out: list[str] = []
    for spec in fc.imports:
        for target in _RESOLVERS[fc.language](fc.path, spec, index):
            if target != fc.path and target not in out:
                out.append(target)
    return out


def describe(fc: FileChunks) -> dict[str, Any]:
    return {"path": fc.path, "language": fc.language, "symbols": len(fc.symbols), "lines": fc.lines}
