#!/usr/bin/env bash
# Side-by-side benchmark: `trainplace serve` against the do-nothing axum+rustls
# webhook in examples/baseline.rs, same machine, same load generator, interleaved
# rounds in one run so both see the same conditions. Loopback only; stops itself.
#
#   scripts/bench-compare.sh            # 10 s per round, 2 rounds
#   SECS=30 ROUNDS=3 scripts/bench-compare.sh
#   PROFILE=release scripts/bench-compare.sh   # the quicker build (default: dist, as shipped)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-10}
ROUNDS=${ROUNDS:-2}
PROFILE=${PROFILE:-dist}
# Both servers (and the load generator) from the same profile.
cargo build --profile "$PROFILE" --locked --bin trainplace --example loadgen --example baseline >&2
BIN=${CARGO_TARGET_DIR:-target}/$PROFILE
rss() { awk '/VmRSS/ {printf "%.1f MiB", $2/1024}' "/proc/$1/status"; }

TRAINPLACE_LOG=warn "$BIN/trainplace" serve --addr 127.0.0.1:18443 --probe-addr 127.0.0.1:18080 --inventory off &
TP=$!
"$BIN/examples/baseline" 127.0.0.1:19443 2>/dev/null &
BASE=$!
trap 'kill $TP $BASE 2>/dev/null || true' EXIT
sleep 2
echo "idle RSS: trainplace $(rss $TP), baseline $(rss $BASE)"
echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)"
for port in 18443 19443; do
  "$BIN/examples/loadgen" --url "https://127.0.0.1:$port/mutate" --insecure -d 1 -c 1 --rate 20 >/dev/null
done
sleep 8
echo "idle RSS after 20 reviews each, 8 s later: trainplace $(rss $TP), baseline $(rss $BASE)"

load() { # label port extra-args...
  local label=$1 port=$2 pid=$3; shift 3
  "$BIN/examples/loadgen" --url "https://127.0.0.1:$port/mutate" --insecure -d "$SECS" \
    --pid "$pid" --label "$label" "$@"
}
for round in $(seq "$ROUNDS"); do
  echo "--- round $round: closed loop, 32 connections"
  load trainplace 18443 $TP -c 32
  load baseline 19443 $BASE -c 32
  echo "--- round $round: open loop 2000/s, 16 connections"
  load trainplace 18443 $TP -c 16 --rate 2000
  load baseline 19443 $BASE -c 16 --rate 2000
done
echo "RSS after the load: trainplace $(rss $TP), baseline $(rss $BASE)"
sleep 10
echo "RSS 10 s later: trainplace $(rss $TP), baseline $(rss $BASE)"
sleep 20
echo "RSS 30 s later: trainplace $(rss $TP), baseline $(rss $BASE)"
