"""One reconcile of one Brain: read, render, diff, apply what changed, prune, write status.

Blocking code (the Kubernetes client is synchronous); the handlers run it in a worker thread,
serialised per Brain. It is level-triggered: whatever woke it up, it compares the whole desired
stack with the live one, so a missed event costs latency, never correctness.

Write discipline (a resync of an unchanged Brain makes zero write calls):
- a child is applied only when some rendered field differs from the live object (:mod:`diff`);
- a child is deleted only when it carries this Brain's labels and ownerReference but is no longer
  rendered;
- status is patched only when the computed status differs from the stored one.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from brain.core.contract import ingest_counts
from brain.core.gitrefs import check_url
from brain_operator import API_VERSION
from brain_operator.api import Brain, MemorySource, RoutingPolicy
from brain_operator.config import OperatorConfig
from brain_operator.diff import first_difference
from brain_operator.health import Health
from brain_operator.kube import BRAIN_KINDS, CHILD_KINDS, KINDS, POD, SECRET, Kube, KubeError
from brain_operator.metrics import BRAIN_READY, forget_brain, set_backup, set_index
from brain_operator.reindexing import reindex_check, set_reindex_metrics
from brain_operator.render import names
from brain_operator.render.common import (
    BRAIN_LABEL,
    MANAGED_BY,
    Capabilities,
    GeneratedSecrets,
    Manifest,
    RenderInput,
    owner_reference,
)
from brain_operator.render.gateway import config_hash
from brain_operator.render.jobs import (
    reindex_model_hash,
    render_ingest_job,
    render_reindex_job,
    source_hash,
)
from brain_operator.render.litellm_config import check_policies
from brain_operator.render.secrets import db_roles, master_key_ref, needs_db_password, needs_master_key
from brain_operator.render.stack import render_brain
from brain_operator.secret_use import (
    DATABASE_SUPERUSER,
    DATABASE_URL,
    MASTER_KEY,
    SECRET_NOT_PERMITTED,
    SECRETS_CONDITION,
    Refusal,
    blocks_brain,
    brain_uses,
    log_summary,
    permitted,
    refused,
    source_uses,
    summary,
    taken_over_message,
    without_refused,
)
from brain_operator.status import (
    Check,
    cnpg_ready,
    endpoints,
    index_check,
    merge_conditions,
    now_iso,
    phase_of,
    ready_check,
    secret_has_key,
    status_differs,
    workload_ready,
)

log = logging.getLogger("brain_operator.reconciler")

#: emit(object body, event type, reason, message): posts a Kubernetes Event.
Emit = Callable[[dict[str, Any], str, str, str], None]
OPTIONAL_APIS = {
    "Cluster": ("postgresql.cnpg.io/v1", "clusters"),
    "ServiceMonitor": ("monitoring.coreos.com/v1", "servicemonitors"),
}


def _no_emit(body: dict[str, Any], etype: str, reason: str, message: str) -> None:
    return None


@dataclass
class Result:
    """What one reconcile did, for metrics, events and tests."""

    applied: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    jobs_created: list[str] = field(default_factory=list)
    status_written: bool = False
    phase: str | None = None
    ready: bool = False
    error: str | None = None

    @property
    def wrote(self) -> bool:
        return bool(self.applied or self.deleted or self.jobs_created or self.status_written)


def _decode(secret: dict[str, Any] | None, key: str) -> str | None:
    if not secret:
        return None
    raw = (secret.get("data") or {}).get(key)
    return base64.b64decode(raw).decode() if raw else None


def _ref(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def _owned_by(obj: dict[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj.get("metadata", {}).get("ownerReferences") or [])


def _child_selector(brain: str) -> str:
    """The labels every child of this Brain carries (what the reconcile lists and prunes by)."""
    return f"app.kubernetes.io/managed-by={MANAGED_BY},{BRAIN_LABEL}={brain}"


def _has_labels(obj: dict[str, Any], selector: str) -> bool:
    """Whether obj carries every ``key=value`` of an equality selector (what a list would match)."""
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(labels.get(k) == v for k, _, v in (p.partition("=") for p in selector.split(",")))


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    return "; ".join(parts)


class Reconciler:
    def __init__(self, kube: Kube, cfg: OperatorConfig) -> None:
        self.kube = kube
        self.cfg = cfg
        self.health: dict[tuple[str, str], Health] = {}

    # -- inputs ----------------------------------------------------------------------------------

    def _related(self, namespace: str, brain: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Raw RoutingPolicies and MemorySources in the namespace that point at this Brain."""
        policies = [
            p
            for p in self.kube.list(BRAIN_KINDS["RoutingPolicy"], namespace)
            if (p.get("spec", {}).get("brainRef") or {}).get("name") == brain
        ]
        sources = [
            s
            for s in self.kube.list(BRAIN_KINDS["MemorySource"], namespace)
            if (s.get("spec", {}).get("brainRef") or {}).get("name") == brain
        ]
        return policies, sources

    def _generated_secrets(self, brain: Brain) -> tuple[GeneratedSecrets, list[str]]:
        """Read back what was generated before; generate only what has never existed.

        Also the Secrets in the way: one at a generated name that this Brain did not generate and
        whose owner did not label it for the use. Applying ours would take it over (its value read
        back as ours, its ownerReference set, so it would be deleted with the Brain): a tenant
        could pick a Brain name to reach any ``*-master-key`` Secret. Their messages, if any.
        """
        ns, name = brain.metadata.namespace or "default", brain.metadata.name
        probe = RenderInput(brain=brain)
        password = key = None
        conflicts: list[str] = []
        if needs_db_password(probe):
            live = self._generated_secret(ns, name, names.db_credentials(name), DATABASE_SUPERUSER, conflicts)
            password = _decode(live, "password") or secrets.token_urlsafe(24)
        if needs_master_key(probe):
            live = self._generated_secret(ns, name, names.master_key(name), MASTER_KEY, conflicts)
            key = _decode(live, "masterKey") or "sk-brain-" + secrets.token_urlsafe(32)
        logins: dict[str, str] = {}
        for role in db_roles(probe):  # one Postgres login per job (issue #26)
            live = self._generated_secret(ns, name, names.db_role(name, role), DATABASE_URL, conflicts)
            logins[role] = _decode(live, "password") or secrets.token_urlsafe(24)
        return GeneratedSecrets(db_password=password, master_key=key, db_role_passwords=logins), conflicts

    def _generated_secret(
        self, namespace: str, brain: str, secret: str, use: str, conflicts: list[str]
    ) -> dict[str, Any] | None:
        """The live Secret at a generated name, when it is this Brain's own or its owner labelled it
        for the use (then it is adopted); otherwise None, and a message in ``conflicts``."""
        live = self.kube.get(SECRET, namespace, secret)
        if live is None or _has_labels(live, _child_selector(brain)) or permitted(live, use):
            return live
        conflicts.append(taken_over_message(secret, brain, use))
        return None

    def master_key(self, body: dict[str, Any]) -> str | None:
        """The gateway's master key, so the health poll may read the per-namespace counts that the
        gateway shows only to an owner. None (the public figures) if it cannot be read.

        The same Secret the gateway gets: a ``masterKeySecretRef`` whose Secret is not labelled
        ``brain.dev/secret-use=master-key`` is not read, the generated key is (as in the reconcile).
        """
        try:
            brain = Brain.model_validate(body)
            ns = brain.metadata.namespace or "default"
            # The default health URL is the gateway Service's name: only a Service this Brain owns
            # may receive its key, not one another team made at that name (`_foreign_children`).
            gateway = self.kube.get(KINDS[("v1", "Service")], ns, names.gateway(brain.metadata.name))
            if self.cfg.health_url_names_gateway and not (
                gateway is not None and _owned_by(gateway, str(brain.metadata.uid))
            ):
                return None
            wanted = [u for u in brain_uses(brain) if u.use == MASTER_KEY]
            brain = without_refused(brain, refused(wanted, self._secret_getter(ns)))
            secret, key = master_key_ref(RenderInput(brain=brain))
            if secret == names.master_key(brain.metadata.name):  # the generated one: only if ours
                return _decode(self._generated_secret(ns, brain.metadata.name, secret, MASTER_KEY, []), key)
            return _decode(self.kube.get(SECRET, ns, secret), key)
        except (ValidationError, KubeError):
            return None

    def _secret_getter(self, namespace: str) -> Callable[[str], dict[str, Any] | None]:
        """Reads one Secret by name (the operator never lists Secrets: rbac.py)."""
        return lambda name: self.kube.get(SECRET, namespace, name)

    def _capabilities(self) -> Capabilities:
        return Capabilities(
            service_monitor=self.kube.has_resource(*OPTIONAL_APIS["ServiceMonitor"]),
            cnpg=self.kube.has_resource(*OPTIONAL_APIS["Cluster"]),
        )

    # -- the reconcile ---------------------------------------------------------------------------

    def reconcile(self, namespace: str, name: str, emit: Emit = _no_emit) -> Result | None:
        """Bring one Brain's stack to its spec. None when the Brain no longer exists."""
        raw = self.kube.get(BRAIN_KINDS["Brain"], namespace, name)
        if raw is None:
            forget_brain(namespace, name)
            self.health.pop((namespace, name), None)
            self._orphans(namespace, name)
            return None
        if raw["metadata"].get("deletionTimestamp"):
            return Result(phase="Terminating")
        result = Result()
        try:
            spec_brain = Brain.model_validate(raw)
        except ValidationError as exc:
            result.error = f"invalid spec: {_validation_message(exc)}"
            self._write_failed_status(raw, result, "InvalidSpec", emit)
            return result

        # Secrets the spec names are used only where their owner's label says so (secret_use.py):
        # a refused one is rendered as unset, or, for the database, nothing is rendered at all.
        get_secret = self._secret_getter(namespace)
        refusals = refused(brain_uses(spec_brain), get_secret)
        if refusals:
            log.warning("%s/%s: %s", namespace, name, log_summary(refusals))
        secrets_check = _secrets_check(refusals, "Brain")
        if blocks_brain(refusals):
            result.error = summary(refusals)
            self._write_failed_status(
                raw, result, SECRET_NOT_PERMITTED, emit, {SECRETS_CONDITION: secrets_check}
            )
            return result
        brain = without_refused(spec_brain, refusals)

        generated, conflicts = self._generated_secrets(brain)
        if conflicts:
            result.error = "; ".join(conflicts)
            log.warning("%s/%s: %s", namespace, name, result.error)
            taken = Check("False", SECRET_NOT_PERMITTED, result.error)
            self._write_failed_status(raw, result, SECRET_NOT_PERMITTED, emit, {SECRETS_CONDITION: taken})
            return result

        policies_raw, sources_raw = self._related(namespace, name)
        policies, parsed = self._parse_children(policies_raw, sources_raw, emit)
        source_refusals = {s.metadata.name: refused(source_uses(s), get_secret) for s in parsed}
        sources = [s for s in parsed if not source_refusals[s.metadata.name]]
        for source, refusals_of in source_refusals.items():
            if refusals_of:
                log.warning("%s/%s: MemorySource %s: %s", namespace, name, source, log_summary(refusals_of))
        sources, insecure = self._refuse_insecure_sources(sources, sources_raw, emit)
        caps = self._capabilities()
        inp = RenderInput(
            brain=brain,
            routing_policies=tuple(policies),
            memory_sources=tuple(sources),
            secrets=generated,
            images=self.cfg.images,
            capabilities=caps,
            allow_insecure_git_urls=self.cfg.allow_insecure_git_urls,
            traces_endpoint=self.cfg.traces_endpoint,
        )
        owner = owner_reference(API_VERSION, "Brain", name, str(raw["metadata"]["uid"]))
        missing_api: str | None = None
        desired: list[Manifest] = []
        try:
            rendered = render_brain(inp)
        except ValueError as exc:
            result.error = f"rendering failed: {exc}"
            self._write_failed_status(raw, result, "RenderFailed", emit)
            return result
        for obj in rendered:
            if obj["kind"] in OPTIONAL_APIS and not self.kube.has_resource(*OPTIONAL_APIS[obj["kind"]]):
                missing_api = f"{obj['apiVersion']} {obj['kind']} is not served by this cluster"
                continue
            obj["metadata"]["ownerReferences"] = [owner]
            desired.append(obj)

        live = self._live_children(namespace, name, caps)
        foreign = self._foreign_children(desired, live, str(raw["metadata"]["uid"]))
        if foreign:
            result.error = not_owned_message(foreign, name)
            log.warning("%s/%s: %s", namespace, name, result.error)
            self._write_failed_status(raw, result, CHILD_NOT_OWNED, emit)
            return result
        try:
            self._apply_all(desired, live, result)
            self._prune(desired, live, str(raw["metadata"]["uid"]), result)
            self._immediate_ingest(inp, sources_raw, owner, result)
            migration = self._model_migration(inp, owner, result)
        except KubeError as exc:
            result.error = f"applying the stack failed: {exc.message}"
            log.warning("%s/%s: %s", namespace, name, result.error)
            self._write_failed_status(raw, result, "ApplyFailed", emit)
            raise

        for obj in desired:  # reflect what we just applied when computing status
            live.setdefault((obj["kind"], obj["metadata"]["name"]), obj)
        self._write_brain_status(raw, brain, inp, live, missing_api, result, emit, migration, secrets_check)
        self._write_policy_statuses(inp, policies_raw, result)
        self._write_source_statuses(
            sources_raw, {s.metadata.name for s in parsed}, source_refusals, brain, result, emit, insecure
        )
        if result.applied or result.deleted:
            emit(
                raw,
                "Normal",
                "Applied",
                f"applied {', '.join(result.applied) or 'nothing'}; "
                f"deleted {', '.join(result.deleted) or 'nothing'}"[:1000],
            )
        return result

    def _parse_children(
        self, policies_raw: list[dict[str, Any]], sources_raw: list[dict[str, Any]], emit: Emit
    ) -> tuple[list[RoutingPolicy], list[MemorySource]]:
        policies: list[RoutingPolicy] = []
        sources: list[MemorySource] = []
        for p in policies_raw:
            try:
                policies.append(RoutingPolicy.model_validate(p))
            except ValidationError as exc:
                emit(p, "Warning", "InvalidSpec", _validation_message(exc))
        for s in sources_raw:
            try:
                sources.append(MemorySource.model_validate(s))
            except ValidationError as exc:
                emit(s, "Warning", "InvalidSpec", _validation_message(exc))
        return policies, sources

    def _refuse_insecure_sources(
        self, sources: list[MemorySource], sources_raw: list[dict[str, Any]], emit: Emit
    ) -> tuple[list[MemorySource], dict[str, str]]:
        """Sources whose git URL is http:// or file:// are not rendered (no CronJob, no Job) unless
        the operator runs with --allow-insecure-git-urls: the CRD lets their shape through, so that
        tests can use them, and this is where a cluster refuses them. Returns (kept, name → why)."""
        if self.cfg.allow_insecure_git_urls:
            return sources, {}
        by_name = {s["metadata"]["name"]: s for s in sources_raw}
        kept: list[MemorySource] = []
        refused: dict[str, str] = {}
        for source in sources:
            why = _insecure_source(source)
            if why is None:
                kept.append(source)
                continue
            refused[source.metadata.name] = why
            previous = {
                c.get("type"): c
                for c in (by_name[source.metadata.name].get("status") or {}).get("conditions") or []
            }.get("Ready")
            if not previous or previous.get("message") != why:  # once per change, not every resync
                emit(by_name[source.metadata.name], "Warning", "InsecureGitURL", why[:1000])
        return kept, refused

    def _live_children(
        self, namespace: str, name: str, caps: Capabilities
    ) -> dict[tuple[str, str], dict[str, Any]]:
        selector = _child_selector(name)
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for kind in CHILD_KINDS:
            if kind.kind == "Job":  # one-off ingest Jobs expire by TTL; never pruned
                continue
            if (kind.kind == "Cluster" and not caps.cnpg) or (
                kind.kind == "ServiceMonitor" and not caps.service_monitor
            ):
                continue
            if kind.kind == "Secret":  # by name: the operator may not list Secrets (rbac.py)
                got = (self.kube.get(kind, namespace, n) for n in names.generated_secrets(name))
                found = [s for s in got if s and _has_labels(s, selector)]
            else:
                found = self.kube.list(kind, namespace, selector)
            for obj in found:
                out[(kind.kind, obj["metadata"]["name"])] = obj
        return out

    def _foreign_children(
        self, desired: list[Manifest], live: dict[tuple[str, str], dict[str, Any]], uid: str
    ) -> list[str]:
        """Objects already at a name this Brain renders that it does not own (`Kind/name`).

        A child's name is `<brain>-<part>`, so the Brain's name picks it: a tenant could name a Brain
        after another team's Service, ConfigMap or CronJob. The forced server-side apply would take
        it over (its fields, its ownerReference: deleting the Brain would delete it). Secrets are
        judged before rendering (`_generated_secret`, whose labelled adoption is deliberate).
        Costs a read only for a child missing from `live` (a new one, or one in the way)."""
        out = []
        for obj in desired:
            key = (obj["kind"], obj["metadata"]["name"])
            if key in live or obj["kind"] == "Secret":
                continue
            there = self.kube.get(
                KINDS[(obj["apiVersion"], obj["kind"])], obj["metadata"]["namespace"], key[1]
            )
            if there is not None and not _owned_by(there, uid):
                out.append(_ref(obj))
        return out

    def _apply_all(
        self, desired: list[Manifest], live: dict[tuple[str, str], dict[str, Any]], result: Result
    ) -> None:
        for obj in desired:
            key = (obj["kind"], obj["metadata"]["name"])
            current = live.get(key)
            diff = "missing" if current is None else first_difference(obj, current)
            if diff is None:
                continue
            log.info("apply %s (%s)", _ref(obj), diff)
            live[key] = self.kube.apply(obj)
            result.applied.append(_ref(obj))

    def _prune(
        self, desired: list[Manifest], live: dict[tuple[str, str], dict[str, Any]], uid: str, result: Result
    ) -> None:
        wanted = {(o["kind"], o["metadata"]["name"]) for o in desired}
        for key, obj in list(live.items()):
            if key in wanted or not _owned_by(obj, uid):
                continue
            kind = KINDS[(obj["apiVersion"], obj["kind"])]
            log.info("delete %s (no longer rendered)", _ref(obj))
            self.kube.delete(kind, obj["metadata"]["namespace"], obj["metadata"]["name"])
            live.pop(key)
            result.deleted.append(_ref(obj))

    def _immediate_ingest(
        self, inp: RenderInput, sources_raw: list[dict[str, Any]], owner: dict[str, Any], result: Result
    ) -> None:
        """One Job per MemorySource spec version; its name carries the spec hash (idempotent)."""
        by_name = {s["metadata"]["name"]: s for s in sources_raw}
        for source in inp.memory_sources:
            raw = by_name[source.metadata.name]
            digest = source_hash(source)
            if (raw.get("status") or {}).get("specHash") == digest:
                continue
            job = render_ingest_job(inp, source)
            job["metadata"]["ownerReferences"] = [owner]
            created = self.kube.create(job)
            if created is not None:
                result.jobs_created.append(_ref(job))
            status = {
                "specHash": digest,
                "lastJob": job["metadata"]["name"],
                "observedGeneration": raw["metadata"].get("generation"),
            }
            self.kube.patch_status(BRAIN_KINDS["MemorySource"], inp.namespace, source.metadata.name, status)
            raw.setdefault("status", {}).update(status)

    def _model_migration(
        self, inp: RenderInput, owner: dict[str, Any], result: Result
    ) -> dict[str, Any] | None:
        """The migration Job toward spec.embedding.model: created when the gateway reports an index
        built by another model and no migration running; returned (or None) for the condition.

        Its name carries the target's hash, so a resync or a second replica gets AlreadyExists and
        reads the one Job back; nothing is created before the gateway's health was read.
        """
        emb = inp.brain.spec.embedding
        name = names.reindex_job(inp.name, reindex_model_hash(emb.model, emb.dim))
        job_kind = KINDS[("batch/v1", "Job")]
        existing = self.kube.get(job_kind, inp.namespace, name)
        health = self.health.get((inp.namespace, inp.name))
        index = health.index if health is not None else None
        if existing is not None or index is None or index.reindex is not None:
            return existing
        if not index.live_model or index.live_model == emb.model:
            return None
        job = render_reindex_job(inp)
        job["metadata"]["ownerReferences"] = [owner]
        created = self.kube.create(job)
        if created is None:  # another replica or an earlier pass created it
            return self.kube.get(job_kind, inp.namespace, name)
        log.info("%s/%s: started %s (%s -> %s)", inp.namespace, inp.name, name, index.live_model, emb.model)
        result.jobs_created.append(_ref(job))
        return created

    # -- status ----------------------------------------------------------------------------------

    def _component_checks(
        self, inp: RenderInput, live: dict[tuple[str, str], dict[str, Any]], missing_api: str | None
    ) -> dict[str, Check]:
        b = inp.name
        db = inp.brain.spec.database
        if db.external is not None:
            ref = db.external.secret_ref
            secret = self.kube.get(SECRET, inp.namespace, ref.name)
            db_check = secret_has_key(secret, ref.name, ref.key)
        elif db.cloud_native_pg is not None:
            if not inp.capabilities.cnpg:
                db_check = Check(
                    "False", "CloudNativePGNotInstalled", missing_api or "CloudNativePG is not installed"
                )
            else:
                db_check = cnpg_ready(
                    live.get(("Cluster", names.database(b))), f"Cluster {names.database(b)}"
                )
        else:
            db_check = workload_ready(
                live.get(("StatefulSet", names.database(b))), f"StatefulSet {names.database(b)}"
            )
        return {
            "DatabaseReady": db_check,
            "EmbedderReady": workload_ready(
                live.get(("Deployment", names.embedder(b))), f"Deployment {names.embedder(b)}"
            ),
            "GatewayReady": workload_ready(
                live.get(("Deployment", names.gateway(b))), f"Deployment {names.gateway(b)}"
            ),
        }

    def _write_brain_status(
        self,
        raw: dict[str, Any],
        brain: Brain,
        inp: RenderInput,
        live: dict[tuple[str, str], dict[str, Any]],
        missing_api: str | None,
        result: Result,
        emit: Emit,
        migration: dict[str, Any] | None = None,
        secrets_check: Check | None = None,
    ) -> None:
        ns, name = inp.namespace, inp.name
        generation = raw["metadata"].get("generation")
        current = raw.get("status") or {}
        components = self._component_checks(inp, live, missing_api)
        health = self.health.get((ns, name))
        index = index_check(health)
        previous = {c.get("type"): c for c in current.get("conditions") or []}.get("IndexHealthy")
        if health is None and previous is not None:
            # Not polled yet (operator restart): keep what the last poll said instead of flapping.
            index = Check(previous["status"], previous.get("reason", ""), previous.get("message", ""))
        ready = ready_check(components)
        reindexing = reindex_check(
            brain.spec.embedding.model, health.index if health is not None else None, migration
        )
        was = {c.get("type"): c for c in current.get("conditions") or []}.get("Reindexing")
        if health is None and was is not None:  # not polled yet: keep the last word, as for IndexHealthy
            reindexing = Check(was["status"], was.get("reason", ""), was.get("message", ""))
        checks = {"Ready": ready, **components, "IndexHealthy": index, "Reindexing": reindexing}
        if secrets_check is not None:
            checks[SECRETS_CONDITION] = secrets_check
        now = now_iso()
        status: dict[str, Any] = {
            "phase": phase_of(components, index, None),
            "observedGeneration": generation,
            "conditions": merge_conditions(current.get("conditions"), checks, generation, now),
            "endpoints": endpoints(brain.spec, name, ns).to_k8s(),
            "configHash": config_hash(inp),
        }
        if health is not None and health.index is not None:
            status["index"] = health.index.to_k8s()
            set_index(
                ns,
                name,
                health.index.entries_by_kind or {},
                health.index.entries_by_namespace or {},
                health.index,
            )
            set_reindex_metrics(f"{ns}/{name}", health.index)
        backup = brain.spec.backup
        set_backup(
            ns,
            name,
            backup.max_age_hours if backup is not None else None,
            health.index if health is not None else None,
            (raw.get("metadata") or {}).get("creationTimestamp"),
        )
        BRAIN_READY.labels(brain=f"{ns}/{name}").set(1 if ready.ok else 0)
        result.phase, result.ready = status["phase"], ready.ok
        if status_differs(current, status):
            self.kube.patch_status(BRAIN_KINDS["Brain"], ns, name, status)
            result.status_written = True
            if current.get("phase") != status["phase"]:
                etype = "Normal" if status["phase"] in ("Ready", "Progressing", "Pending") else "Warning"
                emit(
                    raw,
                    etype,
                    f"Phase{status['phase']}",
                    ready.message if not ready.ok else "all components ready",
                )
            old_index = {c.get("type"): c.get("status") for c in current.get("conditions") or []}.get(
                "IndexHealthy"
            )
            if old_index not in (None, index.status) and index.status == "False":
                emit(raw, "Warning", index.reason, index.message)
            old_reindex = was.get("reason") if was is not None else None
            if reindexing.reason == "ReindexFailed" and old_reindex != "ReindexFailed":
                emit(raw, "Warning", "ReindexFailed", reindexing.message)
            elif (
                reindexing.reason != old_reindex
                and reindexing.reason in ("Reindexing", "Current")
                and old_reindex in ("Reindexing", "ModelChangePending", "ReindexFailed")
            ):
                emit(raw, "Normal", reindexing.reason, reindexing.message)
            if secrets_check is not None:
                _emit_refusal(raw, current, secrets_check, emit)

    def _write_failed_status(
        self,
        raw: dict[str, Any],
        result: Result,
        reason: str,
        emit: Emit,
        extra: dict[str, Check] | None = None,
    ) -> None:
        meta = raw["metadata"]
        current = raw.get("status") or {}
        generation = meta.get("generation")
        message = result.error or reason
        checks = {"Ready": Check("False", reason, message), **(extra or {})}
        conditions = [c for c in current.get("conditions") or [] if c.get("type") not in checks]
        ready = merge_conditions(current.get("conditions"), checks, generation, now_iso())
        status = {"phase": "Failed", "observedGeneration": generation, "conditions": ready + conditions}
        result.phase = "Failed"
        if status_differs(current, status):
            self.kube.patch_status(BRAIN_KINDS["Brain"], meta["namespace"], meta["name"], status)
            result.status_written = True
            emit(raw, "Warning", reason, message[:1000])

    def _write_policy_statuses(
        self, inp: RenderInput, policies_raw: list[dict[str, Any]], result: Result
    ) -> None:
        applied, rejected = check_policies(inp.brain, inp.routing_policies)
        applied_names = {n for n, _ in applied}
        digest = config_hash(inp)
        now = now_iso()
        for raw in policies_raw:
            pname = raw["metadata"]["name"]
            if pname in applied_names:
                check = Check("True", "Applied", f"served as model in the gateway config of Brain {inp.name}")
            else:
                check = Check("False", "Rejected", rejected.get(pname, "the spec is invalid"))
            self._patch_child_status(
                "RoutingPolicy",
                raw,
                {"brain": inp.name, "configHash": digest if check.ok else None},
                {"Applied": check},
                now,
                result,
            )

    def _write_source_statuses(
        self,
        sources_raw: list[dict[str, Any]],
        valid: set[str],
        refusals: dict[str, list[Refusal]],
        brain: Brain,
        result: Result,
        emit: Emit,
        insecure: dict[str, str] | None = None,
    ) -> None:
        """Ready and SecretsPermitted of each source; a refused credential is not imported at all
        (no CronJob, no Job), and its source says which Secret lacks which label."""
        now = now_iso()
        for raw in sources_raw:
            source = raw["metadata"]["name"]
            checks: dict[str, Check] = {}
            if source in refusals:
                checks[SECRETS_CONDITION] = _secrets_check(refusals[source], "MemorySource")
            if refusals.get(source):
                ready = Check(
                    "False",
                    SECRET_NOT_PERMITTED,
                    f"not imported until its Secret is permitted: {summary(refusals[source])}",
                )
            elif source in (insecure or {}):
                ready = Check("False", "InsecureGitURL", (insecure or {})[source])
            elif source in valid:
                ready = Check(
                    "True",
                    "Scheduled",
                    f"imports into Brain {brain.metadata.name} on schedule {raw['spec'].get('schedule')!r}",
                )
            else:
                ready = Check(
                    "False", "InvalidSpec", "the spec does not validate; see the events of this object"
                )
            self._patch_child_status("MemorySource", raw, {}, {"Ready": ready, **checks}, now, result)
            if SECRETS_CONDITION in checks:
                _emit_refusal(raw, raw.get("status") or {}, checks[SECRETS_CONDITION], emit)

    def _patch_child_status(
        self,
        kind: str,
        raw: dict[str, Any],
        fields: dict[str, Any],
        checks: dict[str, Check],
        now: str,
        result: Result,
    ) -> None:
        current = raw.get("status") or {}
        generation = raw["metadata"].get("generation")
        others = [c for c in current.get("conditions") or [] if c.get("type") not in checks]
        conditions = merge_conditions(current.get("conditions"), checks, generation, now) + others
        conditions.sort(key=lambda c: str(c.get("type")))  # two writers; a stable order avoids flapping
        status = {**fields, "observedGeneration": generation, "conditions": conditions}
        if status_differs(current, status):
            self.kube.patch_status(
                BRAIN_KINDS[kind], raw["metadata"]["namespace"], raw["metadata"]["name"], status
            )
            result.status_written = True

    def _orphans(self, namespace: str, brain: str) -> None:
        """Policies and sources whose Brain does not exist say so in their status."""
        policies, sources = self._related(namespace, brain)
        now = now_iso()
        missing = Check("False", "BrainNotFound", f"Brain {brain} does not exist in namespace {namespace}")
        scratch = Result()
        for raw in policies:
            self._patch_child_status(
                "RoutingPolicy", raw, {"brain": brain, "configHash": None}, {"Applied": missing}, now, scratch
            )
        for raw in sources:
            self._patch_child_status("MemorySource", raw, {}, {"Ready": missing}, now, scratch)

    # -- ingest results ---------------------------------------------------------------------------

    def record_ingest(self, job: dict[str, Any], emit: Emit = _no_emit) -> bool:
        """Copy a finished ingest Job's summary line into its MemorySource's status. True if written.

        An import stopped by the retire guard completes (exit 0) but is not Synced: the status says
        why and names the confirmation token, and a Warning event tells whoever watches events.
        """
        meta = job["metadata"]
        source_name = (meta.get("labels") or {}).get("brain.dev/memorysource")
        if not source_name:
            return False
        ns = meta["namespace"]
        st = job.get("status") or {}
        conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
        if conds.get("Complete") == "True":
            outcome = "succeeded"
        elif conds.get("Failed") == "True":
            outcome = "failed"
        else:
            return False
        source = self.kube.get(BRAIN_KINDS["MemorySource"], ns, source_name)
        if source is None:
            return False
        current = source.get("status") or {}
        finished = (
            st.get("completionTime")
            or (
                [c.get("lastTransitionTime") for c in st.get("conditions") or [] if c.get("type") == "Failed"]
                or [None]
            )[0]
        )
        if current.get("lastJob") == meta["name"] and current.get("lastSync") == finished:
            return False
        fields: dict[str, Any] = {"lastJob": meta["name"], "lastSync": finished, "retireGuard": None}
        stopped: dict[str, Any] | None = None
        if outcome == "succeeded":
            doc = self._job_result(ns, meta["name"])
            if doc is not None:
                fields["counts"] = ingest_counts(doc)
                stopped = _retire_stop(doc.get("stopped"))
            check = Check("True", "ImportSucceeded", f"Job {meta['name']} finished")
            if stopped is not None:
                fields["retireGuard"] = stopped
                check = Check("False", "MassRetireStopped", stopped["message"])
        else:
            check = Check("False", "ImportFailed", f"Job {meta['name']} failed; see its pod logs")
        result = Result()
        self._patch_child_status("MemorySource", source, fields, {"Synced": check}, now_iso(), result)
        if stopped is not None and result.status_written:
            emit(source, "Warning", "MassRetireStopped", stopped["message"])
        return result.status_written

    def _job_result(self, namespace: str, job: str) -> dict[str, Any] | None:
        """The JSON summary a job prints as its last stdout line, if its pod logs are readable."""
        pods = self.kube.list(POD, namespace, f"job-name={job}")
        for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp", ""), reverse=True):
            try:
                text = self.kube.pod_log_tail(namespace, pod["metadata"]["name"])
            except KubeError:
                continue
            for line in reversed([ln for ln in text.splitlines() if ln.strip()]):
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue
                if isinstance(doc, dict):
                    return doc
                break
        return None


CHILD_NOT_OWNED = "ChildNotOwned"


def not_owned_message(refs: list[str], brain: str) -> str:
    """The objects in the way of a Brain's children, and what to do (names only, never content)."""
    listed = ", ".join(refs[:10]) + (f" and {len(refs) - 10} more" if len(refs) > 10 else "")
    return (
        f"{listed}: already exist and were not made for Brain {brain}; applying would take them over "
        f"(and deleting the Brain would delete them), so nothing is applied. Give the Brain another "
        f"name, or have their owner delete or rename them"
    )


def _insecure_source(source: MemorySource) -> str | None:
    """Why a source's git URL is refused by the scheme policy (naming the field), or None."""
    for kind in ("git", "skills", "personas"):
        repo = getattr(source.spec, kind)
        if repo is None:
            continue
        try:
            check_url(repo.url, f"spec.{kind}.url")
        except ValueError as exc:
            return str(exc)
    return None


def _secrets_check(refusals: list[Refusal], kind: str) -> Check:
    if not refusals:
        return Check("True", "SecretsLabelled", f"every Secret this {kind} names is labelled for its use")
    return Check("False", SECRET_NOT_PERMITTED, summary(refusals))


def _emit_refusal(raw: dict[str, Any], before: dict[str, Any], check: Check, emit: Emit) -> None:
    """A Warning Event when a refusal appears or changes (not on every resync that finds it again)."""
    if check.ok:
        return
    was = {c.get("type"): c for c in before.get("conditions") or []}.get(SECRETS_CONDITION) or {}
    if (was.get("status"), was.get("message")) != (check.status, check.message[:4096]):
        emit(raw, "Warning", SECRET_NOT_PERMITTED, check.message[:1000])


def _retire_stop(raw: Any) -> dict[str, Any] | None:
    """The job's `stopped` object as status.retireGuard, or None; the job's log is not trusted blindly."""
    if not isinstance(raw, dict):
        return None
    try:
        would, stored = int(raw.get("wouldRetire", 0)), int(raw.get("stored", 0))
    except (TypeError, ValueError):
        return None
    token = str(raw.get("confirm", ""))
    if not re.fullmatch(r"[0-9a-f]{12}", token):
        return None
    return {
        "wouldRetire": max(would, 0),
        "stored": max(stored, 0),
        "confirm": token,
        "message": str(raw.get("message", ""))[:1000],
    }
