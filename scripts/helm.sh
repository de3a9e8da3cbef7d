#!/usr/bin/env bash
# Builds helm from the pin in tools/helm (go.mod + go.sum) through the Go module proxy, once,
# into a cache outside the repository, the same way scripts/control-plane.sh builds the
# sandbox's control plane: the cache directory is keyed by helm's version and a hash of the
# pin files, so a changed pin builds anew and an unchanged one builds nothing.
#
#   scripts/helm.sh          build if missing, print the path of the helm binary on stdout
#   scripts/helm.sh path     print that path (built or not)
#
# Progress goes to stderr. TRAINPLACE_CACHE overrides ~/.cache/trainplace.
# The ldflags are the ones helm's own Makefile sets (version, and the Kubernetes version
# `helm lint` and `helm template` assume), from
# https://github.com/helm/helm/blob/v3.22.0/Makefile
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pin="$root/tools/helm"

module_version() { # module_version MODULE -> the version tools/helm/go.mod requires
  awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$pin/go.mod"
}
helm_version="$(module_version helm.sh/helm/v3)"
client_go_version="$(module_version k8s.io/client-go)"
pins_hash="$(cat "$pin/go.mod" "$pin/go.sum" | sha256sum | cut -c1-12)"
cache="${TRAINPLACE_CACHE:-$HOME/.cache/trainplace}/helm/helm-$helm_version-$pins_hash"
bin="$cache/bin/helm"

log() { printf 'helm: %s\n' "$*" >&2; }

build() {
  if [ -x "$bin" ]; then
    log "cached: $bin"
    echo "$bin"
    return
  fi
  command -v go >/dev/null || { log "go is missing: helm is built from source with Go >= 1.24"; exit 1; }
  local stage="$cache/bin.partial.$$" started minor ldflags
  started=$(date +%s)
  rm -rf "$stage"
  mkdir -p "$stage"
  trap 'rm -rf "$stage"' EXIT
  # client-go v0.N.x is Kubernetes 1.N.
  minor="${client_go_version#v0.}"; minor="${minor%%.*}"
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
  ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
  done
  log "building helm $helm_version (cold: a few minutes on 2 cores)"
  (cd "$pin" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$stage/helm" helm.sh/helm/v3/cmd/helm)
  rm -rf "$cache/bin"
  mv "$stage" "$cache/bin"
  trap - EXIT
  log "built in $(( $(date +%s) - started ))s: $bin ($(du -sh "$bin" | cut -f1))"
  echo "$bin"
}

case "${1:-build}" in
  build) build ;;
  path) echo "$bin" ;;
  *) echo "usage: $0 [build|path]" >&2; exit 2 ;;
esac
