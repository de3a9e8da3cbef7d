# trainplace container image: `trainplace serve` (the admission webhook) and the CLI.
#   docker build -t ghcr.io/trainplace/trainplace:0.1.0 .
# Runtime: distroless cc (glibc, CA roots, no shell, no package manager), uid 65532.
# The manifests use the native preStop `sleep` action because there is no shell here.

# The toolchain the lockfile is tested with (workspace rust-version is 1.85).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --profile dist --locked -p trainplace --bin trainplace \
 && install -D -m 0755 target/dist/trainplace /out/trainplace

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/trainplace /usr/local/bin/trainplace
USER 65532:65532
# 8443: HTTPS /mutate and /validate; 8080: plain-HTTP /healthz, /readyz, /metrics.
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/trainplace"]
CMD ["serve"]
