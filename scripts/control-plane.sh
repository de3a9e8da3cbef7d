#!/usr/bin/env bash
# Builds the sandbox's control plane from pinned sources through the Go module proxy, once,
# into a cache outside the repository:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl  (tools/kubernetes)
#   etcd                                                             (tools/etcd)
#   kwok                                                             (tools/kwok)
# The pins are the go.mod and go.sum files under tools/. The cache directory is keyed by the
# versions and a hash of those files, so a changed pin builds anew and an unchanged one builds
# nothing.
#
#   scripts/control-plane.sh          build what is missing, print the bin directory on stdout
#   scripts/control-plane.sh path     print the bin directory (built or not)
#   scripts/control-plane.sh regen    rewrite tools/kubernetes/go.mod's replace block from
#                                     k8s.io/kubernetes's own go.mod (after changing its version)
#
# Progress goes to stderr. TRAINPLACE_CACHE overrides ~/.cache/trainplace.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="$root/tools"

module_version() { # module_version DIR MODULE -> the version DIR/go.mod requires
  awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$1/go.mod"
}
k8s_version="$(module_version "$tools/kubernetes" k8s.io/kubernetes)"
etcd_version="$(module_version "$tools/etcd" go.etcd.io/etcd/server/v3)"
kwok_version="$(module_version "$tools/kwok" sigs.k8s.io/kwok)"
# Only the control plane's own pins (tools/helm is scripts/helm.sh's); the order is the one
# the former glob tools/*/go.mod had, so existing caches keep their key.
pins_hash="$(cat "$tools"/{etcd,kubernetes,kwok}/go.mod "$tools"/{etcd,kubernetes,kwok}/go.sum | sha256sum | cut -c1-12)"
cache="${TRAINPLACE_CACHE:-$HOME/.cache/trainplace}/control-plane/k8s-$k8s_version-etcd-$etcd_version-kwok-$kwok_version-$pins_hash"
bin="$cache/bin"

log() { printf 'control-plane: %s\n' "$*" >&2; }

regen() {
  local staging proxy
  proxy="$(go env GOPROXY | cut -d, -f1)"
  staging="v0.${k8s_version#v1.}"
  log "replace block for k8s.io/kubernetes $k8s_version -> staging modules at $staging"
  local mod
  mod="$(cd "$tools/kubernetes" && go mod download -json "k8s.io/kubernetes@$k8s_version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  [ -n "$mod" ] || { log "could not download k8s.io/kubernetes@$k8s_version's go.mod through $proxy"; exit 1; }
  awk -v s="$staging" '
    /^replace \(/ { skip = 1; next }
    skip && /^\)/ { skip = 0; next }
    !skip { print }
  ' "$tools/kubernetes/go.mod" >"$tools/kubernetes/go.mod.new"
  {
    echo "replace ("
    awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' "$mod" | sort -u |
      awk -v s="$staging" '{ print "\t" $1 " => " $1 " " s }'
    echo ")"
  } >>"$tools/kubernetes/go.mod.new"
  mv "$tools/kubernetes/go.mod.new" "$tools/kubernetes/go.mod"
  (cd "$tools/kubernetes" && go mod tidy)
  log "done; commit tools/kubernetes/go.mod and go.sum"
}

build() {
  command -v go >/dev/null || { log "go is missing: the control plane is built from source with Go >= 1.24"; exit 1; }
  local want=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok) missing=0
  for b in "${want[@]}"; do [ -x "$bin/$b" ] || missing=1; done
  if [ "$missing" = 0 ]; then
    log "cached in $bin"
    echo "$bin"
    return
  fi
  # Not local: the EXIT trap runs after this function has returned.
  stage="$cache/bin.partial.$$"
  local started
  started=$(date +%s)
  rm -rf "$stage"
  mkdir -p "$stage"
  trap 'rm -rf "$stage"' EXIT
  # The version variables make the binaries report v1.34.x instead of v0.0.0: clients and
  # components that parse the server version (kubectl, the scheduler's feature gates) need them.
  local v="$k8s_version" major minor ldflags pkg
  major="${v#v}"; major="${major%%.*}"
  minor="${v#v*.}"; minor="${minor%%.*}"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  log "building Kubernetes $k8s_version (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl); cold, about 8 minutes on 2 cores"
  (cd "$tools/kubernetes" && go build -trimpath -ldflags "$ldflags" -o "$stage/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
  log "building etcd $etcd_version"
  (cd "$tools/etcd" && go build -trimpath -ldflags "-s -w" -o "$stage/etcd" go.etcd.io/etcd/server/v3)
  log "building kwok $kwok_version"
  (cd "$tools/kwok" && go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$kwok_version" -o "$stage/kwok" sigs.k8s.io/kwok/cmd/kwok)
  rm -rf "$bin"
  mv "$stage" "$bin"
  trap - EXIT
  log "built in $(( $(date +%s) - started ))s into $bin ($(du -sh "$bin" | cut -f1))"
  echo "$bin"
}

case "${1:-build}" in
  build) build ;;
  path) echo "$bin" ;;
  regen) regen ;;
  *) echo "usage: $0 [build|path|regen]" >&2; exit 2 ;;
esac
