//! Reductions over rows: matrix 2-norm, softmax, layer normalisation.

use super::error::OpError;
use super::registry::{OpSpec, dag_error};
use super::shape::{ParamSpec, ShapeParams, dim};
use crate::te::{ComputeDag, DType, compute, exp, placeholder, reduce_axis, reduce_max, sqrt, sum};

const ROWS: &[ParamSpec] = &[dim("M", 128, "rows"), dim("N", 1024, "row length")];

/// The epsilon added to the variance in layer_norm.
pub const LAYER_NORM_EPS: f32 = 1e-5;

pub(crate) const NORM: OpSpec = OpSpec {
    name: "norm",
    description: "matrix 2-norm per batch: out[B] = sqrt(sum of A[B,M,N] squared)",
    params: &[
        dim("B", 4, "batch"),
        dim("M", 256, "rows"),
        dim("N", 256, "columns"),
    ],
    origin: super::registry::Origin::BuiltIn,
    build: build_norm,
};

pub(crate) const SOFTMAX: OpSpec = OpSpec {
    name: "softmax",
    description: "softmax over the last axis of x[M,N] (max-subtracted; times 1/row sum)",
    params: ROWS,
    origin: super::registry::Origin::BuiltIn,
    build: build_softmax,
};

pub(crate) const LAYER_NORM: OpSpec = OpSpec {
    name: "layer_norm",
    description: "layer normalisation of x[M,N] over N (times 1/sqrt(variance + 1e-5) per row), then * gamma[N] + beta[N]",
    params: ROWS,
    origin: super::registry::Origin::BuiltIn,
    build: build_layer_norm,
};

fn build_norm(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (b, m, n) = (p.get("B"), p.get("M"), p.get("N"));
    let a = placeholder("A", &[b, m, n], DType::F32);
    let (ri, rj) = (reduce_axis(m, "ri"), reduce_axis(n, "rj"));
    let squares = compute("sum_squares", &[b], |ix| {
        let x = a.at([&ix[0], &ri, &rj]);
        sum(&x * &x, [&ri, &rj])
    });
    let out = compute("norm", &[b], |ix| sqrt(squares.at([&ix[0]])));
    ComputeDag::new(&[a], &[out]).map_err(dag_error("norm"))
}

fn build_softmax(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (m, n) = (p.get("M"), p.get("N"));
    let x = placeholder("x", &[m, n], DType::F32);
    let rk = reduce_axis(n, "k");
    let row_max = compute("row_max", &[m], |ix| reduce_max(x.at([&ix[0], &rk]), [&rk]));
    let shifted_exp = compute("exp", &[m, n], |ix| {
        exp(x.at([&ix[0], &ix[1]]) - row_max.at([&ix[0]]))
    });
    let rs = reduce_axis(n, "k");
    let row_sum = compute("row_sum", &[m], |ix| {
        sum(shifted_exp.at([&ix[0], &rs]), [&rs])
    });
    // One division per row, one multiplication per element.
    let row_inv = compute("row_inv", &[m], |ix| 1.0f32 / row_sum.at([&ix[0]]));
    let out = compute("softmax", &[m, n], |ix| {
        shifted_exp.at([&ix[0], &ix[1]]) * row_inv.at([&ix[0]])
    });
    ComputeDag::new(&[x], &[out]).map_err(dag_error("softmax"))
}

fn build_layer_norm(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (m, n) = (p.get("M"), p.get("N"));
    let x = placeholder("x", &[m, n], DType::F32);
    let gamma = placeholder("gamma", &[n], DType::F32);
    let beta = placeholder("beta", &[n], DType::F32);
    let inv_n = 1.0 / n as f32;
    let rk = reduce_axis(n, "k");
    let mean = compute("mean", &[m], |ix| sum(x.at([&ix[0], &rk]) * inv_n, [&rk]));
    let rv = reduce_axis(n, "k");
    let variance = compute("variance", &[m], |ix| {
        let d = x.at([&ix[0], &rv]) - mean.at([&ix[0]]);
        sum(&d * &d * inv_n, [&rv])
    });
    // One square root and division per row, multiplications per element.
    let rstd = compute("rstd", &[m], |ix| {
        1.0f32 / sqrt(variance.at([&ix[0]]) + LAYER_NORM_EPS)
    });
    let out = compute("layer_norm", &[m, n], |ix| {
        let centered = x.at([&ix[0], &ix[1]]) - mean.at([&ix[0]]);
        centered * rstd.at([&ix[0]]) * gamma.at([&ix[1]]) + beta.at([&ix[1]])
    });
    ComputeDag::new(&[x, gamma, beta], &[out]).map_err(dag_error("layer_norm"))
}
