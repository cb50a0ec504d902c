#!/usr/bin/env bash
# Start a local control plane with one REAL node: containerd + runc + kubelet + kube-proxy
# (iptables) + kube-router's NetworkPolicy controller (iptables + ipset) + CoreDNS,
# bridge/host-local/portmap/loopback CNI, the controller-manager's hostpath provisioner, and the
# images of `make images` imported into containerd (no registry).
#
#   eval "$(bash hack/node-up.sh)"     # or: make node-up      (root; minutes the first time)
#   bash hack/node-down.sh             # or: make node-down    (stops all of it, leaves nothing)
#
# stdout: `export KUBECONFIG=...` and `export PATH=<bin>:$PATH` (like hack/cluster-up.sh);
# everything else goes to stderr. A node left by an earlier run (this state folder, the netns,
# pods, mounts, cgroups) is cleaned first. A failed start cleans up what it started.
#
# This cluster is separate from hack/cluster-up.sh's kwok-only one (its own state folder and
# ports, see hack/node-lib.sh); both run side by side. Environment (all optional):
#   BRAIN_NODE_STATE     state folder [/tmp/brain-node]
#   BRAIN_NODE_ETCD_PORT / BRAIN_NODE_ETCD_PEER_PORT / BRAIN_NODE_APISERVER_PORT [23379/23380/27443]
#   BRAIN_NODE_IMAGES    images to import from Docker, space-separated [the six of hack/images.sh]
#   BRAIN_NODE_IMAGE_CACHE  1: containerd's root (its image store) lives in
#                        $BRAIN_CACHE/node-containerd-v1 and survives node-down, so only images whose
#                        Docker image ID changed are imported again [1]; 0: in the state folder,
#                        imported every run and deleted by node-down
#   BRAIN_NODE_NETNS, BRAIN_NODE_HOST_IP, BRAIN_NODE_IP, BRAIN_NODE_POD_CIDR: see hack/node-lib.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=node-lib.sh
source "$ROOT/hack/node-lib.sh"
log() { node_log "$*"; }
die() {
  log "ERROR: $*"
  exit 1
}

[[ $(id -u) == 0 ]] || die "a real node needs root (containerd, kubelet, network namespaces, cgroups); run as root, or use the kwok-only hack/cluster-up.sh"
for t in ip nsenter iptables openssl curl docker flock; do
  command -v "$t" >/dev/null || die "$t is not on PATH"
done

# --- images first: a clear error before anything starts -------------------------------------
IMAGES=()
if [[ -n ${BRAIN_NODE_IMAGES:-} ]]; then
  read -r -a IMAGES <<<"$BRAIN_NODE_IMAGES"
else
  for i in operator gateway embedder jobs database cloudflared; do IMAGES+=("$(bash "$ROOT/hack/images.sh" --ref "$i")"); done
fi
bash "$ROOT/hack/docker-up.sh" || die "no Docker engine to take the images from (hack/docker-up.sh failed above)"
missing=()
for i in "${IMAGES[@]}"; do docker image inspect "$i" >/dev/null 2>&1 || missing+=("$i"); done
((${#missing[@]} == 0)) || die "Docker has no ${missing[*]}: build them first with \`make images\`"

KUBE_BIN=$(bash "$ROOT/hack/kube-build.sh")
BIN=$(bash "$ROOT/hack/node-build.sh")
# The NetworkPolicy enforcer (the bridge plugin ignores policies): its own versioned cache folder.
KUBE_ROUTER=$(bash "$ROOT/hack/kube-router-build.sh")
NODE_DIR=$(dirname "$BIN")
export PATH=$BIN:$KUBE_BIN:$PATH # containerd finds its shim on PATH

mkdir -p "$(dirname "$NODE_STATE")"
exec 7>"$NODE_STATE.lock"
flock -w 600 7 || die "timed out waiting for $NODE_STATE.lock (another node-up/down still running?)"

# --- a stale node from an earlier run --------------------------------------------------------
if [[ -d $NODE_STATE || -e /run/netns/$NETNS ]] || ip link show "$HOST_IF" >/dev/null 2>&1 || [[ -n $(kubepods_cgroups) ]]; then
  log "stale node from an earlier run (state $NODE_STATE, netns $NETNS): cleaning it first"
  BRAIN_NODE_LOCKED=1 bash "$ROOT/hack/node-down.sh"
fi
for p in "$BRAIN_KUBE_ETCD_PORT" "$BRAIN_KUBE_ETCD_PEER_PORT" "$BRAIN_KUBE_APISERVER_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    die "port 127.0.0.1:$p is already in use by another process (see: ss -ltnp 'sport = :$p'); set BRAIN_NODE_ETCD_PORT / BRAIN_NODE_ETCD_PEER_PORT / BRAIN_NODE_APISERVER_PORT to free ports"
  fi
done
for r in "$POD_CIDR" "$SERVICE_CIDR" "${HOST_IP}/30"; do
  if ip route show "$r" 2>/dev/null | grep -q .; then
    die "the host already routes $r ($(ip route show "$r" | head -1)); set BRAIN_NODE_POD_CIDR / BRAIN_NODE_HOST_IP to free ranges"
  fi
done

STARTED=0
on_exit() {
  local rc=$?
  if ((rc != 0 && STARTED)); then
    log "start failed: cleaning up (logs kept in $NODE_STATE.failed-logs)"
    rm -rf "$NODE_STATE.failed-logs"
    cp -r "$NODE_STATE/logs" "$NODE_STATE.failed-logs" 2>/dev/null || true
    cp -r "$BRAIN_KUBE_STATE/logs" "$NODE_STATE.failed-logs/kube" 2>/dev/null || true
    BRAIN_NODE_LOCKED=1 bash "$ROOT/hack/node-down.sh" || true
  fi
}
trap on_exit EXIT
trap 'exit 130' INT TERM

t0=$(date +%s.%N)
STARTED=1
mkdir -p "$NODE_STATE"/{pids,logs,pki,cni/net.d,cni/ipam,kubelet,pod-logs,containerd}
chmod 755 "$NODE_STATE"
ln -sfn "$BIN" "$NODE_STATE/bin"

# --- network: the node's namespace and the veth pair -----------------------------------------
ip netns add "$NETNS"
NS=(nsenter --net="/run/netns/$NETNS" --)
ip link add "$HOST_IF" type veth peer name "$NODE_IF"
ip link set "$NODE_IF" netns "$NETNS"
ip addr add "$HOST_IP/30" dev "$HOST_IF"
ip link set "$HOST_IF" up
"${NS[@]}" ip link set lo up
"${NS[@]}" ip addr add "$NODE_IP/30" dev "$NODE_IF"
"${NS[@]}" ip link set "$NODE_IF" up
"${NS[@]}" ip route add default via "$HOST_IP"
# Per-namespace sysctls: the node forwards between the bridge and the veth; bridged pod-to-pod
# traffic through a Service passes iptables (so replies are un-NATed).
"${NS[@]}" sysctl -qw net.ipv4.ip_forward=1
"${NS[@]}" sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || log "net.bridge.bridge-nf-call-iptables not settable in the netns; same-node Service hairpin may fail"
ip route add "$POD_CIDR" via "$NODE_IP" dev "$HOST_IF"
ip route add "$SERVICE_CIDR" via "$NODE_IP" dev "$HOST_IF"

# --- the control plane, on the host-side address ----------------------------------------------
exports=$(
  BRAIN_KUBE_ADDRESS=$HOST_IP BRAIN_KUBE_ENDPOINT_RECONCILER=lease BRAIN_KUBE_NODES=0 BRAIN_KUBE_SMOKE=0 \
    bash "$ROOT/hack/cluster-up.sh" 7>&- # its daemons must not hold the node lock
)
KC=$BRAIN_KUBE_STATE/kubeconfig
k() { "$KUBE_BIN/kubectl" --kubeconfig "$KC" "$@"; }

# Client certificates for the kubelet (Node authorizer) and kube-proxy (system:node-proxier).
PKI=$BRAIN_KUBE_STATE/pki
client_cert() { # NAME SUBJECT → $NODE_STATE/NAME.kubeconfig
  local name=$1 subj=$2 b64='base64 -w0'
  openssl ecparam -name prime256v1 -genkey -noout -out "$NODE_STATE/pki/$name.key" 2>/dev/null
  openssl req -new -key "$NODE_STATE/pki/$name.key" -subj "$subj" -out "$NODE_STATE/pki/$name.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$NODE_STATE/pki/$name.ext"
  openssl x509 -req -in "$NODE_STATE/pki/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 365 -sha256 -extfile "$NODE_STATE/pki/$name.ext" -out "$NODE_STATE/pki/$name.crt" 2>/dev/null
  cat >"$NODE_STATE/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: brain-node
  cluster:
    server: https://$HOST_IP:$BRAIN_KUBE_APISERVER_PORT
    certificate-authority-data: $($b64 <"$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $($b64 <"$NODE_STATE/pki/$name.crt")
    client-key-data: $($b64 <"$NODE_STATE/pki/$name.key")
contexts:
- name: brain-node
  context: {cluster: brain-node, user: $name}
current-context: brain-node
EOF
  chmod 600 "$NODE_STATE/$name.kubeconfig"
}
client_cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
client_cert kube-proxy "/CN=system:kube-proxy"
client_cert kube-router "/CN=system:kube-router"

# start / wait_for (hack/daemon-lib.sh): containerd, kubelet and kube-proxy in the node's netns.
DAEMON_DIR=$NODE_STATE DAEMON_BIN=$BIN
DAEMON_NAMES=("${NODE_DAEMONS[@]}")
DAEMON_PREFIX=("${NS[@]}")
daemon_alive() { node_pid_alive "$1"; }
# shellcheck source=hack/daemon-lib.sh
source "$ROOT/hack/daemon-lib.sh"

# --- containerd -------------------------------------------------------------------------------
cat >"$NODE_STATE/cni/net.d/10-brain.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "brain",
  "plugins": [
    {"type": "bridge", "bridge": "brain0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$NODE_STATE/cni/ipam",
              "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
# containerd's root: images, their unpacked snapshots, metadata. Cached between runs (see the
# header); containers never survive a run (node-down deletes them, and so does the start below).
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}
if [[ ${BRAIN_NODE_IMAGE_CACHE:-1} == 1 ]]; then CTRD_ROOT=$CACHE/node-containerd-v1; else CTRD_ROOT=$NODE_STATE/containerd/root; fi
mkdir -p "$CTRD_ROOT"
cat >"$NODE_STATE/containerd/config.toml" <<EOF
version = 3
root = "$CTRD_ROOT"
state = "$NODE_STATE/containerd/state"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE_STATE/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "registry.k8s.io/pause:3.10"
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$NODE_STATE/cni/net.d"
EOF
start containerd --config "$NODE_STATE/containerd/config.toml"
CTR=("$BIN/ctr" --address "$CONTAINERD_SOCK" -n k8s.io)
wait_for containerd 60 "${CTR[@]}" version

# --- images: ours from Docker, pause and CoreDNS from node-build, by import -------------------
# A cached root may hold what a killed run left: no container or sandbox may outlive a node.
# Every step here is bounded and named: a CI run once sat in this section for its whole 1,500 s
# with nothing said after containerd's start.
for c in $(timeout 60 "${CTR[@]}" containers ls -q 2>/dev/null); do
  timeout 60 "${CTR[@]}" containers delete "$c" >/dev/null 2>&1 || true
done
for sb in $(timeout 60 "${CTR[@]}" sandboxes ls 2>/dev/null | awk 'NR > 1 {print $1}'); do
  timeout 60 "${CTR[@]}" sandboxes rm -f "$sb" >/dev/null 2>&1 || true
done
# pause and CoreDNS: small archives from node-build, imported every run (a second or two).
ti=$(date +%s)
for f in "$NODE_DIR"/images/*.tar; do
  timeout 300 "${CTR[@]}" images import --local "$f" >/dev/null || die "importing $f into containerd failed or took over 300 s"
done
# Ours: only what changed. $CTRD_ROOT/imported lists "<ref> <Docker image ID>" (the digest of the
# image's config, so a rebuilt image has a new one) of what is in containerd's store.
STAMP=$CTRD_ROOT/imported
have=$("${CTR[@]}" images ls -q 2>/dev/null || true)
imported() { grep -qxF "$1 $2" "$STAMP" 2>/dev/null && grep -qxF "$1" <<<"$have"; }
new_stamp=()
todo=()
for i in "${IMAGES[@]}"; do
  id=$(timeout 60 docker image inspect -f '{{.Id}}' "$i") || die "docker image inspect $i failed or did not answer in 60 s (is dockerd up?)"
  imported "$i" "$id" || todo+=("$i")
  new_stamp+=("$i $id")
done
if ((${#todo[@]})); then
  log "importing ${#todo[@]} image(s) from Docker: ${todo[*]}"
  timeout 900 docker save "${todo[@]}" | timeout 900 "${CTR[@]}" images import --local - >/dev/null \
    || die "importing ${todo[*]} into containerd failed or took over 900 s (docker save | ctr images import)"
fi
printf '%s\n' "${new_stamp[@]}" >"$STAMP"
log "images imported in $(($(date +%s) - ti)) s (${#todo[@]} of ${#IMAGES[@]} from Docker changed)"

# --- kubelet ----------------------------------------------------------------------------------
: >"$NODE_STATE/resolv.conf"
cat >"$NODE_STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
oomScoreAdj: 0
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
clusterDNS: [$DNS_IP]
clusterDomain: cluster.local
resolvConf: $NODE_STATE/resolv.conf
podLogsDir: $NODE_STATE/pod-logs
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "2%", imagefs.available: "2%"}
serializeImagePulls: false
maxPods: 60
nodeStatusReportFrequency: 10s
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
EOF
start kubelet --config="$NODE_STATE/kubelet.yaml" --kubeconfig="$NODE_STATE/kubelet.kubeconfig" \
  --root-dir="$NODE_STATE/kubelet" --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=1
wait_for "node $NODE_NAME Ready" 120 k wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s

# --- kube-proxy (iptables), in the node's netns -----------------------------------------------
cat >"$NODE_STATE/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $NODE_STATE/kube-proxy.kubeconfig}
mode: iptables
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [$NODE_IP/32]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
start kube-proxy --config="$NODE_STATE/kube-proxy.yaml" --v=1
wait_for "kube-proxy healthz" 60 "${NS[@]}" curl -sf http://127.0.0.1:10256/healthz

# --- kube-router's network-policy controller, in the node's netns -----------------------------
# Only its firewall: the bridge plugin routes, kube-proxy serves Services. It turns every
# NetworkPolicy into iptables chains and ipsets of the node's netns (both go with the netns at
# node-down), and accepts what the node itself sends (kubelet probes, Service traffic from the host,
# which kube-proxy masquerades to the bridge's address). Its rights: kube-router's upstream
# ClusterRole, read-only.
k apply -f - >&2 <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:kube-router"}
rules:
- apiGroups: [""]
  resources: [namespaces, pods, services, nodes, endpoints]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:kube-router"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kube-router"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:kube-router"}]
EOF
DAEMON_BIN=$(dirname "$KUBE_ROUTER") start kube-router --kubeconfig="$NODE_STATE/kube-router.kubeconfig" \
  --hostname-override="$NODE_NAME" --run-firewall=true --run-router=false --run-service-proxy=false \
  --service-cluster-ip-range="$SERVICE_CIDR" --enable-ipv6=false --health-port=20244 --metrics-port=0 \
  --iptables-sync-period=1m --v=1
# Ready once its top-level chain is hooked into FORWARD: from then on a pod a policy selects gets
# only what the policy admits.
wait_for "kube-router's policy chains" 90 "${NS[@]}" sh -c 'iptables -S FORWARD | grep -q KUBE-ROUTER-FORWARD'
wait_for "kube-router healthz" 30 "${NS[@]}" curl -sf http://127.0.0.1:20244/healthz

# --- volumes: hack/node/provisioner.py (host process) ----------------------------------------
setsid python3 "$ROOT/hack/node/provisioner.py" --kubectl "$KUBE_BIN/kubectl" --kubeconfig "$KC" \
  --root "$NODE_STATE/volumes" </dev/null >"$NODE_STATE/logs/provisioner.log" 2>&1 7>&- &
echo $! >"$NODE_STATE/pids/provisioner.pid"

# --- CoreDNS and the hostpath StorageClass ---------------------------------------------------
COREDNS_IMAGE="brain-node/coredns:$(<"$NODE_DIR/coredns.version")"
sed -e "s|@COREDNS_IMAGE@|$COREDNS_IMAGE|" -e "s|@DNS_IP@|$DNS_IP|" "$ROOT/hack/node/cluster-addons.yaml" | k apply -f - >&2
wait_for "CoreDNS Available" 120 k -n kube-system wait --for=condition=Available deploy/coredns --timeout=1s
# The name resolves from the node's netns through the Service (kube-proxy → CoreDNS pod).
wait_for "kubernetes.default via $DNS_IP" 60 "${NS[@]}" \
  python3 -c "
import socket,struct,sys
q=b'\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00'+b''.join(bytes([len(p)])+p.encode() for p in 'kubernetes.default.svc.cluster.local'.split('.'))+b'\x00\x00\x01\x00\x01'
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(2);s.sendto(q,('$DNS_IP',53));r=s.recv(512)
sys.exit(0 if struct.unpack('>H',r[6:8])[0]>0 else 1)"

STARTED=0
log "ready in $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s: node $NODE_NAME ($NODE_IP), API https://$HOST_IP:$BRAIN_KUBE_APISERVER_PORT, state $NODE_STATE"
echo "$exports"
