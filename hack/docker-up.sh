#!/usr/bin/env bash
# Starts a Docker engine for `make images` and the container tests, or reuses one that answers.
#
#   bash hack/docker-up.sh          # idempotent; prints nothing but errors and "docker-up: ..." notes
#   bash hack/docker-down.sh        # stops the engine this script started (and only that one)
#
# Nothing is assumed of the machine: Debian's docker.io is installed when dockerd is missing (root
# only). The engine runs with our own flags:
#   --data-root  $BRAIN_CACHE/docker-v1   images and layer cache survive reruns, outside the repo
#   --iptables=false --ip-forward=false --ip-masq=false
#                the machine's firewall and sysctls stay untouched; builds use --network host, and
#                test containers reach only the host and each other on the default bridge
# State (pidfile, log) lives in $BRAIN_CACHE/docker-v1/run; DOCKER_HOST is the default socket so a
# plain `docker` works afterwards.
set -euo pipefail
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}
ROOT_DIR=${DOCKER_DATA_ROOT:-$CACHE/docker-v1}
RUN_DIR=$ROOT_DIR/run
SOCK=${DOCKER_SOCK:-/var/run/docker.sock}
WAIT=${DOCKER_UP_WAIT:-60}
log() { echo "docker-up: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

if docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
  exit 0 # an engine already answers (ours from an earlier run, or the machine's own)
fi
# One start at a time (the background builds and a test worker may both get here): the second
# waits, then finds the engine the first started answering. dockerd must inherit no lock
# descriptor (`7>&- 8>&- 9>&-` below: ours, and hack/images.sh's 9 when it started us): it would
# hold that lock for its whole life, and the next docker-up or images.sh would wait on it forever.
LOCK=$CACHE/docker-up.lock
mkdir -p "$CACHE"
exec 7>"$LOCK"
flock -w "${DOCKER_UP_LOCK_WAIT:-900}" 7 || die "another docker-up held $LOCK for ${DOCKER_UP_LOCK_WAIT:-900}s"
if docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
  exit 0
fi
if ! command -v dockerd >/dev/null; then
  [ "$(id -u)" = 0 ] || die "no dockerd on PATH and not root, so Debian's docker.io cannot be installed; install Docker or run as root"
  command -v apt-get >/dev/null || die "no dockerd on PATH and no apt-get to install docker.io"
  log "installing Debian's docker.io (dockerd, containerd, runc)"
  # shellcheck source=hack/apt-lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/apt-lib.sh"
  apt_install docker.io || die "apt-get install docker.io failed (is Debian's mirror reachable?)"
fi
command -v docker >/dev/null || die "no docker client on PATH"
[ "$(id -u)" = 0 ] || die "dockerd must start as root here (no rootless setup); run as root or start Docker yourself"

mkdir -p "$RUN_DIR"
PIDFILE=$RUN_DIR/dockerd.pid
LOGFILE=$RUN_DIR/dockerd.log
if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  log "dockerd (pid $(cat "$PIDFILE")) is running but does not answer yet; waiting"
else
  [ -S "$SOCK" ] && { log "removing stale socket $SOCK"; rm -f "$SOCK"; }
  rm -f "$PIDFILE" /var/run/docker.pid
  log "starting dockerd (data root $ROOT_DIR, log $LOGFILE)"
  # setsid: the engine outlives this script and the make/pytest process that ran it.
  setsid dockerd \
    --data-root "$ROOT_DIR/data" \
    --exec-root "$RUN_DIR/exec" \
    --pidfile "$PIDFILE" \
    --host "unix://$SOCK" \
    --storage-driver overlay2 \
    --iptables=false --ip-forward=false --ip-masq=false \
    --userland-proxy=false \
    --log-level warn \
    >>"$LOGFILE" 2>&1 </dev/null 7>&- 8>&- 9>&- &
fi
for _ in $(seq "$WAIT"); do
  docker version --format '{{.Server.Version}}' >/dev/null 2>&1 && exit 0
  if [ -f "$PIDFILE" ] && ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    break
  fi
  sleep 1
done
log "ERROR: dockerd did not answer within ${WAIT}s. Last lines of $LOGFILE:"
tail -n 15 "$LOGFILE" >&2 || true
if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  kill "$(cat "$PIDFILE")" 2>/dev/null || true
fi
exit 1
