#!/usr/bin/env bash
# Installs what the test suite needs besides Rust: PyPI kubernetes-validate (official
# Kubernetes schemas, strict mode) and PyYAML (a YAML 1.1 reader for the YAML
# round-trip tests) in .venv, and Debian chromium for the advisor's browser test.
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
if ! command -v openssl >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null
fi
command -v openssl >/dev/null || { echo "openssl is missing (certs/make-certs.sh and its test use it)" >&2; exit 1; }
command -v kubectl >/dev/null || { echo "kubectl is missing (the plugin and kustomize tests run the real kubectl)" >&2; exit 1; }
