//! Compiled kernels compute what the reference computes: every op with the
//! default schedule and the hand-written ones, and random valid schedules.

use crate::common;

use common::{assert_close, build, random_inputs, reduction_length, reference, small_cases};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tessera::codegen::{self, CodegenOptions};
use tessera::schedule::random::{RandomScheduleStats, random_schedule_tallied};
use tessera::schedule::{State, steps_from_json};
use tessera::te::ComputeDag;
use tessera::tir;

/// Random schedules may recompute a lot; those above this many stores are
/// only compiled, not run.
const MAX_RUN_STORES: u64 = 20_000_000;

/// Compiles and runs `state`, comparing with the reference; false if the
/// program is too large to run.
fn check_state(label: &str, dag: &ComputeDag, state: &State, seed: u64) -> bool {
    let func = tir::lower(state).unwrap_or_else(|e| panic!("{label}: lowering: {e}"));
    let steps = serde_json::to_string(state.steps()).unwrap_or_default();
    let kernel = codegen::compile(&func, &CodegenOptions::default())
        .unwrap_or_else(|e| panic!("{label}: compile: {e}\nsteps={steps}\n{func}"));
    if tir::passes::store_count(&func.body) > MAX_RUN_STORES {
        return false;
    }
    let inputs = random_inputs(dag, seed);
    let want = reference(dag, &inputs);
    let got = kernel
        .run_host(&inputs)
        .unwrap_or_else(|e| panic!("{label}: run: {e}"));
    assert_close(
        &format!("{label} steps={steps}"),
        &got,
        &want,
        reduction_length(dag),
    );
    true
}

#[test]
fn default_schedule_of_every_op() {
    for (op, params) in small_cases() {
        let dag = build(op, &params);
        assert!(check_state(op, &dag, &State::new(&dag), 1));
    }
}

#[test]
fn example_schedules() {
    for (file, op, params) in [
        (
            "examples/schedules/matmul_tiled.json",
            "matmul",
            vec![("M", 64), ("N", 48), ("K", 33)],
        ),
        (
            "examples/schedules/conv2d_tiled.json",
            "conv2d",
            vec![("C", 5), ("H", 9), ("W", 11), ("K", 8)],
        ),
    ] {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{e}"));
        let steps = steps_from_json(&text).unwrap_or_else(|e| panic!("{e}"));
        let dag = build(op, &params);
        let state = State::replay(&dag, &steps).unwrap_or_else(|e| panic!("{e}"));
        assert!(check_state(file, &dag, &state, 2));
    }
}

#[test]
fn random_schedules_compile_to_the_reference() {
    let per_op: u64 = std::env::var("TESSERA_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let (mut ran, mut compiled_only) = (0, 0);
    let mut stats = RandomScheduleStats::default();
    for (n, (op, params)) in small_cases().iter().enumerate() {
        let dag = build(op, params);
        for seed in 0..per_op {
            let mut rng = StdRng::seed_from_u64(seed * 7919 + n as u64);
            let state = random_schedule_tallied(&dag, &mut rng, 12, &mut stats);
            if check_state(&format!("{op} seed {seed}"), &dag, &state, seed) {
                ran += 1;
            } else {
                compiled_only += 1;
            }
        }
    }
    // At the default 10 cases per op the rarest kind (a transposing
    // cache_read) applies about 40 times: each kind must apply at least a
    // quarter of that, scaled to the number of cases (10 at the default).
    let minimum = per_op as usize;
    eprintln!(
        "random schedules: {ran} run, {compiled_only} only compiled (too large to run); \
         steps of each kind (at least {minimum} must apply):\n{stats}"
    );
    assert!(
        ran >= 20 * per_op as usize,
        "only {ran} random schedules were run"
    );
    let thin = stats.kinds_below(minimum);
    assert!(
        thin.is_empty(),
        "step kinds that applied fewer than {minimum} times: {thin:?}\n{stats}"
    );
}

#[test]
fn long_contiguous_copies_run_as_calls_and_match() {
    // A cache's copy out (70 elements a row), and the interior rows of a
    // padded copy computed per channel (40 elements, one column in).
    let cases = [
        (
            "matmul",
            vec![("M", 70), ("N", 70), ("K", 3)],
            r#"[{"kind": "cache_write", "stage": "C"},
                {"kind": "annotate", "stage": "C", "iter": "i1", "annotation": "vectorize"}]"#,
        ),
        (
            "depthwise_conv2d",
            vec![("C", 3), ("H", 40), ("W", 40)],
            r#"[{"kind": "compute_at", "stage": "pad", "target": "depthwise_conv2d", "iter": "i1"},
                {"kind": "annotate", "stage": "pad", "iter": "i3", "annotation": "vectorize"}]"#,
        ),
    ];
    for (op, params, steps) in cases {
        let dag = build(op, &params);
        let steps = steps_from_json(steps).unwrap_or_else(|e| panic!("{op}: {e}"));
        let state = State::replay(&dag, &steps).unwrap_or_else(|e| panic!("{op}: {e}"));
        let func = tir::lower(&state).unwrap_or_else(|e| panic!("{op}: {e}"));
        let report = codegen::decisions(&func);
        assert!(
            report.vector_loops.iter().any(|l| l.copy),
            "{op}: no copy call\n{report}\n{func}"
        );
        for seed in [3, 4] {
            assert!(check_state(op, &dag, &state, seed));
        }
    }
}
