//! One pass per row: stages with several consumers computed at a loop that
//! all their consumers are inside (softmax's `exp`, layer_norm's `mean`),
//! the steps that make it legal and the ones refused with the consumers
//! outside named; the row-fused sketches of the normalisations, randomly
//! filled at odd shapes through the IR interpreter and the JIT; and random
//! step lists, which never leave a producer computed after a reader.

use std::collections::{HashMap, HashSet};

use crate::common;

use common::{assert_close, build, random_inputs, reduction_length, reference};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tessera::codegen::{self, CodegenOptions};
use tessera::runtime::Target;
use tessera::schedule::random::random_schedule;
use tessera::schedule::{ComputeAt, State, Step, steps_from_json};
use tessera::search::{generate_sketches, materialize, random_decisions};
use tessera::te::{ComputeDag, DType, ExprKind, TensorId, compute, placeholder};
use tessera::tir::{self, PrimFunc, Stmt};

/// Lowers `state`, runs it through the IR interpreter and the JIT, and
/// compares both with the reference.
fn check(label: &str, dag: &ComputeDag, state: &State) -> PrimFunc {
    let steps = serde_json::to_string(state.steps()).unwrap_or_default();
    let label = format!("{label} steps={steps}");
    let func = tir::lower(state).unwrap_or_else(|e| panic!("{label}: lowering: {e}"));
    let inputs = random_inputs(dag, 7);
    let want = reference(dag, &inputs);
    let interpreted = tir::run(&func, &inputs).unwrap_or_else(|e| panic!("{label}: IR: {e}"));
    let length = reduction_length(dag);
    assert_close(&format!("{label} (IR)"), &interpreted, &want, length);
    let kernel = codegen::compile(&func, &CodegenOptions::default())
        .unwrap_or_else(|e| panic!("{label}: compile: {e}\n{func}"));
    let got = kernel
        .run_host(&inputs)
        .unwrap_or_else(|e| panic!("{label}: run: {e}"));
    assert_close(&format!("{label} (JIT)"), &got, &want, length);
    func
}

fn steps(json: &str) -> Vec<Step> {
    steps_from_json(json).unwrap_or_else(|e| panic!("{e}"))
}

fn replay(dag: &ComputeDag, json: &str) -> State {
    State::replay(dag, &steps(json)).unwrap_or_else(|e| panic!("{e}"))
}

/// The error text of replaying `json`, which must fail at its last step.
fn refusal(dag: &ComputeDag, json: &str) -> String {
    let list = steps(json);
    match State::replay(dag, &list) {
        Ok(_) => panic!("accepted: {json}"),
        Err(e) => {
            assert_eq!(e.index, list.len() - 1, "{e}");
            e.to_string()
        }
    }
}

/// The shape of the buffer called `name`.
fn buffer_shape(func: &PrimFunc, name: &str) -> Vec<i64> {
    func.buffers
        .iter()
        .find(|b| b.name == name)
        .unwrap_or_else(|| panic!("no buffer {name}"))
        .shape
        .clone()
}

/// Buffers read before anything is stored into them, walking the function
/// in program order (intermediate buffers only: the parameters hold inputs
/// or are only written).
fn read_before_written(func: &PrimFunc) -> Vec<String> {
    let params: HashSet<usize> = func.params.iter().copied().collect();
    let by_handle: HashMap<TensorId, usize> = func
        .buffers
        .iter()
        .enumerate()
        .map(|(b, buffer)| (buffer.handle.id(), b))
        .collect();
    let mut written: HashSet<usize> = HashSet::new();
    let mut early: Vec<String> = Vec::new();
    let reads = |e: &tessera::te::Expr, written: &HashSet<usize>, early: &mut Vec<String>| {
        e.visit(&mut |x| {
            if let ExprKind::Read(t, _) = x.kind()
                && let Some(&b) = by_handle.get(&t.id())
                && !params.contains(&b)
                && !written.contains(&b)
                && !early.contains(&func.buffers[b].name)
            {
                early.push(func.buffers[b].name.clone());
            }
        });
    };
    func.body.visit(&mut |stmt| match stmt {
        Stmt::Store { buffer, value, .. } => {
            reads(value, &written, &mut early);
            written.insert(*buffer);
        }
        Stmt::IfThenElse { cond, .. } => reads(cond, &written, &mut early),
        Stmt::Let { value, .. } => reads(value, &written, &mut early),
        _ => {}
    });
    early
}

const SOFTMAX_FUSED: &str = r#"[
    {"kind": "compute_at", "stage": "row_inv", "target": "softmax", "iter": "i0"},
    {"kind": "compute_at", "stage": "row_sum", "target": "softmax", "iter": "i0"},
    {"kind": "compute_at", "stage": "exp", "target": "softmax", "iter": "i0"},
    {"kind": "compute_at", "stage": "row_max", "target": "softmax", "iter": "i0"}"#;

#[test]
fn a_producer_read_by_several_stages_is_computed_once_per_row_inside_all_of_them() {
    for (m, n) in [(5, 37), (3, 8), (1, 1)] {
        let dag = build("softmax", &[("M", m), ("N", n)]);
        let state = replay(
            &dag,
            &format!(
                r#"{SOFTMAX_FUSED},
                {{"kind": "split", "stage": "softmax", "iter": "i1", "factors": [4]}},
                {{"kind": "annotate", "stage": "softmax", "iter": "i1.1", "annotation": "vectorize"}},
                {{"kind": "annotate", "stage": "row_sum", "iter": "k", "annotation": "vectorize"}},
                {{"kind": "annotate", "stage": "row_max", "iter": "k", "annotation": "vectorize"}},
                {{"kind": "annotate", "stage": "softmax", "iter": "i0", "annotation": "parallel"}}]"#
            ),
        );
        let func = check(&format!("softmax M={m} N={n}"), &dag, &state);
        // exp holds one row: the union of what row_sum and softmax read.
        assert_eq!(buffer_shape(&func, "exp"), vec![1, n], "{func}");
        assert_eq!(buffer_shape(&func, "row_sum"), vec![1]);
        assert_eq!(read_before_written(&func), Vec::<String>::new(), "{func}");
    }
    let dag = build("layer_norm", &[("M", 3), ("N", 41)]);
    let state = replay(
        &dag,
        r#"[{"kind": "compute_at", "stage": "rstd", "target": "layer_norm", "iter": "i0"},
            {"kind": "compute_at", "stage": "variance", "target": "layer_norm", "iter": "i0"},
            {"kind": "compute_at", "stage": "mean", "target": "layer_norm", "iter": "i0"},
            {"kind": "annotate", "stage": "mean", "iter": "k", "annotation": "vectorize"}]"#,
    );
    let func = check("layer_norm fused", &dag, &state);
    assert_eq!(buffer_shape(&func, "mean"), vec![1]);
}

#[test]
fn the_region_computed_is_the_union_of_what_every_consumer_reads() {
    // p is read at i by a and at i + 1 by out; a is computed in out's loop:
    // each iteration needs p[i..=i + 1].
    let n = 9;
    let x = placeholder("x", &[n + 1], DType::F32);
    let p = compute("p", &[n + 1], |ix| x.at([&ix[0]]) * 2.0);
    let a = compute("a", &[n], |ix| p.at([&ix[0]]) * 3.0);
    let out = compute("out", &[n], |ix| p.at([&(&ix[0] + 1)]) + a.at([&ix[0]]));
    let dag = ComputeDag::new(&[x], &[out]).unwrap_or_else(|e| panic!("{e}"));
    let state = replay(
        &dag,
        r#"[{"kind": "compute_at", "stage": "a", "target": "out", "iter": "i0"},
            {"kind": "compute_at", "stage": "p", "target": "out", "iter": "i0"}]"#,
    );
    let func = check("shifted readers", &dag, &state);
    assert_eq!(buffer_shape(&func, "p"), vec![2], "{func}");
}

#[test]
fn a_producer_inside_one_consumer_only_computes_the_rows_of_the_others_too() {
    // exp at row_sum's row loop, row_sum at softmax's: exp is read by both,
    // and softmax is not inside row_sum, so that is refused; exp at
    // softmax's row loop with row_sum at a deeper loop of softmax is fine.
    let dag = build("softmax", &[("M", 4), ("N", 19)]);
    let text = refusal(
        &dag,
        r#"[{"kind": "compute_at", "stage": "row_inv", "target": "softmax", "iter": "i0"},
            {"kind": "compute_at", "stage": "row_sum", "target": "softmax", "iter": "i0"},
            {"kind": "compute_at", "stage": "exp", "target": "row_sum", "iter": "i0"}]"#,
    );
    assert!(
        text.contains("it is read by row_sum, softmax, and softmax is not inside 'row_sum.i0'"),
        "{text}"
    );
    let state = replay(
        &dag,
        r#"[{"kind": "split", "stage": "softmax", "iter": "i1", "factors": [5]},
            {"kind": "compute_at", "stage": "row_inv", "target": "softmax", "iter": "i1.0"},
            {"kind": "compute_at", "stage": "row_sum", "target": "softmax", "iter": "i1.0"},
            {"kind": "compute_at", "stage": "exp", "target": "softmax", "iter": "i0"}]"#,
    );
    let func = check("softmax nested", &dag, &state);
    assert_eq!(read_before_written(&func), Vec::<String>::new(), "{func}");
}

#[test]
fn steps_that_would_leave_a_consumer_outside_are_refused_with_its_name() {
    let dag = build("softmax", &[("M", 4), ("N", 9)]);
    // row_sum before row_inv, its consumer, is placed.
    let text = refusal(
        &dag,
        r#"[{"kind": "compute_at", "stage": "row_sum", "target": "softmax", "iter": "i0"}]"#,
    );
    assert!(
        text.contains("it is read by row_inv, and row_inv is not inside 'softmax.i0'"),
        "{text}"
    );
    // exp first: row_sum, its other consumer, is still at the root.
    let text = refusal(
        &dag,
        r#"[{"kind": "compute_at", "stage": "exp", "target": "softmax", "iter": "i0"}]"#,
    );
    assert!(
        text.contains("it is read by row_sum, softmax, and row_sum is not inside 'softmax.i0'"),
        "{text}"
    );
    // A loop inside the one row_sum is computed at: row_sum is outside it.
    let text = refusal(
        &dag,
        r#"[{"kind": "compute_at", "stage": "row_inv", "target": "softmax", "iter": "i0"},
            {"kind": "compute_at", "stage": "row_sum", "target": "softmax", "iter": "i0"},
            {"kind": "compute_at", "stage": "exp", "target": "softmax", "iter": "i1"}]"#,
    );
    assert!(
        text.contains("row_sum is not inside 'softmax.i1'"),
        "{text}"
    );
    // Undoing a consumer's placement afterwards: root or inline.
    let fused = format!("{SOFTMAX_FUSED},");
    let text = refusal(
        &dag,
        &format!(r#"{fused} {{"kind": "compute_root", "stage": "row_sum"}}]"#),
    );
    assert!(
        text.contains("'exp'") && text.contains("row_sum is not inside 'softmax.i0'"),
        "{text}"
    );
    // Inlining a consumer hands its readers to the producer, and they are
    // inside the loop too (they had to be): accepted. Inlining the host is not.
    let state = replay(
        &dag,
        &format!(r#"{fused} {{"kind": "compute_inline", "stage": "row_inv"}}]"#),
    );
    check("softmax fused, row_inv inlined", &dag, &state);
    let text = refusal(
        &dag,
        r#"[{"kind": "compute_at", "stage": "row_max", "target": "exp", "iter": "i0"},
            {"kind": "compute_inline", "stage": "exp"}]"#,
    );
    assert!(text.contains("target 'exp' is inlined"), "{text}");
    // A stage at its own loop.
    let text = refusal(
        &dag,
        r#"[{"kind": "compute_at", "stage": "row_sum", "target": "row_sum", "iter": "i0"}]"#,
    );
    assert!(
        text.contains("row_inv is not inside 'row_sum.i0'"),
        "{text}"
    );
    // layer_norm: the mean is read by the variance and the output.
    let dag = build("layer_norm", &[("M", 4), ("N", 9)]);
    let text = refusal(
        &dag,
        r#"[{"kind": "compute_at", "stage": "mean", "target": "layer_norm", "iter": "i0"}]"#,
    );
    assert!(
        text.contains("it is read by variance, layer_norm, and variance is not inside"),
        "{text}"
    );
}

/// Walks up from `stage` through its placements; whether it reaches loop
/// `iter` of `host` or a loop inside it.
fn placed_within(state: &State, stage: usize, host: usize, iter: usize) -> bool {
    let stages = state.stages();
    let position = |s: usize, it: usize| stages[s].leaves.iter().position(|&l| l == it);
    let Some(limit) = position(host, iter) else {
        return false;
    };
    let mut current = stage;
    for _ in 0..stages.len() {
        if current == host {
            return true;
        }
        match stages[current].compute_at {
            ComputeAt::At {
                stage: up,
                iter: at,
            } if up == host => return position(host, at).is_some_and(|p| p >= limit),
            ComputeAt::At { stage: up, .. } => current = up,
            _ => return false,
        }
    }
    false
}

#[test]
fn random_step_lists_never_compute_a_producer_after_a_reader() {
    let mut rng = StdRng::seed_from_u64(21);
    let mut multi = 0;
    for (op, params) in [
        ("softmax", vec![("M", 3), ("N", 11)]),
        ("layer_norm", vec![("M", 2), ("N", 13)]),
    ] {
        let dag = build(op, &params);
        for round in 0..200 {
            let state = random_schedule(&dag, &mut rng, 30);
            for (index, stage) in state.stages().iter().enumerate() {
                if let ComputeAt::At { stage: host, iter } = stage.compute_at {
                    let consumers = state.effective_consumers(index);
                    multi += usize::from(consumers.len() > 1);
                    for c in consumers {
                        assert!(
                            placed_within(&state, c, host, iter),
                            "{op} #{round}: {} read by {} outside its loop\n{}",
                            stage.name,
                            state.stages()[c].name,
                            state.to_text()
                        );
                    }
                }
            }
            let func = tir::lower(&state).unwrap_or_else(|e| panic!("{op} #{round}: {e}"));
            assert_eq!(
                read_before_written(&func),
                Vec::<String>::new(),
                "{op} #{round}\n{}\n{func}",
                state.to_text()
            );
            if round % 10 == 0 {
                check(&format!("{op} random #{round}"), &dag, &state);
            }
        }
    }
    assert!(
        multi >= 5,
        "only {multi} multi-consumer placements were drawn"
    );
}

#[test]
fn random_fills_of_every_sketch_with_the_row_fused_ones_match_the_reference() {
    let target = Target::from_env();
    let mut fused = 0;
    for (op, params) in [
        ("softmax", vec![("M", 5), ("N", 37)]),
        ("softmax", vec![("M", 3), ("N", 70)]),
        ("layer_norm", vec![("M", 3), ("N", 41)]),
        ("layer_norm", vec![("M", 2), ("N", 7)]),
        ("norm", vec![("B", 2), ("M", 3), ("N", 19)]),
    ] {
        let dag = build(op, &params);
        for sketch in generate_sketches(&dag, &target) {
            let is_fused = sketch.name.contains("row_fusion");
            for seed in 0..3 {
                let mut rng = StdRng::seed_from_u64(seed);
                let decisions = random_decisions(&sketch, &mut rng);
                let label = format!("{op} {params:?} [{}] {decisions:?}", sketch.name);
                let state = materialize(&dag, &sketch, &decisions)
                    .unwrap_or_else(|e| panic!("{label}: {e}"));
                let func = check(&label, &dag, &state);
                if is_fused {
                    fused += 1;
                    // One row of each member at a time.
                    for member in ["exp", "mean", "variance"] {
                        if let Some(b) = func.buffers.iter().find(|b| b.name == member) {
                            assert_eq!(b.shape[0], 1, "{label}\n{func}");
                        }
                    }
                }
            }
        }
    }
    assert!(fused >= 24, "only {fused} row-fused schedules");
}
