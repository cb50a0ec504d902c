#!/usr/bin/env bash
# Warms the cached builds `make test` waits on, in the background, while install, lint, typecheck
# and the first tests run. On a fresh machine those builds are ~37 min of CPU on two cores
# (docs/performance.md, "A fresh machine's `make test`"); run one after another in front of the
# suite they add up, run beside it they take the CPU the suite leaves idle while it waits on
# subprocesses, pods and polls. On a warm machine every step is a cache hit and takes seconds.
#
#   bash hack/prebuild.sh start     # returns at once; the steps run niced (19) in their own session
#   bash hack/prebuild.sh status    # the steps done so far, and whether it still runs
#   bash hack/prebuild.sh stop      # stops what still builds, brings down a Docker engine it started
#   bash hack/prebuild.sh around CMD...  # start, CMD, then stop however CMD ends; exits with CMD's status
#                                        # (`make test` runs its lint, typecheck and unit this way)
#
# Steps, in the order the suite first needs them: kube-build (the control plane: pytest's
# collection asks for it), otelcol-build (the OpenTelemetry Collector the trace tests run,
# hack/otelcol-build.sh: ~2.5 min cold; for non-root runs too), then, as root only (the real-node
# tests skip elsewhere), images (hack/images.sh: cloudflared's binary, the bases, the six images),
# node-build and kube-router-build (the node's NetworkPolicy enforcer, hack/kube-router-build.sh: ~3 min cold).
# BRAIN_PREBUILD_STEPS overrides the list (space-separated, of those names); BRAIN_PREBUILD_NICE
# the niceness (19: only idle CPU).
#
# Every step is the same script the tests call, and each holds its own lock (flock in
# hack/{kube,otelcol,node,kube-router,cloudflared}-build.sh and hack/images.sh), so a test that
# needs a build before the background has it waits for that build instead of starting a second one.
# A step cut off by `stop` leaves no finished cache folder, so the next run builds it again.
# State and log: .prebuild/ in the checkout (ignored by git).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=${BRAIN_PREBUILD_STATE:-$ROOT/.prebuild}
STEPS_ALL=(kube-build otelcol-build images node-build kube-router-build)
NICE=${BRAIN_PREBUILD_NICE:-19}
[[ $NICE =~ ^[0-9]+$ ]] && ((NICE <= 19)) || { echo "prebuild: ERROR: BRAIN_PREBUILD_NICE=$NICE: expected 0 to 19" >&2; exit 2; }
log() { echo "prebuild: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
}

running() { [[ -f $STATE/pid ]] && kill -0 "$(cat "$STATE/pid")" 2>/dev/null; }

steps() {
  if [[ -n ${BRAIN_PREBUILD_STEPS:-} ]]; then
    local s
    for s in $BRAIN_PREBUILD_STEPS; do
      [[ " ${STEPS_ALL[*]} " == *" $s "* ]] || die "BRAIN_PREBUILD_STEPS: unknown step '$s' (accepted: ${STEPS_ALL[*]})"
    done
    echo "$BRAIN_PREBUILD_STEPS"
  elif ((EUID == 0)); then
    echo "${STEPS_ALL[*]}"
  else
    echo kube-build otelcol-build
  fi
}

script_of() {
  case $1 in
    images) echo "$ROOT/hack/images.sh" ;;
    *) echo "$ROOT/hack/$1.sh" ;;
  esac
}

# run_steps: the background half. One line per step in steps.tsv: name, seconds, exit status.
run_steps() {
  local step t0 rc
  for step in "$@"; do
    t0=$SECONDS
    log "$step: starting"
    rc=0
    if [[ $step == images ]]; then
      # dockerd would inherit nice 19 from here, and with it every container the tests run later
      # (tests/delivery/test_containers.py), starved by the other test worker: start it at 0.
      nice -n -19 bash "$ROOT/hack/docker-up.sh" || rc=$?
    fi
    ((rc)) || bash "$(script_of "$step")" >/dev/null || rc=$?
    printf '%s\t%d\t%d\n' "$step" $((SECONDS - t0)) "$rc" >>"$STATE/steps.tsv"
    log "$step: exit $rc after $((SECONDS - t0)) s"
  done
}

start() {
  local list
  list=$(steps)
  if running; then
    log "already running (pid $(cat "$STATE/pid")); not starting a second one"
    return 0
  fi
  command -v setsid >/dev/null || die "setsid is missing (util-linux)"
  rm -rf "$STATE"
  mkdir -p "$STATE"
  # Whether an engine answered before us decides whether stop brings it down again.
  if ! docker version >/dev/null 2>&1; then touch "$STATE/docker-was-down"; fi
  # shellcheck disable=SC2086 # the step names are words
  setsid nice -n "$NICE" bash "${BASH_SOURCE[0]}" _run $list </dev/null >>"$STATE/log" 2>&1 &
  echo $! >"$STATE/pid"
  log "started (pid $!): $list; log $STATE/log"
}

summary() {
  [[ -f $STATE/steps.tsv ]] || return 0
  local step secs rc
  while IFS=$'\t' read -r step secs rc; do
    if ((rc == 0)); then log "$step: done in $secs s"; else log "$step: FAILED (exit $rc) after $secs s; see $STATE/log"; fi
  done <"$STATE/steps.tsv"
}

stop() {
  if [[ ! -d $STATE ]]; then
    log "nothing to stop: no prebuild was started from $ROOT"
    return 0
  fi
  if running; then
    local pid
    pid=$(cat "$STATE/pid")
    log "stopping what still builds (session $pid); the next run builds it again"
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 30); do
      pgrep -s "$pid" >/dev/null || break
      sleep 1
    done
    pkill -KILL -s "$pid" 2>/dev/null || true
  fi
  summary
  if [[ -f $STATE/docker-was-down ]]; then bash "$ROOT/hack/docker-down.sh" || true; fi
  rm -f "$STATE/pid" "$STATE/docker-was-down"
}

status() {
  summary
  if running; then log "running (pid $(cat "$STATE/pid"))"; else log "not running"; fi
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  status) status ;;
  around)
    shift
    (($#)) || die "around: no command given (e.g. hack/prebuild.sh around make lint typecheck unit)"
    start
    trap stop EXIT
    rc=0
    "$@" || rc=$?
    exit "$rc"
    ;;
  _run)
    shift
    run_steps "$@"
    ;;
  -h | --help | help) usage ;;
  *)
    log "unknown command '${1:-}' (accepted: start, status, stop, around, --help)"
    exit 2
    ;;
esac
