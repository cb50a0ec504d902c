"""The rule for a git source's `ref` and `url`, shared by the CRD (api.py) and the ingest job.

A ref or URL reaches the git command line. A value starting with `-` is read by git as an option
(`--upload-pack=<command>` runs that command), and a transport such as `ext::` runs one too, so
both are checked against an allow-list before any git runs. The regexes are RE2-compatible (no
look-around) so the CRD's CEL rules use the very same strings.
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
#: https://host[:port]/path, ssh://[user@]host[:port]/path, or scp-like user@host:path.
URL_REGEX = (
    rf"^(https://{_HOST}(:[0-9]+)?(/{_PATH})?"
    rf"|ssh://({_USER}@)?{_HOST}(:[0-9]+)?/{_PATH}"
    rf"|{_USER}@{_HOST}:[A-Za-z0-9_~/.]{_PATH})$"
)
URL_ACCEPTED = (
    "https://host/path, ssh://[user@]host[:port]/path or user@host:path (host not starting with '-')"
)
_LOCAL_URL = re.compile(rf"^(http://{_HOST}(:[0-9]+)?(/{_PATH})?|file:///?[!-~]*)$")

_REF_RE = re.compile(REF_REGEX)
_URL_RE = re.compile(URL_REGEX)


def check_ref(ref: str, field: str = "spec.git.ref") -> str:
    """`ref` unchanged, or ValueError naming `field` and what is accepted."""
    if (
        not isinstance(ref, str)
        or len(ref) > 255
        or not _REF_RE.match(ref)
        or ref.endswith(".lock")
        or ".lock/" in ref
    ):
        raise ValueError(f"{field} must be {REF_ACCEPTED}, not {ref!r}"[:400])
    return ref


def check_url(url: str, field: str = "spec.git.url", *, allow_local: bool = False) -> str:
    """`url` unchanged, or ValueError naming `field`. `allow_local` (brainctl on a laptop, tests,
    never a cluster job) also lets http://, file:// and a local path through."""
    if isinstance(url, str) and len(url) <= 2048 and _URL_RE.match(url):
        return url
    if allow_local and isinstance(url, str) and len(url) <= 2048:
        if _LOCAL_URL.match(url):
            return url
        if (
            "://" not in url
            and "::" not in url
            and not url.startswith("-")
            and re.fullmatch(r"[^\x00-\x1f\x7f]+", url)
        ):
            return url  # a local path (made a file:// URL by the checkout)
    also = "; http://, file:// and local paths only with the local allowance" if not allow_local else ""
    raise ValueError(f"{field} must be {URL_ACCEPTED}{also}, not {url!r}"[:400])


def is_plain_http(url: str) -> bool:
    """A URL whose traffic (and any credential sent with it) is readable on the wire."""
    return url.lower().startswith("http://")
