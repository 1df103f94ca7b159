//! Round trips of DAGs through their spec, and the errors of bad specs.

use super::*;
use crate::te::{
    self, ComputeOp, DagError, Expr, HostTensor, Tensor, cast, compute, erf, floordiv, floormod,
    max, min, placeholder, reduce_axis, select,
};

fn matmul() -> ComputeDag {
    let a = placeholder("A", &[4, 8], DType::F32);
    let b = placeholder("B", &[8, 3], DType::F32);
    let k = reduce_axis(8, "k");
    let c = compute("C", &[4, 3], |ix| {
        te::sum(a.at([&ix[0], &k]) * b.at([&k, &ix[1]]), [&k])
    });
    ComputeDag::new(&[a, b], &[c])
        .expect("valid")
        .with_label("matmul[M=4,N=3,K=8,f32]")
}

/// A DAG with every expression kind: select, cast, min/max, floordiv and
/// floormod, erf and pow, a max reduction, non-finite and typed constants,
/// negation, logical operators, two outputs, axis names not the defaults.
fn everything() -> ComputeDag {
    let x = placeholder("X", &[6, 10], DType::F32);
    let idx = placeholder("Idx", &[6], DType::I32);
    let unused = placeholder("Unused", &[2], DType::F64);
    let k = reduce_axis(10, "kk");
    let m = compute("rowmax", &[6], |ix| {
        let keep = ix[0].lt(3) | k.ge(5_i64);
        te::reduce_max(select(keep, x.at([&ix[0], &k]), f32::NEG_INFINITY), [&k])
    });
    let y = Tensor::from_compute("y", &[6, 5], {
        let r = te::Var::new("row", 6, te::IterKind::Spatial);
        let c = te::Var::new("col", 5, te::IterKind::Spatial);
        let (re, ce) = (r.expr(), c.expr());
        let half = cast(DType::F32, floordiv(&ce, 2_i64) + floormod(&re, 3_i64));
        let from_int = cast(DType::F32, idx.at([&re]) * 2_i32);
        let bounded = min(max(m.at([&re]), -1.5_f32), f32::INFINITY);
        let body = erf(half) + te::pow(from_int, 2.0_f32) - (-bounded)
            + select(
                !re.equal(1_i64) & Expr::bool(true),
                te::tanh(0.25_f32),
                0.5_f32,
            );
        ComputeOp {
            axes: vec![r, c],
            body,
        }
    });
    let s = compute("s", &[6], |ix| {
        te::sqrt(te::abs(y.at([ix[0].clone(), Expr::i64(0)])))
    });
    ComputeDag::new(&[x, idx, unused], &[s, y]).expect("valid")
}

fn assert_round_trip(dag: &ComputeDag) -> ComputeDag {
    let spec = dag.to_spec();
    let json = spec.to_json();
    let parsed = DagSpec::from_json(&json).unwrap_or_else(|e| panic!("{e}\n{json}"));
    assert_eq!(parsed, spec, "JSON round trip");
    let rebuilt = ComputeDag::from_spec(&parsed).unwrap_or_else(|e| panic!("{e}\n{json}"));
    assert_eq!(rebuilt.canonical_text(), dag.canonical_text());
    assert_eq!(rebuilt.workload_key(), dag.workload_key());
    assert_eq!(rebuilt.label(), dag.label());
    assert_eq!(rebuilt.to_string(), dag.to_string());
    assert_eq!(rebuilt.to_spec(), spec);
    rebuilt
}

fn outputs_of(dag: &ComputeDag) -> Vec<HostTensor> {
    let inputs: Vec<HostTensor> = dag
        .inputs()
        .iter()
        .enumerate()
        .map(|(n, t)| {
            let dims: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
            HostTensor::random(&dims, t.dtype(), n as u64 + 3)
        })
        .collect();
    te::evaluate(dag, &inputs).expect("evaluates")
}

#[test]
fn a_matmul_round_trips_with_its_names() {
    let dag = matmul();
    let rebuilt = assert_round_trip(&dag);
    assert!(
        rebuilt
            .to_string()
            .contains("sum((A[i0, k] * B[k, i1]), axis=[k: 8])")
    );
    assert_eq!(rebuilt.workload_key().readable, "matmul[M=4,N=3,K=8,f32]");
}

#[test]
fn every_expression_kind_round_trips_and_computes_the_same() {
    let dag = everything();
    let text = dag.to_string();
    for part in [
        "erf(",
        "pow(",
        "floordiv(",
        "floormod(",
        "select(",
        "max(",
        "-inf",
        "inf",
    ] {
        assert!(text.contains(part), "the test DAG lacks {part}:\n{text}");
    }
    let rebuilt = assert_round_trip(&dag);
    let (want, got) = (outputs_of(&dag), outputs_of(&rebuilt));
    assert_eq!(want.len(), 2);
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w.to_f64_vec(), g.to_f64_vec(), "same values, bit for bit");
    }
}

#[test]
fn non_finite_constants_are_strings_in_json() {
    let json = everything().to_spec().to_json();
    assert!(json.contains("\"value\":\"-inf\""), "{json}");
    assert!(json.contains("\"value\":\"inf\""), "{json}");
    assert!(!json.contains("null"), "{json}");
}

/// The error of a spec that must be rejected.
fn fails(result: Result<ComputeDag, SpecError>) -> SpecError {
    match result {
        Ok(dag) => panic!("accepted:\n{dag}"),
        Err(e) => e,
    }
}

/// Why the matmul spec with `edit` applied to its JSON value is rejected.
fn edited(edit: impl FnOnce(&mut serde_json::Value)) -> SpecError {
    let mut value = serde_json::to_value(matmul().to_spec()).expect("serialises");
    edit(&mut value);
    fails(DagSpec::from_json(&value.to_string()).and_then(|spec| ComputeDag::from_spec(&spec)))
}

fn source(v: &mut serde_json::Value) -> &mut serde_json::Value {
    &mut v["tensors"][2]["body"]["source"]
}

#[test]
fn an_unknown_variable_names_the_stage_and_lists_those_in_scope() {
    let e =
        edited(|v| source(v)["a"]["indices"][1] = serde_json::json!({"op": "var", "name": "j"}));
    let text = e.to_string();
    assert!(matches!(e, SpecError::UnknownVariable { .. }), "{e:?}");
    assert!(text.contains("stage 'C'") && text.contains("`j`"), "{text}");
    assert!(text.contains("`i0`, `i1`, `k`"), "{text}");
}

#[test]
fn a_reduce_axis_is_out_of_scope_outside_its_reduce() {
    let mut spec = matmul().to_spec();
    if let TensorSpec::Compute { body, .. } = &mut spec.tensors[2] {
        *body = ExprSpec::Var { name: "k".into() };
    }
    let e = fails(ComputeDag::from_spec(&spec));
    assert!(e.to_string().contains("`i0`, `i1`") && !e.to_string().contains("`k`,"));
}

#[test]
fn reads_of_later_or_unknown_tensors_are_rejected() {
    for tensor in [2, 3, 99] {
        let e = edited(|v| source(v)["a"]["tensor"] = serde_json::json!(tensor));
        assert!(
            matches!(e, SpecError::BadRead { tensor: t, position: 2, .. } if t == tensor),
            "{e:?}"
        );
        assert!(e.to_string().contains("#0 to #1"), "{e}");
    }
}

#[test]
fn wrong_arity_bad_constants_and_dtypes_are_named() {
    let e = edited(|v| {
        *source(v) = serde_json::json!({"op": "call", "func": "pow", "args": [source(v).clone()]})
    });
    assert!(
        matches!(
            e,
            SpecError::Arity {
                expected: 2,
                got: 1,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("pow takes 2"), "{e}");

    for (dtype, value) in [
        ("i32", "1.5"),
        ("bool", "1"),
        ("f32", "\"infinity\""),
        ("i32", "4294967296"),
    ] {
        let e = edited(|v| {
            *source(v) = serde_json::json!({"op": "const", "dtype": dtype,
                "value": serde_json::from_str::<serde_json::Value>(value).expect("json")})
        });
        assert!(
            matches!(e, SpecError::BadConstant { .. }),
            "{dtype} {value}: {e:?}"
        );
        assert!(
            e.to_string()
                .contains(&format!("cannot have dtype {dtype}")),
            "{e}"
        );
    }

    let e = edited(|v| v["tensors"][2]["dtype"] = serde_json::json!("f64"));
    assert!(matches!(e, SpecError::StageDtype { .. }), "{e:?}");

    let e = edited(|v| v["tensors"][0]["dtype"] = serde_json::json!("f16"));
    assert!(
        matches!(e, SpecError::Parse { .. }) && e.to_string().contains("f16"),
        "{e}"
    );
}

#[test]
fn axis_names_must_be_distinct_and_one_per_dimension() {
    let e = edited(|v| v["tensors"][2]["axes"] = serde_json::json!(["i0"]));
    assert!(
        matches!(
            e,
            SpecError::AxisCount {
                axes: 1,
                rank: 2,
                ..
            }
        ),
        "{e:?}"
    );
    let e = edited(|v| v["tensors"][2]["axes"] = serde_json::json!(["k", "i1"]));
    assert!(
        matches!(e, SpecError::DuplicateAxis { ref name, .. } if name == "k"),
        "{e:?}"
    );
}

#[test]
fn unknown_fields_outputs_and_order_are_checked() {
    let e = edited(|v| v["tensors"][0]["layout"] = serde_json::json!("nchw"));
    assert!(e.to_string().contains("layout"), "{e}");
    let e = edited(|v| v["outputs"] = serde_json::json!([5]));
    assert!(
        matches!(
            e,
            SpecError::BadOutput {
                position: 5,
                count: 3,
                ..
            }
        ),
        "{e:?}"
    );
    let e = edited(|v| {
        let stage = v["tensors"][2].clone();
        v["tensors"].as_array_mut().expect("list").push(stage);
        v["tensors"][3]["name"] = serde_json::json!("D");
    });
    assert!(matches!(e, SpecError::Order { position: 3, .. }), "{e:?}");
    assert!(e.to_string().contains("no output needs"), "{e}");
}

#[test]
fn what_the_dag_check_rejects_comes_through() {
    // Reading B[k, i0] leaves B's second dimension (extent 3) for i0 < 4.
    let e =
        edited(|v| source(v)["b"]["indices"][1] = serde_json::json!({"op": "var", "name": "i0"}));
    assert!(
        matches!(e, SpecError::Dag(DagError::IndexOutOfBounds(_))),
        "{e:?}"
    );
    assert!(e.to_string().contains("stage 'C'"), "{e}");
    // Every placeholder is an input, so a placeholder output is listed twice.
    let e = edited(|v| v["outputs"] = serde_json::json!([0]));
    assert!(
        matches!(e, SpecError::Dag(DagError::DuplicateArgument { .. })),
        "{e:?}"
    );
}

#[test]
fn the_documented_json_form_is_the_matmul_spec() {
    // The example on DagSpec's docs.
    let json = r#"{"label": "matmul[M=4,N=3,K=8,f32]",
     "tensors": [
       {"kind": "placeholder", "name": "A", "shape": [4, 8], "dtype": "f32"},
       {"kind": "placeholder", "name": "B", "shape": [8, 3], "dtype": "f32"},
       {"kind": "compute", "name": "C", "shape": [4, 3], "dtype": "f32", "axes": ["i0", "i1"],
        "body": {"op": "reduce", "reducer": "sum", "axes": [{"name": "k", "extent": 8}],
                 "source": {"op": "binary", "binop": "mul",
                            "a": {"op": "read", "tensor": 0, "indices": [{"op": "var", "name": "i0"}, {"op": "var", "name": "k"}]},
                            "b": {"op": "read", "tensor": 1, "indices": [{"op": "var", "name": "k"}, {"op": "var", "name": "i1"}]}}}}],
     "outputs": [2]}"#;
    let spec = DagSpec::from_json(json).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(spec, matmul().to_spec());
}
