#!/usr/bin/env bash
# Stop the local control plane started by hack/cluster-up.sh (exactly the processes named
# by its pid files) and remove its state folder. Safe to run when nothing is running.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=kube-lib.sh
source "$ROOT/hack/kube-lib.sh"

if [[ ${BRAIN_KUBE_LOCKED:-0} != 1 ]]; then
  mkdir -p "$(dirname "$STATE")"
  exec 8>"$STATE.lock"
  flock -w 120 8 || echo "cluster-down: $STATE.lock still held after 120 s; stopping anyway" >&2
fi

if [[ ! -d $STATE ]]; then
  echo "cluster-down: nothing to stop ($STATE does not exist)" >&2
  exit 0
fi
stop_all
for c in "${COMPONENTS[@]}"; do
  if pid_alive "$c"; then
    echo "cluster-down: ERROR: $c still running (pid $(<"$STATE/pids/$c.pid"))" >&2
    exit 1
  fi
done
rm -rf "$STATE"
echo "cluster-down: stopped, removed $STATE" >&2
