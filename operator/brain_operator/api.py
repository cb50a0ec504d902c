"""The brain.dev/v1alpha1 API: Brain, MemorySource and RoutingPolicy as pydantic v2 models.

These models are the single source of truth. ``crdgen`` turns them into the CRD schemas the API
server validates with (descriptions become ``kubectl explain`` text, so they are written for the
platform engineer who reads them); the renderers and handlers parse custom objects with them.
Python field names are snake_case; the Kubernetes names are the camelCase aliases.

Validation lives in two places that must agree: OpenAPI bounds/enums/patterns and CEL rules
(``x-kubernetes-validations``, attached through ``json_schema_extra``) for the API server, and the
same constraints as pydantic validators so a bad spec is also refused in ``brainctl up``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict

from brain.core.contract import (
    DEFAULT_EMBEDDING_DIM,
    DEFAULT_EMBEDDING_MODEL,
    ENV_REFERENCE,
    ENV_REFERENCE_REFUSED,
)
from brain.core.gitrefs import (
    INSECURE_FLAG,
    REF_ACCEPTED,
    REF_REGEX,
    SECURE_ACCEPTED,
    URL_ACCEPTED,
    URL_REGEX,
    check_ref,
    check_url,
)
from brain_operator import API_VERSION

#: Validation context key: brainctl's local manifests may name a plain local path as a git URL
#: (a CRD never accepts one; http:// and file:// pass the shape and meet the operator's policy).
LOCAL_GIT_CONTEXT = "allow_local_git"

# --------------------------------------------------------------------------------------------
# Shared building blocks
# --------------------------------------------------------------------------------------------

#: Kubernetes resource.Quantity, as the API server spells it (e.g. ``500m``, ``2Gi``, ``1``).
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$"
DURATION_PATTERN = r"^[0-9]+(ms|s|m|h)$"
MEMORY_NAMESPACE_PATTERN = r"^[a-z0-9][a-z0-9._/-]*$"


def _cron_regex() -> str:
    """A regex for the five-field cron syntax CronJob accepts (plus the @-macros).

    Each field is a comma list of ``*``, a number or a range, each optionally stepped; month and
    weekday also take three-letter names. Numeric bounds are per field so ``61 * * * *`` fails.
    """
    names = "[A-Za-z]{3}"
    fields = [
        "[0-5]?[0-9]",  # minute
        "(1[0-9]|2[0-3]|0?[0-9])",  # hour
        "(3[01]|[12][0-9]|0?[1-9])",  # day of month
        f"(1[0-2]|0?[1-9]|{names})",  # month
        f"([0-7]|{names})",  # day of week
    ]
    parts = []
    for value in fields:
        item = f"(\\*|\\?|{value}(-{value})?)(/[0-9]{{1,2}})?"
        parts.append(f"{item}(,{item})*")
    body = " +".join(parts)
    macros = "@(yearly|annually|monthly|weekly|daily|midnight|hourly)"
    return f"^(({body})|{macros})$"


CRON_REGEX = _cron_regex()
_CRON_RE = re.compile(CRON_REGEX)


def _quantity_to_str(value: Any) -> Any:
    """Quantities may be written as YAML numbers (``cpu: 1``); Kubernetes treats both alike."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return str(value)
    return value


Quantity = Annotated[
    str,
    BeforeValidator(_quantity_to_str),
    Field(pattern=QUANTITY_PATTERN, json_schema_extra={"x-kubernetes-int-or-string": True}),
]


def cel(rule: str, message: str, **extra: str) -> JsonDict:
    """One ``x-kubernetes-validations`` entry; ``message`` names the field it is about."""
    return {"rule": rule, "message": message, **extra}


def no_env_reference(field: str) -> JsonDict:
    """The CEL half of `ConfigStr`: a value LiteLLM would read from the gateway's environment."""
    return {
        "x-kubernetes-validations": [
            cel(f"!self.startsWith('{ENV_REFERENCE}')", f"{field} {ENV_REFERENCE_REFUSED}")
        ]
    }


def _refuse_env_reference(value: str) -> str:
    if value.startswith(ENV_REFERENCE):
        raise ValueError(ENV_REFERENCE_REFUSED)
    return value


#: A string that reaches the gateway's LiteLLM config, where `os.environ/<VAR>` is read from the
#: gateway's environment (brain.core.contract.ENV_REFERENCE); its field adds `no_env_reference`.
ConfigStr = Annotated[str, AfterValidator(_refuse_env_reference)]


def immutable(field: str, why: str) -> dict[str, Any]:
    """A transition rule refusing any change once the field is set."""
    return {"x-kubernetes-validations": [cel("self == oldSelf", f"{field} is immutable: {why}")]}


class _Model(BaseModel):
    """camelCase on the wire, unknown fields refused (the API server prunes them too), and frozen:
    a parsed spec is a value, so a renderer or handler cannot change what the next one reads."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_attribute_docstrings=False,
        frozen=True,
    )

    def to_k8s(self) -> dict[str, Any]:
        """The object as the API server would store it (camelCase, no unset optionals)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class SecretKeyRef(_Model):
    """A key in a Secret in the Brain's namespace."""

    name: str = Field(
        description="Name of the Secret, in the same namespace as the resource that refers to it.",
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
    )
    key: str = Field(
        description="Key inside the Secret's data whose value is used.",
        min_length=1,
        max_length=253,
        pattern=r"^[-._a-zA-Z0-9]+$",
    )


class ResourceList(_Model):
    """CPU and memory amounts, as Kubernetes quantities."""

    cpu: Quantity | None = Field(default=None, description="CPU, e.g. `250m` or `2`.")
    memory: Quantity | None = Field(default=None, description="Memory, e.g. `512Mi` or `2Gi`.")


class Resources(_Model):
    """Compute resources for the pods of one component.

    Anything left out falls back to the component's default (listed in each field's description),
    so setting only ``limits.memory`` keeps the default requests.
    """

    requests: ResourceList | None = Field(
        default=None, description="Minimum resources the scheduler reserves for each pod."
    )
    limits: ResourceList | None = Field(
        default=None, description="Maximum resources each pod may use before it is throttled or killed."
    )


# --------------------------------------------------------------------------------------------
# Brain
# --------------------------------------------------------------------------------------------


class GatewayModel(_Model):
    """An upstream LLM the gateway can route to."""

    name: ConfigStr = Field(
        description=(
            "Model name agents ask for (the `model` field of an OpenAI or Anthropic request) and that "
            "RoutingPolicy tiers refer to. Unique within the Brain. Not starting with `os.environ/`."
        ),
        min_length=1,
        max_length=128,
        pattern=MODEL_NAME_PATTERN,
        json_schema_extra=no_env_reference("name"),
    )
    model: ConfigStr = Field(
        description=(
            "Provider model in LiteLLM notation, `<provider>/<model>`, e.g. `openai/gpt-4o`, "
            "`anthropic/claude-sonnet-4-5` or `openai/echo` for any OpenAI-compatible server. Not "
            "starting with `os.environ/` (LiteLLM would read the gateway's environment there)."
        ),
        min_length=1,
        max_length=256,
        json_schema_extra=no_env_reference("model"),
    )
    api_base: str | None = Field(
        default=None,
        description=(
            "Base URL of the provider API, e.g. `https://api.deepseek.com/v1`. Omit for the provider default."
        ),
        max_length=2048,
        pattern=r"^https?://\S+$",
    )
    api_key_secret_ref: SecretKeyRef | None = Field(
        default=None,
        description=(
            "Secret key holding the provider API key. It reaches the gateway as an environment variable, "
            "never through the rendered config. Omit for upstreams that need no key. The Secret must carry "
            "the label `brain.dev/secret-use: model-api-key` (else the model is served without a key and "
            "condition SecretsPermitted says why)."
        ),
    )


class GatewayAuth(_Model):
    """How agents authenticate to the gateway."""

    master_key_secret_ref: SecretKeyRef | None = Field(
        default=None,
        description=(
            "Secret key holding the gateway master key (admin access; agents get their own keys via "
            "`brainctl keys`). When omitted the operator generates one in Secret `<brain>-master-key`, "
            "key `masterKey`. The Secret must carry the label `brain.dev/secret-use: master-key` (else the "
            "generated key is used and condition SecretsPermitted says why)."
        ),
    )


class RetrievalFloor(_Model):
    """The least absolute evidence for a memory to be injected; with none above it, nothing is.

    A memory passes when its legs' evidence, each as a share of that leg's floor, adds up to 1 (one leg
    at its floor is enough); its episode neighbours pass with it. 0 turns a leg's floor off.
    """

    vector: float = Field(
        default=0.3, ge=0, le=1, description="Cosine similarity between the question and the memory."
    )
    lexical: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Share of the question's term weight (BM25 IDF) that the memory's words cover.",
    )
    trigram: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Share of the question's identifiers (ports, flags, env vars, hosts) found verbatim.",
    )
    calibration: float = Field(
        default=0.95,
        ge=0,
        le=1,
        description=(
            "Lowers the vector floor, per scope, to this quantile of the best cosines that generic "
            "unrelated questions reach there, when that is lower: in a small, quiet brain weaker "
            "paraphrases pass while that share of unrelated questions is still turned away. 0 keeps "
            "the vector floor fixed."
        ),
    )
    gate: bool = Field(
        default=True,
        description=(
            "Inject anything only when some memory reaches one leg's floor on its own (for identifiers: "
            "all of them verbatim); weaker legs that agree then still add up. false: any memory whose "
            "legs add up opens it, which answers more unrelated questions than either leg alone. "
            "It also stays shut for a question naming a hyphenated name no memory holds, of a kind "
            "the brain holds (its last part), whose first part no memory uses alone."
        ),
    )


class Retrieval(_Model):
    """What the gateway injects into each request before it reaches the model."""

    enabled: bool = Field(default=True, description="Inject memories into requests. Off: a plain proxy.")
    top_k: int = Field(default=5, ge=1, le=50, description="Most memories injected per request.")
    token_budget: int = Field(
        default=2000, ge=100, le=32000, description="Most tokens of injected context per request."
    )
    timeout_ms: int = Field(
        default=500,
        ge=50,
        le=10000,
        description=(
            "Time budget for retrieval in milliseconds. Past it the request goes on without memory; "
            "it never fails because of the brain."
        ),
    )
    skill_slots: int = Field(default=2, ge=0, le=10, description="Skills appended after memories, at most.")
    persona: bool = Field(
        default=True, description="Prefix a matching agent persona (from `personas` MemorySources)."
    )
    standout_ratio: float = Field(
        default=0.55,
        ge=0,
        le=1,
        description=(
            "Inject only the best memory when it answers on one leg alone and no other scores above "
            "this share of its score; memories naming what it names and the question does not (a "
            "second hop) stay with it. 0: always up to topK memories above the floor."
        ),
    )
    floor: RetrievalFloor = Field(default_factory=RetrievalFloor, description=RetrievalFloor.__doc__)
    lexical_mirror: bool = Field(
        default=True,
        description=(
            "Keep each gateway replica's copy of the stored keyword (BM25) weights in memory, so the "
            "keyword leg ranks in a few milliseconds at any brain size; the database still filters and "
            "scores what it proposes. It costs about 300 MB of memory a replica per million memories. Off: the "
            "leg ranks in the database, whose time grows with the brain."
        ),
    )


class CaptureFilters(_Model):
    """Quality gates applied before a response is captured as an episodic memory."""

    venting: bool = Field(default=True, description="Skip exchanges whose prompt is venting or abuse.")
    noise: bool = Field(
        default=True,
        description="Skip responses with self-corrections, stack traces or hallucination markers.",
    )
    min_code_lines: int = Field(
        default=10, ge=1, le=1000, description="Smallest code block (in lines) worth capturing on its own."
    )


class Capture(_Model):
    """What the gateway learns from responses (fire-and-forget, after the response is sent)."""

    enabled: bool = Field(default=True, description="Capture valuable responses as episodic memories.")
    filters: CaptureFilters = Field(default_factory=CaptureFilters, description=CaptureFilters.__doc__)
    trusted_hosts: list[
        Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)]
    ] = Field(
        default_factory=list,
        max_length=100,
        description=(
            "Hosts (and their subdomains) that captured code may download from and run: a code block "
            "that fetches from any other host and executes something (curl | sh, a Dockerfile with "
            "another package index, a Makefile target, a Python or terminal block) goes to the review "
            "queue as a proposal instead of into memory. Empty: every such block waits for an owner."
        ),
    )


class Exposure(_Model):
    """Exposure receipts: which conversations were given which memory (ids, key names, times; no text)."""

    retention_days: int = Field(
        default=30,
        ge=1,
        le=3650,
        description=(
            "Days a receipt (memory id, version, key name, conversation hash, time) is kept after the "
            "conversation was last given the memory. Owners read them (`brainctl memory exposure ID`, "
            "`GET /brain/v1/memories/{id}/exposure`, the review page); a conversation given a memory "
            "that an owner retires, forgets or purges within this window is told so on its next request."
        ),
    )


class Gateway(_Model):
    """The LiteLLM gateway agents talk to.

    OpenAI `/v1/chat/completions`, Anthropic `/v1/messages`, MCP `/mcp` and REST `/brain/v1`.
    """

    replicas: int = Field(
        default=2, ge=1, le=50, description="Gateway pods. Two or more keep a PDB meaningful."
    )
    resources: Resources | None = Field(
        default=None,
        description="Gateway pod resources. Defaults: requests 250m CPU / 512Mi, limits 2 CPU / 2Gi.",
    )
    models: list[GatewayModel] = Field(
        description="Upstream models the gateway serves. Names are unique.",
        min_length=1,
        max_length=64,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    auth: GatewayAuth = Field(default_factory=GatewayAuth, description=GatewayAuth.__doc__)
    retrieval: Retrieval = Field(default_factory=Retrieval, description=Retrieval.__doc__)
    capture: Capture = Field(default_factory=Capture, description=Capture.__doc__)
    exposure: Exposure = Field(default_factory=Exposure, description=Exposure.__doc__)
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(
        default="ClusterIP", description="Type of the gateway Service."
    )


class Embedding(_Model):
    """The embedder that turns memories and queries into vectors."""

    model: ConfigStr = Field(
        default=DEFAULT_EMBEDDING_MODEL,
        min_length=1,
        max_length=256,
        json_schema_extra=no_env_reference("model"),
        description=(
            "fastembed model name. Changing it is a model migration: `brainctl reindex --to-model` builds "
            "the new model's index beside the live one and swaps it in when complete; the `Reindexing` "
            "condition shows progress. Until then the live index serves (a gateway already on the new "
            "model answers from the other legs)."
        ),
    )
    dim: int = Field(
        default=DEFAULT_EMBEDDING_DIM,
        ge=8,
        le=4096,
        description="Vector dimension of the model. Fixed at creation: the memories table is built for it.",
        json_schema_extra=immutable(
            "spec.embedding.dim", "stored vectors have this dimension; create a new Brain to change it"
        ),
    )
    replicas: int = Field(default=1, ge=1, le=20, description="Embedder pods.")
    resources: Resources | None = Field(
        default=None,
        description="Embedder pod resources. Defaults: requests 250m CPU / 1Gi, limits 2 CPU / 2Gi.",
    )


class ManagedDatabase(_Model):
    """A single Postgres (pgvector) StatefulSet run by the operator."""

    storage: Quantity = Field(
        default="10Gi",
        description=(
            "Size of the data volume. Fixed at creation (a StatefulSet's volume template cannot change)."
        ),
        json_schema_extra={
            **immutable(
                "spec.database.managed.storage", "the StatefulSet volume claim template cannot change"
            ),
            "x-kubernetes-int-or-string": True,
        },
    )
    storage_class_name: str | None = Field(
        default=None,
        max_length=253,
        description="StorageClass of the data volume; omit for the cluster default. Fixed at creation.",
        json_schema_extra=immutable(
            "spec.database.managed.storageClassName", "the StatefulSet volume claim template cannot change"
        ),
    )
    resources: Resources | None = Field(
        default=None,
        description="Postgres pod resources. Defaults: requests 250m CPU / 512Mi, limits 2 CPU / 4Gi.",
    )


class ExternalDatabase(_Model):
    """A Postgres you run (with the `vector` and `pg_trgm` extensions available)."""

    secret_ref: SecretKeyRef = Field(
        description=(
            "Secret key holding the connection string, e.g. `postgresql://user:pw@host:5432/brain`. The "
            "Secret must carry the label `brain.dev/secret-use: database-url` (else nothing is applied and "
            "the Brain is Failed, reason SecretNotPermitted)."
        )
    )


class CloudNativePGDatabase(_Model):
    """A CloudNativePG `Cluster` (needs the CloudNativePG operator installed)."""

    instances: int = Field(
        default=3, ge=1, le=9, description="Postgres instances (one primary, the rest replicas)."
    )
    storage: Quantity = Field(default="10Gi", description="Volume size per instance.")
    storage_class_name: str | None = Field(
        default=None,
        max_length=253,
        description="StorageClass for the volumes; omit for the cluster default.",
    )


_DB_MODES = "spec.database.managed, spec.database.external or spec.database.cloudNativePG"


class Database(_Model):
    """Where memories live. Set exactly one of `managed`, `external`, `cloudNativePG`; the choice is fixed."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "[has(self.managed), has(self.external), has(self.cloudNativePG)]"
                    ".filter(x, x).size() == 1",
                    f"exactly one of {_DB_MODES} must be set",
                ),
                cel(
                    "has(self.managed) == has(oldSelf.managed) && has(self.external) == has(oldSelf.external)"
                    " && has(self.cloudNativePG) == has(oldSelf.cloudNativePG)",
                    "spec.database mode is immutable: switching would strand the stored memories; "
                    "create a new Brain and import",
                ),
            ]
        }
    )

    managed: ManagedDatabase | None = Field(default=None, description=ManagedDatabase.__doc__)
    external: ExternalDatabase | None = Field(default=None, description=ExternalDatabase.__doc__)
    cloud_native_pg: CloudNativePGDatabase | None = Field(
        default=None, alias="cloudNativePG", description=CloudNativePGDatabase.__doc__
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> Database:
        if sum(x is not None for x in (self.managed, self.external, self.cloud_native_pg)) != 1:
            raise ValueError(f"exactly one of {_DB_MODES} must be set")
        return self

    @property
    def mode(self) -> Literal["managed", "external", "cloudNativePG"]:
        if self.external is not None:
            return "external"
        if self.cloud_native_pg is not None:
            return "cloudNativePG"
        return "managed"


def _schedule_field(default: str, path: str, what: str) -> Any:
    return Field(
        default=default,
        max_length=128,
        description=f"Cron schedule (five fields, UTC, or @daily etc.) of {what}.",
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    f"self.matches(r'{CRON_REGEX}')",
                    f"{path} must be a cron schedule like '0 3 * * *' or '@daily'",
                )
            ]
        },
    )


def _check_cron(value: str, path: str) -> str:
    if not _CRON_RE.match(value):
        raise ValueError(f"{path} must be a cron schedule like '0 3 * * *' or '@daily'")
    return value


class _ScheduledJob(_Model):
    """What every CronJob of a Brain has: a schedule, a pause switch, pod resources (and a model)."""

    job: ClassVar[str]  # the spec field, for messages: spec.<job>.schedule

    schedule: str
    model: str | None = None
    suspend: bool = Field(default=False, description="Pause scheduling; a running job is not stopped.")
    resources: Resources | None = Field(
        default=None,
        description="Job pod resources. Defaults: requests 100m CPU / 256Mi, limits 1 CPU / 1Gi.",
    )

    @field_validator("schedule")
    @classmethod
    def _cron(cls, v: str) -> str:
        return _check_cron(v, f"spec.{cls.job}.schedule")


class Distill(_ScheduledJob):
    """The distill CronJob: clusters captured episodes and drafts proposals for an owner to promote."""

    job = "distill"
    schedule: str = _schedule_field("0 3 * * *", "spec.distill.schedule", "the distill job")
    model: str | None = Field(
        default=None,
        max_length=128,
        description=(
            "Gateway model (a `spec.gateway.models[].name`) that drafts proposals; omit for the first one."
        ),
    )


class Digest(_ScheduledJob):
    """The digest CronJob: aggregates usage signals into a team digest."""

    job = "digest"
    schedule: str = _schedule_field("0 6 * * 1", "spec.digest.schedule", "the digest job")
    model: str | None = Field(
        default=None,
        max_length=128,
        description=(
            "Ignored, kept so manifests that set it stay valid: the digest is computed from the database "
            "and calls no model."
        ),
    )


class BackupStorage(_Model):
    """The volume the operator creates for the dumps, `<brain>-backups`. It is the Brain's child: it
    goes when the Brain is deleted or spec.backup is removed. For dumps that outlive the Brain, name
    your own claim in `claimName` (and copy dumps off the cluster for disaster recovery)."""

    size: Quantity = Field(
        default="10Gi",
        description=(
            "Size of the `<brain>-backups` volume. It must hold `keep` dumps plus one in progress; a full "
            "volume fails the backup (status.index.lastBackupResult `failed`, alert BrainBackupFailed)."
        ),
    )
    storage_class_name: str | None = Field(
        default=None,
        max_length=253,
        description="StorageClass of the backups volume; omit for the cluster default. Fixed at creation.",
        json_schema_extra=immutable(
            "spec.backup.storage.storageClassName", "a bound volume's StorageClass cannot change"
        ),
    )


_BACKUP_TARGETS = "spec.backup.storage or spec.backup.claimName"


class Backup(_Model):
    """Scheduled `pg_dump` backups of the Brain's database into a volume (docs/operations.md,
    "Database backups"). Each run dumps in custom format, checks the dump with `pg_restore --list`,
    keeps the newest `keep` and records its result in status.index (lastBackup, lastBackupResult,
    lastBackupBytes). `brainctl restore` puts a dump back. Managed and CloudNativePG databases only:
    an external database is backed up by whoever runs it."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!(has(self.storage) && has(self.claimName))",
                    f"set at most one of {_BACKUP_TARGETS}: the dumps go to one volume",
                ),
            ]
        }
    )

    schedule: str = _schedule_field("0 3 * * *", "spec.backup.schedule", "the backup job")
    suspend: bool = Field(default=False, description="Pause scheduled backups; a running one is not stopped.")
    keep: int = Field(
        default=7,
        ge=1,
        le=365,
        description=(
            "Dumps to retain: after a good dump the oldest beyond this many are deleted (a failed run "
            "deletes nothing, so the last good dumps survive a bad night)."
        ),
    )
    storage: BackupStorage | None = Field(
        default=None,
        description=(
            "The volume the operator creates for the dumps (`<brain>-backups`). The default when "
            "claimName is not set either."
        ),
    )
    claim_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description=(
            "An existing PersistentVolumeClaim in the Brain's namespace to write the dumps to instead "
            "(e.g. one backed by off-cluster storage). The operator neither creates nor deletes it."
        ),
    )
    max_age_hours: int = Field(
        default=26,
        ge=1,
        le=8760,
        description=(
            "A Brain whose last good backup is older than this many hours has missed one: alert "
            "BrainBackupMissing (exported as brain_backup_max_age_seconds). The default lets a daily "
            "schedule run late by two hours."
        ),
    )
    resources: Resources | None = Field(
        default=None,
        description="Backup job pod resources. Defaults: requests 100m CPU / 256Mi, limits 1 CPU / 1Gi.",
    )

    @field_validator("schedule")
    @classmethod
    def _cron(cls, v: str) -> str:
        return _check_cron(v, "spec.backup.schedule")

    @model_validator(mode="after")
    def _one_target(self) -> Backup:
        if self.storage is not None and self.claim_name is not None:
            raise ValueError(f"set at most one of {_BACKUP_TARGETS}: the dumps go to one volume")
        return self

    @property
    def volume(self) -> BackupStorage:
        """The operator-made volume's settings (the defaults when neither target is set)."""
        return self.storage or BackupStorage()


class Tunnel(_Model):
    """Expose the gateway through a Cloudflare Tunnel (a cloudflared sidecar); no inbound port needed."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "has(self.tokenSecretRef)",
                    "spec.tunnel.tokenSecretRef is required: cloudflared needs the tunnel token",
                )
            ]
        }
    )

    provider: Literal["cloudflare"] = Field(default="cloudflare", description="Tunnel provider.")
    token_secret_ref: SecretKeyRef | None = Field(
        default=None,
        description=(
            "Secret key holding the tunnel token (`cloudflared tunnel token <name>`). The Secret must carry "
            "the label `brain.dev/secret-use: tunnel-token` (else no tunnel runs and condition "
            "SecretsPermitted says why)."
        ),
    )
    hostname: str | None = Field(
        default=None,
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="Public hostname routed to the tunnel; reported as the gateway endpoint.",
    )

    @model_validator(mode="after")
    def _token(self) -> Tunnel:
        if self.token_secret_ref is None:
            raise ValueError("spec.tunnel.tokenSecretRef is required: cloudflared needs the tunnel token")
        return self


class ServiceMonitorSpec(_Model):
    """A prometheus-operator ServiceMonitor for the gateway and embedder."""

    enabled: bool = Field(default=False, description="Create the ServiceMonitor (needs its CRD installed).")
    interval: str = Field(default="30s", pattern=DURATION_PATTERN, description="Scrape interval, e.g. `30s`.")
    labels: dict[str, str] | None = Field(
        default=None, description="Extra labels, e.g. the `release` label your Prometheus selects on."
    )


class GrafanaDashboards(_Model):
    """Grafana dashboards as ConfigMaps, for the Grafana sidecar to pick up."""

    enabled: bool = Field(default=False, description="Create the dashboard ConfigMap.")
    labels: dict[str, str] = Field(
        default={"grafana_dashboard": "1"},
        description="Labels the Grafana dashboard sidecar selects on.",
    )


class Monitoring(_Model):
    """Prometheus and Grafana integration."""

    service_monitor: ServiceMonitorSpec = Field(
        default_factory=ServiceMonitorSpec, description=ServiceMonitorSpec.__doc__
    )
    grafana_dashboards: GrafanaDashboards = Field(
        default_factory=GrafanaDashboards, description=GrafanaDashboards.__doc__
    )


class Traces(_Model):
    """OpenTelemetry traces of every memory step: each hook step, embedding and job run (docs/tracing.md)."""

    endpoint: str | None = Field(
        default=None,
        max_length=2048,
        pattern=r"^https?://[^\s/]+(/\S*)?$",
        description=(
            "The OTLP/HTTP collector, e.g. `http://otel-collector.monitoring:4318` (`/v1/traces` is "
            "added unless the URL ends with it). Every pod of the Brain sends its spans there. Unset: "
            "the operator's `--traces-endpoint` (the chart's `observability.traces.endpoint`), else no "
            "traces at all, and no cost."
        ),
    )
    content: bool = Field(
        default=False,
        description=(
            "Put query text and injected memory text into spans. A data-exposure choice: whoever reads "
            "the collector then reads the team's memory. Off, spans carry counts, ids, model names and "
            "outcomes only."
        ),
    )


class Observability(_Model):
    """Where the Brain's pods send their traces."""

    traces: Traces = Field(default_factory=Traces, description=Traces.__doc__)


class NetworkPolicies(_Model):
    """NetworkPolicies that keep everything but the gateway private to the Brain."""

    enabled: bool = Field(
        default=True,
        description=(
            "Only the gateway accepts traffic from outside the Brain, on its API port; the database only "
            "from this Brain's gateway and jobs; the embedder only from those and Prometheus."
        ),
    )
    prometheus_namespace: str = Field(
        default="monitoring",
        pattern=DNS_LABEL_PATTERN,
        max_length=63,
        description=(
            "The namespace whose pods labelled `app.kubernetes.io/name: prometheus` may scrape the "
            "embedder (its /metrics shares the port with /v1/embeddings). A pod with that label in any "
            "other namespace is refused; for another scraper, label its namespace `brain.dev/metrics: scrape`."
        ),
    )


_EXTERNAL_BACKUP_MESSAGE = (
    "spec.backup is for managed and CloudNativePG databases: an external database (spec.database.external) "
    "is backed up by whoever runs it (your provider's backups or PITR); remove spec.backup"
)


class BrainSpec(_Model):
    """Desired state of a team brain."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!has(self.distill) || !has(self.distill.model) || "
                    "self.gateway.models.exists(m, m.name == self.distill.model)",
                    "spec.distill.model must name one of spec.gateway.models",
                ),
                cel(
                    "!has(self.digest) || !has(self.digest.model) || "
                    "self.gateway.models.exists(m, m.name == self.digest.model)",
                    "spec.digest.model must name one of spec.gateway.models",
                ),
                cel(
                    "!has(self.backup) || !has(self.database.external)",
                    _EXTERNAL_BACKUP_MESSAGE,
                ),
            ]
        }
    )

    gateway: Gateway = Field(description=Gateway.__doc__)
    embedding: Embedding = Field(default_factory=Embedding, description=Embedding.__doc__)
    database: Database = Field(
        default_factory=lambda: Database(managed=ManagedDatabase()),
        description=Database.__doc__,
        json_schema_extra={"default": {"managed": {}}},
    )
    distill: Distill = Field(default_factory=Distill, description=Distill.__doc__)
    digest: Digest = Field(default_factory=Digest, description=Digest.__doc__)
    tunnel: Tunnel | None = Field(default=None, description=Tunnel.__doc__)
    backup: Backup | None = Field(default=None, description=Backup.__doc__)
    monitoring: Monitoring = Field(default_factory=Monitoring, description=Monitoring.__doc__)
    observability: Observability = Field(default_factory=Observability, description=Observability.__doc__)
    network_policies: NetworkPolicies = Field(
        default_factory=NetworkPolicies, description=NetworkPolicies.__doc__
    )

    @model_validator(mode="after")
    def _job_models_exist(self) -> BrainSpec:
        names = [m.name for m in self.gateway.models]
        if len(set(names)) != len(names):
            raise ValueError("spec.gateway.models names must be unique")
        for path, job in (("spec.distill.model", self.distill), ("spec.digest.model", self.digest)):
            if job.model is not None and job.model not in names:
                raise ValueError(f"{path} must name one of spec.gateway.models")
        if self.backup is not None and self.database.external is not None:
            raise ValueError(_EXTERNAL_BACKUP_MESSAGE)
        return self


class Condition(_Model):
    """One aspect of the resource's state, Kubernetes-style."""

    type: str = Field(description="Condition type, e.g. `Ready`.", max_length=64)
    status: Literal["True", "False", "Unknown"] = Field(description="Whether the condition holds.")
    reason: str = Field(default="", max_length=128, description="CamelCase reason for the last transition.")
    message: str = Field(default="", max_length=4096, description="What happened, for a person.")
    last_transition_time: str | None = Field(
        default=None,
        description="When status last changed (RFC 3339).",
        json_schema_extra={"format": "date-time"},
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation the condition was computed for."
    )


class Endpoints(_Model):
    """Where agents reach the brain."""

    gateway: str | None = Field(default=None, description="Gateway base URL (OpenAI and Anthropic APIs).")
    mcp: str | None = Field(default=None, description="MCP endpoint URL.")


class ReindexProgress(_Model):
    """A model migration in progress: the new model's index is built beside the live one."""

    from_model: str = Field(default="", description="Model of the live index (served until the swap).")
    to_model: str = Field(description="Model the new index is built with.")
    to_dim: int = Field(ge=1, description="Dimension of the new index.")
    done: int = Field(default=0, ge=0, description="Entries embedded into the new index so far.")
    total: int = Field(default=0, ge=0, description="Entries the new index must hold.")
    started_at: str | None = Field(default=None, description="When the migration started (RFC 3339).")


class IndexStatus(_Model):
    """Index health as reported by the gateway's `/brain/v1/health`."""

    total_entries: int | None = Field(default=None, ge=0, description="All live entries.")
    entries_by_kind: dict[str, int] | None = Field(default=None, description="Live entries per kind.")
    entries_by_namespace: dict[str, int] | None = Field(
        default=None, description="Live entries per memory namespace."
    )
    embedded_ratio: float | None = Field(
        default=None, ge=0, le=1, description="Share of entries that have an embedding (1.0 = fully indexed)."
    )
    stale_entries: int | None = Field(default=None, ge=0, description="Entries past their review date.")
    pending_proposals: int | None = Field(default=None, ge=0, description="Proposals awaiting an owner.")
    last_ingest: str | None = Field(default=None, description="Last successful ingest (RFC 3339).")
    last_distill: str | None = Field(default=None, description="Last successful distill (RFC 3339).")
    last_digest: str | None = Field(default=None, description="Last successful digest (RFC 3339).")
    last_backup: str | None = Field(
        default=None, description="When the last good backup (spec.backup) finished (RFC 3339)."
    )
    last_backup_result: Literal["ok", "failed"] | None = Field(
        default=None,
        description="Result of the newest backup run: `failed` (e.g. a full volume) fires BrainBackupFailed.",
    )
    last_backup_bytes: int | None = Field(
        default=None, ge=0, description="Size of the last good backup's dump file in bytes."
    )
    embedding_model: str | None = Field(default=None, description="Model the stored vectors come from.")
    embedding_dim: int | None = Field(default=None, ge=0, description="Dimension of the stored vectors.")
    live_model: str | None = Field(
        default=None, description="Model the live index is built by (what queries are compared with)."
    )
    reindex: ReindexProgress | None = Field(default=None, description=ReindexProgress.__doc__)
    last_checked: str | None = Field(
        default=None, description="When the operator last read the health endpoint."
    )


BrainPhase = Literal["Pending", "Progressing", "Ready", "Degraded", "Failed"]


class BrainStatus(_Model):
    """Observed state, written by the operator only."""

    phase: BrainPhase | None = Field(
        default=None,
        description=(
            "Pending: nothing running yet. Progressing: rolling out. Ready: serving. "
            "Degraded: serving with a problem (see conditions). "
            "Failed: cannot be reconciled (see conditions)."
        ),
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="Last metadata.generation reconciled."
    )
    conditions: list[Condition] | None = Field(
        default=None,
        max_length=16,
        description=(
            "Ready, DatabaseReady, EmbedderReady, GatewayReady, IndexHealthy, Reindexing, and SecretsPermitted "
            "(False, reason SecretNotPermitted, naming each referenced Secret not labelled "
            "`brain.dev/secret-use` for its use)."
        ),
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    endpoints: Endpoints | None = Field(default=None, description=Endpoints.__doc__)
    index: IndexStatus | None = Field(default=None, description=IndexStatus.__doc__)
    config_hash: str | None = Field(default=None, description="Hash of the rendered gateway config.")


class ObjectMeta(BaseModel):
    """The metadata fields the operator reads; everything else passes through untouched."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = Field(default=None, alias="resourceVersion")
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class _Resource(_Model):
    """Common envelope of a brain.dev object."""

    model_config = ConfigDict(extra="ignore")

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)


class Brain(_Resource):
    """A team brain: gateway, embedder, database and jobs, reconciled by brain-operator."""

    kind: Literal["Brain"] = "Brain"
    spec: BrainSpec
    status: BrainStatus | None = None


# --------------------------------------------------------------------------------------------
# MemorySource
# --------------------------------------------------------------------------------------------


class BrainRef(_Model):
    """The Brain (in the same namespace) this resource belongs to."""

    name: str = Field(
        min_length=1,
        max_length=63,
        pattern=DNS_LABEL_PATTERN,
        description="Name of the Brain. Fixed at creation.",
    )


_brain_ref_immutable = immutable("spec.brainRef", "move the resource by deleting and recreating it")


class GitSource(_Model):
    """A git repository to read from."""

    url: str = Field(
        min_length=1,
        max_length=2048,
        description=(
            f"Clone URL: {SECURE_ACCEPTED}. http:// and file:/// pass this check but the operator refuses "
            f"them (condition Ready=False, reason InsecureGitURL, no Job) unless started with {INSECURE_FLAG}."
        ),
        json_schema_extra={
            "x-kubernetes-validations": [cel(f"self.matches(r'{URL_REGEX}')", f"url must be {URL_ACCEPTED}")]
        },
    )
    ref: str = Field(
        default="main",
        min_length=1,
        max_length=255,
        description=(
            "Branch, tag (optionally refs/heads/…, refs/tags/…) or commit id, in `git check-ref-format` "
            "shape; never starting with '-'."
        ),
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    f"self.matches(r'{REF_REGEX}') && !self.endsWith('.lock') && !self.contains('.lock/')",
                    f"ref must be {REF_ACCEPTED}",
                )
            ]
        },
    )
    paths: list[str] | None = Field(
        default=None,
        max_length=64,
        description="Paths or globs inside the repository to import; omit for the whole tree.",
    )
    credentials_secret_ref: SecretKeyRef | None = Field(
        default=None,
        description=(
            "Secret key holding a token or SSH private key for private repositories. The Secret must carry "
            "the label `brain.dev/secret-use: git-credentials` (else the source is not imported and its "
            "condition SecretsPermitted says why)."
        ),
    )

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str, info: ValidationInfo) -> str:
        """The CRD's shape rule only: the scheme policy (no http://, file://) is the operator's and the
        job's, which an operator flag relaxes for tests. brainctl passes LOCAL_GIT_CONTEXT for a
        laptop's own manifests, where a plain local path is the user's to read."""
        local = bool((info.context or {}).get(LOCAL_GIT_CONTEXT))
        return check_url(value, "url", allow_insecure=True, allow_path=local)

    @field_validator("ref")
    @classmethod
    def _check_ref(cls, value: str) -> str:
        return check_ref(value, "ref")


class GitMemories(GitSource):
    """Markdown memories (with front matter) or source code (chunked along its syntax tree)."""

    format: Literal["markdown", "code"] = Field(
        default="markdown",
        description=(
            "`markdown`: one memory per file, front matter for metadata. `code`: AST chunks and edges."
        ),
    )


class InlineSource(_Model):
    """Memories kept in a ConfigMap: each key is one markdown memory."""

    config_map_name: str = Field(
        min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN, description="Name of the ConfigMap."
    )


_SOURCE_KINDS = "spec.git, spec.skills, spec.personas or spec.inline"


class RetireGuard(_Model):
    """Stops an import that would retire most of what this source imported (a wrong path or ref
    looks exactly like a mass deletion). The stopped import writes nothing and names a token in
    `status.retireGuard.confirm`; copy it to `confirm` to let that one removal through."""

    max_share: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description=(
            "Largest share of the source's stored entries one import may retire without confirmation "
            "(0 < maxShare ≤ 1). Retiring every entry always needs confirmation."
        ),
    )
    confirm: str | None = Field(
        default=None,
        max_length=64,
        pattern=r"^[0-9a-f]{12}$",
        description="The token a stopped import reported in status.retireGuard.confirm.",
    )


class RetireStop(_Model):
    """The last import stopped at the retire guard: what it would have retired."""

    would_retire: int = Field(ge=0, description="Entries the import would have retired.")
    stored: int = Field(ge=0, description="Entries the source holds now.")
    confirm: str = Field(
        description="Set spec.retireGuard.confirm to this to let exactly this removal through."
    )
    message: str = Field(default="", max_length=1000, description="Why the import stopped, in words.")


class MemorySourceSpec(_Model):
    """Something to import into a Brain on a schedule. Set exactly one of git, skills, personas, inline."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "[has(self.git), has(self.skills), has(self.personas), has(self.inline)]"
                    ".filter(x, x).size() == 1",
                    f"exactly one of {_SOURCE_KINDS} must be set",
                ),
            ]
        }
    )

    brain_ref: BrainRef = Field(description=BrainRef.__doc__, json_schema_extra=_brain_ref_immutable)
    namespace: str = Field(
        default="shared",
        min_length=1,
        max_length=128,
        pattern=MEMORY_NAMESPACE_PATTERN,
        description="Memory namespace the imported entries land in (retrieval scopes by it).",
    )
    origin: Literal["import", "untrusted"] = Field(
        default="import",
        description=(
            "Origin class recorded on every entry. `untrusted` entries are never injected as curated."
        ),
    )
    schedule: str = _schedule_field("0 * * * *", "spec.schedule", "re-imports")
    suspend: bool = Field(default=False, description="Pause scheduled imports.")
    git: GitMemories | None = Field(default=None, description=GitMemories.__doc__)
    skills: GitSource | None = Field(default=None, description="A repository of `SKILL.md` skills.")
    personas: GitSource | None = Field(
        default=None, description="A repository of agent persona markdown files."
    )
    inline: InlineSource | None = Field(default=None, description=InlineSource.__doc__)
    retire_guard: RetireGuard = Field(default_factory=RetireGuard, description=RetireGuard.__doc__)
    resources: Resources | None = Field(
        default=None,
        description="Ingest job resources. Defaults: requests 100m CPU / 256Mi, limits 1 CPU / 1Gi.",
    )

    @field_validator("schedule")
    @classmethod
    def _cron(cls, v: str) -> str:
        return _check_cron(v, "spec.schedule")

    @model_validator(mode="after")
    def _exactly_one(self) -> MemorySourceSpec:
        if sum(x is not None for x in (self.git, self.skills, self.personas, self.inline)) != 1:
            raise ValueError(f"exactly one of {_SOURCE_KINDS} must be set")
        return self

    @property
    def source_type(self) -> Literal["git", "skills", "personas", "inline"]:
        if self.git is not None:
            return "git"
        if self.skills is not None:
            return "skills"
        if self.personas is not None:
            return "personas"
        return "inline"


class IngestCounts(_Model):
    """What the last import did (from the ingest job's summary line)."""

    added: int = Field(default=0, ge=0, description="New entries.")
    superseded: int = Field(
        default=0, ge=0, description="Changed entries (the old version is kept as history)."
    )
    skipped: int = Field(default=0, ge=0, description="Unchanged entries.")
    retired: int = Field(default=0, ge=0, description="Entries whose source item disappeared.")
    rejected: int = Field(default=0, ge=0, description="Items refused by the secret gate or lint.")


class MemorySourceStatus(_Model):
    """Observed state, written by the operator only."""

    observed_generation: int | None = Field(
        default=None, ge=0, description="Last metadata.generation reconciled."
    )
    conditions: list[Condition] | None = Field(
        default=None,
        max_length=16,
        description=(
            "Ready (the import is scheduled), Synced (the last import succeeded) and, when the source names a "
            "Secret, SecretsPermitted (False, reason SecretNotPermitted: the Secret is not labelled "
            "`brain.dev/secret-use: git-credentials`, and nothing is imported)."
        ),
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    last_sync: str | None = Field(default=None, description="When the last import finished (RFC 3339).")
    last_job: str | None = Field(default=None, description="Name of the last import Job.")
    spec_hash: str | None = Field(
        default=None, description="Hash of the spec the last immediate import ran for."
    )
    counts: IngestCounts | None = Field(default=None, description=IngestCounts.__doc__)
    retire_guard: RetireStop | None = Field(default=None, description=RetireStop.__doc__)


class MemorySource(_Resource):
    """Something a Brain imports on a schedule: memories, code, skills or personas."""

    kind: Literal["MemorySource"] = "MemorySource"
    spec: MemorySourceSpec
    status: MemorySourceStatus | None = None


# --------------------------------------------------------------------------------------------
# RoutingPolicy
# --------------------------------------------------------------------------------------------


class Tiers(_Model):
    """Which gateway model serves each complexity tier (names from `spec.gateway.models` of the Brain)."""

    simple: ConfigStr = Field(
        min_length=1,
        max_length=128,
        description="Greetings, lookups, short questions.",
        json_schema_extra=no_env_reference("simple"),
    )
    medium: ConfigStr = Field(
        min_length=1,
        max_length=128,
        description="Everyday coding.",
        json_schema_extra=no_env_reference("medium"),
    )
    complex: ConfigStr = Field(
        min_length=1,
        max_length=128,
        description="Architecture, refactors, multi-file changes.",
        json_schema_extra=no_env_reference("complex"),
    )
    reasoning: ConfigStr = Field(
        min_length=1,
        max_length=128,
        description="Hard multi-step reasoning.",
        json_schema_extra=no_env_reference("reasoning"),
    )


def _weight(default: float, what: str) -> Any:
    return Field(default=default, ge=0, le=1, description=what)


class DimensionWeights(_Model):
    """How much each signal counts toward the complexity score (0 to 1 each)."""

    token_count: float = _weight(0.10, "Prompt length.")
    code_presence: float = _weight(0.30, "Code and programming keywords.")
    reasoning_markers: float = _weight(0.25, "'step by step', 'think through', ...")
    technical_terms: float = _weight(0.25, "Architecture and infrastructure vocabulary.")
    simple_indicators: float = _weight(0.05, "'what is', 'define' (lowers the score).")
    multi_step_patterns: float = _weight(0.03, "'first ... then', numbered steps.")
    question_complexity: float = _weight(0.02, "Several questions in one prompt.")


_BOUNDARIES_MESSAGE = (
    "spec.tierBoundaries must be strictly increasing: simpleMedium < mediumComplex < complexReasoning"
)


class TierBoundaries(_Model):
    """Score thresholds between tiers; strictly increasing."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "self.simpleMedium < self.mediumComplex && self.mediumComplex < self.complexReasoning",
                    _BOUNDARIES_MESSAGE,
                )
            ]
        }
    )

    simple_medium: float = Field(
        default=0.15, ge=0, le=1, description="Score above which a request is MEDIUM."
    )
    medium_complex: float = Field(
        default=0.35, ge=0, le=1, description="Score above which a request is COMPLEX."
    )
    complex_reasoning: float = Field(
        default=0.60, ge=0, le=1, description="Score above which a request is REASONING."
    )

    @model_validator(mode="after")
    def _increasing(self) -> TierBoundaries:
        if not (self.simple_medium < self.medium_complex < self.complex_reasoning):
            raise ValueError(_BOUNDARIES_MESSAGE)
        return self


class TokenThresholds(_Model):
    """Prompt lengths (in tokens) that count as short or long."""

    simple: int = Field(default=15, ge=0, le=100000, description="Below this a prompt counts as short.")
    complex: int = Field(default=400, ge=1, le=1000000, description="Above this a prompt counts as long.")


#: A keyword of the router's lists (each reaches the gateway's LiteLLM config).
Keyword = Annotated[ConfigStr, Field(json_schema_extra=no_env_reference("keyword"))]


class Keywords(_Model):
    """Keyword lists replacing the router's built-in ones; omit a list to keep the default."""

    code: list[Keyword] | None = Field(default=None, max_length=256, description="Words that signal code.")
    reasoning: list[Keyword] | None = Field(
        default=None, max_length=256, description="Phrases that ask for reasoning."
    )
    technical: list[Keyword] | None = Field(default=None, max_length=256, description="Technical vocabulary.")
    simple: list[Keyword] | None = Field(
        default=None, max_length=256, description="Phrases of simple questions."
    )


class Override(_Model):
    """An explicit request ("use pro") that bypasses the complexity score."""

    phrase: ConfigStr = Field(
        min_length=1,
        max_length=128,
        description="Case-insensitive phrase in the last user message, e.g. `use pro`.",
        json_schema_extra=no_env_reference("phrase"),
    )
    model: ConfigStr = Field(
        min_length=1,
        max_length=128,
        description="Gateway model to use when the phrase appears.",
        json_schema_extra=no_env_reference("model"),
    )


class RoutingPolicySpec(_Model):
    """The complexity router of a Brain: a virtual model that picks a real one per request."""

    brain_ref: BrainRef = Field(description=BrainRef.__doc__, json_schema_extra=_brain_ref_immutable)
    model_name: ConfigStr = Field(
        default="smart-router",
        min_length=1,
        max_length=128,
        pattern=MODEL_NAME_PATTERN,
        description="The virtual model name agents ask for to be routed.",
        json_schema_extra=no_env_reference("modelName"),
    )
    tiers: Tiers = Field(description=Tiers.__doc__)
    default_model: ConfigStr | None = Field(
        default=None,
        max_length=128,
        description="Model used when no tier can be determined; omit for `tiers.medium`.",
        json_schema_extra=no_env_reference("defaultModel"),
    )
    dimension_weights: DimensionWeights = Field(
        default_factory=DimensionWeights, description=DimensionWeights.__doc__
    )
    tier_boundaries: TierBoundaries = Field(
        default_factory=TierBoundaries, description=TierBoundaries.__doc__
    )
    token_thresholds: TokenThresholds = Field(
        default_factory=TokenThresholds, description=TokenThresholds.__doc__
    )
    keywords: Keywords | None = Field(default=None, description=Keywords.__doc__)
    overrides: list[Override] | None = Field(
        default=None,
        max_length=64,
        description="Explicit overrides, checked before scoring. Phrases are unique.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["phrase"]},
    )

    def referenced_models(self) -> set[str]:
        """Every gateway model name this policy routes to (must exist in the Brain)."""
        names = {self.tiers.simple, self.tiers.medium, self.tiers.complex, self.tiers.reasoning}
        if self.default_model:
            names.add(self.default_model)
        names.update(o.model for o in self.overrides or [])
        return names


class RoutingPolicyStatus(_Model):
    """Observed state, written by the operator only."""

    observed_generation: int | None = Field(
        default=None, ge=0, description="Last metadata.generation reconciled."
    )
    conditions: list[Condition] | None = Field(
        default=None,
        max_length=16,
        description="Applied: the policy is in the Brain's gateway config.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    brain: str | None = Field(default=None, description="The Brain whose gateway serves this policy.")
    config_hash: str | None = Field(
        default=None, description="Hash of the gateway config the policy is part of."
    )


class RoutingPolicy(_Resource):
    """The complexity router for a Brain: tiers to models, weights, boundaries, keywords, overrides."""

    kind: Literal["RoutingPolicy"] = "RoutingPolicy"
    spec: RoutingPolicySpec
    status: RoutingPolicyStatus | None = None


#: The custom resources, with what crdgen needs to know about each.
RESOURCES: dict[str, dict[str, Any]] = {
    "Brain": {
        "model": Brain,
        "spec": BrainSpec,
        "status": BrainStatus,
        "plural": "brains",
        "singular": "brain",
        "short_names": ["brain"],
    },
    "MemorySource": {
        "model": MemorySource,
        "spec": MemorySourceSpec,
        "status": MemorySourceStatus,
        "plural": "memorysources",
        "singular": "memorysource",
        "short_names": ["msrc"],
    },
    "RoutingPolicy": {
        "model": RoutingPolicy,
        "spec": RoutingPolicySpec,
        "status": RoutingPolicyStatus,
        "plural": "routingpolicies",
        "singular": "routingpolicy",
        "short_names": ["rpol"],
    },
}
