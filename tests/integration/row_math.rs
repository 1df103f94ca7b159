//! Row math: transcendental calls of vectorised loops run through the
//! `std::arch` row primitives (the `row_math` step). Random fills of every
//! sketch of softmax, gelu and a sigmoid/tanh/log operator at odd shapes,
//! with row math forced where a site allows it, through the IR interpreter
//! and the JIT at every ISA cap this machine allows; the primitives
//! bit-identical to the JIT's inline f32x4 code; the step's validation and
//! lowering errors; an artifact with row math falling back, with its
//! reason, where its ISA is capped away.

use crate::common;

use common::{
    Scratch, assert_close, build, isa_coverage, random_inputs, reduction_length, reference,
};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tessera::codegen::{self, CodegenOptions};
use tessera::runtime::Target;
use tessera::runtime::micro_kernels::Isa;
use tessera::runtime::row_math;
use tessera::schedule::{State, Step, steps_from_json};
use tessera::search::{generate_sketches, materialize, random_decisions};
use tessera::te::{self, ComputeDag, DType, HostTensor, Intrinsic, compute, placeholder};
use tessera::tir::{self, Stmt};

/// `out[m, n] = sigmoid(x)·tanh(x) + log(x² + 1)`: the other three
/// functions in one elementwise operator.
fn activations(m: i64, n: i64) -> ComputeDag {
    let x = placeholder("x", &[m, n], DType::F32);
    let out = compute("act", &[m, n], |ix| {
        let v = x.at([&ix[0], &ix[1]]);
        te::sigmoid(&v) * te::tanh(&v) + te::log(&v * &v + 1.0)
    });
    ComputeDag::new(&[x], &[out]).unwrap_or_else(|e| panic!("{e}"))
}

/// The operators with transcendental calls, at widths no multiple of 8 or 16.
fn cases() -> Vec<(String, ComputeDag)> {
    vec![
        (
            "softmax 5x37".into(),
            build("softmax", &[("M", 5), ("N", 37)]),
        ),
        (
            "softmax 3x70".into(),
            build("softmax", &[("M", 3), ("N", 70)]),
        ),
        ("gelu 3x41".into(), build("gelu", &[("M", 3), ("N", 41)])),
        ("gelu 2x19".into(), build("gelu", &[("M", 2), ("N", 19)])),
        ("activations 3x23".into(), activations(3, 23)),
    ]
}

/// The targets to check: the host and each cap below it that changes what
/// row math may use (AVX2, and SSE where none is allowed).
fn targets() -> Vec<Target> {
    let host = Target::from_env();
    let mut out = vec![host];
    for cap in [Isa::Avx2Fma, Isa::Sse] {
        let capped = host.with_isa_cap(cap);
        if capped.isa() < out.last().map_or(Isa::Avx512, |t| t.isa()) {
            out.push(capped);
        }
    }
    out
}

fn row_math_calls(func: &tir::PrimFunc) -> usize {
    let mut calls = 0;
    func.body
        .visit(&mut |s| calls += usize::from(matches!(s, Stmt::RowMathCall(_))));
    calls
}

/// Lowers `state`, runs it through the IR interpreter and the JIT for
/// `target`, compares both with the reference; returns the row calls.
fn check(
    label: &str,
    dag: &ComputeDag,
    state: &State,
    target: Target,
    inputs: &[HostTensor],
) -> usize {
    let steps = serde_json::to_string(state.steps()).unwrap_or_default();
    let label = format!("{label} steps={steps}");
    let func = tir::lower(state).unwrap_or_else(|e| panic!("{label}: lowering: {e}"));
    let want = reference(dag, inputs);
    let interpreted = tir::run(&func, inputs).unwrap_or_else(|e| panic!("{label}: IR: {e}"));
    let reduction = reduction_length(dag);
    assert_close(&format!("{label} (IR)"), &interpreted, &want, reduction);
    let kernel = codegen::compile(&func, &CodegenOptions::for_target(target))
        .unwrap_or_else(|e| panic!("{label}: compile: {e}\n{func}"));
    let got = kernel
        .run_host(inputs)
        .unwrap_or_else(|e| panic!("{label}: run: {e}"));
    assert_close(&format!("{label} (JIT)"), &got, &want, reduction);
    row_math_calls(&func)
}

#[test]
fn random_fills_of_every_sketch_with_row_math_match_the_reference_at_every_cap() {
    isa_coverage(&Target::from_env());
    let per_sketch = 3;
    for target in targets() {
        let allowed = row_math::allowed_isas(&target);
        let (mut schedules, mut with_row_math, mut calls) = (0, 0, 0);
        for (name, dag) in cases() {
            let inputs = random_inputs(&dag, 11);
            let sketches = generate_sketches(&dag, &target);
            for sketch in &sketches {
                for site in &sketch.sites {
                    assert!(
                        site.row_math.iter().all(|isa| allowed.contains(isa)),
                        "{name} {}: site {} offers {:?} under cap {}",
                        sketch.name,
                        site.stage,
                        site.row_math,
                        target.cap_description()
                    );
                }
                for seed in 0..per_sketch {
                    let mut rng = StdRng::seed_from_u64(seed);
                    let mut decisions = random_decisions(sketch, &mut rng);
                    // Row math wherever a site allows it, cycling the ISAs.
                    for (i, site) in sketch.sites.iter().enumerate() {
                        if !site.row_math.is_empty() {
                            decisions.vectorize[i] = true;
                            decisions.row_math[i] =
                                Some(site.row_math[(seed as usize + i) % site.row_math.len()]);
                        }
                    }
                    let state = materialize(&dag, sketch, &decisions)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                    let label = format!("{name} {} cap {}", sketch.name, target.cap_description());
                    let n = check(&label, &dag, &state, target, &inputs);
                    schedules += 1;
                    calls += n;
                    with_row_math += usize::from(
                        state
                            .steps()
                            .iter()
                            .any(|s| matches!(s, Step::RowMath { .. })),
                    );
                }
            }
        }
        eprintln!(
            "cap {}: {schedules} schedules, {with_row_math} with row_math ({calls} row calls)",
            target.cap_description()
        );
        if allowed.is_empty() {
            assert_eq!(
                with_row_math, 0,
                "no row math is proposed without an ISA for it"
            );
        } else {
            assert!(
                with_row_math * 3 >= schedules,
                "only {with_row_math} of {schedules} schedules use row math"
            );
            assert!(calls >= with_row_math);
        }
    }
}

/// A te builder of one unary function (`te::exp`, …).
type UnaryBuilder = fn(te::Expr) -> te::Expr;

/// `out = f(x)` over a row, vectorized, without and with row math.
fn unary(f: UnaryBuilder, n: i64) -> ComputeDag {
    let x = placeholder("x", &[n], DType::F32);
    let out = compute("out", &[n], |ix| f(x.at([&ix[0]])));
    ComputeDag::new(&[x], &[out]).unwrap_or_else(|e| panic!("{e}"))
}

/// Inputs over wide ranges plus every special: NaN, ±inf, ±0, the
/// overflow and underflow edges, subnormal inputs and results.
fn wide_inputs() -> Vec<f32> {
    let mut xs = vec![
        0.0,
        -0.0,
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        -f32::from_bits(1),
        1e-40,
        88.72,
        88.73,
        89.0,
        -87.33,
        -103.9,
        -104.0,
        -104.1,
        0.625,
        0.927_734_4,
        4.0,
        f32::MAX,
        -f32::MAX,
    ];
    xs.extend((0..=u32::MAX).step_by(65_537).map(f32::from_bits));
    xs.extend((0..20_000).map(|i| -110.0 + 200.0 * i as f32 / 20_000.0));
    xs.push(0.5); // an odd length: a tail for every width
    xs
}

#[test]
fn row_primitives_are_bit_identical_to_the_jit_inline_code() {
    let target = Target::from_env();
    let coverage = isa_coverage(&target);
    let allowed = row_math::allowed_isas(&target);
    let skipped: Vec<Isa> = row_math::row_math_isas()
        .into_iter()
        .filter(|isa| !allowed.contains(isa))
        .collect();
    eprintln!("row primitives covered: {allowed:?}; skipped: {skipped:?} ({coverage})");
    let xs = wide_inputs();
    let n = xs.len() as i64;
    let functions: [(Intrinsic, UnaryBuilder); 5] = [
        (Intrinsic::Exp, te::exp),
        (Intrinsic::Log, te::log),
        (Intrinsic::Tanh, te::tanh),
        (Intrinsic::Sigmoid, te::sigmoid),
        (Intrinsic::Erf, te::erf),
    ];
    let input = HostTensor::from_f32(&[xs.len()], xs.clone()).unwrap_or_else(|e| panic!("{e}"));
    for (function, f) in functions {
        let dag = unary(f, n);
        let json = r#"[{"kind":"split","stage":"out","iter":"i0","factors":[64]},
                       {"kind":"annotate","stage":"out","iter":"i0.1","annotation":"vectorize"}]"#;
        let steps = steps_from_json(json).unwrap_or_else(|e| panic!("{e}"));
        let state = State::replay(&dag, &steps).unwrap_or_else(|e| panic!("{e}"));
        let func = tir::lower(&state).unwrap_or_else(|e| panic!("{e}"));
        let inline = codegen::compile(&func, &CodegenOptions::for_target(target))
            .unwrap_or_else(|e| panic!("{e}"))
            .run_host(std::slice::from_ref(&input))
            .unwrap_or_else(|e| panic!("{e}"));
        let want = inline[0].as_f32().unwrap_or_else(|| panic!("f32")).to_vec();
        for &isa in &allowed {
            let primitive = row_math::primitive_for(function, isa)
                .unwrap_or_else(|| panic!("no {isa} {}", function.name()));
            let mut got = xs.clone();
            row_math::run(&target, primitive, &mut got).unwrap_or_else(|e| panic!("{e}"));
            let differ: Vec<(f32, f32, f32)> = xs
                .iter()
                .zip(&got)
                .zip(&want)
                .filter(|((_, g), w)| g.to_bits() != w.to_bits())
                .map(|((x, g), w)| (*x, *g, *w))
                .take(5)
                .collect();
            assert!(
                differ.is_empty(),
                "{}: (x, row, inline) {differ:?}",
                primitive.name
            );
        }
    }
}

fn step_error(dag: &ComputeDag, json: &str) -> String {
    let steps = steps_from_json(json).unwrap_or_else(|e| panic!("{e}"));
    match State::replay(dag, &steps) {
        Ok(_) => panic!("{json} applied"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn invalid_row_math_steps_are_typed_errors_that_say_what_exists() {
    let gelu = build("gelu", &[("M", 4), ("N", 16)]);
    let vectorized = r#"{"kind":"annotate","stage":"gelu","iter":"i1","annotation":"vectorize"}"#;
    let err = step_error(
        &gelu,
        &format!(
            r#"[{vectorized}, {{"kind":"row_math","stage":"gelu","iter":"i1","isa":"neon"}}]"#
        ),
    );
    assert!(
        err.contains("no row primitives for ISA 'neon'") && err.contains("avx2, avx512"),
        "{err}"
    );
    let err = step_error(
        &gelu,
        r#"[{"kind":"row_math","stage":"gelu","iter":"i0","isa":"avx2"}]"#,
    );
    assert!(err.contains("innermost") && err.contains("i0, i1"), "{err}");
    let err = step_error(
        &gelu,
        r#"[{"kind":"row_math","stage":"gelu","iter":"i1","isa":"avx2"}]"#,
    );
    assert!(err.contains("not vectorized"), "{err}");
    let relu = build("relu", &[("M", 4), ("N", 16)]);
    let err = step_error(
        &relu,
        r#"[{"kind":"annotate","stage":"relu","iter":"i1","annotation":"vectorize"},
            {"kind":"row_math","stage":"relu","iter":"i1","isa":"avx2"}]"#,
    );
    assert!(err.contains("calls no f32 exp"), "{err}");
    let err =
        steps_from_json(r#"[{"kind":"row_math","stage":"gelu","iter":"i1","isa":"avx2","x":1}]"#)
            .expect_err("an unknown field");
    assert!(err.to_string().contains("unknown field `x`"), "{err}");
    // Applied fully or not at all: a state that refuses the step is unchanged.
    let mut state = State::new(&gelu);
    let before = state.to_text();
    let step = Step::RowMath {
        stage: "gelu".into(),
        iter: "i1".into(),
        isa: "avx2".into(),
    };
    assert!(state.apply(step).is_err());
    assert_eq!(state.to_text(), before);
    // A later step that would change the loop is refused (every valid state
    // lowers): a split of it, or another annotation.
    for later in [
        r#"{"kind":"split","stage":"gelu","iter":"i1","factors":[4]}"#,
        r#"{"kind":"annotate","stage":"gelu","iter":"i1","annotation":"unroll"}"#,
    ] {
        let err = step_error(
            &gelu,
            &format!(
                r#"[{vectorized}, {{"kind":"row_math","stage":"gelu","iter":"i1","isa":"avx2"}}, {later}]"#
            ),
        );
        assert!(
            err.starts_with("step 2") && err.contains("a row_math step runs this loop"),
            "{err}"
        );
    }
}

#[test]
fn an_artifact_with_row_math_records_its_isa_and_falls_back_where_it_is_capped_away() {
    use tessera::deploy::{FallbackReason, KernelSource, Library};
    use tessera::measure::Task;

    let target = Target::from_env();
    let Some(&isa) = row_math::allowed_isas(&target).first() else {
        eprintln!(
            "skipped: no row-math ISA runs here ({})",
            target.cap_description()
        );
        return;
    };
    let dir = Scratch::new("row-math-deploy");
    let task = Task::from_registry("gelu", "M=4,N=24").expect("task");
    let steps = steps_from_json(&format!(
        r#"[{{"kind":"split","stage":"gelu","iter":"i1","factors":[8]}},
            {{"kind":"annotate","stage":"gelu","iter":"i1.1","annotation":"vectorize"}},
            {{"kind":"row_math","stage":"gelu","iter":"i1.1","isa":"{}"}}]"#,
        isa.name()
    ))
    .expect("steps");
    let artifact = common::deploy_one_record(&dir, &task, &steps);
    assert_eq!(artifact.isa.as_deref(), Some(isa.name()));

    let inputs = random_inputs(task.dag(), 4);
    let want = reference(task.dag(), &inputs);
    let library = Library::open_with_target(dir.join("schedules"), target.with_isa_cap(Isa::Sse))
        .expect("library");
    let loaded = library
        .kernel(task.dag())
        .expect("falls back rather than failing");
    match &loaded.source {
        KernelSource::Fallback(reason @ FallbackReason::MissingRowMathIsa { needs, cap, .. }) => {
            assert_eq!(needs, isa.name());
            assert!(cap.contains("with_isa_cap(sse)"), "{reason}");
            assert!(reason.to_string().contains("row primitives"), "{reason}");
        }
        other => panic!("expected a missing row-math ISA fallback, got {other:?}"),
    }
    let got = loaded
        .kernel
        .run_host(&inputs)
        .expect("the default schedule runs");
    assert_close("fallback", &got, &want, 1);

    let tuned = Library::open_with_target(dir.join("schedules"), target)
        .and_then(|l| l.kernel(task.dag()))
        .expect("loads");
    assert!(
        matches!(tuned.source, KernelSource::Tuned { .. }),
        "{:?}",
        tuned.source
    );
    let got = tuned.kernel.run_host(&inputs).expect("runs");
    assert_close("tuned", &got, &want, 1);
}

#[test]
fn the_lowered_loop_reads_its_row_after_one_call_and_reductions_still_vectorise() {
    let dag = build("softmax", &[("M", 3), ("N", 37)]);
    let json = r#"[{"kind":"compute_inline","stage":"exp"},
        {"kind":"annotate","stage":"row_max","iter":"k","annotation":"vectorize"},
        {"kind":"annotate","stage":"row_sum","iter":"k","annotation":"vectorize"},
        {"kind":"row_math","stage":"row_sum","iter":"k","isa":"avx2"},
        {"kind":"split","stage":"softmax","iter":"i1","factors":[16]},
        {"kind":"annotate","stage":"softmax","iter":"i1.1","annotation":"vectorize"},
        {"kind":"row_math","stage":"softmax","iter":"i1.1","isa":"avx2"}]"#;
    let steps = steps_from_json(json).expect("steps");
    let state = State::replay(&dag, &steps).expect("replays");
    let func = tir::lower(&state).expect("lowers");
    assert_eq!(row_math_calls(&func), 2, "{func}");
    let text = func.to_string();
    assert!(text.contains("row primitive avx2_exp"), "{text}");
    let reductions = codegen::decisions(&func)
        .vector_loops
        .iter()
        .filter(|l| l.plan.is_some_and(|p| p.accumulators > 0))
        .count();
    assert_eq!(reductions, 2, "row_max and the fissioned row_sum: {text}");
    if row_math::allowed_isas(&Target::from_env()).contains(&Isa::Avx2Fma) {
        let inputs = random_inputs(&dag, 3);
        check(
            "softmax fissioned",
            &dag,
            &state,
            Target::from_env(),
            &inputs,
        );
    } else {
        eprintln!("skipped the JIT run: avx2 row primitives are not allowed here");
    }
}
