#!/usr/bin/env bash
# Creates the venv, installs the locked dependencies (requirements/$EXTRA.txt, hashed, exported from
# uv.lock by hack/lock.sh), then the project itself editable without resolving anything, and
# assembles the offline embedding model. Idempotent; the model lives in a versioned cache outside
# the repo so reruns are instant.
#
#   VENV=/tmp/venv bash hack/install.sh      # another venv
#   EXTRA=local bash hack/install.sh         # brainctl up without the dev tools
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
EXTRA=${EXTRA:-dev}
REQ=requirements/$EXTRA.txt
[ -f "$REQ" ] || { echo "install: no $REQ (EXTRA is one of: $(cd requirements && ls *.txt | sed 's/\.txt//' | tr '\n' ' '))" >&2; exit 2; }
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
# uv, not pip: the same hashes, with a cache outside the checkout, so a fresh clone installs in
# ≈ 30 s where pip took ≈ 105 s (docs/performance.md, "A fresh machine, end to end"). Byte-compiled
# here, as pip does: where PYTHONDONTWRITEBYTECODE is set (this machine, CI) nothing is cached at
# import time, and every process compiled litellm & co. from source again (pytest 1,182 s, not 1,031).
uv=$(bash hack/uv.sh)
export UV_CACHE_DIR=${UV_CACHE_DIR:-${BRAIN_CACHE:-$HOME/.cache/brain-operator}/uv-v1}
export SSL_CERT_FILE=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt} UV_SYSTEM_CERTS=1
"$uv" pip install -q --python "$VENV/bin/python" --compile-bytecode --require-hashes --no-deps -r "$REQ"
"$uv" pip install -q --python "$VENV/bin/python" --no-deps -e .
PIP="$VENV/bin/pip" bash hack/model.sh >/dev/null
