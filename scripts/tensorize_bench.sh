#!/usr/bin/env bash
# Full vector width, measured in one run on this machine: for GEMM 512³ and
# 1024³, dense 64×768×3072, a ResNet conv2d layer and batch_matmul
# 12×128×128×64, tune each workload twice into one fresh database — first
# without micro-kernels (`--no-tensorize`: code Cranelift generates alone),
# then with them — and `tessera bench` the result at 1 and 2 threads. bench
# times the tuned (tensorized) kernel, the best plain one and the gemm /
# matrixmultiply crates interleaved, on the same inputs, and reports the
# fraction of the widest ISA's nominal FMA peak; for dense, whose weight a
# deployed inference kernel gets as a constant, also the schedule with the
# weight laid out ahead of time (`--constants weight`). Prints one table.
#
#   scripts/tensorize_bench.sh [TRIALS] [OUT]     (default 64, target/tensorize-bench)
set -euo pipefail
trials=${1:-64}
out=${2:-target/tensorize-bench}
mkdir -p "$out"
cargo build --release --quiet --bin tessera
tessera=target/release/tessera
db="$out/bench.db"
rm -f "$db" "$db-wal" "$db-shm"

workloads=(
  "matmul M=512,N=512,K=512"
  "matmul M=1024,N=1024,K=1024"
  "dense M=64,K=768,N=3072 weight"
  "conv2d N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1"
  "batch_matmul B=12,M=128,N=128,K=64"
)

for w in "${workloads[@]}"; do
  read -r op shape constants <<<"$w"
  echo "== $op $shape" >&2
  "$tessera" tune "$op" --shape "$shape" --trials "$trials" --db "$db" --no-pretrained --no-tensorize >"$out/$op-$shape.plain.txt"
  "$tessera" tune "$op" --shape "$shape" --trials "$trials" --db "$db" --no-pretrained >"$out/$op-$shape.tensorized.txt"
  for threads in 1 2; do
    extra=()
    if [ -n "${constants:-}" ]; then extra=(--constants "$constants"); fi
    "$tessera" bench "$op" --shape "$shape" --db "$db" --threads "$threads" --repeat 11 --json "${extra[@]}" >"$out/$op-$shape.t$threads.json"
  done
done

python3 - "$out" "${workloads[@]}" <<'PY'
import json, sys
out, workloads = sys.argv[1], sys.argv[2:]
def load(op, shape, t):
    return json.load(open(f"{out}/{op}-{shape}.t{t}.json"))
def fmt(x):
    return "-" if x is None else f"{x:.1f}"
def ratio(a, b):
    return "-" if a is None or b is None else f"{a / b:.2f}"
print("| workload | threads | tensorized | weights prepacked | plain | gemm | matrixmultiply | tensorized/plain | best/gemm | of roofline |")
print("|---|---|---|---|---|---|---|---|---|---|")
scaling = []
for w in workloads:
    op, shape = w.split(" ")[:2]
    one = None
    for t in (1, 2):
        r = load(op, shape, t)
        g, plain, pre = r["gflops"], r.get("plain_gflops"), r.get("prepacked_gflops")
        best = max(g, pre or 0)
        gemm = r["peers"].get("gemm")
        mm = r["peers"].get("matrixmultiply")
        if r["source"] != "tuned":
            sys.exit(f"{op} {shape}: bench used the {r['source']} schedule: {r['source_reason']}")
        print(f"| {op} {shape} | {t} | {fmt(g)} | {fmt(pre)} | {fmt(plain)} | {fmt(gemm)} | {fmt(mm)} | {ratio(g, plain)} "
              f"| {ratio(best, gemm)} | {100 * best / r['native_peak_gflops']:.0f}% of {r['native_peak_gflops']:.0f} ({r['native_isa']}) |")
        if t == 1:
            one = g
        else:
            scaling.append(f"{op} {shape}: 2 threads / 1 thread = {g / one:.2f}")
print()
print("\n".join(scaling))
PY
