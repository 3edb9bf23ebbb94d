#!/usr/bin/env bash
# Makes kit/kit.tar.xz for device.sh: deeptree (stripped), Stockfish, fastchess, the for5 tree and libstdc++.
#
#   bash docs/strength/x16-50/kit.sh DEEPTREE TREE_DIR
#
# STOCKFISH (default /usr/games/stockfish) and FASTCHESS name the others. kit/ must be ignored by git
# (.git/info/exclude): it travels with `carry`, never in a commit.
set -eu
deeptree=${1:?DEEPTREE}
tree=${2:?TREE_DIR}
root=$(cd "$(dirname "$0")/../../.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tree" "$stage/lib" "$root/kit"
cp "$deeptree" "$stage/deeptree" && strip "$stage/deeptree"
cp "${STOCKFISH:-/usr/games/stockfish}" "$stage/stockfish"
cp "${FASTCHESS:?set FASTCHESS}" "$stage/fastchess"
cp "$tree"/data.mdb "$stage/tree/"
cp -L "$(ldconfig -p | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')" "$stage/lib/libstdc++.so.6"
tar -C "$stage" -cf - deeptree stockfish fastchess tree lib | xz -9 -T2 >"$root/kit/kit.tar.xz"
ls -la "$root/kit"
