#!/usr/bin/env bash
# Hostile reviews against a running webhook: for each shape of the engine's work-bounds
# test (one list a tenant controls grown to 1 MiB and 3 MiB), `trainplace serve`'s answer
# time, its CPU per hostile review and its peak RSS above idle, and whether a normal
# review sent at the same time stays within its usual p99. A benchmark, not a test:
# docs/performance.md holds its figures. Loopback only; stops itself.
#
#   scripts/bench-hostile.sh                 # every shape, /validate, 4 s each
#   SHAPES="Pod_var_refs Pod_env" ENDPOINT=mutate scripts/bench-hostile.sh
#
# Per shape and size: (1) the hostile review alone, one connection, closed loop for
# SECS seconds: answer p50/max and server CPU per review; the server's peak RSS
# (VmHWM of a server started for this body) less its RSS after one normal review;
# (2) the normal ~10 KB review at RATE/s on 4 connections, with the hostile loop
# running beside it on one connection: the normal review's p99 against its p99 alone.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-4}
RATE=${RATE:-200}
PROFILE=${PROFILE:-release}
ENDPOINT=${ENDPOINT:-validate}
cargo build --profile "$PROFILE" --locked --bin trainplace --example loadgen >&2
cargo build --profile "$PROFILE" --locked -p trainplace-engine --example hostile_shapes >&2
BIN=${CARGO_TARGET_DIR:-target}/$PROFILE
DIR=$(mktemp -d)
HOSTILE_WRITE="$DIR" "$BIN/examples/hostile_shapes"
TP=
start() {
  TRAINPLACE_LOG=error "$BIN/trainplace" serve --addr 127.0.0.1:18543 --probe-addr 127.0.0.1:18180 \
    --inventory off &
  TP=$!
  sleep 1
}
stop() { kill "$TP" 2>/dev/null || true; wait "$TP" 2>/dev/null || true; }
trap 'stop; rm -rf "$DIR"' EXIT
URL="https://127.0.0.1:18543/$ENDPOINT"
kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$TP/status"; }
load() { "$BIN/examples/loadgen" --url "$URL" --insecure "$@"; }
# A figure of the load generator's output: `field LINE_PATTERN`.
fig() { awk -v f="$1=" -v l="$2" '$0 ~ l { for (i = 1; i <= NF; i++) if (index($i, f) == 1) { print substr($i, length(f) + 1); exit } }'; }
start
load -c 4 -d 2 --rate "$RATE" >/dev/null # warm up
ALONE=$(load -c 4 -d "$SECS" --rate "$RATE" | fig p99 'from send')
stop
echo "normal review alone at $RATE/s: p99 from send $ALONE"
echo "| shape | MiB | hostile answer | server CPU per hostile review | peak RSS above idle | normal p99 beside it |"
echo "|---|---:|---|---|---:|---|"
for f in "$DIR"/*.json; do
  name=$(basename "$f" .json)
  shape=${name%-*}
  mib=${name##*-}
  if [ -n "${SHAPES:-}" ] && ! grep -qw "$shape" <<<"$SHAPES"; then continue; fi
  # A fresh server per body: its idle RSS after one normal review, then its peak.
  start
  load -c 1 -d 1 >/dev/null
  idle=$(kib VmRSS)
  out=$(load -c 1 -d "$SECS" --body "$f" --pid "$TP")
  peak=$(kib VmHWM)
  answer="$(fig p50 mode <<<"$out") median, $(fig max mode <<<"$out") max ($(fig requests mode <<<"$out") sent)"
  cpu=$(fig cpu/review server <<<"$out")
  load -c 1 -d "$((SECS + 1))" --body "$f" >/dev/null &
  H=$!
  sleep 0.5
  beside=$(load -c 4 -d "$SECS" --rate "$RATE" | fig p99 'from send')
  wait $H || true
  stop
  echo "| $shape | $mib | $answer | $cpu | $(((peak - idle) / 1024)) MiB | $beside |"
done
