#!/usr/bin/env bash
# Regenerates manifests/overlays/guardrails/validating-admission-policies.yaml from the
# embedded policy (policies/), and the chart's copy of it. tests/vap_export.rs and
# tests/helm_chart.rs fail when either is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
out=manifests/overlays/guardrails/validating-admission-policies.yaml
cargo run --quiet --locked -- policy export --format vap >"$out"
cp "$out" charts/trainplace/files/validating-admission-policies.yaml
echo "wrote $out and its copy in charts/trainplace/files/"
