"""The secret gate: typed detectors plus an entropy net, for titles, bodies, tags and queries.

Findings carry a type and a span, never the value, so no error message or log can echo a secret.
Tricky negatives (UUIDs, git SHAs, lockfile hashes, base64 blobs, long identifiers) are kept by
design: hex-only and over-long tokens never reach the entropy net.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import math
import re
import struct
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from brain.core.errors import SecretRejected
from brain.core.sanitize import fold

Mode = Literal["refuse", "redact"]


@dataclass(frozen=True)
class Finding:
    type: str
    start: int
    end: int


# (type, pattern, group): `group` is the part that is secret (0 = the whole match).
_DETECTORS: list[tuple[str, re.Pattern[str], int]] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*-----|$)"
        ),
        0,
    ),
    # Also when split by a space, dot or dash (a common way to slip a key past a naive pattern).
    (
        "aws_access_key",
        re.compile(
            r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA)"
            r"(?:[0-9A-Z]{16}|(?=[ \t._A-Z-]{0,20}\d)(?:[ \t._-]?[0-9A-Z]){16})\b"
        ),
        0,
    ),
    (
        "aws_secret_key",
        re.compile(
            r"(?i)aws[\w.-]{0,20}?(?:secret|sk)[\w.-]{0,20}['\"]?\s*[:=]\s*['\"]?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
        ),
        1,
    ),
    ("gcp_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"), 0),
    ("gcp_service_account_key", re.compile(r"\"private_key_id\"\s*:\s*\"([0-9a-f]{40})\""), 1),
    ("azure_storage_key", re.compile(r"(?i)AccountKey=([A-Za-z0-9+/]{86}==)"), 1),
    ("azure_sas_token", re.compile(r"(?i)[?&]sig=([A-Za-z0-9%+/]{40,}={0,2})"), 1),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"), 0),
    ("gitlab_token", re.compile(r"\bgl(?:pat|dt|rt|ptt|cbt)-[A-Za-z0-9_\-]{20,}\b"), 0),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"), 0),
    (
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+"),
        0,
    ),
    (
        "discord_webhook",
        re.compile(r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}"),
        0,
    ),
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,40}\b"), 0),
    ("twilio_key", re.compile(r"\b(?:AC|SK)[0-9a-f]{32}\b"), 0),
    (
        "twilio_key",
        re.compile(
            r"(?i)twilio[\w.-]{0,20}(?:token|secret|key)[\w.-]{0,10}['\"]?[ \t]*[:=][ \t]*['\"]?([0-9a-f]{32})\b"
        ),
        1,
    ),
    ("mailgun_key", re.compile(r"\bkey-[0-9a-zA-Z]{32}\b"), 0),
    (
        "mailgun_key",
        re.compile(
            r"(?i)mailgun[\w.-]{0,20}(?:key|secret)[\w.-]{0,10}['\"]?[ \t]*[:=][ \t]*['\"]?([0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8})\b"
        ),
        1,
    ),
    ("basic_auth", re.compile(r"(?i)\bbasic[ \t]+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"), 1),
    ("stripe_key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b"), 0),
    ("anthropic_key", re.compile(r"\bsk-ant-(?:api|admin|oat)\d{2}-[A-Za-z0-9_\-]{20,}"), 0),
    ("openai_key", re.compile(r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"), 0),
    ("bearer_token", re.compile(r"(?i)\bbearer[ \t]+(?!eyJ)([A-Za-z0-9._~+/-]{20,}=*)"), 1),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), 0),
    (
        "connection_string",
        re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@'\"«»]+:([^\s@/'\"«»]{3,})@[^\s'\"]+"),
        1,
    ),
]

# A secret-named key, a separator on the same line, then the value. `«` is excluded so a redaction
# placeholder is never a value again (capture redacts, then the refusing gate re-reads the result).
_GENERIC = re.compile(
    r"(?i)(?<![A-Za-z0-9])([A-Za-z0-9_.-]*(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey"
    r"|access[_-]?key|auth[_-]?key|credentials?|private[_-]?key|client[_-]?secret)[A-Za-z0-9_.-]*)[\"']?[ \t]*"
    r"(?::|=|:=|=>)[ \t]*([\"']?)([^\s\"'`,;()<>{}\[\]«»]{8,})"
)
# A key that names *where* a secret is, or a property of it, not the secret itself.
_REFERENCE_KEY = re.compile(
    r"(?:(?:^|[_.-])(?:names?|refs?|files?|paths?|env|vars?|ids?|arns?|urls?|uris?|length|len|policy|field|hash"
    r"|type|kind|header|ttl|seconds|expiry|expires|timeout|rotation|mount|dir|manager|store|provider|source"
    r"|label|prompt|format|algorithm|version)|(?<=[a-z])(?:Names?|Refs?|KeyRef|Files?|Paths?|Env|Ids?|Arn|Url|Uri"
    r"|Length|Policy|Field|Hash|Type|Header|Ttl|Source|Label|Format|Version))$"
)
_PLACEHOLDER = re.compile(
    r"(?i)^(?:\$|%|\{\{|<|\*{3,}|x{6,}|\.{3}|os\.environ|process\.env|env\.|secretKeyRef|changeme|redacted"
    r"|your[_-]|example|placeholder|none|null|true|false|undefined|required|optional|string|str|bytes|provided"
    r"|supplied|hidden|masked|generated|random|unset|empty|missing|default|disabled|enabled|inherited|omitted)"
)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_CAMEL = re.compile(r"[a-z][A-Z]")
_LETTERS = re.compile(r"^[A-Za-z]+$")
# Unlabelled tokens longer than this are blobs (digests, ciphertext, vectors); prefixed keys and named
# values of any length are still caught by the typed and key=value detectors.
MAX_RANDOM_TOKEN = 63
# An unquoted letters-only value this long reads as a passphrase, not a word of prose.
PASSPHRASE_LETTERS = 16
_TOKEN = re.compile(r"[A-Za-z0-9+/_=-]{20,}")
_HEX = re.compile(r"^[0-9a-fA-F-]+$")
_HASH_TOKEN = re.compile(
    r"(?i)^(?:(?:sha\d{1,3}|md5|blake2b?)[-:_]|(?:nonce|salt|iv|blob|base64|b64|ciphertext|etag|fingerprint|hash"
    r"|digest|checksum)[=:])"
)
# A token named as data (a digest, a nonce, a blob) is not a credential, however random it looks.
_HASH_PREFIX = re.compile(
    r"(?i)(?:sha\d{1,3}|md5|blake2b?|integrity|checksum|digest|nonce|salt|iv|blob|base64|b64|ciphertext|etag"
    r"|fingerprint|hash)[-:=\s\"']{1,3}$"
)


def _entropy(s: str) -> float:
    counts = Counter(s)
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _class(ch: str) -> int:
    return 0 if ch.islower() else 1 if ch.isupper() else 2 if ch.isdigit() else 3


def _is_float_blob(tok: str) -> bool:
    """Base64 of float32 values (embedding vectors): random-looking text, but plausible numbers."""
    try:
        raw = base64.b64decode(tok + "=" * (-len(tok) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    if len(raw) < 16 or len(raw) % 4:
        return False
    values = struct.unpack(f"<{len(raw) // 4}f", raw)
    plausible = sum(1 for v in values if v == 0.0 or 1e-6 <= abs(v) <= 1e6)
    return plausible >= 0.8 * len(values)


def _is_binary_b64(tok: str) -> bool:
    """Standard base64 of ≥ 12 bytes with `+`, `/` or padding: data (a digest, a nonce, a blob), not a key.

    API keys use URL-safe or alphanumeric alphabets; secrets that are base64 (AWS secret keys,
    Azure account keys) are caught by their own detectors, which read the name beside them.
    """
    if not ("+" in tok or "/" in tok or tok.endswith("=")) or len(tok) % 4:
        return False
    try:
        return len(base64.b64decode(tok, validate=True)) >= 12
    except (binascii.Error, ValueError):
        return False


def _looks_random(tok: str) -> bool:
    """High entropy, all three character classes, and frequent class switches (unlike CamelCase)."""
    if len(tok) > MAX_RANDOM_TOKEN or _HEX.match(tok):
        return False
    classes = {_class(c) for c in tok}
    if not {0, 1, 2} <= classes:
        return False
    switches = sum(_class(a) != _class(b) for a, b in itertools.pairwise(tok)) / (len(tok) - 1)
    return switches >= 0.3 and _entropy(tok) >= 4.2 and not _is_float_blob(tok)


_SLUG_SEP = re.compile(r"[-_/]+")
_WORD = re.compile(r"^[a-z]{3,}$")


def _is_slug(tok: str) -> bool:
    """A path or slug built from parts none of which is random on its own, one of them a plain word:
    `decisions/01J9ZQ4Y7V0K3M5N8P2R6T1W4X-pgvector` (a ULID-named file). A random part of 20 or more
    characters still counts, so `token_urlsafe` secrets, whose `-` and `_` fall at random, stay caught."""
    parts = [p for p in _SLUG_SEP.split(tok) if p]
    if len(parts) < 2 or not any(_WORD.match(p) for p in parts):
        return False
    return not any(len(p) >= 20 and _looks_random(p) for p in parts)


def _generic_is_secret(key: str, quote: str, value: str) -> bool:
    """A value after a secret-named key is a secret unless it is a reference, a placeholder or code."""
    if _REFERENCE_KEY.search(key) or _PLACEHOLDER.match(value):
        return False
    if quote:  # a quoted literal is meant as the value itself, letters-only passphrases included
        return True
    if _LETTERS.match(value):
        return len(value) >= PASSPHRASE_LETTERS and not _CAMEL.search(value)
    return not _IDENTIFIER.match(value)


def scan(text: str) -> list[Finding]:
    """All secret spans in `text`, typed, non-overlapping, in order."""
    found: list[Finding] = []

    def add(kind: str, start: int, end: int) -> None:
        if not any(f.start < end and start < f.end for f in found):
            found.append(Finding(kind, start, end))

    for kind, pattern, group in _DETECTORS:
        for m in pattern.finditer(text):
            add(kind, m.start(group), m.end(group))
    for m in _GENERIC.finditer(text):
        if _generic_is_secret(m.group(1), m.group(2), m.group(3)):
            add("generic_secret", m.start(3), m.end(3))
    for m in _TOKEN.finditer(text):
        tok = m.group(0).strip("=-_")
        if _HASH_PREFIX.search(text[max(0, m.start() - 14) : m.start()]) or _HASH_TOKEN.match(tok):
            continue
        if _looks_random(tok) and not _is_binary_b64(m.group(0)) and not _is_slug(tok):
            add("high_entropy_string", m.start(), m.end())
    return sorted(found, key=lambda f: f.start)


def scan_all(text: str) -> list[Finding]:
    """`scan` of the text and of its folded view (fullwidth, look-alikes, invisibles undone).

    Spans from the folded view do not index the original, so they are reported over the whole text.
    """
    found = scan(text)
    folded = fold(text)
    if folded != text and not found:
        extra = scan(folded)
        if extra:
            return [Finding(f.type, 0, len(text)) for f in extra[:1]]
    return found


def redact(text: str, findings: list[Finding] | None = None) -> str:
    findings = scan(text) if findings is None else findings
    out, last = [], 0
    for f in findings:
        out.append(text[last : f.start])
        out.append(f"«REDACTED:{f.type}»")
        last = f.end
    out.append(text[last:])
    return "".join(out)


def describe(findings: list[Finding]) -> str:
    return ", ".join(sorted({f.type for f in findings}))


class SecretGate:
    """Applies the policy: `refuse` raises naming the field and detector types; `redact` masks in place."""

    def __init__(self, mode: Mode = "refuse") -> None:
        self.mode = mode

    def check(self, field: str, value: str) -> str:
        findings = scan_all(value)
        if not findings:
            return value
        if self.mode == "redact":
            out = redact(value, findings)
            # Redaction is a fixpoint: what it returns never trips the gate again.
            return out if not scan_all(out) else f"«REDACTED:{describe(scan_all(out))}»"
        raise SecretRejected(
            f"{field} contains what looks like a secret ({describe(findings)}); remove it or store a reference "
            "to where the secret lives (e.g. a vault path) instead",
            field=field,
        )
