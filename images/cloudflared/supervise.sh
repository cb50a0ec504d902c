#!/bin/sh
# The cloudflared image's entrypoint: run `cloudflared "$@"` and, whenever it exits, start it again
# after a capped exponential backoff (1, 2, 4 ... 60 s; back to 1 s after a run of 5 minutes).
# Why: cloudflared exits when it cannot reach Cloudflare (edge discovery fails at start). A sidecar
# that exits goes into CrashLoopBackOff, and a container that is not running is not Ready, so the
# whole gateway pod would leave its Service. Restarting inside the container keeps the gateway
# serving in the cluster while the tunnel retries; each restart is logged on stderr
# (`kubectl logs <gateway pod> -c cloudflared`). SIGTERM/SIGINT stop cloudflared and the loop.
# Only `tunnel ...` is supervised; anything else (`--version`, `help`) runs once, as it is.
set -u
if [ "${1:-}" != tunnel ]; then exec cloudflared "$@"; fi
child=""
stop() {
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null
    wait "$child"
  fi
  exit 0
}
trap stop TERM INT
restarts=0
delay=1
while :; do
  started=$(date +%s)
  cloudflared "$@" &
  child=$!
  wait "$child"
  code=$?
  child=""
  if [ $(($(date +%s) - started)) -ge 300 ]; then delay=1; fi
  restarts=$((restarts + 1))
  echo "cloudflared-supervise: cloudflared exited with code $code; restart $restarts in ${delay}s (the gateway keeps serving inside the cluster)" >&2
  sleep "$delay" &
  child=$!
  wait "$child"
  child=""
  delay=$((delay * 2))
  if [ "$delay" -gt 60 ]; then delay=60; fi
done
