//! Reductions along a row: the vector-reduce sketches of the normalisation
//! operators, randomly filled at odd shapes (rows not a multiple of the
//! vector width), through the IR interpreter and the JIT against the
//! reference; vectorized reduction loops with lane-wise accumulators, their
//! tails, and their serial fallback under bit-stable floating point.

use crate::common;

use common::{assert_close, build, random_inputs, reduction_length, reference};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tessera::codegen::{self, CodegenOptions};
use tessera::runtime::Target;
use tessera::schedule::{State, steps_from_json};
use tessera::search::{generate_sketches, materialize, random_decisions};
use tessera::te::ComputeDag;
use tessera::tir;

/// Lowers `state`, runs it through the IR interpreter and the JIT (with
/// `options`) and compares both with the reference; returns the vectorized
/// loops code generation runs as lane-wise reductions.
fn check(label: &str, dag: &ComputeDag, state: &State, options: &CodegenOptions) -> usize {
    let steps = serde_json::to_string(state.steps()).unwrap_or_default();
    let label = format!("{label} steps={steps}");
    let func = tir::lower(state).unwrap_or_else(|e| panic!("{label}: lowering: {e}"));
    let inputs = random_inputs(dag, 5);
    let want = reference(dag, &inputs);
    let interpreted = tir::run(&func, &inputs).unwrap_or_else(|e| panic!("{label}: IR: {e}"));
    assert_close(
        &format!("{label} (IR)"),
        &interpreted,
        &want,
        reduction_length(dag),
    );
    let kernel = codegen::compile(&func, options)
        .unwrap_or_else(|e| panic!("{label}: compile: {e}\n{func}"));
    let got = kernel
        .run_host(&inputs)
        .unwrap_or_else(|e| panic!("{label}: run: {e}"));
    assert_close(
        &format!("{label} (JIT)"),
        &got,
        &want,
        reduction_length(dag),
    );
    codegen::decisions(&func)
        .vector_loops
        .iter()
        .filter(|l| l.plan.is_some_and(|p| p.accumulators > 0))
        .count()
}

fn replay(dag: &ComputeDag, json: &str) -> State {
    let steps = steps_from_json(json).unwrap_or_else(|e| panic!("{e}"));
    State::replay(dag, &steps).unwrap_or_else(|e| panic!("{e}"))
}

/// The normalisations at shapes whose rows are no multiple of 4 lanes.
fn odd_cases() -> Vec<(&'static str, Vec<(&'static str, i64)>)> {
    vec![
        ("softmax", vec![("M", 5), ("N", 37)]),
        ("softmax", vec![("M", 3), ("N", 70)]),
        ("layer_norm", vec![("M", 3), ("N", 41)]),
        ("layer_norm", vec![("M", 2), ("N", 7)]),
        ("norm", vec![("B", 2), ("M", 3), ("N", 19)]),
    ]
}

#[test]
fn normalisations_get_row_reductions_at_the_root_and_in_their_consumer() {
    let target = Target::from_env();
    let names = |op: &str, params: &[(&str, i64)]| -> Vec<String> {
        generate_sketches(&build(op, params), &target)
            .into_iter()
            .map(|s| s.name)
            .collect()
    };
    let softmax = names("softmax", &[("M", 128), ("N", 1024)]);
    assert!(
        softmax
            .iter()
            .any(|n| n.contains("row_max:vector_reduce@exp")),
        "{softmax:?}"
    );
    // row_sum is read by the per-row reciprocal, no longer by softmax
    // itself: it joins softmax's row loop with the whole chain.
    assert!(
        softmax.iter().any(|n| n.contains("row_sum:vector_reduce ")
            && n.contains("softmax:row_fusion(row_inv,row_sum,exp,row_max)")),
        "{softmax:?}"
    );
    assert!(
        softmax.iter().any(|n| n.contains("row_max:vector_reduce ")),
        "{softmax:?}"
    );
    // The per-row reciprocal stays a stage of its own (not inlined per element).
    assert!(
        softmax.iter().all(|n| n.contains("row_inv:simple")),
        "{softmax:?}"
    );
    let layer_norm = names("layer_norm", &[("M", 128), ("N", 1024)]);
    // The mean has two consumers: alone, it stays at the root; with the
    // variance and rstd it joins layer_norm's row loop.
    assert!(
        layer_norm.iter().any(|n| n.contains("mean:vector_reduce ")
            && n.contains("variance:vector_reduce ")
            && n.contains("layer_norm:row_fusion(rstd,variance,mean)")),
        "{layer_norm:?}"
    );
    assert!(!layer_norm.iter().any(|n| n.contains("mean:vector_reduce@")));
}

#[test]
fn random_fills_of_every_sketch_match_the_reference() {
    let target = Target::from_env();
    let options = CodegenOptions::default();
    let mut lane_wise = 0;
    for (op, params) in odd_cases() {
        let dag = build(op, &params);
        for sketch in generate_sketches(&dag, &target) {
            for seed in 0..4 {
                let mut rng = StdRng::seed_from_u64(seed);
                let decisions = random_decisions(&sketch, &mut rng);
                let label = format!("{op} {params:?} [{}] {decisions:?}", sketch.name);
                let state = materialize(&dag, &sketch, &decisions)
                    .unwrap_or_else(|e| panic!("{label}: {e}"));
                lane_wise += check(&label, &dag, &state, &options);
            }
        }
    }
    assert!(
        lane_wise >= 10,
        "only {lane_wise} lane-wise reduction loops"
    );
}

#[test]
fn vectorized_reduction_loops_with_tails_and_rounds_match_the_reference() {
    let options = CodegenOptions::default();
    // N = 3: shorter than a vector; 23: one round of 4 accumulators, one
    // more chunk, 3 scalar iterations; 64: 4 rounds in a loop; 1029: 257
    // chunks (rounds, one leftover chunk) and a 1-element tail.
    for n in [3, 23, 64, 1029] {
        let dag = build("softmax", &[("M", 3), ("N", n)]);
        let state = replay(
            &dag,
            r#"[{"kind": "annotate", "stage": "row_max", "iter": "k", "annotation": "vectorize"},
                {"kind": "annotate", "stage": "row_sum", "iter": "k", "annotation": "vectorize"}]"#,
        );
        let lane_wise = check(&format!("softmax N={n}"), &dag, &state, &options);
        assert_eq!(lane_wise, if n < 4 { 0 } else { 2 }, "N={n}");
    }
}

#[test]
fn a_reduction_computed_in_its_consumers_row_loop_matches_the_reference() {
    let dag = build("softmax", &[("M", 6), ("N", 45)]);
    let state = replay(
        &dag,
        r#"[{"kind": "compute_at", "stage": "row_max", "target": "exp", "iter": "i0"},
            {"kind": "compute_at", "stage": "row_inv", "target": "softmax", "iter": "i0"},
            {"kind": "compute_at", "stage": "row_sum", "target": "softmax", "iter": "i0"},
            {"kind": "annotate", "stage": "row_max", "iter": "k", "annotation": "vectorize"},
            {"kind": "annotate", "stage": "row_sum", "iter": "k", "annotation": "vectorize"},
            {"kind": "annotate", "stage": "exp", "iter": "i0", "annotation": "parallel"},
            {"kind": "annotate", "stage": "softmax", "iter": "i0", "annotation": "parallel"}]"#,
    );
    let lane_wise = check("softmax fused", &dag, &state, &CodegenOptions::default());
    assert_eq!(lane_wise, 2);
}

#[test]
fn bit_stable_floating_point_keeps_sums_serial() {
    let strict = CodegenOptions {
        strict_fp: true,
        ..CodegenOptions::default()
    };
    let dag = build("softmax", &[("M", 4), ("N", 50)]);
    let vectorized = replay(
        &dag,
        r#"[{"kind": "annotate", "stage": "row_max", "iter": "k", "annotation": "vectorize"},
            {"kind": "annotate", "stage": "row_sum", "iter": "k", "annotation": "vectorize"}]"#,
    );
    check("softmax strict", &dag, &vectorized, &strict);
    // Max is exact lane-wise; the sum, run serially, rounds as the default
    // schedule does: the outputs agree bit for bit.
    let inputs = random_inputs(&dag, 9);
    let run = |state: &State| {
        let func = tir::lower(state).unwrap_or_else(|e| panic!("{e}"));
        codegen::compile(&func, &strict)
            .unwrap_or_else(|e| panic!("{e}"))
            .run_host(&inputs)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let (lane_wise, serial) = (run(&vectorized), run(&State::new(&dag)));
    assert_eq!(lane_wise[0].to_f64_vec(), serial[0].to_f64_vec());
}

/// `max` and `min` give the other operand where one is NaN, as the
/// reference (Rust's `f32::max`) does: scalar code, vector chunks with a
/// scalar tail, window reductions and lane-wise row reductions.
#[test]
fn a_nan_operand_of_max_and_min_gives_the_other_one_as_in_the_reference() {
    use tessera::te::{DType, compute, placeholder, reduce_axis, reduce_max};
    let x = placeholder("x", &[3, 10], DType::F32);
    let k = reduce_axis(10, "k");
    let row_max = compute("row_max", &[3], |ix| reduce_max(x.at([&ix[0], &k]), [&k]));
    let clipped = compute("clipped", &[3, 10], |ix| {
        tessera::te::min(
            tessera::te::max(x.at([&ix[0], &ix[1]]), row_max.at([&ix[0]])),
            0.5,
        )
    });
    let row_dag = ComputeDag::new(&[x], &[clipped]).expect("dag");
    let cases = [
        (build("relu", &[("M", 3), ("N", 10)]), "[]"),
        (
            build("relu", &[("M", 3), ("N", 10)]),
            r#"[{"kind":"split","stage":"relu","iter":"i1","factors":[4]},
                {"kind":"annotate","stage":"relu","iter":"i1.1","annotation":"vectorize"}]"#,
        ),
        (
            build(
                "max_pool2d",
                &[
                    ("N", 1),
                    ("C", 2),
                    ("H", 9),
                    ("W", 9),
                    ("R", 3),
                    ("S", 3),
                    ("stride", 1),
                    ("pad", 1),
                ],
            ),
            r#"[{"kind":"reorder","stage":"max_pool2d","order":["i0","i1","i2","rr","rs","i3"]},
                {"kind":"split","stage":"max_pool2d","iter":"i3","factors":[4]},
                {"kind":"annotate","stage":"max_pool2d","iter":"i3.1","annotation":"vectorize"}]"#,
        ),
        (row_dag.clone(), "[]"),
        (
            row_dag,
            r#"[{"kind":"annotate","stage":"row_max","iter":"k","annotation":"vectorize"},
                {"kind":"split","stage":"clipped","iter":"i1","factors":[4]},
                {"kind":"annotate","stage":"clipped","iter":"i1.1","annotation":"vectorize"}]"#,
        ),
    ];
    for (dag, json) in cases {
        let state = replay(&dag, json);
        let func = tir::lower(&state).unwrap_or_else(|e| panic!("{json}: {e}"));
        let mut inputs = random_inputs(&dag, 9);
        let data = inputs[0].as_f32_mut().expect("f32");
        for i in (0..data.len()).step_by(3) {
            data[i] = f32::NAN;
        }
        let want = reference(&dag, &inputs);
        assert!(
            want.iter()
                .all(|t| t.as_f32().expect("f32").iter().all(|v| !v.is_nan())),
            "{json}: the reference ignores NaN operands"
        );
        let kernel = codegen::compile(&func, &CodegenOptions::default())
            .unwrap_or_else(|e| panic!("{json}: {e}"));
        let got = kernel.run_host(&inputs).unwrap_or_else(|e| panic!("{e}"));
        assert_close(json, &got, &want, reduction_length(&dag));
    }
}
