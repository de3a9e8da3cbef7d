#!/usr/bin/env bash
# Installs what the test suite needs besides Rust: PyPI kubernetes-validate (official
# Kubernetes schemas, strict mode), PyYAML (a YAML 1.1 reader for the YAML
# round-trip tests), the AWS CLI and moto's server (the advisor's AWS calls and eksctl
# run against them on loopback, tests/aws_loopback) in .venv, Debian chromium for the advisor's browser test and HAProxy
# for the sandbox's two-replica test, and the sandbox's control plane (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, etcd, kwok), built from pinned
# sources by scripts/control-plane.sh into ~/.cache/trainplace (once; later runs reuse it),
# and helm, krew, promtool, the Training Operator, crane, actionlint and eksctl (the chart's,
# the kubectl plugin's, the chart's alert tests, the advisor's sandbox test's PyTorchJob
# controller, the image's, the release workflow's lint and the advisor's cluster configs'
# `eksctl create cluster --dry-run`), built the same way by
# scripts/go-tool.sh, and mdBook (tests/docs_book.rs builds docs/ with it), installed
# with cargo from crates.io into the same cache, keyed by version.
# Also: git and procps (`kill`), which tests run, shellcheck (actionlint runs it), and an
# open-file limit for the burst test (checked below; a limit cannot be raised for the
# later `cargo test` from here).
# As root (CI) it installs the Debian packages it needs; otherwise it names them.
# Idempotent; safe to run on a fresh machine.
#
#   scripts/test-deps.sh            everything the README's test command needs
#   scripts/test-deps.sh TOOL...    the packages and the venv, and of the built tools only
#                                   these (control-plane, helm, krew, promtool,
#                                   training-operator, crane, actionlint, mdbook): for
#                                   running one test binary, e.g. `scripts/test-deps.sh
#                                   helm promtool && cargo test --test helm_chart`
#
# The tools build at the same time, TRAINPLACE_TOOL_JOBS at once (default 2), longest
# first; each `go build` uses every core already, so more jobs mostly overlap the
# single-threaded links and the downloads. They share one Go build and module cache
# (`go env GOCACHE GOMODCACHE`), which Go locks for concurrent builds.
set -euo pipefail
cd "$(dirname "$0")/.."
KUBERNETES_VALIDATE=1.37.0
PYYAML=6.0.3
# The AWS CLI v1 (botocore validates every flag and parameter it sends) and moto's server.
AWSCLI=1.45.11
MOTO=5.2.1
# mdBook for docs/ (tests/docs_book.rs reads this pin).
MDBOOK=0.5.4
# tests/burst_memory.rs: 2,000 connections at once plus room (its OPEN_FILES).
OPEN_FILES=2512

missing=()
python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
command -v git >/dev/null 2>&1 || missing+=(git)
# actionlint runs it on the release workflow's scripts (tests/release_workflow.rs).
command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)
type -P kill >/dev/null || missing+=(procps)
# The scale test reads the audit's peak memory with it (tests/cluster/scale.rs).
[ -x /usr/bin/time ] || missing+=(time)
# The browser test runs $TRAINPLACE_CHROMIUM, else `chromium` from PATH, as here.
[ -n "${TRAINPLACE_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "missing Debian packages: ${missing[*]} (install them as root, or run this script as root)" >&2
    exit 1
  fi
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ -n "${TRAINPLACE_CHROMIUM:-}" ] && [ ! -x "$TRAINPLACE_CHROMIUM" ]; then
  echo "TRAINPLACE_CHROMIUM=$TRAINPLACE_CHROMIUM is not an executable" >&2
  exit 1
fi

if [ ! -x .venv/bin/kubernetes-validate ] \
  || [ "$(.venv/bin/kubernetes-validate --version 2>/dev/null)" != "$KUBERNETES_VALIDATE" ] \
  || ! .venv/bin/python -c "import yaml; assert yaml.__version__ == '$PYYAML'" 2>/dev/null \
  || ! .venv/bin/python -c "import awscli, moto; assert awscli.__version__ == '$AWSCLI' and moto.__version__ == '$MOTO'" 2>/dev/null \
  || [ ! -x .venv/bin/moto_server ] || [ ! -x .venv/bin/aws ]; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check "kubernetes-validate==$KUBERNETES_VALIDATE" "pyyaml==$PYYAML" \
    "awscli==$AWSCLI" "moto[server]==$MOTO"
fi

hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt "$OPEN_FILES" ]; then
  echo "the open-file hard limit is $hard; tests/burst_memory.rs needs $OPEN_FILES: raise it as root (ulimit -Hn $OPEN_FILES in the shell that runs cargo test, or nofile in /etc/security/limits.conf)" >&2
  exit 1
fi
command -v openssl >/dev/null || { echo "openssl is missing (certs/make-certs.sh and its test use it)" >&2; exit 1; }
command -v kubectl >/dev/null || { echo "kubectl is missing (the plugin and kustomize tests run the real kubectl)" >&2; exit 1; }
command -v haproxy >/dev/null || { echo "haproxy is missing (the sandbox's two-replica test balances with it)" >&2; exit 1; }
command -v go >/dev/null || { echo "go is missing: the sandbox's control plane is built from source (Go >= 1.24)" >&2; exit 1; }
all_tools=(control-plane eksctl promtool training-operator helm mdbook krew crane actionlint)
if [ "$#" -gt 0 ]; then
  for t in "$@"; do
    [[ " ${all_tools[*]} " == *" $t "* ]] || { echo "test-deps: unknown tool $t (one of: ${all_tools[*]})" >&2; exit 2; }
  done
  want=("$@")
else
  want=("${all_tools[@]}")
fi
jobs_max="${TRAINPLACE_TOOL_JOBS:-2}"
[[ "$jobs_max" =~ ^[1-9][0-9]*$ ]] || { echo "TRAINPLACE_TOOL_JOBS=$jobs_max is not a positive number" >&2; exit 2; }

build_tool() { # build_tool NAME: build (or find cached) one tool
  case "$1" in
    control-plane) scripts/control-plane.sh >/dev/null ;;
    mdbook)
      local mdbook_root="${TRAINPLACE_CACHE:-$HOME/.cache/trainplace}/mdbook-$MDBOOK"
      if [ -x "$mdbook_root/bin/mdbook" ]; then
        echo "mdbook: cached: $mdbook_root/bin/mdbook" >&2
      else
        local started
        started=$(date +%s)
        cargo install mdbook --version "$MDBOOK" --locked --no-default-features --features search \
          --root "$mdbook_root" --quiet
        echo "mdbook: built in $(( $(date +%s) - started ))s: $mdbook_root/bin/mdbook" >&2
      fi
      ;;
    *) scripts/go-tool.sh "$1" >/dev/null ;;
  esac
}

logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
started=$(date +%s)
for t in "${all_tools[@]}"; do
  [[ " ${want[*]} " == *" $t "* ]] || continue
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  echo "test-deps: $t" >&2
  ( rc=0; build_tool "$t" 2>"$logs/$t.log" || rc=$?; echo "$rc" >"$logs/$t.rc" ) &
done
wait
failed=()
for t in "${all_tools[@]}"; do
  [ -f "$logs/$t.rc" ] || continue
  cat "$logs/$t.log" >&2
  [ "$(cat "$logs/$t.rc")" = 0 ] || failed+=("$t")
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "test-deps: failed to build: ${failed[*]} (their output above)" >&2
  exit 1
fi
echo "test-deps: tools ready in $(( $(date +%s) - started ))s (${want[*]})" >&2
