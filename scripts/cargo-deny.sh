#!/usr/bin/env bash
# cargo-deny at a pinned version, installed from crates.io with `cargo install --locked`
# into a cache outside the repository once (like mdBook in scripts/test-deps.sh), then run
# with the arguments given, on the workspace's deny.toml:
#
#   scripts/cargo-deny.sh check licenses bans sources    what CI checks (.ci/run, with
#                                                        --hide-inclusion-graph)
#   scripts/cargo-deny.sh check advisories               where the RustSec database can be
#                                                        fetched (GitHub); not in CI here
#   scripts/cargo-deny.sh path                           the binary's path (built or not)
#
# Progress goes to stderr. TRAINPLACE_CACHE overrides ~/.cache/trainplace.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
CARGO_DENY=0.20.2
dir="${TRAINPLACE_CACHE:-$HOME/.cache/trainplace}/cargo-deny-$CARGO_DENY"
bin="$dir/bin/cargo-deny"

if [ "${1:-}" = path ]; then
  echo "$bin"
  exit 0
fi
if [ ! -x "$bin" ]; then
  started=$(date +%s)
  echo "cargo-deny: installing $CARGO_DENY into $dir (once; several minutes cold)" >&2
  # Its own target directory: not the workspace's CARGO_TARGET_DIR.
  CARGO_TARGET_DIR="$dir/target" cargo install cargo-deny --version "$CARGO_DENY" --locked \
    --root "$dir" --quiet
  rm -rf "$dir/target"
  echo "cargo-deny: built in $(( $(date +%s) - started ))s" >&2
fi
cd "$root"
exec "$bin" --manifest-path "$root/Cargo.toml" "$@"
