#!/usr/bin/env bash
# The fast tier: the tests that need nothing but Rust (and the shell, git and `script`
# every machine has): the engine's, diagnose's and the advisor's crates, and of the
# trainplace package its unit tests and the integration tests listed below (the CLI, and
# the webhook and advisor servers in process over real sockets). No control plane, no
# kubectl, no Python, no Go tools: nothing for scripts/test-deps.sh to install.
#
#   scripts/test-fast.sh [TESTNAME-FILTER...]     arguments go to both cargo test runs
#
# The README's test command (`scripts/test-deps.sh && cargo test --workspace --locked`)
# runs everything, these included. A test that needs a tool is not listed here; one listed
# here that starts to need one fails here, which says to move it out of the list.
set -euo pipefail
cd "$(dirname "$0")/.."
pure=(
  advisor_cli advisor_existing_reservations advisor_http advisor_pinned_check
  advisor_policy_dir audit bypass capacity_block_audit capacity_block_server
  capacity_blocks cert_validity cli_habits cli_reference closed_pipe diagnose_cli dra
  import_graph inventory inventory_incremental io_threads policy_schema readme_advisor
  rolling_restart self_contained soak webhook_deadlines webhook_drain webhook_hostile
  webhook_tls
)
# One package selection, the whole workspace's, as the README's command uses: cargo
# unifies features by the packages a run selects, so selecting fewer would build the
# engine and the binary a second time. The targets are what narrows it: every library,
# binary, every integration test of the crates under crates/, and the
# trainplace package's tests listed above; then the doc tests.
shopt -s nullglob
targets=()
for f in crates/*/tests/*.rs crates/*/tests/*/main.rs; do
  name=$(basename "$f" .rs)
  [ "$name" = main ] && name=$(basename "$(dirname "$f")")
  targets+=(--test "$name")
done
for t in "${pure[@]}"; do targets+=(--test "$t"); done
cargo test --locked --workspace --lib --bins "${targets[@]}" "$@"
cargo test --locked --workspace --doc "$@"
