#!/usr/bin/env bash
# Stop the real node of hack/node-up.sh and leave nothing behind: pods and their shims, mounts
# under the state folder, the node's network namespace (bridge, pod veths, kube-proxy's iptables
# rules go with it), the host-side veth and routes, the kubepods cgroups, the hostpath volumes,
# then its control plane (hack/cluster-down.sh on the node's own state folder). Safe to run when
# nothing is running; exits non-zero only when something could not be removed.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=node-lib.sh
source "$ROOT/hack/node-lib.sh"
[[ $(id -u) == 0 ]] || { node_log "ERROR: node-down needs root (like node-up)"; exit 1; }
if [[ ${BRAIN_NODE_LOCKED:-0} != 1 ]]; then
  mkdir -p "$(dirname "$NODE_STATE")"
  exec 7>"$NODE_STATE.lock"
  flock -w 120 7 || node_log "$NODE_STATE.lock still held after 120 s; stopping anyway"
fi
bin=""
[[ -L $NODE_STATE/bin ]] && bin=$(readlink -f "$NODE_STATE/bin")
node_clean "$bin"
if [[ -d $BRAIN_KUBE_STATE ]]; then
  BRAIN_KUBE_LOCKED=0 bash "$ROOT/hack/cluster-down.sh"
fi
left=()
[[ -e /run/netns/$NETNS ]] && left+=("netns $NETNS")
ip link show "$HOST_IF" >/dev/null 2>&1 && left+=("link $HOST_IF")
[[ -n $(our_shims) ]] && left+=("shims $(our_shims | tr '\n' ' ')")
[[ -n $(kubepods_cgroups) ]] && left+=("kubepods cgroups")
if [[ -d $NODE_STATE ]] && awk -v p="$NODE_STATE/" 'index($2, p) == 1 {found=1} END {exit !found}' /proc/self/mounts; then
  left+=("mounts under $NODE_STATE")
fi
if ((${#left[@]})); then
  node_log "ERROR: could not remove: ${left[*]}"
  exit 1
fi
rm -rf "$NODE_STATE"
node_log "stopped, removed $NODE_STATE"
