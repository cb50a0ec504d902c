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
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
"$VENV/bin/pip" install -q --require-hashes --no-deps -r "$REQ"
"$VENV/bin/pip" install -q --no-deps -e .
PIP="$VENV/bin/pip" bash hack/model.sh >/dev/null
