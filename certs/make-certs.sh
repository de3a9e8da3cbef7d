#!/usr/bin/env bash
# Make a private CA and an ECDSA P-256 serving certificate for the trainplace webhook,
# then write the self-signed overlay's Secret manifest and caBundle patch.
#
#   certs/make-certs.sh                 first run: CA + serving cert; later runs: no-op
#                                       unless the serving cert is missing, invalid,
#                                       lacks a Service name or expires within 30 days
#   certs/make-certs.sh --rotate        new serving key and cert, same CA (caBundle
#                                       unchanged; the server reloads without restart)
#
# Options:
#   --out DIR        where ca.{crt,key} and tls.{crt,key} live (default: certs/out)
#   --overlay DIR    overlay that gets secret.yaml and ca-bundle-patch.yaml
#                    (default: manifests/overlays/self-signed)
#   --days N         serving certificate lifetime (default: 365)
#   --rotate         always issue a new serving key and certificate (keeps the CA)
#
# Needs bash, openssl (1.1.1 or 3.x) and base64. See certs/README.md.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/certs/out"
overlay="$root/manifests/overlays/self-signed"
# The Service trainplace/trainplace of manifests/base (its names are the SANs).
namespace=trainplace
service=trainplace
days=365
ca_days=3650
rotate=false

die() { echo "make-certs: $*" >&2; exit 1; }
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="${2:?--out needs a directory}"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    --overlay) overlay="${2:?--overlay needs a directory}"; shift 2 ;;
    --overlay=*) overlay="${1#*=}"; shift ;;
    --days) days="${2:?--days needs a number}"; shift 2 ;;
    --rotate) rotate=true; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
case "$days" in ''|*[!0-9]*) die "--days must be a whole number, got '$days'" ;; esac
command -v openssl >/dev/null || die "openssl is not installed"
[ -d "$overlay" ] || die "overlay directory $overlay does not exist"

names=("$service" "$service.$namespace" "$service.$namespace.svc" "$service.$namespace.svc.cluster.local")
mkdir -p "$out"
umask 077
work="$(mktemp -d "$out/.work.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Replace a file in one rename so a reader never sees half of it.
install_file() { # src dst
  cp "$1" "$2.tmp.$$" && mv -f "$2.tmp.$$" "$2"
}

new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

make_ca() {
  new_key "$work/ca.key"
  openssl req -x509 -new -key "$work/ca.key" -sha256 -days "$ca_days" \
    -subj "/CN=trainplace-webhook-ca" \
    -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$work/ca.crt"
  install_file "$work/ca.key" "$out/ca.key"
  install_file "$work/ca.crt" "$out/ca.crt"
  echo "make-certs: new CA $out/ca.crt" >&2
}

make_leaf() {
  local san="" n
  for n in "${names[@]}"; do san="${san:+$san,}DNS:$n"; done
  cat > "$work/leaf.ext" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=$san
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
EOF
  new_key "$work/tls.key"
  openssl req -new -key "$work/tls.key" -subj "/CN=$service.$namespace.svc" -out "$work/tls.csr"
  openssl x509 -req -in "$work/tls.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days "$days" -sha256 \
    -extfile "$work/leaf.ext" -out "$work/tls.crt" 2>/dev/null
  # Key first, then certificate: a reader that sees the new certificate with the old
  # key refuses the pair and keeps its last good one until the next check.
  install_file "$work/tls.key" "$out/tls.key"
  install_file "$work/tls.crt" "$out/tls.crt"
  echo "make-certs: new serving certificate $out/tls.crt (serial $(openssl x509 -in "$out/tls.crt" -noout -serial | cut -d= -f2))" >&2
}

# The serving cert is kept when it chains to the CA, matches its key, names every
# Service DNS name and is valid for 30 more days.
leaf_ok() {
  [ -s "$out/tls.crt" ] && [ -s "$out/tls.key" ] || return 1
  openssl verify -CAfile "$out/ca.crt" "$out/tls.crt" >/dev/null 2>&1 || return 1
  openssl x509 -in "$out/tls.crt" -noout -checkend $((30 * 86400)) >/dev/null || return 1
  local have want n
  have="$(openssl x509 -in "$out/tls.crt" -noout -pubkey)"
  want="$(openssl pkey -in "$out/tls.key" -pubout)"
  [ "$have" = "$want" ] || return 1
  have="$(openssl x509 -in "$out/tls.crt" -noout -text)"
  for n in "${names[@]}"; do
    grep -q "DNS:$n\(,\|\$\)" <<<"$have" || return 1
  done
}

if [ ! -s "$out/ca.crt" ] || [ ! -s "$out/ca.key" ]; then
  $rotate && die "--rotate keeps the CA, but there is none in $out: run without --rotate first"
  make_ca
fi
if $rotate || ! leaf_ok; then
  make_leaf
else
  echo "make-certs: $out/tls.crt is valid; nothing to do (--rotate forces a new one)" >&2
fi

b64() { base64 < "$1" | tr -d '\n'; }
ca_b64="$(b64 "$out/ca.crt")"

cat > "$work/secret.yaml" <<EOF
# Generated by certs/make-certs.sh: do not edit, do not commit (holds a private key).
apiVersion: v1
kind: Secret
metadata:
  name: trainplace-tls
  namespace: $namespace
type: kubernetes.io/tls
data:
  tls.crt: $(b64 "$out/tls.crt")
  tls.key: $(b64 "$out/tls.key")
  ca.crt: $ca_b64
EOF
cat > "$work/ca-bundle-patch.yaml" <<EOF
# Generated by certs/make-certs.sh: the CA that signed the serving certificate.
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: trainplace
webhooks:
  - name: mutate.trainplace.io
    clientConfig:
      caBundle: $ca_b64
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: trainplace
webhooks:
  - name: validate.trainplace.io
    clientConfig:
      caBundle: $ca_b64
EOF
install_file "$work/secret.yaml" "$overlay/secret.yaml"
chmod 644 "$work/ca-bundle-patch.yaml"
install_file "$work/ca-bundle-patch.yaml" "$overlay/ca-bundle-patch.yaml"
echo "make-certs: wrote $overlay/secret.yaml and $overlay/ca-bundle-patch.yaml" >&2
