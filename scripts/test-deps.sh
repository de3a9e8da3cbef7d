#!/usr/bin/env bash
# Installs what the test suite needs besides Rust: PyPI kubernetes-validate (official
# Kubernetes schemas, strict mode) and PyYAML (a YAML 1.1 reader for the YAML
# round-trip tests) in .venv, Debian chromium for the advisor's browser test and HAProxy
# for the sandbox's two-replica test, and the sandbox's control plane (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, etcd, kwok), built from pinned
# sources by scripts/control-plane.sh into ~/.cache/trainplace (once; later runs reuse it),
# and helm (the chart's tests), built the same way by scripts/helm.sh.
# Idempotent; safe to run on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/kubernetes-validate ] || ! .venv/bin/python -c 'import yaml; assert yaml.__version__ == "6.0.3"' 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check kubernetes-validate==1.37.0 pyyaml==6.0.3
fi
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is missing: install the Debian package chromium (the advisor browser test needs it)" >&2
  fi
fi
missing=()
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
if [ "${#missing[@]}" -gt 0 ] && [ "$(id -u)" = 0 ]; then
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v openssl >/dev/null || { echo "openssl is missing (certs/make-certs.sh and its test use it)" >&2; exit 1; }
command -v kubectl >/dev/null || { echo "kubectl is missing (the plugin and kustomize tests run the real kubectl)" >&2; exit 1; }
command -v haproxy >/dev/null || { echo "haproxy is missing (the sandbox's two-replica test balances with it)" >&2; exit 1; }
command -v go >/dev/null || { echo "go is missing: the sandbox's control plane is built from source (Go >= 1.24)" >&2; exit 1; }
scripts/control-plane.sh >/dev/null
scripts/helm.sh >/dev/null
