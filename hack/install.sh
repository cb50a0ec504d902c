#!/usr/bin/env bash
# Creates .venv, installs the project with its dev tools, and assembles the offline embedding model.
# Idempotent; the model lives in a versioned cache outside the repo so reruns are instant.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
"$VENV/bin/pip" install -q -e '.[dev]'
bash hack/model.sh >/dev/null
