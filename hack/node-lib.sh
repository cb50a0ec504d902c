# Shared by hack/node-up.sh and hack/node-down.sh (sourced, not run).
#
# The real node lives in its own network namespace ($NETNS): containerd, kubelet, kube-proxy and
# kube-router (NetworkPolicies) run in it (nsenter --net only: same mounts and cgroups as the
# host), so kube-proxy's and kube-router's iptables rules and ipsets, the bridge, the pods' veths
# and ip_forward never touch the host's network stack. A veth
# pair joins it to the host: $HOST_IP (host side; the apiserver binds there) and $NODE_IP (node
# side, the Node's InternalIP). The host routes the pod and Service ranges to $NODE_IP, so tests
# on the host reach pod and ClusterIP addresses, and nothing else is reachable from pods (the host
# does not forward).
NODE_STATE=${BRAIN_NODE_STATE:-/tmp/brain-node}
NETNS=${BRAIN_NODE_NETNS:-brain-node}
HOST_IF=${BRAIN_NODE_HOST_IF:-brain-h}
NODE_IF=${BRAIN_NODE_IF:-brain-n}
HOST_IP=${BRAIN_NODE_HOST_IP:-10.243.0.1}
NODE_IP=${BRAIN_NODE_IP:-10.243.0.2}
POD_CIDR=${BRAIN_NODE_POD_CIDR:-10.244.0.0/24}
SERVICE_CIDR=10.96.0.0/16 # hack/cluster-up.sh's
DNS_IP=10.96.0.10
NODE_NAME=${BRAIN_NODE_NAME:-brain-node}
# The node's control plane: its own state folder and ports, so the kwok-only cluster of
# tests/operator and tests/cluster (/tmp/brain-kube, 22379/22380/26443) runs alongside.
export BRAIN_KUBE_STATE=$NODE_STATE/kube
export BRAIN_KUBE_ETCD_PORT=${BRAIN_NODE_ETCD_PORT:-23379}
export BRAIN_KUBE_ETCD_PEER_PORT=${BRAIN_NODE_ETCD_PEER_PORT:-23380}
export BRAIN_KUBE_APISERVER_PORT=${BRAIN_NODE_APISERVER_PORT:-27443}
CONTAINERD_SOCK=$NODE_STATE/containerd/containerd.sock
NODE_DAEMONS=(containerd kubelet kube-proxy kube-router provisioner)
CGROUP_ROOT=/sys/fs/cgroup

node_log() { echo "node: $*" >&2; }
node_t0=$SECONDS
node_step() { node_log "$* (+$((SECONDS - node_t0)) s)"; }

# node_pid_alive NAME: its pid file names a live process running our binary of that name
# with this state folder in its arguments.
node_pid_alive() {
  local f=$NODE_STATE/pids/$1.pid pid exe
  [[ -f $f ]] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  exe=${exe% (deleted)}
  if [[ $1 == provisioner ]]; then [[ $exe == */python3* ]] || return 1; else [[ $exe == */"$1" ]] || return 1; fi
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$NODE_STATE/"
}

node_stop() { # node_stop NAME: SIGTERM, SIGKILL after 20 s
  local pid i
  node_pid_alive "$1" || { rm -f "$NODE_STATE/pids/$1.pid"; return 0; }
  pid=$(<"$NODE_STATE/pids/$1.pid")
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 200; i++)); do
    node_pid_alive "$1" || break
    sleep 0.1
  done
  if node_pid_alive "$1"; then
    node_log "$1 (pid $pid) ignored SIGTERM, killing"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
  rm -f "$NODE_STATE/pids/$1.pid"
}

# our_shims: pids of containerd-shim-runc-v2 processes serving our containerd (its socket path
# is in their arguments), so another containerd's shims (Docker's) are never touched.
our_shims() {
  local d
  for d in /proc/[0-9]*; do
    [[ $(readlink "$d/exe" 2>/dev/null) == */containerd-shim-runc-v2* ]] || continue
    tr '\0' ' ' <"$d/cmdline" 2>/dev/null | grep -qF "$CONTAINERD_SOCK" && echo "${d#/proc/}"
  done
}

# kubepods_cgroups: the kubelet's cgroup trees (cgroupfs driver), one per v1 controller plus
# the unified hierarchy, deepest first, so rmdir can remove them in order.
kubepods_cgroups() {
  local m
  for m in "$CGROUP_ROOT"/*/kubepods "$CGROUP_ROOT"/kubepods "$CGROUP_ROOT"/*/kubepods.slice; do
    [[ -d $m ]] && find "$m" -depth -type d
  done
}

# node_clean: everything a node run leaves, in dependency order; safe when nothing is there.
node_clean() {
  local bin=${1:-} pid n m c
  # 1. pods: kubelet first (it would restart them), then every task of our containerd.
  node_stop provisioner
  node_stop kube-router
  node_stop kube-proxy
  node_stop kubelet
  if node_pid_alive containerd && [[ -n $bin && -x $bin/ctr ]]; then
    local ctr=("$bin/ctr" --address "$CONTAINERD_SOCK" -n k8s.io)
    for c in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
      "${ctr[@]}" tasks kill -a -s SIGKILL "$c" >/dev/null 2>&1 || true
    done
    sleep 1
    for c in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
      "${ctr[@]}" tasks delete -f "$c" >/dev/null 2>&1 || true
    done
    for c in $("${ctr[@]}" containers ls -q 2>/dev/null); do
      "${ctr[@]}" containers delete "$c" >/dev/null 2>&1 || true
    done
  fi
  node_step "pods stopped"
  node_stop containerd
  node_step "containerd stopped"
  # 2. shims (and so the containers they hold) that outlived containerd.
  for pid in $(our_shims); do kill -KILL "$pid" 2>/dev/null || true; done
  # 3. whatever still runs in the kubepods cgroups is a container of ours: kill it.
  for c in $(kubepods_cgroups); do
    [[ -f $c/cgroup.procs ]] || continue
    while read -r pid; do [[ -n $pid ]] && { kill -KILL "$pid" 2>/dev/null || true; }; done <"$c/cgroup.procs"
  done
  sleep 0.5
  node_step "leftover processes killed"
  # 4. mounts under the state folder (kubelet volumes, overlay rootfs, shm, netns binds), deepest first.
  if [[ -d $NODE_STATE ]]; then
    for m in $(awk -v p="$NODE_STATE/" 'index($2, p) == 1 {print $2}' /proc/self/mounts | sort -r); do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || node_log "could not unmount $m"
    done
  fi
  # 5. the network: removing the namespace removes the bridge, the pods' veths, and every
  #    iptables rule kube-proxy wrote; the host side of the veth pair goes with its peer.
  if [[ -e /run/netns/$NETNS ]]; then ip netns delete "$NETNS" 2>/dev/null || node_log "could not delete netns $NETNS"; fi
  # The host side usually goes with the namespace a moment later, so the delete may find it gone:
  # `|| true`, or errexit stopped node-down here with no word (seen once in CI); the check at the
  # end of node-down still reports a link that stayed.
  ip link show "$HOST_IF" >/dev/null 2>&1 && { ip link delete "$HOST_IF" 2>/dev/null || true; }
  node_step "mounts and network removed"
  # 6. the kubepods cgroups, now empty (rmdir only: never touches any other cgroup).
  for n in 1 2 3; do
    for c in $(kubepods_cgroups); do rmdir "$c" 2>/dev/null || true; done
    [[ -z $(kubepods_cgroups) ]] && break
    sleep 1
  done
  [[ -z $(kubepods_cgroups) ]] || node_log "some kubepods cgroups are still busy: $(kubepods_cgroups | head -3 | tr '\n' ' ')"
}
