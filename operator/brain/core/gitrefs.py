"""The rules for a git source's `ref` and `url`, shared by the CRD (api.py), the operator and the job.

A ref or URL reaches the git command line. A value starting with `-` is read by git as an option
(`--upload-pack=<command>` runs that command) and a transport such as `ext::` runs one too, so both
are checked against an allow-list before any git runs. Two layers, because they differ in who may
relax them:

- the *shape* (`REF_REGEX`, `URL_REGEX`): what is never valid anywhere (a leading `-`, a transport
  helper, an unknown scheme). The CRD's CEL rules use these very strings (RE2: no look-around).
- the *scheme policy* (`insecure_url`): http:// (clear text, a token readable on the wire), file://
  and local paths (the job pod's own disk) are refused in a cluster unless the operator runs with
  `--allow-insecure-git-urls` (tests); brainctl's local commands allow them (the laptop is the user's).
"""

from __future__ import annotations

import re

_COMPONENT = r"[A-Za-z0-9_+@-]+(\.[A-Za-z0-9_+@-]+)*"
#: A branch, tag (optionally refs/heads/…, refs/tags/…) or commit id: `git check-ref-format` rules,
#: narrowed to ASCII letters, digits and `_ + @ - . /`, never starting with `-` or `.`.
REF_REGEX = rf"^[A-Za-z0-9_]([A-Za-z0-9_+@-]*)(\.[A-Za-z0-9_+@-]+)*(/{_COMPONENT})*$"
REF_ACCEPTED = (
    "a branch, tag or commit id (ASCII letters, digits and _ + @ - . /, not starting with '-' or '.', "
    "no '..', no component ending in '.lock')"
)

_HOST = r"[A-Za-z0-9][A-Za-z0-9.-]*"
_USER = r"[A-Za-z0-9_][A-Za-z0-9._-]*"
_PATH = r"[!-~]*"  # printable ASCII, no space or control character
#: Every URL shape git may be given in some deployment: https://, ssh://, scp-like user@host:path,
#: and (only where the scheme policy allows them) http:// and file:///. No host starts with `-`.
URL_REGEX = (
    rf"^(https?://{_HOST}(:[0-9]+)?(/{_PATH})?"
    rf"|ssh://({_USER}@)?{_HOST}(:[0-9]+)?/{_PATH}"
    rf"|file:///{_PATH}"
    rf"|{_USER}@{_HOST}:[A-Za-z0-9_~/.]{_PATH})$"
)
URL_ACCEPTED = (
    "https://host/path, ssh://[user@]host[:port]/path or user@host:path (host not starting with '-'); "
    "http://host/path and file:///path only where the operator allows insecure git URLs"
)
SECURE_ACCEPTED = "https://host/path, ssh://[user@]host[:port]/path or user@host:path"
#: What relaxes the scheme policy for the operator (flag) and for the job it renders (environment).
INSECURE_FLAG = "--allow-insecure-git-urls"

# Matched with fullmatch: Python's `$` also matches before a final newline, which RE2's (the CRD's)
# does not, so `.match` let `main\n` through the job's check that the API server refuses (session 14).
_REF_RE = re.compile(REF_REGEX)
_URL_RE = re.compile(URL_REGEX)
_LOCAL_PATH_RE = re.compile(r"^[^\x00-\x1f\x7f-][^\x00-\x1f\x7f]*$")


def check_ref(ref: str, field: str = "spec.git.ref") -> str:
    """`ref` unchanged, or ValueError naming `field` and what is accepted."""
    if (
        not isinstance(ref, str)
        or len(ref) > 255
        or not _REF_RE.fullmatch(ref)
        or ref.endswith(".lock")
        or ".lock/" in ref
    ):
        raise ValueError(f"{field} must be {REF_ACCEPTED}, not {ref!r}"[:400])
    return ref


def is_local_path(url: str) -> bool:
    """A plain path (`./repo`, `/srv/repo`, `~/repo`): no scheme, no `::` helper, no leading `-`, and
    no `:` before the first `/` (git reads `host:path` as ssh)."""
    return (
        "://" not in url
        and "::" not in url
        and ":" not in url.split("/", 1)[0]
        and bool(_LOCAL_PATH_RE.fullmatch(url))
    )


def insecure_url(url: str) -> str | None:
    """Why a well-shaped URL is refused in a cluster by default, or None for https/ssh."""
    low = url.lower()
    if low.startswith("http://"):
        return "http:// sends the repository (and any token) in clear text"
    if low.startswith("file://") or is_local_path(url):
        return "file:// and local paths read the job pod's own disk"
    return None


def check_url(
    url: str,
    field: str = "spec.git.url",
    *,
    allow_insecure: bool = False,
    allow_path: bool = False,
) -> str:
    """`url` unchanged, or ValueError naming `field` and what is accepted.

    The shape is always checked. `allow_insecure` (an operator started with the flag, brainctl's
    local commands, tests) lets http:// and file:// through; `allow_path` a plain local path too
    (brainctl only: a CRD never accepts one)."""
    shaped = isinstance(url, str) and len(url) <= 2048 and bool(_URL_RE.fullmatch(url))
    if not shaped and not (allow_path and isinstance(url, str) and len(url) <= 4096 and is_local_path(url)):
        raise ValueError(f"{field} must be {URL_ACCEPTED}, not {url!r}"[:500])
    why = insecure_url(url)
    if why is not None and not allow_insecure:
        raise ValueError(
            f"{field} is refused: {why}; use {SECURE_ACCEPTED} "
            f"(an operator started with {INSECURE_FLAG}, for tests, accepts it), not {url!r}"[:500]
        )
    return url


def is_plain_http(url: str) -> bool:
    """A URL whose traffic (and any credential sent with it) is readable on the wire."""
    return url.lower().startswith("http://")
