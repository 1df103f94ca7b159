//! Every construction error of a ComputeDag is triggered, and its message
//! names the place and the fix.

use tessera::te::{
    self, ComputeDag, DType, DagError, Expr, MAX_TENSOR_ELEMENTS, compute, placeholder,
    reduce_axis, select, sum,
};

fn error_of(result: Result<ComputeDag, DagError>) -> DagError {
    match result {
        Ok(_) => panic!("expected a DagError, the DAG was accepted"),
        Err(e) => e,
    }
}

fn assert_mentions(e: &DagError, parts: &[&str]) {
    let text = e.to_string();
    for part in parts {
        assert!(text.contains(part), "message {text:?} lacks {part:?}");
    }
}

#[test]
fn no_outputs() {
    let a = placeholder("A", &[4], DType::F32);
    let e = error_of(ComputeDag::new(&[a], &[]));
    assert_eq!(e, DagError::NoOutputs);
    assert_mentions(&e, &["no outputs"]);
}

#[test]
fn zero_extent() {
    let a = placeholder("A", &[4, 0], DType::F32);
    let b = compute("B", &[4], |ix| a.at([&ix[0], &Expr::i64(0)]));
    let e = error_of(ComputeDag::new(&[a], &[b]));
    assert!(matches!(
        e,
        DagError::InvalidExtent {
            dim: 1,
            extent: 0,
            ..
        }
    ));
    assert_mentions(&e, &["'A'", "dimension 1", "at least 1"]);
}

#[test]
fn tensor_too_large() {
    let a = placeholder("A", &[1 << 16, 1 << 16], DType::F32);
    let b = compute("B", &[4], |ix| a.at([&ix[0], &ix[0]]));
    let e = error_of(ComputeDag::new(&[a], &[b]));
    assert!(matches!(e, DagError::TensorTooLarge { limit, .. } if limit == MAX_TENSOR_ELEMENTS));
    assert_mentions(&e, &["'A'", "4294967296 elements", "smaller shapes"]);
}

#[test]
fn dtype_mismatch() {
    let a = placeholder("A", &[4], DType::F32);
    let b = placeholder("B", &[4], DType::F64);
    let c = compute("C", &[4], |ix| a.at([&ix[0]]) + b.at([&ix[0]]));
    let e = error_of(ComputeDag::new(&[a, b], &[c]));
    assert!(matches!(
        e,
        DagError::DtypeMismatch {
            left: DType::F32,
            right: DType::F64,
            ..
        }
    ));
    assert_mentions(
        &e,
        &["stage 'C'", "(A[i0] + B[i0])", "f32 vs f64", "te::cast"],
    );
}

#[test]
fn integer_literal_next_to_float_adapts_but_int_tensor_does_not() {
    let a = placeholder("A", &[4], DType::F32);
    let ok = compute("ok", &[4], |ix| a.at([&ix[0]]) * 2 + 1.5);
    assert!(ComputeDag::new(std::slice::from_ref(&a), &[ok]).is_ok());
    let n = placeholder("N", &[4], DType::I32);
    let bad = compute("bad", &[4], |ix| a.at([&ix[0]]) * n.at([&ix[0]]));
    let e = error_of(ComputeDag::new(&[a, n], &[bad]));
    assert_mentions(&e, &["stage 'bad'", "f32 vs i32"]);
}

#[test]
fn operand_types() {
    let a = placeholder("A", &[4], DType::F32);
    let floor = compute("F", &[4], |ix| te::floordiv(a.at([&ix[0]]), 2.0));
    let e = error_of(ComputeDag::new(std::slice::from_ref(&a), &[floor]));
    assert!(matches!(
        e,
        DagError::InvalidOperandType {
            expected: "integer",
            got: DType::F32,
            ..
        }
    ));
    assert_mentions(&e, &["stage 'F'", "floordiv", "integer operands, got f32"]);

    let n = placeholder("N", &[4], DType::I64);
    let exp = compute("E", &[4], |ix| te::exp(n.at([&ix[0]])));
    let e = error_of(ComputeDag::new(&[n], &[exp]));
    assert_mentions(&e, &["stage 'E'", "exp(N[i0])", "float operands, got i64"]);
}

#[test]
fn non_bool_condition() {
    let a = placeholder("A", &[4], DType::F32);
    let c = compute("C", &[4], |ix| select(a.at([&ix[0]]), 1.0, 0.0));
    let e = error_of(ComputeDag::new(&[a], &[c]));
    assert!(matches!(
        e,
        DagError::NonBoolCondition {
            got: DType::F32,
            ..
        }
    ));
    assert_mentions(&e, &["stage 'C'", "must be bool"]);
}

#[test]
fn rank_mismatch() {
    let a = placeholder("A", &[4, 4], DType::F32);
    let c = compute("C", &[4], |ix| a.at([&ix[0]]));
    let e = error_of(ComputeDag::new(&[a], &[c]));
    assert!(matches!(
        e,
        DagError::RankMismatch {
            expected: 2,
            got: 1,
            ..
        }
    ));
    assert_mentions(&e, &["stage 'C'", "tensor 'A'", "1 indices", "rank 2"]);
}

#[test]
fn non_integer_index() {
    let a = placeholder("A", &[4], DType::F32);
    let x = placeholder("X", &[4], DType::F32);
    let c = compute("C", &[4], |ix| a.at([x.at([&ix[0]])]));
    let e = error_of(ComputeDag::new(&[a, x], &[c]));
    assert!(matches!(
        e,
        DagError::NonIntegerIndex {
            dim: 0,
            got: DType::F32,
            ..
        }
    ));
    assert_mentions(&e, &["stage 'C'", "index 0", "must be integers"]);
}

#[test]
fn read_past_the_end_names_stage_tensor_and_index() {
    let a = placeholder("A", &[8], DType::F32);
    let c = compute("shift", &[8], |ix| a.at([&ix[0] + 1]));
    let e = error_of(ComputeDag::new(&[a], &[c]));
    match &e {
        DagError::IndexOutOfBounds(oob) => {
            assert_eq!(oob.stage, "shift");
            assert_eq!(oob.tensor, "A");
            assert_eq!(oob.index, "(i0 + 1)");
            assert_eq!(oob.range, "[1, 8]");
            assert_eq!(oob.extent, 8);
        }
        other => panic!("expected IndexOutOfBounds, got {other:?}"),
    }
    assert_mentions(
        &e,
        &[
            "stage 'shift'",
            "tensor 'A'",
            "`(i0 + 1)`",
            "[1, 8]",
            "te::select",
        ],
    );
}

#[test]
fn read_before_the_start_and_through_a_reduction() {
    let a = placeholder("A", &[8], DType::F32);
    let k = reduce_axis(3, "k");
    let c = compute("win", &[8], |ix| sum(a.at([&ix[0] - &k]), [&k]));
    let e = error_of(ComputeDag::new(&[a], &[c]));
    assert_mentions(&e, &["stage 'win'", "(i0 - k)", "[-2, 7]"]);
}

#[test]
fn guarded_reads_are_accepted() {
    let a = placeholder("A", &[8], DType::F32);
    let k = reduce_axis(3, "k");
    let c = compute("win", &[8], |ix| {
        let at = &ix[0] - &k;
        sum(select(at.ge(0), a.at([&at]), 0.0), [&k])
    });
    assert!(ComputeDag::new(&[a], &[c]).is_ok());
}

#[test]
fn data_dependent_index_cannot_be_proven() {
    let a = placeholder("A", &[8], DType::F32);
    let idx = placeholder("I", &[8], DType::I64);
    let c = compute("gather", &[8], |ix| a.at([idx.at([&ix[0]])]));
    let e = error_of(ComputeDag::new(&[a, idx], &[c]));
    assert_mentions(&e, &["stage 'gather'", "(-inf, +inf)"]);
}

#[test]
fn nested_reduce() {
    let a = placeholder("A", &[4, 4], DType::F32);
    let k = reduce_axis(4, "k");
    let c = compute("C", &[4], |ix| sum(a.at([&ix[0], &k]), [&k]) + 1.0);
    let e = error_of(ComputeDag::new(&[a], &[c]));
    assert!(matches!(e, DagError::NestedReduce { .. }));
    assert_mentions(&e, &["stage 'C'", "whole rule", "stage of its own"]);
}

#[test]
fn reduce_over_a_spatial_axis_or_an_expression() {
    let a = placeholder("A", &[4, 4], DType::F32);
    let c = compute("C", &[4], |ix| sum(a.at([&ix[0], &ix[0]]), [&ix[0]]));
    let e = error_of(ComputeDag::new(std::slice::from_ref(&a), &[c]));
    assert!(matches!(e, DagError::NotAReduceAxis { .. }));
    assert_mentions(
        &e,
        &[
            "stage 'C'",
            "`i0` is not a reduction axis",
            "te::reduce_axis",
        ],
    );

    let k = reduce_axis(4, "k");
    let d = compute("D", &[4], |ix| sum(a.at([&ix[0], &k]), [&(&k + 0)]));
    let e = error_of(ComputeDag::new(&[a], &[d]));
    assert_mentions(&e, &["stage 'D'", "`(k + 0)` is not a reduction axis"]);
}

#[test]
fn duplicate_reduce_axis() {
    let a = placeholder("A", &[4, 4], DType::F32);
    let k = reduce_axis(4, "k");
    let c = compute("C", &[4], |ix| sum(a.at([&ix[0], &k]), [&k, &k]));
    let e = error_of(ComputeDag::new(&[a], &[c]));
    assert!(matches!(e, DagError::DuplicateReduceAxis { .. }));
    assert_mentions(&e, &["stage 'C'", "`k` is listed twice"]);
}

#[test]
fn empty_reduce_axis() {
    let a = placeholder("A", &[4, 4], DType::F32);
    let k = reduce_axis(0, "k");
    let c = compute("C", &[4], |ix| sum(a.at([&ix[0], &ix[0]]), [&k]));
    let e = error_of(ComputeDag::new(&[a], &[c]));
    assert!(matches!(e, DagError::InvalidReduceExtent { extent: 0, .. }));
    assert_mentions(&e, &["stage 'C'", "`k` has extent 0"]);
}

#[test]
fn bool_reduction() {
    let a = placeholder("A", &[4, 4], DType::F32);
    let k = reduce_axis(4, "k");
    let c = compute("C", &[4], |ix| sum(a.at([&ix[0], &k]).gt(0.0), [&k]));
    let e = error_of(ComputeDag::new(&[a], &[c]));
    assert!(matches!(e, DagError::BoolReduction { .. }));
    assert_mentions(&e, &["stage 'C'", "bool"]);
}

#[test]
fn unbound_variables() {
    let a = placeholder("A", &[4, 4], DType::F32);
    let k = reduce_axis(4, "k");
    // `k` is used but the rule does not reduce over it.
    let c = compute("C", &[4], |ix| a.at([&ix[0], &k]));
    let e = error_of(ComputeDag::new(std::slice::from_ref(&a), &[c]));
    assert!(matches!(e, DagError::UnboundVar { .. }));
    assert_mentions(&e, &["stage 'C'", "`k`", "its own indices"]);

    // An index of another stage leaks in.
    let mut leaked = None;
    let first = compute("first", &[4], |ix| {
        leaked = Some(ix[0].clone());
        a.at([&ix[0], &ix[0]])
    });
    let stray = leaked.expect("rule ran");
    let second = compute("second", &[4], |ix| {
        first.at([&ix[0]]) + a.at([&stray, &ix[0]])
    });
    let e = error_of(ComputeDag::new(&[a], &[second]));
    assert_mentions(&e, &["stage 'second'", "`i0`"]);
}

#[test]
fn argument_errors() {
    let a = placeholder("A", &[4], DType::F32);
    let b = compute("B", &[4], |ix| a.at([&ix[0]]) * 2.0);

    let e = error_of(ComputeDag::new(
        &[a.clone(), b.clone()],
        std::slice::from_ref(&b),
    ));
    assert!(matches!(e, DagError::DuplicateArgument { .. }));
    assert_mentions(&e, &["'B' is listed twice"]);

    let e = error_of(ComputeDag::new(
        std::slice::from_ref(&b),
        std::slice::from_ref(&b),
    ));
    assert_mentions(&e, &["'B' is listed twice"]);

    let c = compute("C", &[4], |ix| b.at([&ix[0]]) + 1.0);
    let e = error_of(ComputeDag::new(std::slice::from_ref(&b), &[c]));
    assert!(matches!(e, DagError::InputNotPlaceholder { .. }));
    assert_mentions(&e, &["'B' is listed as an input but is computed"]);

    let e = error_of(ComputeDag::new(&[], std::slice::from_ref(&a)));
    assert!(matches!(e, DagError::OutputIsPlaceholder { .. }));
    assert_mentions(&e, &["output 'A' is a placeholder"]);

    let e = error_of(ComputeDag::new(&[], &[b]));
    assert!(matches!(e, DagError::MissingInput { .. }));
    assert_mentions(
        &e,
        &[
            "placeholder 'A' is read by stage 'B'",
            "add it to the inputs",
        ],
    );
}

#[test]
fn stages_are_in_topological_order_with_inputs_first() {
    let a = placeholder("A", &[4], DType::F32);
    let b = compute("B", &[4], |ix| a.at([&ix[0]]) + 1.0);
    let c = compute("C", &[4], |ix| b.at([&ix[0]]) * a.at([&ix[0]]));
    let d = compute("D", &[4], |ix| c.at([&ix[0]]) - b.at([&ix[0]]));
    let dag = ComputeDag::new(&[a], &[d]).expect("valid");
    let names: Vec<&str> = dag.tensors().iter().map(|t| t.name()).collect();
    assert_eq!(names, ["A", "B", "C", "D"]);
}
