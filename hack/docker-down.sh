#!/usr/bin/env bash
# Stops the Docker engine hack/docker-up.sh started (by its pidfile); a machine's own engine is left alone.
# Containers it ran stop with it; images and the layer cache stay in $BRAIN_CACHE/docker-v1.
set -euo pipefail
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}
ROOT_DIR=${DOCKER_DATA_ROOT:-$CACHE/docker-v1}
PIDFILE=$ROOT_DIR/run/dockerd.pid
if [ ! -f "$PIDFILE" ] || ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  echo "docker-down: no dockerd started by hack/docker-up.sh is running" >&2
  rm -f "$PIDFILE"
  exit 0
fi
pid=$(cat "$PIDFILE")
kill "$pid"
for _ in $(seq 30); do
  kill -0 "$pid" 2>/dev/null || { echo "docker-down: dockerd (pid $pid) stopped" >&2; exit 0; }
  sleep 1
done
echo "docker-down: ERROR: dockerd (pid $pid) did not stop within 30s; it is still running" >&2
exit 1
