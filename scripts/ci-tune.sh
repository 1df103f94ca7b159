#!/usr/bin/env bash
# The tessera CI tuning job for any CI system (.github/workflows/tune.yml runs
# the same steps). Two modes:
#
#   scripts/ci-tune.sh tune SUITE OUT [tessera ci flags…]
#       tune SUITE (or a shard of it: --shard i/n) into OUT, resuming from
#       OUT/tuning.db when the CI system restored it, then verify every
#       artifact before anything is published. Default budget:
#       --trials-per-task 32 unless the flags give one.
#
#   scripts/ci-tune.sh model MODEL.onnx OUT [tessera ci flags…]
#       tune the model's tasks into OUT, deploy them and its model artifact
#       (OUT/schedules/<device>/models/<stem>/), report its end-to-end
#       latency before and after (OUT/model_report.json), verify every
#       artifact, and run the model once from the published folder.
#
#   scripts/ci-tune.sh merge OUT SHARD_OUT…
#       combine the outputs of several shards (run on machines of one class):
#       merge their databases, deploy every device's best schedules, verify
#       them, export the log, retrain the cost model, gather the reports.
#
# TESSERA: the tessera binary to use (default: build target/release/tessera).
# Exit codes are tessera's: 3 when a workload regressed or an artifact failed
# verification, 2 on bad input.
set -euo pipefail

usage() {
    sed -n '2,24p' "$0" >&2
    exit 2
}

tessera_bin() {
    if [[ -n "${TESSERA:-}" ]]; then
        echo "$TESSERA"
    else
        cargo build --release --locked --quiet >&2
        echo "target/release/tessera"
    fi
}

# `--trials-per-task 32` unless the flags give a budget.
default_budget() {
    for arg in "$@"; do
        if [[ $arg == --trials-per-task* || $arg == --time-budget* ]]; then
            return
        fi
    done
    echo --trials-per-task 32
}

tune() {
    (($# >= 2)) || usage
    local suite=$1 out=$2
    shift 2
    local bin
    bin=$(tessera_bin)
    "$bin" ci --suite "$suite" --out "$out" $(default_budget "$@") "$@"
    "$bin" deploy --verify "$out/schedules"
}

model() {
    (($# >= 2)) || usage
    local onnx=$1 out=$2
    shift 2
    local bin
    bin=$(tessera_bin)
    "$bin" ci --onnx "$onnx" --out "$out" $(default_budget "$@") "$@"
    "$bin" deploy --verify "$out/schedules"
    "$bin" model bench "$onnx" --from "$out/schedules" --no-ort --runs 5
}

merge() {
    (($# >= 2)) || usage
    local out=$1
    shift
    local bin
    bin=$(tessera_bin)
    mkdir -p "$out/tuning_logs" "$out/cost_model"
    for shard in "$@"; do
        "$bin" cache --db "$out/tuning.db" merge "$shard/tuning.db"
    done
    "$bin" deploy --db "$out/tuning.db" --out "$out/schedules" --device all
    "$bin" deploy --verify "$out/schedules"
    "$bin" cache --db "$out/tuning.db" export --out "$out/tuning_logs/merged.jsonl"
    "$bin" cost-model --db "$out/tuning.db" train --out "$out/cost_model/merged.model"
    local n=0
    {
        echo "# tessera CI tuning report (merged from $# shards)"
        for shard in "$@"; do
            n=$((n + 1))
            if [[ -f $shard/curves.svg ]]; then
                cp "$shard/curves.svg" "$out/curves-$n.svg"
            fi
            echo
            echo "---"
            echo
            sed "s/^#/##/; s/(curves.svg)/(curves-$n.svg)/" "$shard/report.md"
        done
    } >"$out/report.md"
    echo "merged $# shard(s) into $out"
}

case "${1:-}" in
tune) shift && tune "$@" ;;
model) shift && model "$@" ;;
merge) shift && merge "$@" ;;
*) usage ;;
esac
