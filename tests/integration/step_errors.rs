//! Every step error kind is triggered; errors name the step and leave the
//! state unchanged; bad schedule files are one-line CLI errors.

use crate::common;

use std::process::Command;

use common::{Scratch, build};
use tessera::schedule::{State, Step, StepErrorKind, steps_from_json};
use tessera::te::ComputeDag;

fn parse(json: &str) -> Vec<Step> {
    steps_from_json(json).unwrap_or_else(|e| panic!("{e}"))
}

/// Replays `json` on `dag`; the last step must fail with the returned kind.
fn failing(dag: &ComputeDag, json: &str) -> StepErrorKind {
    let steps = parse(json);
    let (last, prefix) = steps.split_last().expect("at least one step");
    let mut state = State::replay(dag, prefix).unwrap_or_else(|e| panic!("prefix: {e}"));
    let before = state.to_text();
    let err = state
        .apply(last.clone())
        .expect_err("the last step must be rejected");
    assert_eq!(err.index, prefix.len(), "error names the step's position");
    assert_eq!(*err.step, *last);
    assert_eq!(state.to_text(), before, "a rejected step changes nothing");
    assert_eq!(state.steps().len(), prefix.len());
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("step {} (", prefix.len())),
        "{text}"
    );
    err.kind
}

fn matmul() -> ComputeDag {
    build("matmul", &[("M", 8), ("N", 8), ("K", 8)])
}

#[test]
fn unknown_stage_and_loop() {
    let k = failing(
        &matmul(),
        r#"[{"kind": "split", "stage": "D", "iter": "i0", "factors": [2]}]"#,
    );
    assert!(matches!(k, StepErrorKind::UnknownStage { .. }));
    assert!(
        k.to_string()
            .contains("no stage 'D'; the stages are A, B, C")
    );
    let k = failing(
        &matmul(),
        r#"[{"kind": "split", "stage": "C", "iter": "x", "factors": [2]}]"#,
    );
    assert!(
        k.to_string()
            .contains("no loop 'x'; its loops are i0, i1, k")
    );
}

#[test]
fn loops_of_inputs_and_inlined_stages() {
    let k = failing(
        &matmul(),
        r#"[{"kind": "split", "stage": "A", "iter": "i0", "factors": [2]}]"#,
    );
    assert!(matches!(
        k,
        StepErrorKind::NoLoops {
            why: "it is an input",
            ..
        }
    ));
    let conv = build("conv2d", &[("C", 2), ("H", 5), ("W", 5), ("K", 2)]);
    let k = failing(
        &conv,
        r#"[{"kind": "compute_inline", "stage": "pad"},
            {"kind": "split", "stage": "pad", "iter": "i0", "factors": [2]}]"#,
    );
    assert!(matches!(
        k,
        StepErrorKind::NoLoops {
            why: "it is inlined",
            ..
        }
    ));
}

#[test]
fn split_factors() {
    let k = failing(
        &matmul(),
        r#"[{"kind": "split", "stage": "C", "iter": "i0", "factors": []}]"#,
    );
    assert_eq!(k, StepErrorKind::NoFactors);
    let k = failing(
        &matmul(),
        r#"[{"kind": "split", "stage": "C", "iter": "i0", "factors": [4, 0]}]"#,
    );
    assert_eq!(k, StepErrorKind::InvalidFactor { factor: 0 });
    let k = failing(
        &matmul(),
        r#"[{"kind": "split", "stage": "C", "iter": "i0", "factors": [-3]}]"#,
    );
    assert_eq!(k, StepErrorKind::InvalidFactor { factor: -3 });
    let k = failing(
        &matmul(),
        r#"[{"kind": "split", "stage": "C", "iter": "i0", "factors": [65536, 65536]}]"#,
    );
    assert!(matches!(k, StepErrorKind::FactorsTooLarge { .. }));
}

#[test]
fn fuse_rules() {
    let k = failing(
        &matmul(),
        r#"[{"kind": "fuse", "stage": "C", "iters": ["i0"]}]"#,
    );
    assert_eq!(k, StepErrorKind::FuseTooFew);
    let k = failing(
        &matmul(),
        r#"[{"kind": "fuse", "stage": "C", "iters": ["i1", "i0"]}]"#,
    );
    assert!(matches!(k, StepErrorKind::NotConsecutive { .. }));
    let k = failing(
        &matmul(),
        r#"[{"kind": "fuse", "stage": "C", "iters": ["i1", "k"]}]"#,
    );
    assert!(
        k.to_string()
            .contains("cannot fuse spatial loop 'i1' with reduction loop 'k'")
    );
}

#[test]
fn reorder_must_be_a_permutation() {
    for order in [r#"["i0", "i1"]"#, r#"["i0", "i1", "k", "k"]"#] {
        let json = format!(r#"[{{"kind": "reorder", "stage": "C", "order": {order}}}]"#);
        let k = failing(&matmul(), &json);
        assert!(
            matches!(k, StepErrorKind::NotAPermutation { .. }),
            "{order}"
        );
    }
}

#[test]
fn annotations() {
    let k = failing(
        &matmul(),
        r#"[{"kind": "annotate", "stage": "C", "iter": "k", "annotation": "parallel"}]"#,
    );
    assert!(
        k.to_string()
            .contains("'k' is a reduction loop and cannot be parallelized")
    );
    // A reduction loop may be vectorized (lane-wise partial results), but
    // only innermost, like any vectorized loop.
    let k = failing(
        &matmul(),
        r#"[{"kind": "reorder", "stage": "C", "order": ["i0", "k", "i1"]},
            {"kind": "annotate", "stage": "C", "iter": "k", "annotation": "vectorize"}]"#,
    );
    assert!(matches!(k, StepErrorKind::VectorizeNotInnermost { .. }));
    let k = failing(
        &matmul(),
        r#"[{"kind": "annotate", "stage": "C", "iter": "i0", "annotation": "vectorize"}]"#,
    );
    assert!(k.to_string().contains("'i0' has 'i1' inside it"));
    // A later reorder that moves a vectorized loop outward is rejected too.
    let k = failing(
        &matmul(),
        r#"[{"kind": "reorder", "stage": "C", "order": ["i0", "k", "i1"]},
            {"kind": "annotate", "stage": "C", "iter": "i1", "annotation": "vectorize"},
            {"kind": "reorder", "stage": "C", "order": ["i1", "i0", "k"]}]"#,
    );
    assert!(matches!(k, StepErrorKind::VectorizeNotInnermost { .. }));
    let k = failing(
        &matmul(),
        r#"[{"kind": "pragma", "stage": "C", "auto_unroll_max_step": 1000000}]"#,
    );
    assert!(matches!(k, StepErrorKind::UnrollTooLarge { .. }));
}

#[test]
fn placement_rules() {
    let dense = build("dense_bias_relu", &[("M", 4), ("N", 4), ("K", 4)]);
    let k = failing(&dense, r#"[{"kind": "compute_inline", "stage": "relu"}]"#);
    assert!(matches!(k, StepErrorKind::OutputPlacement { .. }));
    let k = failing(&dense, r#"[{"kind": "compute_inline", "stage": "dense"}]"#);
    assert!(matches!(k, StepErrorKind::InlineReduction { .. }));
    let k = failing(
        &dense,
        r#"[{"kind": "compute_at", "stage": "dense", "target": "relu", "iter": "i0"}]"#,
    );
    assert!(k.to_string().contains(
        "'dense' can only be computed at a loop that each of its consumers is, or is computed inside (at that loop or deeper); it is read by bias_add, and bias_add is not inside 'relu.i0'"
    ));
    let k = failing(
        &dense,
        r#"[{"kind": "compute_at", "stage": "data", "target": "dense", "iter": "i0"}]"#,
    );
    assert!(matches!(k, StepErrorKind::InputStage { .. }));
    // A host that is inlined later, or a stage computed at a vectorized loop.
    let k = failing(
        &dense,
        r#"[{"kind": "compute_at", "stage": "dense", "target": "bias_add", "iter": "i1"},
            {"kind": "compute_inline", "stage": "bias_add"}]"#,
    );
    assert_eq!(
        k,
        StepErrorKind::TargetInlined {
            target: "bias_add".into()
        }
    );
    let k = failing(
        &dense,
        r#"[{"kind": "compute_at", "stage": "dense", "target": "bias_add", "iter": "i1"},
            {"kind": "annotate", "stage": "bias_add", "iter": "i1", "annotation": "vectorize"}]"#,
    );
    assert!(matches!(k, StepErrorKind::AttachedAtVectorized { .. }));
}

#[test]
fn an_inlined_stage_hosting_another_is_rejected() {
    let conv = build("conv2d_bn_relu", &[("H", 4), ("W", 4), ("C", 2), ("K", 2)]);
    let k = failing(
        &conv,
        r#"[{"kind": "compute_at", "stage": "bias_add", "target": "bn_mul", "iter": "i0"},
            {"kind": "compute_inline", "stage": "bn_mul"}]"#,
    );
    assert_eq!(
        k,
        StepErrorKind::TargetInlined {
            target: "bn_mul".into()
        }
    );
}

#[test]
fn cache_rules() {
    let k = failing(
        &matmul(),
        r#"[{"kind": "split", "stage": "C", "iter": "i0", "factors": [2]},
            {"kind": "cache_write", "stage": "C"}]"#,
    );
    assert!(matches!(k, StepErrorKind::CacheWriteAfterTransform { .. }));
    let k = failing(&matmul(), r#"[{"kind": "cache_write", "stage": "A"}]"#);
    assert!(matches!(k, StepErrorKind::InputStage { .. }));
    let k = failing(
        &matmul(),
        r#"[{"kind": "cache_read", "stage": "A", "readers": []}]"#,
    );
    assert_eq!(k, StepErrorKind::NoReaders);
    let k = failing(
        &matmul(),
        r#"[{"kind": "cache_read", "stage": "A", "readers": ["B"]}]"#,
    );
    assert!(k.to_string().contains("'B' does not read 'A'"));
}

#[test]
fn rfactor_rules() {
    let relu = build("relu", &[("M", 4), ("N", 4)]);
    let k = failing(
        &relu,
        r#"[{"kind": "rfactor", "stage": "relu", "iter": "i0"}]"#,
    );
    assert!(matches!(k, StepErrorKind::NotAReduction { .. }));
    let k = failing(
        &matmul(),
        r#"[{"kind": "rfactor", "stage": "C", "iter": "i1"}]"#,
    );
    assert!(matches!(k, StepErrorKind::NotAReductionLoop { .. }));
    let conv = build("conv2d", &[("C", 2), ("H", 5), ("W", 5), ("K", 2)]);
    let k = failing(
        &conv,
        r#"[{"kind": "fuse", "stage": "conv2d", "iters": ["rr", "rs"]},
            {"kind": "rfactor", "stage": "conv2d", "iter": "rr@rs"}]"#,
    );
    assert!(matches!(k, StepErrorKind::NotAReductionLoop { .. }));
    let k = failing(
        &conv,
        r#"[{"kind": "compute_at", "stage": "pad", "target": "conv2d", "iter": "i2"},
            {"kind": "rfactor", "stage": "conv2d", "iter": "rc"}]"#,
    );
    assert!(matches!(k, StepErrorKind::HasAttachedStages { .. }));
}

#[test]
fn bad_schedule_files_are_one_line_errors() {
    let dir = Scratch::new("step-errors");
    let cases = [
        ("not json", "[{", "not valid JSON"),
        (
            "wrong shape",
            "{\"a\": 1}",
            "expected a JSON array of steps",
        ),
        (
            "malformed step",
            r#"[{"kind": "split", "stage": "C", "iter": "i0"}]"#,
            "step 0: missing field `factors`",
        ),
        (
            "step that does not apply",
            r#"[{"kind": "split", "stage": "C", "iter": "i0", "factors": [2]},
                {"kind": "fuse", "stage": "C", "iters": ["i1", "k"]}]"#,
            "step 1 (fuse C.[i1, k]): cannot fuse spatial loop 'i1' with reduction loop 'k'",
        ),
    ];
    for (n, (what, content, expected)) in cases.iter().enumerate() {
        let path = dir.join(format!("case{n}.json"));
        std::fs::write(&path, content).expect("write");
        let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["show", "matmul", "--shape", "M=8,N=8,K=8", "--schedule"])
            .arg(&path)
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}");
        assert!(out.stdout.is_empty(), "{what}");
        assert_eq!(err.lines().count(), 1, "{what}: {err}");
        assert!(err.contains(expected), "{what}: {err}");
    }
    let missing = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["show", "matmul", "--schedule", "/nonexistent/steps.json"])
        .output()
        .expect("runs");
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("cannot read /nonexistent/steps.json")
    );
}
