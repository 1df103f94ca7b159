//! Window operators (pooling, depthwise convolution, stencils): random fills
//! of every sketch at stride 1 and 2, pad 0 and 1 and widths no multiple of
//! the vector width, and hand-written schedules whose vectorized output
//! width reads the input with a stride (deinterleaved vector loads) or under
//! an inlined padding's select (speculative vector loads), through the IR
//! interpreter and the JIT against the reference.

use crate::common;

use common::{assert_close, build, random_inputs, reduction_length, reference};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tessera::codegen::{self, CodegenOptions};
use tessera::runtime::Target;
use tessera::schedule::{State, steps_from_json};
use tessera::search::{generate_sketches, materialize, random_decisions};
use tessera::te::{self, ComputeDag, DType, compute, placeholder, reduce_axis, select, sum};
use tessera::tir;

/// Lowers `state`, runs it through the IR interpreter and the JIT and
/// compares both with the reference; returns the machine-code listing.
fn check(label: &str, dag: &ComputeDag, state: &State) -> String {
    let steps = serde_json::to_string(state.steps()).unwrap_or_default();
    let label = format!("{label} steps={steps}");
    let func = tir::lower(state).unwrap_or_else(|e| panic!("{label}: lowering: {e}"));
    let inputs = random_inputs(dag, 3);
    let want = reference(dag, &inputs);
    let interpreted = tir::run(&func, &inputs).unwrap_or_else(|e| panic!("{label}: IR: {e}"));
    let reduction = reduction_length(dag);
    assert_close(&format!("{label} (IR)"), &interpreted, &want, reduction);
    let options = CodegenOptions {
        listing: true,
        ..CodegenOptions::default()
    };
    let kernel = codegen::compile(&func, &options)
        .unwrap_or_else(|e| panic!("{label}: compile: {e}\n{func}"));
    let got = kernel
        .run_host(&inputs)
        .unwrap_or_else(|e| panic!("{label}: run: {e}"));
    assert_close(&format!("{label} (JIT)"), &got, &want, reduction);
    kernel.listing().unwrap_or_default().to_string()
}

fn replay(dag: &ComputeDag, json: &str) -> State {
    let steps = steps_from_json(json).unwrap_or_else(|e| panic!("{e}"));
    State::replay(dag, &steps).unwrap_or_else(|e| panic!("{e}"))
}

/// The window operators at odd widths, stride 1 and 2, pad 0 and 1; one
/// plane wider than annotation's longest vector loop (its padded rows, 69
/// long, are vectorized as copies at any length).
fn odd_cases() -> Vec<(&'static str, Vec<(&'static str, i64)>)> {
    let mut cases = Vec::new();
    for op in ["max_pool2d", "avg_pool2d", "depthwise_conv2d"] {
        for (stride, pad, w) in [(1, 1, 11), (2, 1, 13), (2, 0, 10), (1, 0, 7), (2, 1, 67)] {
            cases.push((
                op,
                vec![
                    ("N", 1),
                    ("C", 3),
                    ("H", 6),
                    ("W", w),
                    ("R", 3),
                    ("S", 3),
                    ("stride", stride),
                    ("pad", pad),
                ],
            ));
        }
    }
    cases
}

/// Three random fills of every sketch of `dag`, checked; returns how many
/// loops code generation runs as vectors.
fn check_random_fills(label: &str, dag: &ComputeDag) -> usize {
    let mut vector_loops = 0;
    for sketch in generate_sketches(dag, &Target::from_env()) {
        for seed in 0..3 {
            let mut rng = StdRng::seed_from_u64(seed);
            let decisions = random_decisions(&sketch, &mut rng);
            let label = format!("{label} [{}] {decisions:?}", sketch.name);
            let state =
                materialize(dag, &sketch, &decisions).unwrap_or_else(|e| panic!("{label}: {e}"));
            check(&label, dag, &state);
            let func = tir::lower(&state).unwrap_or_else(|e| panic!("{label}: {e}"));
            vector_loops += codegen::decisions(&func)
                .vector_loops
                .iter()
                .filter(|l| l.plan.is_some())
                .count();
        }
    }
    vector_loops
}

#[test]
fn random_fills_of_every_window_sketch_match_the_reference() {
    let mut vector_loops = 0;
    for (op, params) in odd_cases() {
        vector_loops += check_random_fills(&format!("{op} {params:?}"), &build(op, &params));
    }
    assert!(vector_loops >= 20, "only {vector_loops} vectorized loops");
}

/// `stage`'s output width split by `factor`, its window loops outside the
/// vectorized inner part; `inline` also inlines the padding.
fn vectorized_width(stage: &str, factor: i64, inline: bool) -> String {
    let inline = if inline {
        r#"{"kind": "compute_inline", "stage": "pad"},"#
    } else {
        ""
    };
    format!(
        r#"[{inline}
            {{"kind": "split", "stage": "{stage}", "iter": "i3", "factors": [{factor}]}},
            {{"kind": "reorder", "stage": "{stage}", "order": ["i0", "i1", "i2", "i3.0", "rr", "rs", "i3.1"]}},
            {{"kind": "annotate", "stage": "{stage}", "iter": "i3.1", "annotation": "vectorize"}}]"#
    )
}

#[test]
fn strided_and_padded_window_reads_vectorize_and_match_the_reference() {
    for op in ["max_pool2d", "avg_pool2d", "depthwise_conv2d"] {
        // Output widths 12, 8, 8, 8, 8: whole vectors (a split that does not
        // divide guards its lanes, and the loop runs lane by lane).
        for (stride, w) in [(1, 12), (2, 15), (2, 16), (3, 22), (4, 29)] {
            for inline in [false, true] {
                let params = [
                    ("N", 1),
                    ("C", 2),
                    ("H", 5),
                    ("W", w),
                    ("R", 3),
                    ("S", 3),
                    ("stride", stride),
                    ("pad", 1),
                ];
                let dag = build(op, &params);
                let label = format!("{op} stride {stride} W {w} inline {inline}");
                let listing = check(
                    &label,
                    &dag,
                    &replay(&dag, &vectorized_width(op, 4, inline)),
                );
                if stride >= 2 {
                    assert!(
                        listing.contains("shufps"),
                        "{label}: no deinterleaving shuffle in\n{listing}"
                    );
                }
            }
        }
    }
}

/// The 3×3 zero-padded box filter `blur` of `tests/custom_op.rs` (an `op!`
/// stencil; there its DAG is shown equal to this te formula).
fn blur(h: i64, w: i64) -> ComputeDag {
    let x = placeholder("img", &[h, w], DType::F32);
    let (r, s) = (reduce_axis(3, "r"), reduce_axis(3, "s"));
    let out = compute("blurred", &[h, w], |ix| {
        let (yi, xi) = ((&ix[0] + &r), (&ix[1] + &s));
        let (h1, w1) = (te::Expr::i64(h) + 1, te::Expr::i64(w) + 1);
        let inside = yi.ge(1) & yi.lt(h1) & xi.ge(1) & xi.lt(w1);
        let read = x.at([&ix[0] + &r - 1, &ix[1] + &s - 1]) / 9.0;
        sum(select(inside, read, 0.0), [&r, &s])
    });
    ComputeDag::new(&[x], &[out]).expect("valid")
}

/// A 2× horizontal downsampling stencil: `out[i, j] = x[i, 2j] + x[i, 2j + 1]`.
fn downsample(h: i64, w: i64) -> ComputeDag {
    let x = placeholder("x", &[h, 2 * w], DType::F32);
    let out = compute("down", &[h, w], |ix| {
        x.at([ix[0].clone(), &ix[1] * 2]) + x.at([ix[0].clone(), &ix[1] * 2 + 1])
    });
    ComputeDag::new(&[x], &[out]).expect("valid")
}

#[test]
fn stencils_vectorize_with_speculative_and_strided_loads() {
    for (h, w) in [(5, 8), (4, 12), (3, 16)] {
        let dag = blur(h, w);
        let listing = check(
            &format!("blur {h}x{w}"),
            &dag,
            &replay(
                &dag,
                r#"[{"kind": "split", "stage": "blurred", "iter": "i1", "factors": [4]},
                    {"kind": "reorder", "stage": "blurred", "order": ["i0", "i1.0", "r", "s", "i1.1"]},
                    {"kind": "annotate", "stage": "blurred", "iter": "i1.1", "annotation": "vectorize"}]"#,
            ),
        );
        // The padding's bounds test runs as vector compares.
        assert!(listing.contains("pcmpgtd"), "blur {h}x{w}:\n{listing}");
        let dag = downsample(h, w);
        let listing = check(
            &format!("downsample {h}x{w}"),
            &dag,
            &replay(
                &dag,
                r#"[{"kind": "split", "stage": "down", "iter": "i1", "factors": [4]},
                    {"kind": "annotate", "stage": "down", "iter": "i1.1", "annotation": "vectorize"}]"#,
            ),
        );
        assert!(listing.contains("shufps"), "downsample {h}x{w}:\n{listing}");
        for (name, dag) in [("blur", blur(h, w)), ("downsample", downsample(h, w))] {
            check_random_fills(&format!("{name} {h}x{w}"), &dag);
        }
    }
}
