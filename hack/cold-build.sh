#!/usr/bin/env bash
# Time the builds a fresh machine's first `make test` runs, from empty caches: hack/kube-build.sh
# (control plane), hack/node-build.sh (real node), hack/cloudflared-build.sh (tunnel sidecar) and
# hack/otelcol-build.sh (the OpenTelemetry Collector of the trace tests),
# each with BRAIN_CACHE, GOCACHE and GOMODCACHE under DEST, so nothing of this machine's warm
# caches helps (the Go module proxy is asked for every module). Prints one tab-separated line per
# step (step, wall s, user s, sys s, max RSS MB, load average before) and a total; the figures
# go in docs/performance.md. Run it under the Go build lock, niced, as the working agreement says:
#
#   flock /tmp/brain-gobuild.lock nice -n 10 bash hack/cold-build.sh /var/tmp/brain-cold
#
# DEST must be missing or empty; it is left in place (a cache root that hack/node-up.sh accepts as
# BRAIN_CACHE=DEST/cache GOCACHE=DEST/gocache GOMODCACHE=DEST/gomod); remove it when done.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST=${1:?usage: hack/cold-build.sh DEST (a missing or empty folder)}
log() { echo "cold-build: $*" >&2; }
if [[ -e $DEST && -n $(ls -A "$DEST") ]]; then
  log "ERROR: $DEST is not empty: a cold measurement needs empty caches"
  exit 1
fi
command -v /usr/bin/time >/dev/null || { log "ERROR: /usr/bin/time is missing (Debian's time package)"; exit 1; }
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
export BRAIN_CACHE=$DEST/cache GOCACHE=$DEST/gocache GOMODCACHE=$DEST/gomod
total=0
printf 'step\twall_s\tuser_s\tsys_s\tmax_rss_mb\tload_before\n'
for step in kube-build node-build cloudflared-build otelcol-build; do
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  log "$step (load average $load)"
  /usr/bin/time -f '%e %U %S %M' -o "$DEST/$step.time" bash "$ROOT/hack/$step.sh" >"$DEST/$step.out" 2>"$DEST/$step.log" \
    || { tail -n 30 "$DEST/$step.log" >&2; log "ERROR: $step failed (log: $DEST/$step.log)"; exit 1; }
  read -r wall user sys rss <"$DEST/$step.time"
  printf '%s\t%.0f\t%.0f\t%.0f\t%d\t%s\n' "$step" "$wall" "$user" "$sys" $((rss / 1024)) "$load"
  total=$(awk -v a="$total" -v b="$wall" 'BEGIN { print a + b }')
done
printf 'total\t%.0f\t\t\t\t%s\n' "$total" "$(cut -d' ' -f1-3 /proc/loadavg)"
log "caches: $(du -sh "$BRAIN_CACHE" | cut -f1) BRAIN_CACHE, $(du -sh "$GOCACHE" | cut -f1) GOCACHE, $(du -sh "$GOMODCACHE" | cut -f1) GOMODCACHE"
