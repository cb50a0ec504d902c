#!/usr/bin/env bash
# Stops the Docker engine hack/docker-up.sh started (by its pidfile); a machine's own engine is left alone.
# Containers it ran stop with it; images and the layer cache stay in $BRAIN_CACHE/docker-v1.
set -euo pipefail
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}
ROOT_DIR=${DOCKER_DATA_ROOT:-$CACHE/docker-v1}
PIDFILE=$ROOT_DIR/run/dockerd.pid
EXEC_ROOT=$ROOT_DIR/run/exec
# dockerd bind-mounts the host's network namespace at <exec-root>/netns/default for host-network
# containers (every image build here) and leaves it mounted when it stops: the cache folder could
# then not be removed ("Device or resource busy"). Unmounted here, also after an engine that died.
release_mounts() {
  local mnt
  awk -v root="$EXEC_ROOT/" 'index($2, root) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r mnt; do
    umount "$mnt" 2>/dev/null || umount -l "$mnt" || echo "docker-down: WARNING: cannot unmount $mnt" >&2
  done
}
if [ ! -f "$PIDFILE" ] || ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  echo "docker-down: no dockerd started by hack/docker-up.sh is running" >&2
  rm -f "$PIDFILE"
  pgrep -f -- "--exec-root $EXEC_ROOT" >/dev/null || release_mounts # not an engine without its pidfile
  exit 0
fi
pid=$(cat "$PIDFILE")
kill "$pid"
for _ in $(seq 30); do
  if ! kill -0 "$pid" 2>/dev/null; then
    release_mounts
    echo "docker-down: dockerd (pid $pid) stopped" >&2
    exit 0
  fi
  sleep 1
done
echo "docker-down: ERROR: dockerd (pid $pid) did not stop within 30s; it is still running" >&2
exit 1
