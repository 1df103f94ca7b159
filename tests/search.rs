//! The auto-scheduler: every sketch of every op, randomly annotated, lowers,
//! compiles and computes what the reference computes.

mod common;

use common::{assert_close, build, random_inputs, reduction_length, reference, small_cases};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tessera::codegen::{self, CodegenOptions};
use tessera::search::{generate_sketches, materialize, random_decisions};
use tessera::tir;

#[test]
fn every_sketch_of_every_op_annotated_at_random_equals_the_reference() {
    let seeds: u64 = std::env::var("TESSERA_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let mut checked = 0;
    for (n, (op, params)) in small_cases().iter().enumerate() {
        let dag = build(op, params);
        let sketches = generate_sketches(&dag);
        assert!(!sketches.is_empty(), "{op}: no sketch");
        for sketch in &sketches {
            for seed in 0..seeds {
                let mut rng = StdRng::seed_from_u64(seed * 7919 + n as u64);
                let decisions = random_decisions(sketch, &mut rng);
                let state = materialize(&dag, sketch, &decisions)
                    .unwrap_or_else(|e| panic!("{op}: {e}\n{decisions:?}"));
                let label = format!("{op} [{}] {decisions:?}", sketch.name);
                let func = tir::lower(&state).unwrap_or_else(|e| panic!("{label}: lowering: {e}"));
                let kernel = codegen::compile(&func, &CodegenOptions::default())
                    .unwrap_or_else(|e| panic!("{label}: compile: {e}"));
                let inputs = random_inputs(&dag, seed);
                let got = kernel
                    .run_host(&inputs)
                    .unwrap_or_else(|e| panic!("{label}: run: {e}"));
                let steps = serde_json::to_string(state.steps()).unwrap_or_default();
                assert_close(
                    &format!("{label} steps={steps}"),
                    &got,
                    &reference(&dag, &inputs),
                    reduction_length(&dag),
                );
                checked += 1;
            }
        }
    }
    println!("{checked} annotated sketches checked");
}
