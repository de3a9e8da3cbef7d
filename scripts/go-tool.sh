#!/usr/bin/env bash
# Builds a pinned Go command-line tool through the Go module proxy, once, into a cache
# outside the repository, the way scripts/control-plane.sh builds the sandbox's control
# plane. The pin is tools/TOOL/go.mod + go.sum; the cache directory is keyed by the tool's
# version and a hash of those files, so a changed pin builds anew and an unchanged one
# builds nothing.
#
#   scripts/go-tool.sh TOOL          build if missing, print the binary's path on stdout
#   scripts/go-tool.sh TOOL path     print that path (built or not)
#
# TOOL: helm (the chart's tests), krew (the kubectl plugin manifest's test), promtool
# (the chart's PrometheusRule alerts), training-operator (the PyTorchJob controller the
# advisor's sandbox test runs), crane (the container image, scripts/image.sh) and actionlint
# (the release workflow's lint) and eksctl (the advisor's cluster configs, checked with
# `eksctl create cluster --dry-run`).
# Progress goes to stderr. TRAINPLACE_CACHE overrides ~/.cache/trainplace.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tool="${1:?usage: $0 helm|krew|promtool|training-operator|crane|actionlint|eksctl [build|path]}"
pin="$root/tools/$tool"

module_version() { # module_version MODULE -> the version tools/TOOL/go.mod requires
  awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$pin/go.mod"
}

case "$tool" in
  helm)
    # The ldflags helm's own Makefile sets (version, and the Kubernetes version `helm lint`
    # and `helm template` assume: client-go v0.N is Kubernetes 1.N), from
    # https://github.com/helm/helm/blob/v3.22.0/Makefile
    module=helm.sh/helm/v3
    cold="88 s"
    package=helm.sh/helm/v3/cmd/helm
    version="$(module_version "$module")"
    minor="$(module_version k8s.io/client-go)"; minor="${minor#v0.}"; minor="${minor%%.*}"
    ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
    ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
    for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
      ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
    done
    ;;
  krew)
    # The version variable krew's release build sets, from
    # https://github.com/kubernetes-sigs/krew/blob/v0.4.3/hack/make-binaries.sh
    module=sigs.k8s.io/krew
    cold="20 s"
    package=sigs.k8s.io/krew/cmd/krew
    version="$(module_version "$module")"
    ldflags="-s -w -X sigs.k8s.io/krew/internal/version.gitTag=$version"
    ;;
  promtool)
    # Prometheus's rule checker; the version variable Prometheus's release build (promu)
    # sets, github.com/prometheus/common/version.Version
    # (https://github.com/prometheus/prometheus/blob/main/.promu.yml).
    # `remove_all_sd` leaves out every optional service discovery (AWS, Azure, GCE,
    # Consul...; file, static and HTTP stay), Prometheus's own build tag for smaller
    # builds (README.md, "Service discovery plugins", and plugins/plugin_*.go:
    # `//go:build !remove_all_sd || enable_<name>_sd`). The tests run `promtool check
    # rules` and `promtool test rules`, which discover nothing.
    module=github.com/prometheus/prometheus
    tags=remove_all_sd
    cold="8 minutes"
    package=github.com/prometheus/prometheus/cmd/promtool
    version="$(module_version "$module")"
    # The module is versioned v0.3XX.Y for Prometheus 3.XX.Y; its VERSION file says which.
    ldflags="-s -w -X github.com/prometheus/common/version.Version=@VERSION_FILE@"
    ;;
  training-operator)
    # The Kubeflow Training Operator v1 (PyTorchJob) controller: tests/cluster/advisor.rs runs
    # it against the sandbox, out of the cluster, as the advisor's plans install it.
    module=github.com/kubeflow/training-operator
    cold="4 minutes"
    package=github.com/kubeflow/training-operator/cmd/training-operator.v1
    version="$(module_version "$module")"
    ldflags="-s -w"
    ;;
  crane)
    # go-containerregistry's crane: scripts/image.sh assembles the image with it. The
    # version variable its release build sets, from
    # https://github.com/google/go-containerregistry/blob/v0.22.1/cmd/crane/cmd/version.go
    module=github.com/google/go-containerregistry
    cold="20 s"
    package=github.com/google/go-containerregistry/cmd/crane
    version="$(module_version "$module")"
    ldflags="-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$version"
    ;;
  actionlint)
    # The GitHub Actions workflow linter (tests/release_workflow.rs); the version variable
    # its release build sets, from https://github.com/rhysd/actionlint/blob/v1.7.12/.goreleaser.yaml
    module=github.com/rhysd/actionlint
    cold="15 s"
    package=github.com/rhysd/actionlint/cmd/actionlint
    version="$(module_version "$module")"
    ldflags="-s -w -X github.com/rhysd/actionlint.version=$version"
    ;;
  eksctl)
    # The version variables eksctl's release build sets (PreReleaseID is "dev" in the
    # module's source and empty in a release; gitCommit, a commit hash there, is the
    # module's version here: the module proxy's zip carries no commit), from
    # https://github.com/eksctl-io/eksctl/blob/v0.215.0/Makefile and
    # https://github.com/eksctl-io/eksctl/blob/v0.215.0/pkg/version/release.go
    module=github.com/weaveworks/eksctl
    cold="10 minutes"
    package=github.com/weaveworks/eksctl/cmd/eksctl
    version="$(module_version "$module")"
    ldflags="-s -w -X github.com/weaveworks/eksctl/pkg/version.PreReleaseID="
    ldflags+=" -X github.com/weaveworks/eksctl/pkg/version.gitCommit=$version"
    ;;
  *) echo "unknown tool $tool (helm, krew, promtool, training-operator, crane, actionlint, eksctl)" >&2; exit 2 ;;
esac

# Build tags are part of the key (a tool built without them keeps its old key).
pins_hash="$( { cat "$pin/go.mod" "$pin/go.sum"; [ -z "${tags:-}" ] || echo "tags=$tags"; } | sha256sum | cut -c1-12)"
cache="${TRAINPLACE_CACHE:-$HOME/.cache/trainplace}/$tool/$tool-$version-$pins_hash"
bin="$cache/bin/$tool"

log() { printf '%s: %s\n' "$tool" "$*" >&2; }

build() {
  if [ -x "$bin" ]; then
    log "cached: $bin"
    echo "$bin"
    return
  fi
  command -v go >/dev/null || { log "go is missing: $tool is built from source with Go >= 1.24"; exit 1; }
  # Not local: the EXIT trap runs after this function has returned.
  stage="$cache/bin.partial.$$"
  local started
  started=$(date +%s)
  rm -rf "$stage"
  mkdir -p "$stage"
  trap 'rm -rf "$stage"' EXIT
  if [[ "$ldflags" == *@VERSION_FILE@* ]]; then
    local dir
    dir="$(cd "$pin" && go mod download -json "$module" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
    ldflags="${ldflags//@VERSION_FILE@/$(cat "$dir/VERSION")}"
  fi
  log "building $module $version (cold: $cold on 2 cores)"
  (cd "$pin" && CGO_ENABLED=0 go build -trimpath -tags "${tags:-}" -ldflags "$ldflags" -o "$stage/$tool" "$package")
  rm -rf "${cache:?}/bin"
  mv "$stage" "$cache/bin"
  trap - EXIT
  log "built in $(( $(date +%s) - started ))s: $bin ($(du -sh "$bin" | cut -f1))"
  echo "$bin"
}

case "${2:-build}" in
  build) build ;;
  path) echo "$bin" ;;
  *) echo "usage: $0 helm|krew|promtool|training-operator|crane|actionlint|eksctl [build|path]" >&2; exit 2 ;;
esac
