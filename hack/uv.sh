#!/usr/bin/env bash
# Prints the path of the pinned uv, installing it once from PyPI into a versioned tool venv in the
# cache (never into .venv). hack/lock.sh resolves with it; hack/install.sh installs with it, because
# uv installs the dev lock into a fresh venv from its cache ($BRAIN_CACHE/uv-v1) in ≈ 30 s with
# the byte-compilation where pip took ≈ 105 s on every fresh clone (one file at a time, no cache here).
#
#   uv=$(bash hack/uv.sh)
set -euo pipefail
UV_VERSION=0.13.9
# sha256 of its Linux wheels (x86_64 and aarch64, glibc and musl): pip in hash-checking mode takes
# the one that fits this machine and refuses any file whose hash is not here, as the lock does for
# everything uv installs after it.
UV_HASHES=(
  d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19 # manylinux_2_17_x86_64
  5435c5ce14a56431208ca0996416d310f1598e8c2c8ba707688985a16bb82dbe # manylinux_2_17_aarch64, musllinux_1_1_aarch64
  2c45530751517d6c3bbc69a19473f6effe47cce047bede01ffd8af7ea7b36b25 # musllinux_1_1_x86_64
)
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}
TOOL=$CACHE/tools/uv-$UV_VERSION
if [ ! -x "$TOOL/bin/uv" ]; then
  mkdir -p "$CACHE/tools"
  exec 9>"$CACHE/tools/uv-install.lock" # two first runs at once (install and a test) install it once
  flock 9
  if [ ! -x "$TOOL/bin/uv" ]; then
    rm -rf "$TOOL.tmp"
    python3 -m venv "$TOOL.tmp" >&2
    "$TOOL.tmp/bin/pip" install -q --require-hashes --no-deps --only-binary :all: \
      -r <(echo "uv==$UV_VERSION" "${UV_HASHES[@]/#/--hash=sha256:}") >&2 ||
      { echo "uv: pip install uv==$UV_VERSION (hash-checked) failed: is PyPI reachable, and does the wheel for $(uname -m) match a hash in hack/uv.sh?" >&2; exit 1; }
    mv "$TOOL.tmp" "$TOOL"
  fi
fi
echo "$TOOL/bin/uv"
