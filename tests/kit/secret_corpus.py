"""The secret gate's corpus. Fake credentials are assembled at import so no literal token sits in git.

POSITIVES: (detector type, text). NEGATIVES: texts that must pass untouched.
"""

from __future__ import annotations

import base64
import hashlib
import random
import struct
import uuid

_rng = random.Random(7)
_B62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def rand(n: int, alphabet: str = _B62) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


PEM = "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA" + rand(64) + "\n-----END RSA PRIVATE KEY-----"
AWS_ID = "AKIA" + rand(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
AWS_SECRET = rand(40, _B62 + "/+")

POSITIVES: list[tuple[str, str]] = [
    ("private_key", f"deploy key:\n{PEM}\n"),
    ("private_key", "-----BEGIN " + "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA" + rand(40)),
    ("aws_access_key", f"export AWS_ACCESS_KEY_ID={AWS_ID}"),
    ("aws_secret_key", f"aws_secret_access_key = {AWS_SECRET}"),
    ("gcp_api_key", "maps key AIza" + rand(35, _B62 + "_-") + " in the frontend"),
    (
        "gcp_service_account_key",
        '{"type": "service_account", "private_key_id": "' + rand(40, "0123456789abcdef") + '"}',
    ),
    (
        "azure_storage_key",
        "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=" + rand(86, _B62 + "+/") + "==",
    ),
    (
        "azure_sas_token",
        "https://acct.blob.core.windows.net/c/f?sv=2022-11-02&sp=r&sig=" + rand(43, _B62 + "%") + "%3D",
    ),
    ("github_token", "use gh" + "p_" + rand(36) + " for the bot"),
    ("github_token", "github_" + "pat_" + rand(22) + "_" + rand(59)),
    ("gitlab_token", "token glpat-" + rand(20)),
    ("slack_token", "xox" + "b-" + rand(11, "0123456789") + "-" + rand(13, "0123456789") + "-" + rand(24)),
    (
        "slack_webhook",
        "https://hooks.slack.com/services/T"
        + rand(8, "ABCDEFGHIJ0123456789")
        + "/B"
        + rand(8, "ABCDEFGHIJ0123456789")
        + "/"
        + rand(24),
    ),
    ("stripe_key", "sk_" + "live_" + rand(24)),
    ("openai_key", "OPENAI_API_KEY=sk-" + "proj-" + rand(48, _B62 + "_-")),
    ("anthropic_key", "sk-" + "ant-api03-" + rand(80, _B62 + "_-")),
    (
        "jwt",
        "Authorization: Bearer eyJ"
        + rand(20, _B62 + "_-")
        + ".eyJ"
        + rand(40, _B62 + "_-")
        + "."
        + rand(43, _B62 + "_-"),
    ),
    ("connection_string", "DATABASE_URL=postgres://app:" + rand(16) + "@db.prod.internal:5432/app"),
    ("connection_string", "mongodb+srv://admin:" + rand(12) + "@cluster0.example.net/test"),
    ("generic_secret", 'client_secret: "' + rand(8) + "-" + rand(8) + '"'),
    ("generic_secret", "db_password=Summer2024!" + rand(4)),
    ("generic_secret", 'api_key = "' + rand(32) + '"'),
    ("high_entropy_string", "the signing value is " + rand(40) + " keep it safe"),
    # Gaps found by the issue-14 attack, and their neighbours.
    ("generic_secret", 'DB_PASSWORD="correcthorsebatterystaple"'),
    ("generic_secret", "DB_PASSWORD=correcthorsebatterystaple"),
    ("generic_secret", "admin_passphrase: 'mellowyellowsunset'"),
    ("generic_secret", "export SERVICE_TOKEN='" + rand(10, "abcdefghijklmnopqrstuvwxyz") + "'"),
    ("aws_access_key", "key id " + AWS_ID[:4] + " " + AWS_ID[4:]),
    ("aws_access_key", "key id " + AWS_ID[:10] + "-" + AWS_ID[10:]),
    ("huggingface_token", "HF_TOKEN=hf" + "_" + rand(34)),
    ("huggingface_token", "pull the model with hf" + "_" + rand(34) + " then run"),
    ("twilio_key", "twilio sid SK" + rand(32, "0123456789abcdef")),
    ("twilio_key", "TWILIO_AUTH_TOKEN=" + rand(32, "0123456789abcdef")),
    ("mailgun_key", "mailgun api key" + "-" + rand(32, "0123456789abcdefghijklmnopqrstuvwxyz")),
    (
        "mailgun_key",
        "MAILGUN_API_KEY="
        + rand(32, "0123456789abcdef")
        + "-"
        + rand(8, "0123456789abcdef")
        + "-"
        + rand(8, "0123456789abcdef"),
    ),
    ("basic_auth", "Authorization: Basic " + base64.b64encode(b"deploy:" + rand(12).encode()).decode()),
    (
        "basic_auth",
        "curl -H 'Authorization: basic " + base64.b64encode(b"ci:" + rand(16).encode()).decode() + "'",
    ),
    ("bearer_token", "Authorization: Bearer " + rand(40, _B62 + "._-")),
    ("discord_webhook", "alerts go to https://discord.com/api/webhooks/99887766/" + rand(68, _B62 + "_-")),
    # a URL-safe random token whose `-` or `_` falls beside a word-like run is still random, not a slug
    ("high_entropy_string", "the webhook token is " + rand(12) + "-hook-" + rand(30)),
]

# Tricky negatives: shapes that look random but are not secrets.
_FLOATS = [_rng.uniform(-1, 1) for _ in range(384)]
_VECTOR_B64 = base64.b64encode(struct.pack("384f", *_FLOATS)).decode()
_SHORT_VEC_B64 = base64.b64encode(struct.pack("8f", *_FLOATS[:8])).decode()
_SHA1 = hashlib.sha1(b"commit").hexdigest()
_SHA256 = hashlib.sha256(b"lockfile").hexdigest()
_SHA512_B64 = base64.b64encode(hashlib.sha512(b"pkg").digest()).decode()

# (class, text) so the report can count false positives per shape of negative.
NEGATIVE_CASES: list[tuple[str, str]] = [
    # Padded base64 (any length not a multiple of 3 bytes), long blobs, and named ones are data.
    *[
        ("base64_random_bytes", base64.b64encode(_rng.randbytes(n)).decode())
        for n in (16, 20, 32, 47, 48, 64)
    ],
    ("base64_random_bytes", "nonce " + base64.b64encode(_rng.randbytes(18)).decode() + " was reused"),
    ("base64_random_bytes", "salt=" + base64.b64encode(_rng.randbytes(24)).decode()),
    ("base64_random_bytes", '"iv": "' + base64.b64encode(_rng.randbytes(30)).decode() + '"'),
    (
        "k8s_reference",
        "password:\n  valueFrom:\n    secretKeyRef:\n      name: brain-db\n      key: password",
    ),
    ("k8s_reference", "secret_name: prod-db-credentials"),
    ("k8s_reference", "passwordSecretRef: brain-db-superuser-credentials"),
    ("k8s_reference", "token_path: /var/run/secrets/kubernetes.io/serviceaccount/token"),
    ("k8s_reference", "api_key_env: OPENAI_API_KEY_PRODUCTION"),
    ("k8s_reference", "client_secret_file: /etc/brain/oauth/client-secret.json"),
    ("prose", "The token: authentication happens at the edge"),
    ("prose", "Rotate the api key every quarter; the password policy requires 14 characters."),
    ("prose", "password: required for the admin console, optional for read-only users"),
    ("prose", "We store the secret in Vault at secret/data/payments/stripe, never in git."),
    ("code_reference", "token = settings.github_token"),
    ("code_reference", "password=getDatabasePassword"),
    ("code_reference", "api_key = config.openai.apiKey"),
    ("identifier", "AKIA is the prefix of AWS access key ids; ASIA marks temporary ones"),
    ("identifier", "the basic plan costs less than the premium plan"),
    ("identifier", "curl -H 'Authorization: Bearer $GITHUB_TOKEN' https://api.github.com/user"),
    ("redaction_placeholder", "export AWS_ACCESS_KEY_ID=«REDACTED:aws_access_key»"),
    ("redaction_placeholder", "postgres://app:«REDACTED:connection_string»@db.prod.internal:5432/app"),
    ("redaction_placeholder", "db_password=«REDACTED:generic_secret» in the old config"),
]

NEGATIVES: list[str] = [
    f"request id {uuid.UUID(int=_rng.getrandbits(128))} failed at 10:32",
    f"fixed in commit {_SHA1}",
    f"short sha {_SHA1[:7]} and full {_SHA1}",
    f"checksum sha256:{_SHA256}",
    f'"integrity": "sha512-{_SHA512_B64}"',
    f"{_SHA256}  ./dist/app.tar.gz",
    f"embedding blob: {_VECTOR_B64}",
    f"vector {_SHORT_VEC_B64}",
    "AbstractSingletonProxyFactoryBeanConfigurationManager2Impl is the class to extend",
    "see src/components/UserProfileSettings/NotificationPreferencesPanel.tsx",
    "password = os.environ['DB_PASSWORD']",
    "token = get_token()",
    "api_key: ${OPENAI_API_KEY}",
    "password: changeme-in-production",
    "secretKeyRef: {name: brain-db, key: password}",
    "The password field must be at least 12 characters long.",
    "set max_connections=200 and shared_buffers=256MB",
    "postgres://localhost:5432/app (no credentials in dev)",
    "The staging database moved to port 6543 on db-staging.internal",
    "use `kubectl get secret brain-db -o jsonpath='{.data.password}'` to read it",
    "docker image sha256:" + _SHA256,
    "ULID 01JD3V8ZQ4K6R2XW5T9N7M1B0C identifies the entry",
    "memories/decisions/01J9ZQ4Y7V0K3M5N8P2R6T1W4X-pgvector.md",  # a ULID-named file (ingest source_key)
    "see runbooks/2024/01HQ3K8Z5W7N9P2R4T6V8X0Y1A-failover_drill for the steps",
    "auth_token_ttl_seconds = 3600",
]
NEGATIVE_CASES += [("hashes_ids_blobs", t) for t in NEGATIVES]
NEGATIVES = [t for _, t in NEGATIVE_CASES]

# Round 2, written after the detectors and measured before tuning (docs/security.md): any finding
# counts for FRESH_SECRETS; FRESH_CLEAN must pass untouched.
FRESH_SECRETS: list[str] = [
    "//registry.npmjs.org/:_authToken=npm_" + rand(36),
    "password = pypi-AgEIcHlwaS5vcmc" + rand(60),
    'secret: "' + rand(6, "abcdefghijklmnopqrstuvwxyz") + "-" + rand(6, "abcdefghijklmnopqrstuvwxyz") + '"',
    "SG." + rand(22) + "." + rand(43),
    '{"auths":{"ghcr.io":{"auth":"' + base64.b64encode(b"bot:" + rand(20).encode()).decode() + '"}}}',
    "https://deploy:" + rand(14) + "@git.internal/app.git",
    "AKIA." + rand(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
    "curl -H 'X-Api-Key: " + rand(32) + "' https://api.example.com",
    "db:\n  password: 'tangerine submarine velvet'",
    "https://discord.com/api/webhooks/1234567890/" + rand(68, _B62 + "_-"),
]
FRESH_CLEAN: list[str] = [
    "sha1 in lockfile: " + hashlib.sha1(b"fresh").hexdigest(),
    "image digest sha256:" + hashlib.sha256(b"fresh").hexdigest(),
    "base64 nonce " + base64.b64encode(_rng.randbytes(12)).decode(),
    "The API key header is X-Api-Key: see docs/auth.md",
    "password_reset_token_expiry: 3600",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "kubectl create secret generic app --from-literal=password=$(pass show app)",
    "ULID 01JD3V8ZQ4K6R2XW5T9N7M1B0C and UUID 1b4e28ba-2fa1-11d2-883f-0016d3cca427",
]
