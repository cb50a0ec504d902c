# Shared by hack/cluster-up.sh and hack/cluster-down.sh (sourced, not run).
STATE=${BRAIN_KUBE_STATE:-/tmp/brain-kube}
# Stop order: clients first, etcd last.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
STOP_ORDER=(kwok kube-scheduler kube-controller-manager kube-apiserver etcd)

# pid_alive NAME: the pid file names a live process of ours: our multi-call binary
# ("kube", possibly "(deleted)" after a cache wipe) with this state folder in its arguments.
pid_alive() {
  local f=$STATE/pids/$1.pid pid exe
  [[ -f $f ]] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [[ $exe == */kube || $exe == */kube" (deleted)" ]] || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$STATE/"
}

# stop_all: SIGTERM each recorded process (only those pid_alive confirms), SIGKILL after 15 s.
stop_all() {
  local c pid i
  for c in "${STOP_ORDER[@]}"; do
    pid_alive "$c" || continue
    pid=$(<"$STATE/pids/$c.pid")
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
      pid_alive "$c" || break
      sleep 0.1
    done
    if pid_alive "$c"; then
      echo "cluster: $c (pid $pid) ignored SIGTERM, killing" >&2
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        pid_alive "$c" || break
        sleep 0.1
      done
    fi
    rm -f "$STATE/pids/$c.pid"
  done
}
