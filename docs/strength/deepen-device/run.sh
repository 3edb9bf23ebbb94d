#!/usr/bin/env bash
# Plays plan.json on a lent 16-core machine, 14 chunks at once, from the repository root:
#   BIN=.devrun bash docs/strength/deepen-device/run.sh
# BIN holds deeptree (build 9a8b1f6), fastchess, stockfish.xz (Debian's Stockfish 15.1, xz-compressed) and
# py/chess (python-chess). Every 20 s the chunks played so far are packed into $OUT/results.tgz, so a run cut
# short still returns its games.
set -u
BIN=${BIN:-.devrun}
HERE=docs/strength/deepen-device
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/$BIN/py
xz -dc "$BIN/stockfish.xz" > /tmp/stockfish && chmod +x /tmp/stockfish
tar xJf docs/strength/deepen-120/trees.tar.xz -C /tmp
export FASTCHESS=$PWD/$BIN/fastchess DEEPTREE=$PWD/$BIN/deeptree STOCKFISH=/tmp/stockfish
{ date -u; nproc; grep -m1 'model name' /proc/cpuinfo; uptime; ls /tmp/trees; echo quit | /tmp/stockfish | head -1; } \
  > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
python3 scripts/match-chunks --plan "${PLAN:-$HERE/plan.json}" --jobs "${JOBS:-14}" --deadline "${DEADLINE:-450}" --out /tmp/m \
  > "$OUT/progress.log" 2>&1 &
pid=$!
# The chunks so far into $OUT/results.tgz, replaced whole (a call cut short returns the last complete one).
pack() { nice tar czf "$OUT/partial.tgz" -C /tmp m && mv "$OUT/partial.tgz" "$OUT/results.tgz"; }
while kill -0 $pid 2>/dev/null; do
  sleep 20
  pack 2>/dev/null
  tail -1 "$OUT/progress.log"
done
wait $pid
echo "match-chunks rc $?"
pack
cp /tmp/m/summary.txt "$OUT/summary.txt"
date -u >> "$OUT/machine.txt"
cat /tmp/m/summary.txt
