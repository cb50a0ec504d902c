"""Generate the CRDs in ``crds/`` (and ``docs/crd-reference.md``) from the pydantic models.

Pydantic emits JSON Schema (``$ref``, ``anyOf`` with ``null``, ``additionalProperties: false``,
titles); the API server wants a *structural* OpenAPI v3 schema: every node typed, no ``$ref``,
``nullable`` instead of null branches, ``x-kubernetes-int-or-string`` for quantities, and pruning
instead of ``additionalProperties: false``. :func:`structural` does that translation, so the CRDs
carry exactly the descriptions, defaults, enums, bounds and CEL rules written in ``api.py``.

Usage: ``python -m brain_operator.crdgen crds [--check]`` (also writes docs/crd-reference.md and
samples/operator/install.yaml next to ``crds/``).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from brain_operator import GROUP, VERSION
from brain_operator.api import QUANTITY_PATTERN, RESOURCES
from brain_operator.rbac import install_manifests
from brain_operator.render import names

#: Not "brain": kubectl expands a category before resource names, so a category equal to the
#: singular would break `kubectl get brain <name>`.
CATEGORY = "brain-all"

# Keys that pydantic emits but a CRD schema must not carry (or does not need).
_DROP = {"title", "additionalProperties", "$defs", "examples"}


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Inline ``$ref`` (and single-element ``allOf``), keeping sibling keys as overrides."""
    node = dict(node)
    if "allOf" in node and len(node["allOf"]) == 1:
        node = {**node.pop("allOf")[0], **node}
    ref = node.pop("$ref", None)
    if ref is None:
        return node
    target = dict(defs[ref.rsplit("/", 1)[-1]])
    rules = list(target.get("x-kubernetes-validations", [])) + list(node.get("x-kubernetes-validations", []))
    merged = {**target, **node}
    if rules:
        merged["x-kubernetes-validations"] = rules
    return merged


def _is_optional(node: dict[str, Any]) -> bool:
    """``Optional[X]`` in pydantic's schema: an ``anyOf`` with a null branch."""
    return any(b.get("type") == "null" for b in node.get("anyOf", []))


def materialize(node: dict[str, Any]) -> dict[str, Any]:
    """The object the API server would produce from ``{}`` by applying this schema's defaults."""
    out: dict[str, Any] = {}
    for name, sub in (node.get("properties") or {}).items():
        if "default" in sub:
            out[name] = copy.deepcopy(sub["default"])
    return out


def structural(
    node: dict[str, Any], defs: dict[str, Any], *, optional: bool = False, nullable: bool = False
) -> dict[str, Any]:
    """Translate one pydantic JSON-schema node into a structural OpenAPI v3 node.

    ``Optional[X]`` becomes ``X`` plus, when ``nullable`` (status schemas, where the operator may
    write an explicit null), ``nullable: true``. In spec schemas a null is better pruned by the
    API server, so the field's default applies, as pydantic treats None.
    """
    node = _resolve(node, defs)
    had_null = False
    if "anyOf" in node:
        branches = node.pop("anyOf")
        kept = [b for b in branches if b.get("type") != "null"]
        had_null = len(kept) < len(branches)
        if len(kept) != 1:
            raise ValueError(f"cannot express anyOf {branches!r} structurally")
        inner = _resolve(kept[0], defs)
        rules = list(inner.get("x-kubernetes-validations", [])) + list(
            node.get("x-kubernetes-validations", [])
        )
        node = {**inner, **node}
        if rules:
            node["x-kubernetes-validations"] = rules
    if node.get("default", 0) is None:
        node.pop("default")

    out: dict[str, Any] = {}
    if "description" in node:
        out["description"] = " ".join(str(node["description"]).split())
    if node.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        out["x-kubernetes-int-or-string"] = True
        out["pattern"] = node.get("pattern", QUANTITY_PATTERN)
    elif "const" in node:
        out["type"] = node.get("type", "string")
        out["enum"] = [node["const"]]
    else:
        kind = node.get("type")
        if kind is None:
            raise ValueError(f"untyped schema node: {node!r}")
        out["type"] = kind
        for key in ("enum", "format", "pattern", "minimum", "maximum", "minLength", "maxLength"):
            if key in node:
                out[key] = node[key]
        if kind == "array":
            out["items"] = structural(node["items"], defs, nullable=nullable)
            for key in ("minItems", "maxItems", "x-kubernetes-list-type", "x-kubernetes-list-map-keys"):
                if key in node:
                    out[key] = node[key]
        if kind == "object":
            props = node.get("properties")
            if props:
                required = set(node.get("required", []))
                out["properties"] = {}
                for name, sub in props.items():
                    child = structural(sub, defs, optional=name not in required, nullable=nullable)
                    if (
                        name not in required
                        and child.get("type") == "object"
                        and "default" not in child
                        and not _is_optional(sub)
                        and "properties" in child
                    ):
                        # A sub-object with a default_factory: spell out its defaulted value (the API
                        # server checks CEL rules against the default itself, before nested defaults).
                        child["default"] = materialize(child)
                    out["properties"][name] = child
                if required:
                    out["required"] = sorted(required)
            elif isinstance(node.get("additionalProperties"), dict):
                out["additionalProperties"] = structural(
                    node["additionalProperties"], defs, nullable=nullable
                )
    if "default" in node:
        out["default"] = node["default"]
    if nullable and had_null and optional and "default" not in out:
        out["nullable"] = True
    if node.get("x-kubernetes-validations"):
        out["x-kubernetes-validations"] = node["x-kubernetes-validations"]
    return out


def _schema_of(model: Any, *, nullable: bool) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.get("$defs", {})
    return structural(raw, defs, nullable=nullable)


_PRINTER_COLUMNS: dict[str, list[dict[str, Any]]] = {
    "Brain": [
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Entries", "type": "integer", "jsonPath": ".status.index.totalEntries"},
        {"name": "Gateway", "type": "string", "jsonPath": ".status.endpoints.gateway"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    "MemorySource": [
        {"name": "Brain", "type": "string", "jsonPath": ".spec.brainRef.name"},
        {"name": "Scope", "type": "string", "jsonPath": ".spec.namespace"},
        {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"},
        {"name": "Synced", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Synced")].status'},
        {"name": "Last Sync", "type": "date", "jsonPath": ".status.lastSync"},
        {"name": "Added", "type": "integer", "jsonPath": ".status.counts.added", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    "RoutingPolicy": [
        {"name": "Brain", "type": "string", "jsonPath": ".spec.brainRef.name"},
        {"name": "Model", "type": "string", "jsonPath": ".spec.modelName"},
        {"name": "Applied", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Applied")].status'},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
}


def crd(kind: str) -> dict[str, Any]:
    """The CustomResourceDefinition for one kind."""
    info = RESOURCES[kind]
    spec_schema = _schema_of(info["spec"], nullable=False)
    status_schema = _schema_of(info["status"], nullable=True)
    root: dict[str, Any] = {
        "type": "object",
        "description": " ".join(str(info["model"].__doc__).split()),
        "required": ["spec"],
        "properties": {
            "apiVersion": {
                "type": "string",
                "description": "API version of this object: brain.dev/v1alpha1.",
            },
            "kind": {"type": "string", "description": f"Kind of this object: {kind}."},
            "metadata": {"type": "object"},
            "spec": spec_schema,
            "status": status_schema,
        },
    }
    if kind == "Brain":
        # metadata is not validated by a CRD's schema, but a rule at the root may read its name
        # (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#validation-rules).
        root["x-kubernetes-validations"] = [
            {
                "rule": f"self.metadata.name.size() <= {names.MAX_BRAIN_NAME}",
                "message": f"metadata.name must be at most {names.MAX_BRAIN_NAME} characters, so every "
                "child (Services, Secrets, CronJobs) is named <brain>-<part>",
            }
        ]
    if kind == "MemorySource":
        # The name is the value of the brain.dev/memorysource label of its ConfigMap, CronJob and Jobs:
        # a longer one (a DNS subdomain may have 253 characters) failed every apply of its Brain.
        root["x-kubernetes-validations"] = [
            {
                "rule": f"self.metadata.name.size() <= {names.MAX_SOURCE_NAME}",
                "message": f"metadata.name must be at most {names.MAX_SOURCE_NAME} characters: it is the "
                "value of the brain.dev/memorysource label of the source's ConfigMap, CronJob and Jobs",
            }
        ]
    plural = info["plural"]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "brain-operator"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": info["singular"],
                "shortNames": info["short_names"],
                "categories": [CATEGORY],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": _PRINTER_COLUMNS[kind],
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


def kopf_peering_crds() -> list[dict[str, Any]]:
    """kopf's peering CRDs: two operator replicas use them to elect the active one."""
    out = []
    for kind, scope in (("KopfPeering", "Namespaced"), ("ClusterKopfPeering", "Cluster")):
        plural = kind.lower() + "s"
        out.append(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {
                    "name": f"{plural}.kopf.dev",
                    "labels": {"app.kubernetes.io/part-of": "brain-operator"},
                },
                "spec": {
                    "group": "kopf.dev",
                    "scope": scope,
                    "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
                    "versions": [
                        {
                            "name": "v1",
                            "served": True,
                            "storage": True,
                            "schema": {
                                "openAPIV3Schema": {
                                    "type": "object",
                                    "description": "kopf peering: operator replicas announce themselves.",
                                    "properties": {
                                        "status": {
                                            "type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True,
                                        }
                                    },
                                }
                            },
                        }
                    ],
                },
            }
        )
    return out


HEADER = (
    "# Generated by `python -m brain_operator.crdgen` from operator/brain_operator/api.py. Do not edit.\n"
)


def dump(obj: dict[str, Any]) -> str:
    return HEADER + yaml.safe_dump(obj, sort_keys=False, width=100, allow_unicode=True)


def outputs() -> dict[str, str]:
    """File name (inside crds/) → YAML text, for every generated CRD."""
    files = {}
    for kind, info in RESOURCES.items():
        files[f"{GROUP}_{info['plural']}.yaml"] = dump(crd(kind))
    for peering in kopf_peering_crds():
        files[f"{peering['metadata']['name'].split('.', 1)[1]}_{peering['spec']['names']['plural']}.yaml"] = (
            dump(peering)
        )
    return files


# ------------------------------------------------------------------------------------------------
# Markdown reference
# ------------------------------------------------------------------------------------------------


def _type_of(node: dict[str, Any]) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "quantity"
    kind = str(node.get("type", "?"))
    if kind == "array":
        return f"[]{_type_of(node['items'])}"
    if kind == "object" and "additionalProperties" in node:
        return f"map[string]{_type_of(node['additionalProperties'])}"
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    return kind


def _constraints(node: dict[str, Any]) -> str:
    bits = []
    if "minimum" in node or "maximum" in node:
        bits.append(f"{node.get('minimum', '')}..{node.get('maximum', '')}")
    if "maxLength" in node:
        bits.append(f"≤{node['maxLength']} chars")
    if "maxItems" in node:
        bits.append(f"≤{node['maxItems']} items")
    if "minItems" in node:
        bits.append(f"≥{node['minItems']} items")
    for rule in node.get("x-kubernetes-validations", []):
        msg = rule["message"]
        bits.append(msg if "cron" not in msg else "cron schedule")
    return "; ".join(bits)


def _rows(node: dict[str, Any], path: str, required: bool, rows: list[str]) -> None:
    default = node.get("default")
    default_s = "" if default is None or default == {} else f"`{json.dumps(default)}`"
    desc = str(node.get("description", "")).replace("|", "\\|")
    checks = _constraints(node).replace("|", "\\|")
    rows.append(
        f"| `{path}` | {_type_of(node)} | {'yes' if required else ''} | {default_s} | {desc} | {checks} |"
    )
    target = node.get("items", node) if node.get("type") == "array" else node
    suffix = "[]" if node.get("type") == "array" else ""
    req = set(target.get("required", []))
    for name, sub in target.get("properties", {}).items():
        _rows(sub, f"{path}{suffix}.{name}", name in req, rows)


def reference_markdown() -> str:
    """docs/crd-reference.md: every field with type, default, description and validation."""
    out = [
        "# CRD reference",
        "",
        "Generated by `make crds` (`python -m brain_operator.crdgen crds`) from",
        "`operator/brain_operator/api.py`; do not edit by hand. Group `brain.dev`, version `v1alpha1`,",
        "all namespaced, category `brain-all` (`kubectl get brain-all` lists all three kinds' objects).",
        "",
    ]
    for kind, info in RESOURCES.items():
        c = crd(kind)
        version = c["spec"]["versions"][0]
        schema = version["schema"]["openAPIV3Schema"]
        out += [
            f"## {kind}",
            "",
            schema["description"],
            "",
            f"Plural `{info['plural']}`, short name `{info['short_names'][0]}`. Columns: "
            + ", ".join(col["name"].upper() for col in version["additionalPrinterColumns"])
            + ".",
            "",
        ]
        for rule in schema.get("x-kubernetes-validations", []):
            out += [f"Validation of the whole object: {rule['message']} (`{rule['rule']}`).", ""]
        for part in ("spec", "status"):
            rows: list[str] = [
                "| Field | Type | Required | Default | Description | Validation |",
                "|---|---|---|---|---|---|",
            ]
            _rows(schema["properties"][part], part, part == "spec", rows)
            out += [f"### {kind} {part}", "", *rows, ""]
    return "\n".join(out).rstrip() + "\n"


def install_yaml() -> str:
    docs = install_manifests()
    return HEADER + "".join("---\n" + yaml.safe_dump(d, sort_keys=False, width=100) for d in docs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m brain_operator.crdgen", description=__doc__.split("\n")[0]
    )
    parser.add_argument("out", type=Path, help="directory to write the CRD YAML files into (e.g. crds)")
    parser.add_argument(
        "--docs", type=Path, help="Markdown field reference (default: <out>/../docs/crd-reference.md)"
    )
    parser.add_argument(
        "--install",
        type=Path,
        help="operator install manifest (default: <out>/../samples/operator/install.yaml)",
    )
    parser.add_argument("--crds-only", action="store_true", help="write only the CRDs")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change")
    args = parser.parse_args(argv)

    wanted = {args.out / name: text for name, text in outputs().items()}
    if not args.crds_only:
        wanted[args.docs or args.out.parent / "docs" / "crd-reference.md"] = reference_markdown()
        wanted[args.install or args.out.parent / "samples" / "operator" / "install.yaml"] = install_yaml()
    stale = [path for path, text in wanted.items() if not path.exists() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"out of date: {path}", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(wanted[path])
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
