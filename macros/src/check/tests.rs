//! Unit tests of checking: inference and the error messages not covered by
//! the trybuild suite.

use super::*;

fn error_of(source: &str) -> String {
    let def: OpDef = match syn::parse_str(source) {
        Ok(def) => def,
        Err(e) => return e.to_string(),
    };
    match check(&def) {
        Ok(_) => String::from("ok"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn infers_params_extents_and_dtypes() {
    let def: OpDef = syn::parse_str(
        "pub fn f(x: f32[M, K], w: f32[N, K]) -> f32[M, N] {
             y[i, j] = sum(k) x[i, k] * w[j, k];
             t[j] = w[j, 0] as f64;
             out[i, j] = y[i, j] + t[j] as f32 * 2
         }",
    )
    .expect("parses");
    let c = check(&def).expect("checks");
    let names: Vec<String> = c.params.iter().map(|p| p.to_string()).collect();
    assert_eq!(names, ["M", "K", "N"]);
    let y = &c.stages[0];
    assert!(y.shape == [Extent::Param(0), Extent::Param(2)]);
    let (_, axes) = y.reduce.as_ref().expect("a reduction");
    assert!(axes[0].1 == Extent::Param(1));
    assert_eq!(c.stages[1].dtype, DType::F64);
    assert_eq!(c.stages[2].dtype, DType::F32);
}

#[test]
fn reports_each_mistake() {
    let cases = [
        (
            "fn f(x: f32[N]) -> f32[N] { t[i] = x[i + 1]; out[i] = t[i] }",
            "cannot infer the extent of `i`",
        ),
        (
            "fn f(x: f32[N]) -> f32[N] { out[i] = sum(k) x[i + k] }",
            "`k in 0..R`",
        ),
        (
            "fn f(x: f32[N]) -> f32[N] { out[i] = x[i] + sum(k) x[k] }",
            "whole right-hand side",
        ),
        (
            "fn f(x: f32[N]) -> f32[N] { out[i, j] = x[i] }",
            "wrong number of indices",
        ),
        (
            "fn f(x: i32[N]) -> f32[N] { out[i] = x[i] }",
            "declared f32 but this computes i32",
        ),
        (
            "fn f(x: f32[N]) -> f32[N] { out[i] = x[i] + 0.5 * i }",
            "dtype mismatch",
        ),
        (
            "fn f(x: f32[N]) -> f32[N] { out[i] = foo(x[i]) }",
            "unknown function `foo`",
        ),
        (
            "fn f(x: f32[N]) -> f32[N] { out[i] = x }",
            "must be indexed",
        ),
        (
            "fn f(x: f32[N]) -> f32[N] { out[i] = exp(i) }",
            "needs a float argument",
        ),
        (
            "fn f(x: f32[N]) -> f32[N] { out[i] = if x[i] { 1.0 } else { 0.0 } }",
            "comparison",
        ),
        (
            "fn f(kernel: f32[N]) -> f32[N] { out[i] = kernel[i] }",
            "rename this tensor",
        ),
        (
            "fn f(x: f32[N]) -> f32[N] { x[i] = x[i] }",
            "already defined",
        ),
        (
            "fn f(x: f32[N]) -> f32[N] { out[i] = sum(k in 1..N) x[k] }",
            "start at 0",
        ),
        (
            "fn f(x: u8[N]) -> f32[N] { out[i] = x[i] }",
            "unknown dtype `u8`",
        ),
    ];
    for (source, expected) in cases {
        let error = error_of(source);
        assert!(error.contains(expected), "{source}\n  gave: {error}");
    }
}
