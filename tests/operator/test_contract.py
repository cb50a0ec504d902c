"""The operator↔pod contract (brain.core.contract): what the operator renders, the pods accept and read.

- Any Brain the CRD admits renders a config the gateway's settings loader and the distill job's
  loader accept (values drawn from the CRD's own schema, so a bound that differs fails here: the
  CRD once admitted `minCodeLines: 0`, which the gateway refused at start).
- Every BRAIN_* variable rendered into a pod is read by that pod's code (its `python -m` module and
  everything it imports), or is an `os.environ/` reference of the LiteLLM config it mounts.
- Each CronJob gets only the secrets it uses (the digest once received the gateway master key).
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grimp
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain.core.contract import Env
from brain.gateway.settings import load_settings
from brain.jobs.settings.distill import DistillConfig
from brain_operator.api import Brain
from brain_operator.render.litellm_config import CALLBACKS, CUSTOM_AUTH, render_litellm_config

from .helpers import ROOT, brain, deep_set, everything_on, render, sample, source

CRD = ROOT / "crds" / "brain.dev_brains.yaml"


def _spec_schema() -> dict[str, Any]:
    doc = yaml.safe_load(CRD.read_text())
    return dict(doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"])


def _from_schema(node: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values the CRD admits for one schema node (objects: any subset of their bounded fields)."""
    if "enum" in node:
        return st.sampled_from(node["enum"])
    kind = node.get("type")
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers(node.get("minimum", -(2**31)), node.get("maximum", 2**31 - 1))
    if kind == "number":
        return st.floats(node.get("minimum", -1e9), node.get("maximum", 1e9), allow_nan=False)
    if kind == "object" and "properties" in node:
        fields = {k: _from_schema(v) for k, v in node["properties"].items()}
        fields = {k: v for k, v in fields.items() if v is not NOTHING}
        if not fields:
            return NOTHING
        return st.fixed_dictionaries({}, optional=fields)
    return NOTHING  # free-form strings, lists: not bounded knobs


NOTHING: st.SearchStrategy[Any] = st.nothing()
_GATEWAY = _spec_schema()["properties"]["gateway"]["properties"]
KNOBS = st.fixed_dictionaries(
    {},
    optional={"retrieval": _from_schema(_GATEWAY["retrieval"]), "capture": _from_schema(_GATEWAY["capture"])},
)


def _crd_knob_count() -> int:
    """How many leaf knobs the strategy covers (so the test cannot silently cover none)."""

    def leaves(node: dict[str, Any]) -> int:
        if node.get("type") == "object" and "properties" in node:
            return sum(leaves(v) for v in node["properties"].values())
        return 1 if node.get("type") in ("boolean", "integer", "number") or "enum" in node else 0

    return leaves(_GATEWAY["retrieval"]) + leaves(_GATEWAY["capture"])


def test_the_property_test_draws_every_bounded_gateway_knob() -> None:
    assert _crd_knob_count() >= 11  # retrieval: 6 + 3 floors; capture: enabled + 3 filters


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs=KNOBS, distill_model=st.sampled_from([None, "default"]))
def test_every_crd_valid_brain_renders_a_config_the_pods_accept(
    knobs: dict[str, Any], distill_model: str | None
) -> None:
    doc = sample("brain.yaml")
    doc["spec"]["gateway"].update(copy.deepcopy(knobs))
    if distill_model is not None:
        doc["spec"]["distill"] = {"model": doc["spec"]["gateway"]["models"][0]["name"]}
    b = brain(doc)  # what the CRD admits, the API model admits (tests/operator/test_crds.py)
    settings_ = load_settings(render_litellm_config(b), env={})
    spec = b.spec.gateway
    assert settings_.retrieval.top_k == spec.retrieval.top_k
    assert settings_.retrieval.floor.model_dump() == spec.retrieval.floor.model_dump()
    assert settings_.retrieval.standout_ratio == spec.retrieval.standout_ratio
    assert settings_.capture.filters.min_code_lines == spec.capture.filters.min_code_lines
    (distill,) = [c for _, c in _containers(render(b)) if c["name"] == "distill"]
    values = {e["name"]: e.get("value", "secret") for e in distill["env"]}
    cfg = DistillConfig.from_env(values)
    assert cfg.model == values[Env.DISTILL_MODEL]
    assert cfg.api_base and cfg.api_base.endswith("/v1")


# ---------------------------------------------------------------------- every rendered var is read


def _containers(manifests: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for m in manifests:
        spec = m.get("spec") or {}
        for _ in range(3):  # CronJob → Job → Pod template
            if "template" in spec:
                spec = spec["template"]["spec"]
                break
            spec = (spec.get("jobTemplate") or {}).get("spec") or spec
        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            yield m["metadata"]["name"], c


def _module_of(container: dict[str, Any]) -> str | None:
    cmd = [*container.get("command", []), *container.get("args", [])]
    if "-m" in cmd and cmd[cmd.index("-m") + 1].startswith("brain."):
        return str(cmd[cmd.index("-m") + 1])
    return None


_GRAPH: grimp.ImportGraph | None = None


def _reads(module: str) -> set[str]:
    """BRAIN_* names `module` and everything it imports mention: string literals and Env.<NAME>."""
    global _GRAPH
    if _GRAPH is None:
        _GRAPH = grimp.build_graph("brain")
    names: set[str] = set()
    env_attrs = {k: v for k, v in vars(Env).items() if isinstance(v, str)}
    roots = {module}
    if (ROOT / "operator" / Path(*module.split(".")) / "__main__.py").exists():
        roots.add(f"{module}.__main__")  # `python -m <package>` runs its __main__
    if module == "brain.gateway":  # LiteLLM imports the hook and auth objects the config names
        roots |= {CALLBACKS[0].rsplit(".", 1)[0], CUSTOM_AUTH.rsplit(".", 1)[0]}
    reachable = set(roots)
    for root in roots:
        reachable |= _GRAPH.find_upstream_modules(root)
    for mod in reachable:
        if not mod.startswith("brain.") or mod == "brain.core.contract":  # it declares every name
            continue
        path = ROOT / "operator" / Path(*mod.split("."))
        file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        for node in ast.walk(ast.parse(file.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.startswith("BRAIN_")
            ):
                names.add(node.value)
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "Env"
            ):
                names.add(env_attrs.get(node.attr, node.attr))
    return names


def _full_render() -> list[dict[str, Any]]:
    src = source(deep_set(sample("memorysource-git.yaml"), "spec.git.credentialsSecretRef",
                          {"name": "git", "key": "token"}))  # fmt: skip
    return render(everything_on(), sources=(src,))


def test_every_rendered_env_var_is_read_by_its_pod() -> None:
    manifests = _full_render()
    litellm = yaml.safe_dump(render_litellm_config(everything_on()))
    checked, unread = 0, []
    for name, c in _containers(manifests):
        module = _module_of(c)
        if module is None:
            continue
        reads = _reads(module)
        for e in c.get("env", []):
            var = e["name"]
            if not var.startswith("BRAIN_"):
                continue
            checked += 1
            if var not in reads and not (module == "brain.gateway" and f"os.environ/{var}" in litellm):
                unread.append(f"{name}/{c['name']} ({module}): {var}")
    assert checked >= 15, checked
    assert not unread, "rendered but never read:\n" + "\n".join(unread)


def test_the_reader_scan_sees_what_a_pod_does_not_read() -> None:
    """The scan is not vacuous: the digest job does not read the distill model or the master key."""
    reads = _reads("brain.jobs.digest")
    assert Env.DATABASE_URL in reads
    assert Env.DISTILL_MODEL not in reads and Env.MASTER_KEY not in reads
    assert Env.MASTER_KEY in _reads("brain.jobs.distill")


# ---------------------------------------------------------------------- secrets per CronJob


def _secret_env(c: dict[str, Any]) -> set[str]:
    return {e["name"] for e in c.get("env", []) if "secretKeyRef" in (e.get("valueFrom") or {})}


@pytest.mark.parametrize(
    ("job", "secrets"),
    [
        ("digest", {Env.DATABASE_URL}),
        ("distill", {Env.DATABASE_URL, Env.MASTER_KEY}),
        ("ingest", {Env.DATABASE_URL, Env.SOURCE_CREDENTIALS}),
    ],
)
def test_each_cronjob_gets_only_the_secrets_it_uses(job: str, secrets: set[str]) -> None:
    cronjobs = [m for m in _full_render() if m["kind"] == "CronJob"]
    containers = [c for m in cronjobs for _, c in _containers([m]) if c["name"] == job]
    assert containers, f"no {job} CronJob rendered"
    for c in containers:
        assert _secret_env(c) == secrets
        assert _secret_env(c) <= _reads(str(_module_of(c)))


def test_long_brain_names_point_status_and_health_at_the_real_service() -> None:
    from brain_operator.config import OperatorConfig
    from brain_operator.render import names
    from brain_operator.status import endpoints

    long = "b" * 60
    b = Brain.model_validate({**sample("brain.yaml"), "metadata": {"name": long, "namespace": "team-ns"}})
    services = {m["metadata"]["name"] for m in render(b) if m["kind"] == "Service"}
    gateway = names.gateway(long)
    assert gateway in services and len(gateway) <= 63
    assert endpoints(b.spec, long, "team-ns").gateway == f"http://{gateway}.team-ns.svc:4000"
    assert (
        OperatorConfig(images=None)
        .health_url(long, "team-ns", None)
        .startswith(  # type: ignore[arg-type]
            f"http://{gateway}.team-ns.svc:4000/"
        )
    )


def test_a_brain_name_at_the_crd_cap_keeps_every_child_name_plain() -> None:
    """The CRD refuses names over MAX_BRAIN_NAME (tests/operator/test_cluster_validation.py); up to
    it every rendered child is `<brain>-<part>`, within its kind's limit, and one more would hash."""
    from brain_operator.render import names

    longest = "b" * names.MAX_BRAIN_NAME
    assert names.keeps_plain_names(longest)
    assert not names.keeps_plain_names(longest + "b")
    b = Brain.model_validate({**sample("brain.yaml"), "metadata": {"name": longest, "namespace": "team-ns"}})
    for m in render(b):
        name = m["metadata"]["name"]
        if m["kind"] in ("Service", "Secret", "Deployment", "StatefulSet", "ConfigMap", "CronJob", "Cluster"):
            assert name.startswith(longest + "-"), (m["kind"], name)
            assert len(name) <= (52 if m["kind"] == "CronJob" else 63), (m["kind"], name)


# ---------------------------------------------------------------------- one model per shape


def _bounds(model: type[Any]) -> dict[str, tuple[Any, ...]]:
    """Each field's default and numeric bounds (ge, gt, le, lt), nested models by their own."""
    out: dict[str, tuple[Any, ...]] = {}
    for name, f in model.model_fields.items():
        default = f.get_default(call_default_factory=True)
        if hasattr(default, "model_dump"):
            default = default.model_dump()
        out[name] = (default, tuple(sorted(repr(m) for m in f.metadata)))  # Ge(ge=1), Le(le=50), ...
    return out


def test_the_crd_and_the_gateway_share_the_retrieval_section() -> None:
    """api.Retrieval declares spec.gateway.retrieval for the CRD schema (descriptions, camelCase);
    the gateway loads the rendered section with brain.core.contract.RetrievalSection. Same fields,
    same defaults, same bounds: a value the CRD admits, the gateway admits, and no more."""
    from brain.core.contract import RetrievalFloor, RetrievalSection
    from brain.gateway.settings import RetrievalSettings
    from brain.retrieval.pipeline import RetrievalConfig
    from brain_operator.api import Retrieval
    from brain_operator.api import RetrievalFloor as CRDFloor

    assert _bounds(Retrieval) == _bounds(RetrievalSection)
    assert _bounds(CRDFloor) == _bounds(RetrievalFloor)
    assert (
        issubclass(RetrievalSettings, RetrievalSection)
        and RetrievalConfig.model_fields["floor"].annotation is RetrievalFloor
    )
    assert set(RetrievalSettings.model_fields) - set(RetrievalSection.model_fields) == {"cache_ttl_s"}


def test_the_ingest_counts_are_one_shape() -> None:
    """The job prints them, the operator copies them into MemorySource.status.counts: one list."""
    from brain.core.contract import INGEST_COUNTS, IngestCounts, ingest_counts
    from brain.ingest.sync import Summary
    from brain_operator.api import IngestCounts as CRDCounts

    assert _bounds(CRDCounts) == _bounds(IngestCounts)
    assert tuple(Summary(added=2, retired=1).as_dict())[: len(INGEST_COUNTS)] == INGEST_COUNTS
    assert ingest_counts({"added": 3, "rejected": None, "source": "x"}) == {
        "added": 3,
        "superseded": 0,
        "skipped": 0,
        "retired": 0,
        "rejected": 0,
    }
