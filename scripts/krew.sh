#!/usr/bin/env bash
# The kubectl plugin `kubectl trainplace` for krew (the kubectl plugin manager):
#
#   scripts/krew.sh archive BIN OS ARCH DIR
#       DIR/trainplace-OS-ARCH.tar.gz holding BIN as `trainplace` (krew links it as
#       kubectl-trainplace; the binary runs the same under either name)
#   scripts/krew.sh manifest VERSION URL_BASE ARCHIVE...
#       the krew plugin manifest on stdout: one platform per archive (os and arch from its
#       name), uri URL_BASE/<archive name>, sha256 of the archive
#
# A release uploads the archives and submits the manifest (to its own index, or to
# krew-index). Manifest format: https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest
# tests/krew_plugin.rs installs the plugin from a manifest and archive made here with the
# pinned krew (tools/krew) and runs it through kubectl.
set -euo pipefail

archive() {
  local bin="$1" os="$2" arch="$3" dir="$4" stage
  stage="$(mktemp -d)"
  trap 'rm -rf "$stage"' RETURN
  install -m 0755 "$bin" "$stage/trainplace"
  mkdir -p "$dir"
  # Reproducible: fixed order, owner and time.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$stage" -czf \
    "$dir/trainplace-$os-$arch.tar.gz" trainplace
  echo "$dir/trainplace-$os-$arch.tar.gz"
}

manifest() {
  local version="$1" base="$2"
  shift 2
  [[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]] || { echo "VERSION must be vX.Y.Z (krew wants the v)" >&2; exit 2; }
  cat <<YAML
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: trainplace
spec:
  version: $version
  shortDescription: Check and fix the layout of distributed GPU training jobs
  description: |
    trainplace judges training workloads (Jobs, JobSets, PyTorchJobs, MPIJobs, TrainJobs,
    RayClusters, ...) the way its admission webhook does, without a cluster: one pod per
    node with all GPUs and EFA interfaces, one zone, NCCL settings for the instance.
      kubectl trainplace check -f job.yaml     # allowed or denied, with the fix
      kubectl trainplace mutate -f job.yaml    # the job in the recommended layout
      kubectl trainplace audit                 # running workloads that violate policy
  platforms:
YAML
  local a name os arch sum
  for a in "$@"; do
    name="$(basename "$a")"
    [[ "$name" =~ ^trainplace-([a-z]+)-([a-z0-9]+)\.tar\.gz$ ]] || { echo "$name: not trainplace-OS-ARCH.tar.gz" >&2; exit 2; }
    os="${BASH_REMATCH[1]}"; arch="${BASH_REMATCH[2]}"
    sum="$(sha256sum "$a" | cut -d' ' -f1)"
    cat <<YAML
    - selector:
        matchLabels:
          os: $os
          arch: $arch
      uri: ${base%/}/$name
      sha256: $sum
      bin: trainplace
      files:
        - from: trainplace
          to: .
YAML
  done
}

case "${1:-}" in
  archive) shift; [ $# = 4 ] || { echo "usage: $0 archive BIN OS ARCH DIR" >&2; exit 2; }; archive "$@" ;;
  manifest) shift; [ $# -ge 3 ] || { echo "usage: $0 manifest VERSION URL_BASE ARCHIVE..." >&2; exit 2; }; manifest "$@" ;;
  *) echo "usage: $0 archive BIN OS ARCH DIR | manifest VERSION URL_BASE ARCHIVE..." >&2; exit 2 ;;
esac
