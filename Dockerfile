# trainplace container image, for users with Docker: `trainplace serve` (the admission
# webhook) and the CLI.
#   docker build -t trainplace:0.1.0 .
# Makes the image scripts/image.sh makes without a daemon (tests/image.rs checks that
# both build the same static binary and set the same user, entrypoint, command and
# ports): the binary, with glibc linked statically, alone on an empty base, uid 65532.
# No shell and no files besides it; the chart runs it with a read-only root filesystem.

# The toolchain of rust-toolchain.toml.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# Built natively for the platform Docker builds for (amd64: x86_64, arm64: aarch64).
RUN arch="$(uname -m)" \
 && RUSTFLAGS="-C target-feature=+crt-static" cargo build --locked --profile dist \
      --target "$arch-unknown-linux-gnu" --target-dir target/static -p trainplace --bin trainplace \
 && install -D -m 0755 "target/static/$arch-unknown-linux-gnu/dist/trainplace" /out/usr/local/bin/trainplace

FROM scratch
COPY --from=build /out/ /
USER 65532:65532
WORKDIR /
# 8443: HTTPS /mutate and /validate; 8080: plain-HTTP /healthz, /readyz, /metrics.
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/trainplace"]
CMD ["serve"]
