//! Operators defined with `tessera::op!`: their DAGs equal the same formulas
//! written with the te API (same WorkloadKey), and their typed call wrappers
//! compute what the reference interpreter computes.

use tessera::ops;
use tessera::te::{
    self, ComputeDag, DType, HostTensor, compute, max, placeholder, reduce_axis, select, sum,
};

tessera::op! {
    /// C = A · B.
    pub fn mm(A: f32[M, K], B: f32[K, N]) -> f32[M, N] {
        C[i, j] = sum(k) A[i, k] * B[k, j]
    }
}

tessera::op! {
    /// The registry's dense_bias_relu, stage for stage.
    pub fn dense_layer(data: f32[M, K], weight: f32[N, K], bias: f32[N]) -> f32[M, N] {
        dense[i, j] = sum(k) data[i, k] * weight[j, k];
        bias_add[i, j] = dense[i, j] + bias[j];
        relu[i, j] = max(bias_add[i, j], 0.0)
    }
}

tessera::op! {
    /// Dense layer with bias and ReLU.
    pub fn dense_relu(x: f32[M, K], w: f32[N, K], b: f32[N]) -> f32[M, N] {
        y[i, j] = sum(k) x[i, k] * w[j, k];
        out[i, j] = max(y[i, j] + b[j], 0.0)
    }
}

tessera::op! {
    /// A 3×3 box filter with zero padding.
    pub fn blur(x: f32[H, W]) -> f32[H, W] {
        out[i, j] = sum(r in 0..3, s in 0..3)
            if i + r >= 1 && i + r < H + 1 && j + s >= 1 && j + s < W + 1 {
                x[i + r - 1, j + s - 1] / 9.0
            } else {
                0.0
            }
    }
}

tessera::op! {
    /// Attention scores q·kᵀ/√D, then a row softmax-style max.
    pub fn scores(q: f32[L, D], k: f32[S, D]) -> f32[L, S] {
        dot[i, j] = sum(d) q[i, d] * k[j, d];
        out[i, j] = dot[i, j] / sqrt(D as f32) - 0.5 * tanh(dot[i, j])
    }
}

tessera::op! {
    /// Mixed dtypes: integer input converted explicitly; max-reduction.
    fn row_max(x: i32[R, C], scale: f64[C]) -> f64[R] {
        out[i] = max(j) x[i, j] as f64 * scale[j] + (i as f64)
    }
}

fn registry_dag(name: &str, params: &[(&str, i64)]) -> ComputeDag {
    let op = ops::find(name).expect("registered");
    op.build(&op.shape(params).expect("valid shape"))
        .expect("builds")
}

#[test]
fn constants_describe_the_definition() {
    assert_eq!(dense_relu::NAME, "dense_relu");
    assert_eq!(dense_relu::DOC, "Dense layer with bias and ReLU.");
    assert_eq!(dense_relu::PARAMS, &["M", "K", "N"]);
    assert_eq!(dense_relu::INPUTS, &["x", "w", "b"]);
    assert_eq!(dense_relu::OUTPUT, "out");
    assert_eq!(blur::PARAMS, &["H", "W"]);
    assert_eq!(scores::PARAMS, &["L", "D", "S"]);
}

#[test]
fn matmul_has_the_registry_key() {
    let ours = mm::dag(&[64, 32, 48]).expect("builds");
    let theirs = registry_dag("matmul", &[("M", 64), ("N", 48), ("K", 32)]);
    assert_eq!(ours.workload_key().hash, theirs.workload_key().hash);
    assert_eq!(ours.label(), "mm[M=64,K=32,N=48,f32]");
    let other_shape = mm::dag(&[64, 32, 47]).expect("builds");
    assert_ne!(other_shape.workload_key().hash, theirs.workload_key().hash);
}

#[test]
fn dense_bias_relu_has_the_registry_key() {
    let ours = dense_layer::dag(&[8, 16, 12]).expect("builds");
    let theirs = registry_dag("dense_bias_relu", &[("M", 8), ("N", 12), ("K", 16)]);
    assert_eq!(ours.canonical_text(), theirs.canonical_text());
    assert_eq!(ours.workload_key().hash, theirs.workload_key().hash);
    // The two-stage form is a different formula, hence a different workload.
    let fused = dense_relu::dag(&[8, 16, 12]).expect("builds");
    assert_ne!(fused.workload_key().hash, theirs.workload_key().hash);
}

#[test]
fn stencil_and_attention_match_the_te_api() {
    let (h, w) = (9, 7);
    let x = placeholder("img", &[h, w], DType::F32);
    let r = reduce_axis(3, "r");
    let s = reduce_axis(3, "s");
    let out = compute("blurred", &[h, w], |ix| {
        let (yi, xi) = ((&ix[0] + &r), (&ix[1] + &s));
        // `H + 1` in the macro is index arithmetic on the parameter, not folded.
        let (h1, w1) = (te::Expr::i64(h) + 1, te::Expr::i64(w) + 1);
        let inside = yi.ge(1) & yi.lt(h1) & xi.ge(1) & xi.lt(w1);
        let read = x.at([&ix[0] + &r - 1, &ix[1] + &s - 1]) / 9.0;
        sum(select(inside, read, 0.0), [&r, &s])
    });
    let te_blur = ComputeDag::new(&[x], &[out]).expect("valid");
    let ours = blur::dag(&[h, w]).expect("builds");
    assert_eq!(ours.canonical_text(), te_blur.canonical_text());

    let (l, d, s_len) = (5, 8, 6);
    let q = placeholder("q", &[l, d], DType::F32);
    let k = placeholder("k", &[s_len, d], DType::F32);
    let rd = reduce_axis(d, "d");
    let dot = compute("dot", &[l, s_len], |ix| {
        sum(q.at([&ix[0], &rd]) * k.at([&ix[1], &rd]), [&rd])
    });
    let out = compute("out", &[l, s_len], |ix| {
        let v = dot.at([&ix[0], &ix[1]]);
        &v / te::sqrt(te::cast(DType::F32, te::Expr::i64(d))) - 0.5 * te::tanh(&v)
    });
    let te_scores = ComputeDag::new(&[q, k], &[out]).expect("valid");
    let ours = scores::dag(&[l, d, s_len]).expect("builds");
    assert_eq!(ours.workload_key().hash, te_scores.workload_key().hash);
}

#[test]
fn max_with_a_literal_matches_te() {
    let x = placeholder("x", &[4], DType::F32);
    let out = compute("out", &[4], |ix| max(x.at([&ix[0]]), 0.0));
    let te_dag = ComputeDag::new(&[x], &[out]).expect("valid");
    tessera::op! {
        fn relu4(x: f32[4]) -> f32[4] {
            out[i] = max(x[i], 0)
        }
    }
    assert!(relu4::PARAMS.is_empty());
    let ours = relu4::dag(&[]).expect("builds");
    assert_eq!(ours.canonical_text(), te_dag.canonical_text());
    assert_eq!(ours.label(), "relu4[f32]");
}

tessera::op! {
    /// Scaled row sums.
    #[defaults(R = 16, C = 32)]
    pub fn row_sums(x: f32[R, C], scale: f32[C]) -> f32[R] {
        out[i] = sum(j) x[i, j] * scale[j]
    }
}

#[test]
fn macro_ops_register_themselves() {
    let op = ops::find("dense_relu").expect("op! registers dense_relu");
    assert!(
        matches!(op.origin, ops::Origin::Registered(at) if at.contains("dense_relu") && at.contains("custom_op.rs")),
        "{:?}",
        op.origin
    );
    assert_eq!(
        op.description,
        "Dense layer with bias and ReLU. (x[M,K], w[N,K], b[N] → out[M,N])"
    );
    let names: Vec<&str> = op.params.iter().map(|p| p.name).collect();
    assert_eq!(names, dense_relu::PARAMS);
    assert!(op.params.iter().all(|p| p.default.is_none() && p.min == 1));
    assert_eq!(op.params[2].help, "dimension of w, b, out");
    let missing = op.default_shape();
    assert!(
        matches!(&missing, Err(ops::OpError::MissingParam { param, .. }) if param == "M"),
        "{missing:?}"
    );
    let via_registry = registry_dag("dense_relu", &[("M", 8), ("N", 12), ("K", 16)]);
    let direct = dense_relu::dag(&[8, 16, 12]).expect("builds");
    assert_eq!(via_registry.workload_key(), direct.workload_key());
    assert_eq!(via_registry.label(), "dense_relu[M=8,K=16,N=12,f32]");
    let listed: Vec<&str> = ops::registry().iter().map(|op| op.name).collect();
    for name in [
        "mm",
        "dense_layer",
        "dense_relu",
        "blur",
        "scores",
        "row_max",
        "relu4",
    ] {
        assert!(listed.contains(&name), "{name} missing from {listed:?}");
    }
    // The built-ins come first, in their own order.
    assert_eq!(listed[0], "matmul");
}

#[test]
fn defaults_fill_the_shape() {
    let op = ops::find("row_sums").expect("registered");
    let shape = op.default_shape().expect("every parameter has a default");
    assert_eq!(shape.to_text(), "R=16,C=32");
    let dag = op
        .build(&op.parse_shape("C=8").expect("valid"))
        .expect("builds");
    assert_eq!(dag.label(), "row_sums[R=16,C=8,f32]");
    assert_eq!(row_sums::PARAM_SPECS[1].default, Some(32));
    let label = row_max::dag(&[2, 3]).expect("builds").label().to_string();
    let via_registry = registry_dag("row_max", &[("R", 2), ("C", 3)]);
    assert_eq!(
        via_registry.label(),
        label,
        "non-f32 outputs keep their dtype"
    );
}

#[test]
fn a_name_defined_twice_is_an_error_naming_both() {
    tessera::op! {
        /// Collides with the built-in gelu on purpose.
        fn gelu(x: f32[N]) -> f32[N] {
            out[i] = x[i]
        }
    }
    assert_eq!(gelu::NAME, "gelu");
    let err = ops::find("gelu").err().expect("ambiguous");
    let text = err.to_string();
    assert!(matches!(err, ops::OpError::AmbiguousOp { .. }), "{text}");
    assert!(
        text.contains("built-in") && text.contains("custom_op.rs"),
        "{text}"
    );
    let unknown = ops::find("no_such_op").err().expect("unknown").to_string();
    assert!(
        unknown.contains("dense_relu"),
        "registered ops are listed: {unknown}"
    );
}

fn random(shape: &[i64], dtype: DType, seed: u64) -> HostTensor {
    let shape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    HostTensor::random(&shape, dtype, seed)
}

fn f32s(t: &HostTensor) -> Vec<f32> {
    t.as_f32().expect("f32").to_vec()
}

fn assert_close(label: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{label}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{label}[{i}]: got {g}, want {w}"
        );
    }
}

/// Runs the reference interpreter on `dag` with random inputs; returns the
/// inputs and the expected output.
fn reference(dag: &ComputeDag, seed: u64) -> (Vec<HostTensor>, Vec<f64>) {
    let inputs: Vec<HostTensor> = dag
        .inputs()
        .iter()
        .enumerate()
        .map(|(n, t)| random(t.shape(), t.dtype(), seed + n as u64))
        .collect();
    let want = te::evaluate(dag, &inputs).expect("evaluates");
    (inputs, want[0].to_f64_vec())
}

#[test]
fn dense_relu_call_matches_the_interpreter() {
    let op = dense_relu::Compiled::new(&[6, 20, 10]).expect("compiles");
    let (inputs, want) = reference(op.dag(), 1);
    let mut out = vec![f32::NAN; 60];
    op.call(
        &f32s(&inputs[0]),
        &f32s(&inputs[1]),
        &f32s(&inputs[2]),
        &mut out,
    )
    .expect("runs");
    let got: Vec<f64> = out.iter().map(|&v| f64::from(v)).collect();
    assert_close("dense_relu", &got, &want, 1e-5);
    assert!(got.iter().all(|&v| v >= 0.0));
}

#[test]
fn stencil_and_attention_calls_match_the_interpreter() {
    let op = blur::Compiled::new(&[9, 7]).expect("compiles");
    let (inputs, want) = reference(op.dag(), 2);
    let mut out = vec![0.0f32; 63];
    op.call(&f32s(&inputs[0]), &mut out).expect("runs");
    let got: Vec<f64> = out.iter().map(|&v| f64::from(v)).collect();
    assert_close("blur", &got, &want, 1e-5);

    let op = scores::Compiled::new(&[5, 8, 6]).expect("compiles");
    let (inputs, want) = reference(op.dag(), 3);
    let mut out = vec![0.0f32; 30];
    op.call(&f32s(&inputs[0]), &f32s(&inputs[1]), &mut out)
        .expect("runs");
    let got: Vec<f64> = out.iter().map(|&v| f64::from(v)).collect();
    assert_close("scores", &got, &want, 1e-5);
}

#[test]
fn integer_and_f64_arguments_round_trip() {
    let op = row_max::Compiled::new(&[3, 5]).expect("compiles");
    let (inputs, want) = reference(op.dag(), 4);
    let x: Vec<i32> = match inputs[0].data() {
        te::HostData::I32(v) => v.clone(),
        _ => panic!("x is i32"),
    };
    let scale: Vec<f64> = inputs[1].to_f64_vec();
    let mut out = vec![0.0f64; 3];
    op.call(&x, &scale, &mut out).expect("runs");
    assert_close("row_max", &out, &want, 1e-12);
}

#[test]
fn the_wrapper_runs_a_kernel_compiled_elsewhere() {
    let dag = mm::dag(&[4, 3, 2]).expect("builds");
    let func = tessera::tir::lower(&tessera::schedule::State::new(&dag)).expect("lowers");
    let kernel = tessera::codegen::compile(&func, &tessera::codegen::CodegenOptions::default())
        .expect("compiles");
    let a: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let b: Vec<f32> = (0..6).map(|v| v as f32 * 0.5).collect();
    let mut c = vec![0.0f32; 8];
    mm::call(&kernel, &a, &b, &mut c).expect("runs");
    // C[0, 0] = 0·0 + 1·1 + 2·2 (B[k, 0] = k); C[1, 1] = 3·0.5 + 4·1.5 + 5·2.5.
    assert_eq!(c[0], 5.0);
    assert_eq!(c[3], 20.0);
}

#[test]
fn wrong_shapes_are_typed_errors() {
    let err = dense_relu::dag(&[4, 4])
        .err()
        .expect("two values for three parameters");
    let text = err.to_string();
    assert!(matches!(err, ops::OpError::InvalidShape { .. }), "{text}");
    assert!(text.contains("M, K, N") && text.contains("got 2"), "{text}");
    assert!(matches!(
        dense_relu::dag(&[4, 0, 4]),
        Err(ops::OpError::Dag { .. })
    ));

    let op = dense_relu::Compiled::new(&[2, 3, 4]).expect("compiles");
    let mut out = vec![0.0f32; 8];
    let err = op
        .call(&[0.0; 6], &[0.0; 11], &[0.0; 4], &mut out)
        .expect_err("w is too short");
    match &err {
        dense_relu::Error::Length {
            arg, expected, got, ..
        } => assert_eq!((*arg, *expected, *got), ("w", 12, 11)),
        other => panic!("wrong error: {other}"),
    }
    assert!(err.to_string().contains("'w'"), "{err}");
    let mut short = vec![0.0f32; 7];
    assert!(matches!(
        op.call(&[0.0; 6], &[0.0; 12], &[0.0; 4], &mut short),
        Err(dense_relu::Error::Length { arg: "out", .. })
    ));
    let other = mm::Compiled::new(&[2, 2, 2]).expect("compiles");
    assert!(matches!(
        dense_relu::call(other.kernel(), &[0.0; 6], &[0.0; 12], &[0.0; 4], &mut out),
        Err(dense_relu::Error::Signature(_))
    ));
}
