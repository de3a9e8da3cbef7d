#!/usr/bin/env bash
# Regenerates manifests/overlays/guardrails/validating-admission-policies.yaml from the
# embedded policy (policies/). tests/vap_export.rs fails when the file is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet --locked -- policy export --format vap \
  > manifests/overlays/guardrails/validating-admission-policies.yaml
echo "wrote manifests/overlays/guardrails/validating-admission-policies.yaml"
