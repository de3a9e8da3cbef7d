#!/usr/bin/env bash
# Side-by-side benchmark: `trainplace serve` against two do-nothing axum+rustls
# webhooks from examples/baseline.rs, same machine, same load generator,
# interleaved rounds in one run so all see the same conditions. Loopback only;
# stops itself.
#   baseline        parses the review into a serde_json::Value (the cheapest read)
#   baseline-typed  axum's Json extractor into kube-core's AdmissionReview<DynamicObject>,
#                   answered with AdmissionResponse::from(&request): the do-nothing
#                   webhook kube-rs's admission module leads to
#
#   scripts/bench-compare.sh            # 10 s per round, 2 rounds
#   SECS=30 ROUNDS=3 scripts/bench-compare.sh
#   PROFILE=release scripts/bench-compare.sh   # the quicker build (default: dist, as shipped)
#   ENDPOINT=validate scripts/bench-compare.sh
#   TRAINPLACE_ARGS="--io-threads 1" scripts/bench-compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-10}
ROUNDS=${ROUNDS:-2}
PROFILE=${PROFILE:-dist}
ENDPOINT=${ENDPOINT:-mutate}
# All servers (and the load generator) from the same profile.
cargo build --profile "$PROFILE" --locked --bin trainplace --example loadgen --example baseline >&2
BIN=${CARGO_TARGET_DIR:-target}/$PROFILE
rss() { awk '/VmRSS/ {printf "%.1f MiB", $2/1024}' "/proc/$1/status"; }
OUT=$(mktemp)

# shellcheck disable=SC2086 # TRAINPLACE_ARGS is a list of flags
TRAINPLACE_LOG=warn "$BIN/trainplace" serve --addr 127.0.0.1:18443 --probe-addr 127.0.0.1:18080 \
  --inventory off ${TRAINPLACE_ARGS:-} &
TP=$!
"$BIN/examples/baseline" 127.0.0.1:19443 2>/dev/null &
BASE=$!
"$BIN/examples/baseline" 127.0.0.1:19444 typed 2>/dev/null &
TYPED=$!
trap 'kill $TP $BASE $TYPED 2>/dev/null || true; rm -f "$OUT"' EXIT
sleep 2
rss_all() { echo "trainplace $(rss $TP), baseline $(rss $BASE), baseline-typed $(rss $TYPED)"; }
echo "idle RSS: $(rss_all)"
echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)"
for port in 18443 19443 19444; do
  "$BIN/examples/loadgen" --url "https://127.0.0.1:$port/$ENDPOINT" --insecure -d 1 -c 1 --rate 20 >/dev/null
done
sleep 8
echo "idle RSS after 20 reviews each, 8 s later: $(rss_all)"

load() { # label port pid extra-args...
  local label=$1 port=$2 pid=$3; shift 3
  "$BIN/examples/loadgen" --url "https://127.0.0.1:$port/$ENDPOINT" --insecure -d "$SECS" \
    --pid "$pid" --label "$label" "$@" | tee -a "$OUT"
}
for round in $(seq "$ROUNDS"); do
  echo "--- round $round: closed loop, 32 connections"
  load trainplace 18443 $TP -c 32
  load baseline 19443 $BASE -c 32
  load baseline-typed 19444 $TYPED -c 32
  echo "--- round $round: open loop 2000/s, 16 connections"
  load trainplace 18443 $TP -c 16 --rate 2000
  load baseline 19443 $BASE -c 16 --rate 2000
  load baseline-typed 19444 $TYPED -c 16 --rate 2000
done
echo "RSS after the load: $(rss_all)"

# trainplace over each baseline, per round: reviews/s and CPU per review in the closed
# loop, p99 from send in the open loop (targets against each baseline: reviews/s
# >= 0.95x, CPU per review <= 1.10x, p99 <= 1.1x).
awk '
  /^[a-z-]+ mode=/ { label = $1; mode = ($2 == "mode=closed") ? "closed" : "open"
                     n[label, mode]++; key = label SUBSEP mode SUBSEP n[label, mode]
                     for (i = 2; i <= NF; i++) if ($i ~ /^rps=/) rps[key] = substr($i, 5) }
  /^  server:/     { for (i = 2; i <= NF; i++) if ($i ~ /^cpu\/review=/) { v = substr($i, 12); sub(/us$/, "", v); cpu[key] = v } }
  /^  from send:/  { v = $4; sub(/^p99=/, "", v); sub(/ms$/, "", v); p99[key] = v }
  END {
    print "--- trainplace / baseline, per round (closed: reviews/s, CPU per review; open: p99 from send)"
    for (r = 1; r <= n["trainplace", "closed"]; r++)
      for (b = 1; b <= 2; b++) {
        base = (b == 1) ? "baseline" : "baseline-typed"
        c = "trainplace" SUBSEP "closed" SUBSEP r; bc = base SUBSEP "closed" SUBSEP r
        o = "trainplace" SUBSEP "open" SUBSEP r; bo = base SUBSEP "open" SUBSEP r
        printf "round %d vs %-15s reviews/s %.2f  cpu/review %.2f  open-loop p99 %.2f\n", r, base,
          rps[c] / rps[bc], cpu[c] / cpu[bc], p99[o] / p99[bo]
      }
  }' "$OUT"
sleep 10
echo "RSS 10 s later: $(rss_all)"
sleep 20
echo "RSS 30 s later: $(rss_all)"
