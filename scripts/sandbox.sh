#!/usr/bin/env bash
# A local Kubernetes control plane with a simulated EKS GPU fleet and trainplace registered
# as its admission webhook: see where a job lands before you spend money on it.
#
#   scripts/sandbox.sh up       build what is missing, start everything, print `export KUBECONFIG=...`
#   scripts/sandbox.sh down     stop every process `up` started (by PID) and remove the state
#   scripts/sandbox.sh status   what runs, where its logs are
#   scripts/sandbox.sh restart COMPONENT [ARG...]
#                               stop one component (SIGTERM; if it runs) and start it again
#                               with the command line `up` gave it, e.g. kube-apiserver to
#                               see watches recover; ARGs are added for this start only, and
#                               it inherits this command's environment (the test suites
#                               start trainplace with a policy of their own this way)
#
# Runs on loopback only: etcd, kube-apiserver (client-certificate auth, RBAC, the default
# admission plugins, which include the webhooks and ValidatingAdmissionPolicy),
# kube-controller-manager (every default controller: job, garbage collector, namespace...),
# kube-scheduler, kwok (plays the kubelet for the fleet's nodes; no container runs) and
# `trainplace serve`. The binaries come from scripts/control-plane.sh.
#
# trainplace is registered with manifests/base's webhook configurations and RBAC; the one
# local difference is that clientConfig points at https://127.0.0.1:PORT with the sandbox's
# own CA instead of at the in-cluster Service. trainplace runs as its ServiceAccount
# (system:serviceaccount:trainplace:trainplace, by client certificate), so its inventory
# watches have exactly the shipped ClusterRole.
#
# Environment:
#   SANDBOX_DIR         state, certificates, logs (default: target/sandbox)
#   SANDBOX_FLEET       the SandboxFleet file (default: sandbox/fleet.yaml)
#   SANDBOX_POLICY_DIR  the policy directory trainplace serves (default: the embedded policy)
#   SANDBOX_WEBHOOK     1 (default) registers trainplace's webhooks; 0 leaves them out
#   TRAINPLACE_BIN      the trainplace binary (default: target/release/trainplace, built if missing)
#   SANDBOX_OWNER_PID   stop everything when this process exits (the test suites set it)
#   SANDBOX_PROFILING   true serves kube-apiserver's /debug/pprof (default: false)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${SANDBOX_DIR:-$root/target/sandbox}"
fleet="${SANDBOX_FLEET:-$root/sandbox/fleet.yaml}"
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok trainplace)

log() { printf 'sandbox: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

running() { # running NAME: its PID is alive
  local pid
  [ -f "$dir/pids/$1" ] && pid="$(cat "$dir/pids/$1")" && kill -0 "$pid" 2>/dev/null
}

down() {
  local stopped=0 name pid
  [ -d "$dir/pids" ] || { log "nothing is running (no $dir/pids)"; return 0; }
  # The watchdog first, so it does not run `down` a second time.
  for name in watchdog "${components[@]}"; do
    [ -f "$dir/pids/$name" ] || continue
    pid="$(cat "$dir/pids/$name")"
    # The watchdog runs this very `down` (bash execs its last command): not itself.
    [ "$pid" = "$$" ] && { rm -f "$dir/pids/$name"; continue; }
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      stopped=$((stopped + 1))
    fi
  done
  for _ in $(seq 100); do
    local alive=0
    for name in watchdog "${components[@]}"; do
      running "$name" && alive=1
    done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for name in watchdog "${components[@]}"; do
    if running "$name"; then
      log "$name did not stop on SIGTERM within 10 s: SIGKILL"
      kill -KILL "$(cat "$dir/pids/$name")" 2>/dev/null || true
    fi
  done
  rm -rf "$dir/pids" "$dir/etcd-data"
  log "stopped $stopped processes"
}

status() {
  local name
  for name in "${components[@]}"; do
    if running "$name"; then
      printf '%-24s running  pid %-8s log %s\n' "$name" "$(cat "$dir/pids/$name")" "$dir/logs/$name.log"
    else
      printf '%-24s stopped\n' "$name"
    fi
  done
  [ -f "$dir/env" ] && cat "$dir/env"
  return 0
}

free_ports() { # free_ports N: N distinct ports the kernel has free now
  python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks: s.close()' "$1"
}

start() { # start NAME CMD...: in the background, its own session, logs in logs/NAME.log
  local name="$1"; shift
  mkdir -p "$dir/cmd"
  # The command line (and KUBECONFIG), NUL-separated, for `restart`.
  { printf '%s\0' "KUBECONFIG=${KUBECONFIG:-}"; printf '%s\0' "$@"; } >"$dir/cmd/$name"
  setsid "$@" >>"$dir/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/pids/$name"
}

restart() { # restart NAME [ARG...]
  local name="${1:-}" pid
  if [ -z "$name" ] || [ ! -f "$dir/cmd/$name" ]; then
    die "restart what? one of: ${components[*]}"
  fi
  shift
  [ -d "$dir/pids" ] || die "the sandbox in $dir is not up"
  if running "$name"; then
    pid="$(cat "$dir/pids/$name")"
    kill -TERM "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  local args=() saved
  while IFS= read -r -d '' a; do args+=("$a"); done <"$dir/cmd/$name"
  # `start` records the command line it runs; the one `up` gave stays the one to restart.
  saved="$(mktemp)"
  cp "$dir/cmd/$name" "$saved"
  KUBECONFIG="${args[0]#KUBECONFIG=}" start "$name" "${args[@]:1}" "$@"
  mv "$saved" "$dir/cmd/$name"
  log "restarted $name (pid $(cat "$dir/pids/$name"))${*:+ with $*}"
}

wait_for() { # wait_for WHAT SECONDS CMD...: until CMD succeeds; a dead component fails at once
  local what="$1" seconds="$2"; shift 2
  local deadline=$(( $(date +%s) + seconds ))
  until "$@" >/dev/null 2>&1; do
    local name
    for name in "${components[@]}"; do
      if [ -f "$dir/pids/$name" ] && ! running "$name"; then
        tail -n 20 "$dir/logs/$name.log" >&2 || true
        die "$name exited while waiting for $what; its log: $dir/logs/$name.log"
      fi
    done
    [ "$(date +%s)" -lt "$deadline" ] || die "$what not ready after ${seconds}s; logs in $dir/logs"
    sleep 0.2
  done
}

pki() {
  local p="$dir/pki"
  mkdir -p "$p"
  [ -f "$p/ca.crt" ] && [ -f "$p/trainplace.crt" ] && return
  log "certificates in $p"
  key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1" 2>/dev/null; }
  key "$p/ca.key"
  openssl req -x509 -new -key "$p/ca.key" -subj "/CN=trainplace-sandbox-ca" -days 3650 -out "$p/ca.crt" 2>/dev/null
  issue() { # issue NAME SUBJECT [SAN]
    key "$p/$1.key"
    openssl req -new -key "$p/$1.key" -subj "$2" -out "$p/$1.csr" 2>/dev/null
    local ext="$p/$1.ext"
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n' >"$ext"
    [ -n "${3:-}" ] && printf 'subjectAltName=%s\n' "$3" >>"$ext"
    openssl x509 -req -in "$p/$1.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial \
      -days 3650 -extfile "$ext" -out "$p/$1.crt" 2>/dev/null
    rm -f "$p/$1.csr" "$ext"
  }
  issue apiserver "/CN=kube-apiserver" "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  issue admin "/O=system:masters/CN=sandbox-admin"
  issue controller-manager "/CN=system:kube-controller-manager"
  issue scheduler "/CN=system:kube-scheduler"
  issue kwok "/O=system:masters/CN=kwok"
  # trainplace's inventory watches run as its ServiceAccount, so the shipped ClusterRole
  # is what they get.
  issue trainplace-client "/O=system:serviceaccounts/O=system:serviceaccounts:trainplace/CN=system:serviceaccount:trainplace:trainplace"
  issue trainplace "/CN=trainplace" "IP:127.0.0.1,DNS:localhost"
  key "$p/sa.key"
  openssl ec -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
  mkdir -p "$p/mark-keys"
  # Shared admission-mark key: every trainplace replica the tests start verifies the others'.
  openssl rand -hex 32 >"$p/mark-keys/sandbox-1"
}

kubeconfig() { # kubeconfig NAME CERT
  local k="$dir/$1.kubeconfig"
  rm -f "$k"
  KUBECONFIG="$k" "$bin/kubectl" config set-cluster sandbox --server="https://127.0.0.1:$api_port" \
    --certificate-authority="$dir/pki/ca.crt" --embed-certs >/dev/null
  KUBECONFIG="$k" "$bin/kubectl" config set-credentials "$2" --client-certificate="$dir/pki/$2.crt" \
    --client-key="$dir/pki/$2.key" --embed-certs >/dev/null
  KUBECONFIG="$k" "$bin/kubectl" config set-context sandbox --cluster=sandbox --user="$2" >/dev/null
  KUBECONFIG="$k" "$bin/kubectl" config use-context sandbox >/dev/null
}

register_webhooks() {
  # manifests/base as kustomize renders it: the namespace, RBAC, policy ConfigMap and the
  # webhook configurations, rewritten to call 127.0.0.1 with the sandbox CA. The Deployment,
  # Service and PDB stay out: trainplace runs here as a local process.
  local ca
  ca="$(base64 -w0 <"$dir/pki/ca.crt")"
  "$bin/kubectl" kustomize "$root/manifests/base" >"$dir/base.yaml"
  python3 - "$dir/base.yaml" "$webhook_port" "$ca" "${SANDBOX_WEBHOOK:-1}" >"$dir/install.json" <<'PY'
import json, sys, subprocess
path, port, ca, webhooks = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
# kubectl turns the multi-document YAML into JSON without a YAML library here.
out = subprocess.run(["kubectl", "create", "--dry-run=client", "-o", "json", "-f", path],
                     check=True, capture_output=True, text=True).stdout
decoder, items, i = json.JSONDecoder(), [], 0
while i < len(out):
    if out[i].isspace():
        i += 1
        continue
    obj, i = decoder.raw_decode(out, i)
    items.extend(obj["items"] if obj.get("kind") == "List" else [obj])
keep = []
for o in items:
    if o["kind"] in ("Deployment", "Service", "PodDisruptionBudget"):
        continue
    if o["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        if not webhooks:
            continue
        for w in o["webhooks"]:
            path = w["clientConfig"].pop("service")["path"]
            w["clientConfig"]["url"] = f"https://127.0.0.1:{port}{path}"
            w["clientConfig"]["caBundle"] = ca
    keep.append(o)
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": keep}))
PY
  "$bin/kubectl" apply -f "$dir/install.json" >/dev/null
}

up() {
  if running kube-apiserver; then
    log "already up"
    status
    echo "export KUBECONFIG=$dir/admin.kubeconfig"
    return
  fi
  command -v openssl >/dev/null || die "openssl is missing (the sandbox makes its own certificates)"
  command -v python3 >/dev/null || die "python3 is missing (the sandbox rewrites the webhook configurations with it)"
  command -v curl >/dev/null || die "curl is missing (the sandbox waits on health endpoints with it)"
  [ -f "$fleet" ] || die "fleet file $fleet does not exist (SANDBOX_FLEET)"
  bin="$("$root/scripts/control-plane.sh")"
  local trainplace="${TRAINPLACE_BIN:-$root/target/release/trainplace}"
  if [ -z "${TRAINPLACE_BIN:-}" ] && [ ! -x "$trainplace" ]; then
    log "building trainplace (cargo build --release)"
    (cd "$root" && cargo build --release --locked --quiet)
  fi
  [ -x "$trainplace" ] || die "TRAINPLACE_BIN=$trainplace is not an executable"
  export PATH="$bin:$PATH"
  mkdir -p "$dir/logs" "$dir/pids"
  up_done=0
  trap '[ "$up_done" = 1 ] || { log "up failed: stopping what it started"; down; }' EXIT
  pki
  local etcd_port peer_port
  read -r etcd_port peer_port api_port webhook_port probe_port <<<"$(free_ports 5)"
  rm -rf "$dir/etcd-data"

  log "etcd on 127.0.0.1:$etcd_port"
  start etcd "$bin/etcd" --name sandbox --data-dir "$dir/etcd-data" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "sandbox=http://127.0.0.1:$peer_port" --unsafe-no-fsync --log-level warn
  wait_for etcd 30 curl -sf "http://127.0.0.1:$etcd_port/health"

  log "kube-apiserver on https://127.0.0.1:$api_port"
  start kube-apiserver "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
    --client-ca-file "$dir/pki/ca.crt" --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 --allow-privileged=true --profiling="${SANDBOX_PROFILING:-false}" \
    --endpoint-reconciler-type none
  kubeconfig admin admin
  kubeconfig controller-manager controller-manager
  kubeconfig scheduler scheduler
  kubeconfig kwok kwok
  kubeconfig trainplace trainplace-client
  export KUBECONFIG="$dir/admin.kubeconfig"
  wait_for kube-apiserver 90 "$bin/kubectl" get --raw /readyz

  log "kube-controller-manager, kube-scheduler, kwok"
  start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$dir/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$dir/controller-manager.kubeconfig" --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 0 --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt"
  start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$dir/scheduler.kubeconfig" \
    --authentication-kubeconfig "$dir/scheduler.kubeconfig" --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 0 --leader-elect=false
  start kwok "$bin/kwok" --kubeconfig "$dir/kwok.kubeconfig" --config "$root/sandbox/kwok-stages.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --cidr 10.64.0.0/16 --node-ip 10.96.0.1 --server-address ""

  # MPIJob comes from the MPI Operator (kubeflow.org/v2beta1); the Training Operator's
  # v1 MPIJob CRD has the same name, and a cluster runs one of the two.
  log "CRDs of every workload kind trainplace reads (schemas/, sandbox/crds/)"
  local crds=(-f "$root/schemas/mpi-operator-v2beta1/kubeflow.org_mpijobs.yaml")
  for f in "$root"/schemas/*.yaml "$root"/sandbox/crds/*.yaml; do
    [ "$(basename "$f")" = kubeflow.org_mpijobs.yaml ] && continue
    grep -q '^kind: CustomResourceDefinition' "$f" && crds+=(-f "$f")
  done
  kubectl apply --server-side "${crds[@]}" >/dev/null
  # `kubectl wait` errors out on a CRD whose status is not written yet: retried.
  wait_for "CRDs established" 60 kubectl wait --for condition=established --timeout 10s crd --all

  log "fleet from $fleet"
  local policy_args=()
  [ -n "${SANDBOX_POLICY_DIR:-}" ] && policy_args=(--policy-dir "$SANDBOX_POLICY_DIR")
  "$trainplace" sandbox nodes -f "$fleet" "${policy_args[@]}" >"$dir/nodes.json"
  # A fleet of no nodes is allowed: a test that makes its own nodes starts from one.
  if grep -q '"items":\[\]' "$dir/nodes.json"; then
    log "the fleet has no nodes"
  else
    kubectl apply -f "$dir/nodes.json" >/dev/null
    # kwok marks nodes Ready one by one: a minute, and a second more per four nodes.
    local nodes
    nodes=$(grep -o '"kind":"Node"' "$dir/nodes.json" | wc -l)
    wait_for "nodes Ready" $((60 + nodes / 4)) kubectl wait --for condition=Ready --timeout 10s node --all
  fi

  log "trainplace serve on https://127.0.0.1:$webhook_port"
  kubectl create namespace trainplace --dry-run=client -o json | kubectl apply -f - >/dev/null
  register_webhooks
  KUBECONFIG="$dir/trainplace.kubeconfig" start trainplace "$trainplace" serve \
    --addr "127.0.0.1:$webhook_port" --probe-addr "127.0.0.1:$probe_port" \
    --tls-cert "$dir/pki/trainplace.crt" --tls-key "$dir/pki/trainplace.key" \
    --mark-keys "$dir/pki/mark-keys" "${policy_args[@]}"
  wait_for "trainplace /readyz" 60 curl -sf "http://127.0.0.1:$probe_port/readyz"
  # The service account controller makes `default` in each namespace; pods need it.
  wait_for "the default ServiceAccount" 30 kubectl -n default get serviceaccount default

  cat >"$dir/env" <<EOF
SANDBOX_DIR=$dir
SANDBOX_BIN=$bin
SANDBOX_API=https://127.0.0.1:$api_port
SANDBOX_WEBHOOK_PORT=$webhook_port
SANDBOX_PROBE_PORT=$probe_port
SANDBOX_ETCD=http://127.0.0.1:$etcd_port
EOF
  if [ -n "${SANDBOX_OWNER_PID:-}" ]; then
    # Stops everything when the owner (a test binary) exits, however it exits.
    # shellcheck disable=SC2016 # the inner script's own arguments
    setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; SANDBOX_DIR="$2" "$3" down' \
      watchdog "$SANDBOX_OWNER_PID" "$dir" "$0" >>"$dir/logs/watchdog.log" 2>&1 </dev/null &
    echo $! >"$dir/pids/watchdog"
  fi
  up_done=1
  log "up: $(kubectl get nodes --no-headers | wc -l) nodes; kubectl get pods -o wide shows where pods land"
  echo "export KUBECONFIG=$dir/admin.kubeconfig"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  restart) shift; restart "$@" ;;
  *) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
