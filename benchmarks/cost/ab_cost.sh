#!/usr/bin/env bash
# The same cost run on two trees of loopscope, alternating, one process per variant
# (overhead.py), on a GPU machine: did a change move what a profile costs?
# Usage: bash benchmarks/cost/ab_cost.sh OLD_TREE OUT_DIR [overhead.py options...]
#   OLD_TREE: a copy of the older sources (git archive REV python csrc setup.py pyproject.toml
#   README.md LICENSE | tar -x -C DIR); the new tree is this checkout.  Each tree is built in
#   place (-Werror, test hooks) and imported through PYTHONPATH; the runs go old, new, old, new.
set -u -o pipefail
case "${1:-}" in -h|--help|"") sed -n '2,/^set /s/^# \{0,1\}//p' "$0" | grep -v '^set '; [ -n "${1:-}" ]; exit $? ;; esac
old=$(cd "$1" && pwd); out=$2; shift 2
new=$(pwd); mkdir -p "$out"
for tree in "$old" "$new"; do
  (cd "$tree" && LOOPSCOPE_WERROR=1 LOOPSCOPE_TEST_HOOKS=1 python3 setup.py -q build_ext --inplace \
     > "$out/build_$(basename "$tree").log" 2>&1) || { tail -20 "$out/build_$(basename "$tree").log"; exit 1; }
done
for round in 1 2; do
  for side in old new; do
    tree=$old; [ "$side" = new ] && tree=$new
    echo "== $side, round $round"
    PYTHONPATH="$tree/python" LOOPSCOPE_CACHE_DIR="/tmp/ab-cache-$side" timeout 240 python3 \
      "$new/benchmarks/cost/overhead.py" "$@" > "$out/ab_${side}_$round.txt" 2>&1
    sed -n '/rounds a variant/,$p' "$out/ab_${side}_$round.txt" | tail -n +2
  done
done
