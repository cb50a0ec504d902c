#!/usr/bin/env bash
# Prints the path of the pinned uv, installing it once from PyPI into a versioned tool venv in the
# cache (never into .venv). hack/lock.sh resolves with it; hack/install.sh installs with it, because
# uv installs the dev lock into a fresh venv from its cache ($BRAIN_CACHE/uv-v1) in ≈ 30 s with
# the byte-compilation where pip took ≈ 105 s on every fresh clone (one file at a time, no cache here).
#
#   uv=$(bash hack/uv.sh)
set -euo pipefail
UV_VERSION=0.13.9
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}
TOOL=$CACHE/tools/uv-$UV_VERSION
if [ ! -x "$TOOL/bin/uv" ]; then
  mkdir -p "$CACHE/tools"
  exec 9>"$CACHE/tools/uv-install.lock" # two first runs at once (install and a test) install it once
  flock 9
  if [ ! -x "$TOOL/bin/uv" ]; then
    rm -rf "$TOOL.tmp"
    python3 -m venv "$TOOL.tmp" >&2
    "$TOOL.tmp/bin/pip" install -q "uv==$UV_VERSION" >&2 || { echo "uv: pip install uv==$UV_VERSION failed (is PyPI reachable?)" >&2; exit 1; }
    mv "$TOOL.tmp" "$TOOL"
  fi
fi
echo "$TOOL/bin/uv"
