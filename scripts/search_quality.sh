#!/usr/bin/env bash
# The auto-scheduler's quality bar, measured in one run on this machine:
# for matmul 512³, conv2d 64×56×56 (3×3, pad 1) and dense+bias+relu
# 64×768×3072, `tessera tune --trials N` with the cost model and with
# random search of the same budget (fresh databases, no pretrained model),
# against the untuned schedule and the hand-written schedules of
# examples/schedules/. Prints one table of GFLOP/s and ratios and draws
# both tuning curves of each workload into OUT/<op>.svg.
#
#   scripts/search_quality.sh [TRIALS] [OUT]     (default 200, target/quality)
set -euo pipefail
trials=${1:-200}
out=${2:-target/quality}
mkdir -p "$out"
cargo build --release --quiet --bin tessera --example compare_curves
tessera=target/release/tessera
curves=target/release/examples/compare_curves

workloads=(
  "matmul M=512,N=512,K=512 examples/schedules/matmul_tiled.json"
  "conv2d N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1 examples/schedules/conv2d_tiled.json"
  "dense_bias_relu M=64,K=768,N=3072 -"
)

field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

rows=()
for w in "${workloads[@]}"; do
  read -r op shape hand <<<"$w"
  for model in forest random; do
    rm -f "$out/$op-$model.db"
    "$tessera" tune "$op" --shape "$shape" --trials "$trials" --model "$model" \
      --no-pretrained --db "$out/$op-$model.db" --json >"$out/$op-$model.json"
  done
  "$curves" "$out/$op.svg" "$out/$op-forest.json" "$out/$op-random.json" >/dev/null
  hand_gflops=-
  if [ "$hand" != - ]; then
    "$tessera" bench "$op" --shape "$shape" --schedule "$hand" --json >"$out/$op-hand.json"
    hand_gflops=$(field "$out/$op-hand.json" gflops)
  fi
  rows+=("$op $(field "$out/$op-forest.json" default_gflops) $hand_gflops \
$(field "$out/$op-forest.json" best_gflops) $(field "$out/$op-random.json" best_gflops) \
$(field "$out/$op-forest.json" time_to_90_s)")
done

python3 - "${rows[@]}" <<'PY'
import sys
print(f"{'workload':<16}{'default':>9}{'hand':>9}{'model':>9}{'random':>9}"
      f"{'model/default':>15}{'model/hand':>12}{'model/random':>14}{'t90 s':>8}")
for row in sys.argv[1:]:
    op, default, hand, model, rand, t90 = row.split()
    default, model, rand, t90 = map(float, (default, model, rand, t90))
    hand_s = "-" if hand == "-" else f"{float(hand):.1f}"
    ratio = "-" if hand == "-" else f"{model / float(hand):.0%}"
    print(f"{op:<16}{default:>9.2f}{hand_s:>9}{model:>9.1f}{rand:>9.1f}"
          f"{model / default:>14.1f}x{ratio:>12}{model / rand:>13.2f}x{t90:>8.1f}")
print("GFLOP/s; model: evolutionary search with the forest cost model; random: random model, same budget")
PY
echo "curves: $out/*.svg"
