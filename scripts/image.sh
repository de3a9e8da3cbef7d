#!/usr/bin/env bash
# Builds trainplace's container image without a Docker daemon: a static Linux binary
# (glibc linked statically, `-C target-feature=+crt-static`) as the only file of one
# layer on an empty base, user 65532:65532, entrypoint the binary, `serve` as its command.
# The layer is assembled with tar and the image with crane (go-containerregistry, pinned
# in tools/crane, built by scripts/go-tool.sh) against a registry that crane serves on
# loopback for the length of the build. Nothing is pushed anywhere else.
#
#   scripts/image.sh [OUT_DIR]        default OUT_DIR: target/image-out
#
# Writes OUT_DIR/oci (an OCI image layout: `crane push OUT_DIR/oci REF`, `skopeo copy
# oci:OUT_DIR/oci ...`), OUT_DIR/trainplace-VERSION-linux-ARCH.tar (`docker load -i`),
# and OUT_DIR/trainplace (the static binary). PROFILE (default dist: whole-program LTO,
# no debug info) picks the cargo profile; tests/image.rs builds with PROFILE=dev, which
# is quicker and makes the same image apart from the binary's optimisation.
# The binary needs nothing from the image at run time. Host names resolve through the
# pod's /etc/hosts (which the kubelet mounts) and its DNS; in-cluster, the Kubernetes
# client uses KUBERNETES_SERVICE_HOST, an IP address.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/target/image-out}"
profile="${PROFILE:-dist}"
# Built natively: linux/amd64 on x86_64, linux/arm64 on aarch64.
case "$(uname -m)" in
  x86_64) arch=amd64 ;;
  aarch64) arch=arm64 ;;
  *) echo "image.sh builds on x86_64 or aarch64 Linux (uname -m: $(uname -m))" >&2; exit 1 ;;
esac
target="$(uname -m)-unknown-linux-gnu"
log() { printf 'image: %s\n' "$*" >&2; }

version="$(cargo metadata --manifest-path "$root/Cargo.toml" --format-version 1 --no-deps \
  | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "trainplace"))')"
crane="$("$root/scripts/go-tool.sh" crane)"

# A target dir of its own: the static flags would otherwise rebuild the tests' artifacts.
log "building the static binary (profile $profile)"
RUSTFLAGS="-C target-feature=+crt-static" cargo build --manifest-path "$root/Cargo.toml" \
  --locked --profile "$profile" --target "$target" --target-dir "$root/target/static" \
  -p trainplace --bin trainplace
dir=$profile; [ "$profile" = dev ] && dir=debug
bin="$root/target/static/$target/$dir/trainplace"
if readelf -l "$bin" | grep -q 'Requesting program interpreter'; then
  echo "$bin is dynamically linked; the image has no libc to load it with" >&2
  exit 1
fi

rm -rf "$out"
mkdir -p "$out/layer/usr/local/bin"
install -m 0755 "$bin" "$out/layer/usr/local/bin/trainplace"
cp "$bin" "$out/trainplace"
# Owner root and a fixed time, so the same binary makes the same layer digest.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
  -C "$out/layer" -cf "$out/layer.tar" usr
rm -rf "$out/layer"

# crane edits images in a registry: serve one on loopback, on a port it picks.
: >"$out/registry.log"
"$crane" registry serve --address 127.0.0.1:0 >>"$out/registry.log" 2>&1 &
registry=$!
trap 'kill "$registry" 2>/dev/null || true; rm -f "$out/layer.tar" "$out/registry.log"' EXIT
port=""
for _ in $(seq 100); do
  port="$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$out/registry.log" | head -1 || true)"
  [ -n "$port" ] && break
  kill -0 "$registry" 2>/dev/null || { cat "$out/registry.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "crane's registry did not say its port:" >&2; cat "$out/registry.log" >&2; exit 1; }
ref="127.0.0.1:$port/trainplace:$version"

"$crane" append --oci-empty-base -f "$out/layer.tar" -t "$ref" >/dev/null
"$crane" mutate "$ref" --set-platform "linux/$arch" \
  --entrypoint /usr/local/bin/trainplace --cmd serve \
  --user 65532:65532 --workdir / --exposed-ports 8443/tcp,8080/tcp \
  -l org.opencontainers.image.title=trainplace \
  -l org.opencontainers.image.version="$version" \
  -l org.opencontainers.image.licenses=Apache-2.0 \
  -t "$ref" >/dev/null
"$crane" pull --format oci "$ref" "$out/oci"
"$crane" pull "$ref" "$out/trainplace-$version-linux-$arch.tar"
log "digest $("$crane" digest "$ref")"
log "wrote $out/oci and $out/trainplace-$version-linux-$arch.tar ($(du -h "$out/trainplace" | cut -f1) binary)"
