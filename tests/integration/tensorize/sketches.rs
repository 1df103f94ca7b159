//! The tensorized sketches of every eligible suite op, randomly filled,
//! under every ISA cap the machine allows, against the reference.

use super::step::{check_tensorized, steps};
use super::*;

use common::{assert_close as assert_tensors_close, build, random_inputs, reference};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tessera::schedule::{ComputeAt, State, Step, StepErrorKind};
use tessera::search::{Sketch, Suite, generate_sketches, materialize, random_decisions};
use tessera::te::ComputeDag;
use tessera::tir;

/// The quick suite's ops whose main stage is a GEMM-shaped contraction the
/// micro-kernels can compute (directly, through a transposing pack, or as
/// an implicit GEMM over a padded input). The others (grouped, depthwise
/// and transposed convolutions, pooling, normalisation, elementwise) have
/// no m axis A reads and B does not, or a strided B.
const ELIGIBLE: [&str; 15] = [
    "matmul",
    "matmul_nt",
    "batch_matmul",
    "dense",
    "dense_bias",
    "dense_bias_relu",
    "conv1d",
    "conv2d",
    "conv2d_bias",
    "conv2d_nhwc",
    "conv2d_nhwc_bias",
    "conv3d",
    "conv2d_capsule",
    "conv2d_bn_relu",
    "transpose_batch_matmul",
];

/// Fills `sketch` of `dag` with the random decisions of `seed`, checks the
/// schedule against the reference on `target`, and returns it for further
/// checks.
fn check_filled(
    target: &Target,
    label: &str,
    dag: &ComputeDag,
    sketch: &Sketch,
    seed: u64,
) -> State {
    let decisions = random_decisions(sketch, &mut StdRng::seed_from_u64(seed));
    let state = materialize(dag, sketch, &decisions)
        .unwrap_or_else(|e| panic!("{label} [{}]: {e}", sketch.name));
    check_tensorized(
        target,
        &format!("{label} [{}] {decisions:?}", sketch.name),
        dag,
        state.steps(),
    );
    state
}

/// Fills every tensorized sketch of `dag` at random `seeds` times and
/// checks each against the reference, all for `target`; returns how many
/// sketches there were.
fn check_tensorized_sketches(target: &Target, label: &str, dag: &ComputeDag, seeds: u64) -> usize {
    // Micro-kernel sketches; the stencil ones (a depthwise window's rows)
    // are checked in `tensorize::stencil`.
    let sketches: Vec<_> = generate_sketches(dag, target)
        .into_iter()
        .filter(|s| s.name.contains(":tensorize(") && !s.name.contains("_stencil)"))
        .collect();
    for sketch in &sketches {
        for seed in 0..seeds {
            check_filled(target, label, dag, sketch, seed);
        }
    }
    sketches.len()
}

#[test]
fn tensorized_sketches_of_every_eligible_suite_op_match_the_reference_at_every_isa() {
    let suite = Suite::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/suites/quick.json"
    )))
    .expect("quick suite");
    let host = host();
    for &isa in coverage().covered() {
        let target = host.with_isa_cap(isa);
        for w in &suite.workloads {
            let spec = tessera::ops::find(&w.op).expect("op");
            let dag = spec
                .build(&spec.parse_shape(&w.shape).expect("shape"))
                .expect("dag");
            let label = format!("{} {} (ISA cap {})", w.op, w.shape, isa.name());
            let count = check_tensorized_sketches(&target, &label, &dag, 1);
            assert_eq!(
                count > 0,
                ELIGIBLE.contains(&w.op.as_str()),
                "{label}: {count} tensorized sketches"
            );
        }
    }
}

#[test]
fn tensorized_sketches_of_odd_shapes_match_the_reference() {
    let mut checked = 0;
    for (op, params) in common::small_cases() {
        let dag = build(op, &params);
        checked += check_tensorized_sketches(&host(), &format!("{op} {params:?}"), &dag, 3);
    }
    assert!(checked >= ELIGIBLE.len(), "{checked} sketches");
}

#[test]
fn a_transposing_pack_reads_the_weight_as_its_layout_says() {
    let dag = build("matmul_nt", &[("M", 5), ("N", 7), ("K", 3)]);
    let state = State::replay(
        &dag,
        &steps(r#"[{"kind":"cache_read","stage":"B","readers":["C"],"layout":[1,0]}]"#),
    )
    .expect("applies");
    let packed = state
        .stages()
        .iter()
        .find(|s| s.name == "B.local")
        .expect("B.local");
    assert_eq!(packed.tensor.shape(), &[3, 7], "B[7, 3] stored as [3, 7]");
    let func = tir::lower(&state).expect("lowers");
    let inputs = random_inputs(&dag, 3);
    let got = tir::run(&func, &inputs).expect("runs");
    assert_tensors_close(
        "matmul_nt packed transposed",
        &got,
        &reference(&dag, &inputs),
        3,
    );
    for (layout, what) in [("[0]", "[0]"), ("[0,0]", "[0, 0]"), ("[1,2]", "[1, 2]")] {
        let json =
            format!(r#"[{{"kind":"cache_read","stage":"B","readers":["C"],"layout":{layout}}}]"#);
        let e = match State::replay(&dag, &steps(&json)) {
            Err(e) => {
                assert!(matches!(e.kind, StepErrorKind::BadLayout { .. }), "{e}");
                e.to_string()
            }
            Ok(_) => panic!("{json} applied"),
        };
        assert!(
            e.contains(&format!(
                "layout {what} is not a permutation of the 2 dimensions of 'B'"
            )),
            "{e}"
        );
    }
}

#[test]
fn a_prime_reduction_is_tensorized_with_an_edge_block_of_k() {
    let dag = build("matmul", &[("M", 16), ("N", 32), ("K", 1031)]);
    let count = check_tensorized_sketches(&host(), "matmul 16x32x1031", &dag, 2);
    assert!(count > 0, "no tensorized sketch");
}

#[test]
fn strided_and_padded_convolutions_are_tensorized_through_a_panel_or_a_transposed_accumulator() {
    // (NHWC convolutions read the strided input as A, which the kernels
    // read at any stride: they need no panel.)
    let cases: [(&str, Vec<(&str, i64)>); 3] = [
        (
            "conv2d",
            vec![
                ("N", 1),
                ("C", 5),
                ("H", 9),
                ("W", 11),
                ("K", 7),
                ("R", 1),
                ("S", 1),
                ("stride", 2),
                ("pad", 0),
                ("dilation", 1),
            ],
        ),
        (
            "conv2d",
            vec![
                ("N", 2),
                ("C", 3),
                ("H", 10),
                ("W", 9),
                ("K", 5),
                ("R", 3),
                ("S", 3),
                ("stride", 2),
                ("pad", 1),
                ("dilation", 1),
            ],
        ),
        (
            "conv1d",
            vec![
                ("N", 1),
                ("C", 4),
                ("L", 23),
                ("K", 3),
                ("R", 3),
                ("stride", 3),
                ("pad", 2),
                ("dilation", 2),
            ],
        ),
    ];
    let mut transposed = 0;
    for (op, params) in cases {
        let dag = build(op, &params);
        let label = format!("{op} {params:?}");
        let sketches: Vec<_> = generate_sketches(&dag, &host())
            .into_iter()
            .filter(|s| {
                s.name.contains("+pack_panel(") || s.name.contains("+transposed_accumulator")
            })
            .collect();
        assert!(
            sketches.iter().any(|s| s.name.contains("+pack_panel(")),
            "{label}: no panel sketch"
        );
        for sketch in &sketches {
            transposed += usize::from(sketch.name.contains("+transposed_accumulator"));
            for seed in 0..4 {
                let state = check_filled(&host(), &label, &dag, sketch, seed);
                assert_eq!(
                    state.stages().iter().any(|s| s.name.ends_with(".panel")),
                    sketch.name.contains("+pack_panel(") || sketch.name.contains("+a_panel"),
                    "{label} [{}]: panel stage",
                    sketch.name
                );
            }
        }
    }
    // The 1x1 convolution has more output channels (7) than output columns
    // (6): its tiles are also accumulated channel-innermost, its input read
    // in place or gathered into an A panel.
    assert!(transposed > 1, "{transposed} transposed accumulators");
}

#[test]
fn a_transposed_accumulator_copied_out_by_its_fused_epilogue_matches_the_reference() {
    // Rows of 5 and 12 output channels: accumulated channel-innermost,
    // either copied out by a copy stage with the bias added in a second
    // pass, or by the bias stage itself (the copy inlined into it).
    let params = [
        ("N", 1),
        ("C", 3),
        ("H", 4),
        ("W", 5),
        ("K", 12),
        ("R", 3),
        ("S", 3),
        ("stride", 1),
        ("pad", 1),
        ("dilation", 1),
    ];
    let dag = build("conv2d_bias", &params);
    let transposed: Vec<_> = generate_sketches(&dag, &host())
        .into_iter()
        .filter(|s| s.name.contains("+transposed_accumulator"))
        .collect();
    if host().kernels().is_empty() {
        return;
    }
    let (fused, alone): (Vec<_>, Vec<_>) = transposed
        .iter()
        .partition(|s| !s.name.contains("conv2d_bias:"));
    assert!(!fused.is_empty() && !alone.is_empty(), "{transposed:?}");
    for sketch in fused {
        for seed in 0..4 {
            let decisions = random_decisions(sketch, &mut StdRng::seed_from_u64(seed));
            let state = materialize(&dag, sketch, &decisions)
                .unwrap_or_else(|e| panic!("[{}]: {e}", sketch.name));
            let stage = |name: &str| {
                state
                    .stages()
                    .iter()
                    .find(|s| s.name == name)
                    .map(|s| s.compute_at)
            };
            assert_eq!(stage("conv2d"), Some(ComputeAt::Inline), "{}", sketch.name);
            assert!(
                matches!(stage("conv2d.local"), Some(ComputeAt::At { .. })),
                "{}",
                sketch.name
            );
            check_tensorized(
                &host(),
                &format!("[{}] {decisions:?}", sketch.name),
                &dag,
                state.steps(),
            );
        }
    }
}

#[test]
fn a_panel_names_what_does_not_fit() {
    let dag = build("matmul", &[("M", 5), ("N", 7), ("K", 3)]);
    for (axes, says) in [
        (
            r#"["k","x"]"#,
            "the reader has no axis 'x'; its axes are i0, i1, k",
        ),
        (r#"["k","i1","i1"]"#, "axis 'i1' is given twice"),
        (
            r#"["k","i1","i0"]"#,
            "the read's index does not use axis 'i0'",
        ),
        (
            r#"["i1"]"#,
            "the read's index uses axis 'k', which the panel's axes must include",
        ),
    ] {
        let json = format!(r#"[{{"kind":"pack_panel","stage":"B","reader":"C","axes":{axes}}}]"#);
        match State::replay(&dag, &steps(&json)) {
            Err(e) => {
                assert!(matches!(e.kind, StepErrorKind::PackPanel { .. }), "{e}");
                assert!(e.to_string().contains(says), "{axes}: {e}");
            }
            Ok(_) => panic!("{json} applied"),
        }
    }
    let state = State::replay(
        &dag,
        &steps(r#"[{"kind":"pack_panel","stage":"B","reader":"C","axes":["i1","k"]}]"#),
    )
    .expect("applies");
    let panel = state
        .stages()
        .iter()
        .find(|s| s.name == "B.panel")
        .expect("B.panel");
    assert_eq!(panel.tensor.shape(), &[7, 3], "B[k, j] as [j, k]");
    let func = tir::lower(&state).expect("lowers");
    let inputs = random_inputs(&dag, 5);
    let got = tir::run(&func, &inputs).expect("runs");
    assert_tensors_close("matmul through a panel", &got, &reference(&dag, &inputs), 3);
}

#[test]
fn reduction_outer_sketches_accumulate_a_block_of_tiles_and_match_the_reference() {
    // Blocks of more than one kernel tile whose reductions are long: a
    // convolution over a small plane with many input channels (its tiles
    // accumulated channel-innermost over every row), a matmul with many
    // rows of A, a batched one.
    let cases: [(&str, Vec<(&str, i64)>); 3] = [
        (
            "conv2d",
            vec![
                ("N", 1),
                ("C", 40),
                ("H", 5),
                ("W", 6),
                ("K", 20),
                ("R", 3),
                ("S", 3),
                ("stride", 1),
                ("pad", 1),
                ("dilation", 1),
            ],
        ),
        ("matmul", vec![("M", 37), ("N", 19), ("K", 300)]),
        (
            "batch_matmul",
            vec![("B", 2), ("M", 21), ("N", 18), ("K", 257)],
        ),
    ];
    if host().kernels().is_empty() {
        eprintln!("skipped: no micro-kernel runs on this machine");
        return;
    }
    for (op, params) in cases {
        let dag = build(op, &params);
        let label = format!("{op} {params:?}");
        let sketches: Vec<_> = generate_sketches(&dag, &host())
            .into_iter()
            .filter(|s| s.name.contains("+reduction_outer"))
            .collect();
        assert!(!sketches.is_empty(), "{label}: no reduction_outer sketch");
        for sketch in &sketches {
            for seed in 0..3 {
                let state = check_filled(&host(), &label, &dag, sketch, seed);
                // The computed stage's outermost loop is a reduction loop.
                let computed = state
                    .stages()
                    .iter()
                    .find(|s| {
                        state.steps().iter().any(|step| {
                            matches!(step, Step::Tensorize { stage, .. } if *stage == s.name)
                        })
                    })
                    .expect("a tensorized stage");
                let names = computed.leaf_names();
                assert!(
                    names.starts_with('r') || names.starts_with('k'),
                    "{label} [{}]: loops {names}",
                    sketch.name
                );
            }
        }
    }
}
