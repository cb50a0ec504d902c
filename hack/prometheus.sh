#!/usr/bin/env bash
# Print the path of a Prometheus server binary, fetching one first when needed.
#
#   PROMETHEUS=$(bash hack/prometheus.sh) && "$PROMETHEUS" --config.file=prometheus.yml
#
# Order: $PROMETHEUS, `prometheus` on PATH, the cached copy, then Debian's `prometheus` package
# (the fetch and the cache, ~/.cache/brain-operator/promtool, are shared with hack/promtool.sh).
# Exit 1 (message on stderr) if none can be had. tests/delivery/test_prometheus_scrape.py uses it.
set -euo pipefail

exec bash "$(dirname "${BASH_SOURCE[0]}")/promtool.sh" prometheus
