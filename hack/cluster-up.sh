#!/usr/bin/env bash
# Start a local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok with fake nodes) as plain processes on 127.0.0.1.
#
#   eval "$(bash hack/cluster-up.sh)"     # or: make cluster-up
#
# stdout: exactly two lines, `export KUBECONFIG=...` and `export PATH=<bin>:$PATH`;
# everything else goes to stderr. Builds the binaries first if this machine has none
# (hack/kube-build.sh, cached). Idempotent: when the cluster recorded in the state folder
# is running and ready it only prints the exports. hack/cluster-down.sh stops it.
#
# Environment (all optional):
#   BRAIN_KUBE_STATE   state folder (pids, certs, kubeconfigs, logs, etcd data) [/tmp/brain-kube]
#   BRAIN_KUBE_ETCD_PORT / BRAIN_KUBE_ETCD_PEER_PORT / BRAIN_KUBE_APISERVER_PORT
#                      loopback ports [22379 / 22380 / 26443]
#   BRAIN_KUBE_NODES   number of kwok fake nodes [1]
#   BRAIN_KUBE_SMOKE   0 skips the smoke Deployment at start-up [1]
#   BRAIN_KUBE_ADDRESS the apiserver's bind/advertise address, in its certificate and the
#                      kubeconfigs [127.0.0.1]; hack/node-up.sh sets the real node's host-side
#                      veth address so pods reach the API through the `kubernetes` Service
#   BRAIN_KUBE_ENDPOINT_RECONCILER  none (no endpoints for the `kubernetes` Service: no pods need
#                      it on kwok) or lease [none]
#   BRAIN_KUBE_CM_ARGS extra kube-controller-manager flags, split on spaces [] (the real node
#                      passes --enable-hostpath-provisioner)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=kube-lib.sh
source "$ROOT/hack/kube-lib.sh" # STATE, COMPONENTS, pid_alive, stop_all
ETCD_PORT=${BRAIN_KUBE_ETCD_PORT:-22379}
ETCD_PEER_PORT=${BRAIN_KUBE_ETCD_PEER_PORT:-22380}
API_PORT=${BRAIN_KUBE_APISERVER_PORT:-26443}
NODES=${BRAIN_KUBE_NODES:-1}
SMOKE=${BRAIN_KUBE_SMOKE:-1}
ADDRESS=${BRAIN_KUBE_ADDRESS:-127.0.0.1}
RECONCILER=${BRAIN_KUBE_ENDPOINT_RECONCILER:-none}
read -r -a CM_ARGS <<<"${BRAIN_KUBE_CM_ARGS:-}"

log() { echo "cluster-up: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
# A failed or interrupted start stops whatever it had started (logs stay for diagnosis).
STARTED=0
on_exit() {
  local rc=$?
  if ((rc != 0 && STARTED)); then
    log "start failed: stopping what was started (logs kept in $STATE/logs)"
    stop_all
  fi
}
trap on_exit EXIT
trap 'exit 130' INT TERM

BIN=$(bash "$ROOT/hack/kube-build.sh")
KUBECTL=$BIN/kubectl
KC=$STATE/kubeconfig

print_exports() {
  printf 'export KUBECONFIG=%q\n' "$KC"
  printf 'export PATH=%q:$PATH\n' "$BIN"
}

api_ready() {
  [[ -f $KC ]] && "$KUBECTL" --kubeconfig "$KC" get --raw /readyz --request-timeout=3s >/dev/null 2>&1
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

mkdir -p "$(dirname "$STATE")"
exec 8>"$STATE.lock"
# One cluster-up/down at a time (parallel test workers share one cluster).
flock -w 900 8 || die "timed out waiting for $STATE.lock (another cluster-up/down still running?)"

# --- already running? -------------------------------------------------------------------
running=0
for c in "${COMPONENTS[@]}"; do pid_alive "$c" && running=$((running + 1)); done
if ((running == ${#COMPONENTS[@]})) && [[ $(readlink -f "$STATE/bin") == "$BIN" ]] && api_ready; then
  log "cluster already running (state $STATE)"
  print_exports
  exit 0
fi
if ((running > 0)) || [[ -d $STATE ]]; then
  log "stale or partial cluster in $STATE: stopping it first"
  BRAIN_KUBE_LOCKED=1 bash "$ROOT/hack/cluster-down.sh"
fi

if [[ $ADDRESS != 127.0.0.1 ]] && (exec 3<>"/dev/tcp/$ADDRESS/$API_PORT") 2>/dev/null; then
  die "port $ADDRESS:$API_PORT is already in use by another process; set BRAIN_KUBE_APISERVER_PORT to a free port"
fi
for p in "$ETCD_PORT" "$ETCD_PEER_PORT" "$API_PORT"; do
  if port_busy "$p"; then
    die "port 127.0.0.1:$p is already in use by another process (see: ss -ltnp 'sport = :$p'); set BRAIN_KUBE_ETCD_PORT / BRAIN_KUBE_ETCD_PEER_PORT / BRAIN_KUBE_APISERVER_PORT to free ports"
  fi
done

t0=$(date +%s.%N)
STARTED=1
mkdir -p "$STATE"/{pids,logs,pki}
ln -sfn "$BIN" "$STATE/bin"
echo "$API_PORT" >"$STATE/apiserver.port"

# --- PKI (ECDSA P-256: fast to generate) -------------------------------------------------
PKI=$STATE/pki
ossl() { openssl "$@" 2>/dev/null; }
ossl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key"
ossl req -x509 -new -key "$PKI/ca.key" -sha256 -days 3650 -subj "/CN=brain-kube-ca" -out "$PKI/ca.crt"
ossl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key"
ossl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"

# cert NAME SUBJECT KIND [SAN]: key + cert signed by the CA.
cert() {
  local name=$1 subj=$2 kind=$3 san=${4:-} ext=$PKI/$1.ext
  ossl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key"
  ossl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$kind"
    [[ -n $san ]] && echo "subjectAltName=$san"
  } >"$ext"
  ossl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$ext" -out "$PKI/$name.crt"
  rm -f "$PKI/$name.csr" "$ext"
}
cert apiserver "/CN=kube-apiserver" serverAuth \
  "IP:127.0.0.1,IP:$ADDRESS,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert admin "/O=system:masters/CN=brain-admin" clientAuth
cert controller-manager "/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
cert kwok "/O=system:masters/CN=kwok-controller" clientAuth

# kubeconfig FILE CERTNAME: self-contained (embedded certs).
kubeconfig() {
  local b64='base64 -w0'
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: brain-kube
  cluster:
    server: https://$ADDRESS:$API_PORT
    certificate-authority-data: $($b64 <"$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $($b64 <"$PKI/$2.crt")
    client-key-data: $($b64 <"$PKI/$2.key")
contexts:
- name: brain-kube
  context:
    cluster: brain-kube
    user: $2
    namespace: default
current-context: brain-kube
EOF
  chmod 600 "$1"
}
kubeconfig "$KC" admin
kubeconfig "$STATE/controller-manager.kubeconfig" controller-manager
kubeconfig "$STATE/scheduler.kubeconfig" scheduler
kubeconfig "$STATE/kwok.kubeconfig" kwok

# start / wait_for (hack/daemon-lib.sh) for the control plane's processes.
DAEMON_DIR=$STATE DAEMON_BIN=$BIN
DAEMON_NAMES=("${COMPONENTS[@]}")
DAEMON_PREFIX=()
daemon_alive() { pid_alive "$1"; }
# shellcheck source=hack/daemon-lib.sh
source "$ROOT/hack/daemon-lib.sh"

# --- etcd ---------------------------------------------------------------------------------
start etcd --name=brain --data-dir="$STATE/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --unsafe-no-fsync=true --log-level=warn
wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"

# --- kube-apiserver -----------------------------------------------------------------------
start kube-apiserver \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address="$ADDRESS" --advertise-address="$ADDRESS" --secure-port="$API_PORT" \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" \
  --service-account-signing-key-file="$PKI/sa.key" \
  --service-cluster-ip-range=10.96.0.0/16 \
  --authorization-mode=Node,RBAC \
  --allow-privileged=true \
  --endpoint-reconciler-type="$RECONCILER" \
  --kubelet-preferred-address-types=InternalIP,Hostname \
  --profiling=false \
  --v=1
wait_for "kube-apiserver /readyz" 90 api_ready

# --- controller-manager, scheduler, kwok (no serving ports: --secure-port=0) ----------------
start kube-controller-manager \
  --kubeconfig="$STATE/controller-manager.kubeconfig" \
  --secure-port=0 --leader-elect=false \
  --controllers='*' \
  --use-service-account-credentials=true \
  --service-account-private-key-file="$PKI/sa.key" \
  --root-ca-file="$PKI/ca.crt" \
  --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
  --profiling=false \
  "${CM_ARGS[@]}" \
  --v=1
start kube-scheduler \
  --kubeconfig="$STATE/scheduler.kubeconfig" \
  --secure-port=0 --leader-elect=false \
  --profiling=false \
  --v=1
"$BIN/kube" kwok-stages >"$STATE/kwok-stages.yaml"
start kwok \
  --kubeconfig="$STATE/kwok.kubeconfig" \
  --config="$STATE/kwok-stages.yaml" \
  --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --node-ip=127.0.0.1 \
  --node-lease-duration-seconds=40 \
  --cidr=10.244.0.0/16

# --- fake nodes -----------------------------------------------------------------------------
for ((i = 0; i < NODES; i++)); do
  cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: kwok-node-$i
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "250"}
  capacity: {cpu: "32", memory: 256Gi, pods: "250"}
EOF
done >"$STATE/kwok-nodes.yaml"

k() { "$KUBECTL" --kubeconfig "$KC" "$@"; }
if ((NODES > 0)); then # 0: a real node joins instead (hack/node-up.sh)
  k apply -f "$STATE/kwok-nodes.yaml" >&2
  wait_for "fake nodes Ready" 60 k wait --for=condition=Ready node --all --timeout=1s
fi
wait_for "default service account" 60 k get serviceaccount default -n default

# --- smoke test: a Deployment becomes Available ---------------------------------------------
if [[ $SMOKE == 1 ]]; then
  k create deployment brain-smoke --image=registry.k8s.io/pause:3.10 --replicas=1 >&2
  wait_for "smoke Deployment Available" 90 \
    k wait --for=condition=Available deployment/brain-smoke --timeout=1s
  k delete deployment brain-smoke --wait=false >&2
fi

log "ready in $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s: API https://$ADDRESS:$API_PORT, state $STATE"
print_exports
