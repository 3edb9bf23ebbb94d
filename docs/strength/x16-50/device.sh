#!/usr/bin/env bash
# Plays plan-x16.json (issue 50, item 5) on a 16-core machine, 14 games at once, from a kit carried beside the
# checkout, within LIMIT seconds, and leaves what this call played as $OUT/NAME.tar.xz.
#
#   bash docs/strength/x16-50/device.sh NAME LIMIT
#
# kit/kit.tar.xz (made by kit.sh) holds deeptree, Stockfish, fastchess, the for5 tree and a libstdc++ used only where
# the machine's own cannot run Stockfish; kit/prev.tar.xz, where present, is what earlier calls played (their
# tarballs untarred into one folder and tarred again), so that no chunk is played twice. Chunks of one pair (2 games);
# none starts unless its estimate (33 s a game; a pair has taken up to 92 s) ends 60 s before LIMIT; a chunk still
# playing 20 s before LIMIT is cut. A chunk without its whole result (cut, or failed) is not counted: its files move to
# incomplete/ under the call's name, the log names it, and a later call plays it again whole.
set -u
name=${1:?NAME}
limit=${2:?LIMIT}
start=$(date +%s)
root=$(cd "$(dirname "$0")/../../.." && pwd)
plan=${PLAN:-$root/docs/strength/x16-50/plan-x16.json}
jobs=${JOBS:-14}
work=/tmp/x16
out=${OUT:-/tmp/x16-results}
mkdir -p "$work" "$out"
if [ ! -x "$work/stockfish" ]; then
    python3 -m tarfile -e "$root/kit/kit.tar.xz" "$work" || exit 1
fi
if [ -f "$root/kit/prev.tar.xz" ] && [ ! -d "$work/out" ]; then
    mkdir -p "$work/out" && python3 -m tarfile -e "$root/kit/prev.tar.xz" "$work/out" || exit 1
fi
mkdir -p "$work/out"
stamp=$work/out/.stamp-$name
touch "$stamp"
sleep 1
if ! echo quit | "$work/stockfish" >/dev/null 2>&1; then
    export LD_LIBRARY_PATH=$work/lib
fi
log=$work/out/$name.log
{
    echo "call $name: $(date -u +%FT%TZ), limit $limit s, $jobs games at once"
    echo "nproc $(nproc); $(grep -m1 'model name' /proc/cpuinfo); LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    echo uci | "$work/stockfish" | grep -m1 '^id name'
} >"$log" 2>&1
export FASTCHESS=$work/fastchess DEEPTREE=$work/deeptree STOCKFISH=$work/stockfish PYTHONUNBUFFERED=1
left=$((limit - ($(date +%s) - start)))
if [ "$left" -lt 130 ]; then
    echo "only $left s of the limit left: no chunk would fit" >>"$log"
    cat "$log"
    exit 1
fi
timeout -k 5 $((left - 20)) python3 "$root/scripts/match-chunks" --plan "$plan" --jobs "$jobs" --chunk-games 2 \
    --deadline $((left - 60)) --out "$work/out" >>"$log" 2>&1
echo "match-chunks rc $? at $(date -u +%FT%TZ)" >>"$log"
# A chunk whose log lacks its whole result (cut by the limit, or failed): not counted, kept in incomplete/, played
# again whole by a later call (scripts/match-chunks' own rule, lab.matches.chunk_done: a summary of both games).
for chunk in "$work"/out/*/chunk-*.log; do
    [ -e "$chunk" ] || continue
    if ! PYTHONPATH=$root/scripts python3 -c 'import sys; from lab import matches
sys.exit(0 if matches.chunk_done(sys.argv[1], 2) else 1)' "$chunk"; then
        match=$(basename "$(dirname "$chunk")")
        kept=$work/out/incomplete/$name-$match-$(basename "$chunk" .log)
        mkdir -p "$work/out/incomplete"
        echo "not counted (cut at the limit, or failed: its rc above), kept as $kept.*: $chunk" >>"$log"
        mv "$chunk" "$kept.log"
        [ -e "${chunk%.log}.pgn" ] && mv "${chunk%.log}.pgn" "$kept.pgn"
    fi
done
cat "$log"
# What this call wrote, tarred by python (the machine may have no xz).
(cd "$work/out" && find . -type f -newer "$stamp" ! -name '.stamp-*' | sort | python3 -c '
import sys, tarfile
with tarfile.open(sys.argv[1], "w:xz") as tar:
    for line in sys.stdin:
        tar.add(line.strip())
' "$out/$name.tar.xz") || exit 1
ls -la "$out"
