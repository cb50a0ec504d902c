#!/usr/bin/env bash
# Lint every images/*/Dockerfile with hadolint (config: images/.hadolint.yaml).
#   bash hack/lint-dockerfiles.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HADOLINT=$(bash "$ROOT/hack/hadolint.sh")
cd "$ROOT"
"$HADOLINT" --config images/.hadolint.yaml images/*/Dockerfile
echo "lint-dockerfiles: $(ls images/*/Dockerfile | wc -l) Dockerfiles clean" >&2
