#!/usr/bin/env bash
# Cuts a release: one version for the package, the chart and the images.
#
#   make release VERSION=0.3.0              # set, changelog, commit, tag, chart package, images
#   make release VERSION=0.3.0 IMAGES=0     # the same without building the images (no Docker)
#   bash hack/release.sh --rebuild v0.1.0   # an earlier release, rebuilt from its commit in git
#
# The version lives in operator/brain/__init__.py (`__version__`); pyproject reads it, the operator
# renders its image tags from it, and this script writes Chart.yaml's version and appVersion and
# regenerates samples/operator/install.yaml from it (tests/delivery/test_release.py fails when any
# of them disagree). CHANGELOG.md's "Unreleased" section becomes the release's, followed by the
# commits since the previous release. The release commit is tagged v<VERSION> and recorded, with
# its full commit id, in hack/releases.txt by a second commit: a tag need not travel with a clone,
# the file does, so the upgrade e2e can always rebuild the previous release.
# Outputs: dist/brain-operator-<VERSION>.tgz and, with IMAGES=1, the images tagged <VERSION>.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
log() { echo "release: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
RELEASES=hack/releases.txt
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}
PY=${PY:-$ROOT/.venv/bin/python}
HELM=${HELM:-$(command -v helm || true)}

commit_of() { # vX.Y.Z → the full commit id recorded for it
  awk -v t="$1" '$1 == t { print $2 }' "$RELEASES"
}

package_chart() { # <chart dir> <out dir>
  [ -n "$HELM" ] || HELM=$(bash hack/kube-build.sh)/helm # built once from Go modules, cached
  "$HELM" package "$1" -d "$2" >&2
}

if [ "${1:-}" = --rebuild ]; then
  tag=${2:?usage: hack/release.sh --rebuild vX.Y.Z}
  commit=$(commit_of "$tag")
  [ -n "$commit" ] || die "$tag is not in $RELEASES (known: $(awk '!/^#/ {print $1}' "$RELEASES" | xargs))"
  dir=$CACHE/releases-v1/$tag
  # The cache outlives the checkout that made it: a worktree of another (or a deleted) clone has a
  # .git file naming an admin folder that is not here, so anything but this commit, readable by
  # git, is made again from this clone.
  if [ "$(git -C "$dir" rev-parse HEAD 2>/dev/null)" != "$commit" ]; then
    rm -rf "$dir"
    git worktree prune
    mkdir -p "$(dirname "$dir")"
    git worktree add --detach "$dir" "$commit" >&2
  fi
  version=${tag#v}
  package_chart "$dir/charts/brain-operator" "$dir/dist"
  if [ "${IMAGES:-1}" = 1 ]; then
    IMAGE_TAG=$version bash "$dir/hack/images.sh" >&2
  fi
  echo "$dir"
  exit 0
fi

VERSION=${VERSION:-${1:-}}
[[ $VERSION =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]] ||
  die "VERSION must be MAJOR.MINOR.PATCH (SemVer, no prefix), e.g. make release VERSION=0.3.0; got '${VERSION}'"
tag=v$VERSION
[ -z "$(git status --porcelain)" ] || die "the work tree has changes; commit or remove them first"
git rev-parse -q --verify "refs/tags/$tag" >/dev/null && die "tag $tag exists already"
[ -z "$(commit_of "$tag")" ] || die "$tag is already recorded in $RELEASES"
last=$(awk '!/^#/ && NF {print $1}' "$RELEASES" | sort -V | tail -1)
if [ -n "$last" ] && [ "$(printf '%s\n%s\n' "$last" "$tag" | sort -V | tail -1)" != "$tag" ]; then
  die "$tag is not newer than the last release, $last"
fi

log "setting version $VERSION"
sed -i -E "s/^__version__ = \".*\"$/__version__ = \"$VERSION\"/" operator/brain/__init__.py
sed -i -E "s/^version: .*/version: $VERSION/; s/^appVersion: .*/appVersion: \"$VERSION\"/" charts/brain-operator/Chart.yaml
PYTHONPATH=$ROOT/operator "$PY" -m brain_operator.crdgen crds >&2
PYTHONPATH=$ROOT/operator "$PY" hack/chart-sync.py >&2

log "writing CHANGELOG.md"
since=${last:+$(commit_of "$last")}
"$PY" - "$VERSION" "$(date -u +%F)" "$since" <<'EOF'
import subprocess, sys
from pathlib import Path

version, day, since = sys.argv[1:4]
path = Path("CHANGELOG.md")
text = path.read_text()
head, sep, rest = text.partition("## Unreleased\n")
if not sep:
    sys.exit("release: CHANGELOG.md has no '## Unreleased' section")
notes, nxt, tail = rest.partition("\n## ")
span = f"{since}..HEAD" if since else "HEAD"
subjects = subprocess.run(
    ["git", "log", "--no-merges", "--format=%s (%h)", span], check=True, capture_output=True, text=True
).stdout.splitlines()
commits = "\n".join(f"- {s if len(s) <= 160 else s[:157] + '...'}" for s in subjects)
section = f"## {version} ({day})\n{notes.strip()}\n\n### Commits\n\n{commits}\n"
older = f"\n## {tail}" if nxt else ""
path.write_text(f"{head}## Unreleased\n\n{section}{older}")
EOF

git add -A
git commit -q -m "release $tag"
git tag -a "$tag" -m "brain-operator $VERSION"
echo "$tag $(git rev-parse HEAD) $(date -u +%F)" >>"$RELEASES"
git add "$RELEASES"
git commit -q -m "$RELEASES: $tag"
log "tagged $tag at $(git rev-parse "$tag^{commit}")"

package_chart charts/brain-operator dist
if [ "${IMAGES:-1}" = 1 ]; then
  IMAGE_TAG=$VERSION bash hack/images.sh >&2
fi
log "done: $tag, dist/brain-operator-$VERSION.tgz"
