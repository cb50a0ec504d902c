# Shared by hack/cluster-up.sh and hack/node-up.sh (sourced, not run): start a daemon detached and
# wait for a condition while watching that none of ours died. The caller sets, before calling:
#   DAEMON_DIR     folder holding logs/NAME.log and pids/NAME.pid
#   DAEMON_BIN     folder of the binaries
#   DAEMON_NAMES   array: the daemons whose death ends a wait (and whose logs a timeout shows)
#   DAEMON_PREFIX  array, may be empty: a command prefix (node-up's nsenter into the node's netns)
# and defines daemon_alive NAME (its pid file names a live process of ours) and die MESSAGE.

# start NAME ARGS...: in its own session, stdin closed, output to its log, pid to its pid file.
# Returns once the process runs the daemon: until the forked shell has exec'd setsid, the prefix and
# then the binary, /proc/PID/exe is bash, setsid or nsenter, and the callers' daemon_alive (which
# checks the binary, against a reused pid) would call a daemon that is still starting dead. Under
# load that took long enough for wait_for's first check to stop a cluster start with "etcd exited
# while waiting for etcd" and an empty log (fresh-clone CI, sessions 22 and 23). No daemon here
# is a shell script, so a bash exe means the start is not done.
start() {
  local name=$1 pid exe i
  shift
  # 7>&- 8>&-: a daemon must not inherit (and so hold forever) the caller's state lock descriptor.
  setsid "${DAEMON_PREFIX[@]}" "$DAEMON_BIN/$name" "$@" </dev/null >"$DAEMON_DIR/logs/$name.log" 2>&1 7>&- 8>&- &
  pid=$!
  echo "$pid" >"$DAEMON_DIR/pids/$name.pid"
  for ((i = 0; i < 100; i++)); do # at most 10 s; a process that is gone is left to wait_for
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 0
    case ${exe% (deleted)} in
      */bash | */setsid | */nsenter) sleep 0.1 ;;
      *) return 0 ;;
    esac
  done
}

# wait_for WHAT SECONDS COMMAND...: poll COMMAND every 0.2 s until it succeeds; fail early, with
# its log, when one of DAEMON_NAMES exits, and with every log's tail on a timeout.
wait_for() {
  local what=$1 secs=$2 i d
  shift 2
  for ((i = 0; i < secs * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    for d in "${DAEMON_NAMES[@]}"; do
      if [[ -f $DAEMON_DIR/pids/$d.pid ]] && ! daemon_alive "$d"; then
        tail -n 30 "$DAEMON_DIR/logs/$d.log" >&2 || true
        die "$d exited while waiting for $what (log: $DAEMON_DIR/logs/$d.log)"
      fi
    done
    sleep 0.2
  done
  for d in "${DAEMON_NAMES[@]}"; do
    [[ -f $DAEMON_DIR/logs/$d.log ]] && { echo "--- $d" >&2; tail -n 20 "$DAEMON_DIR/logs/$d.log" >&2; }
  done
  die "timed out after ${secs}s waiting for $what (logs: $DAEMON_DIR/logs)"
}
