//! Elementwise ops on 2-D tensors.

use super::error::OpError;
use super::registry::{OpSpec, dag_error};
use super::shape::{ParamSpec, ShapeParams, dim};
use crate::te::{ComputeDag, DType, compute, erf, max, placeholder};

const ROWS: &[ParamSpec] = &[dim("M", 1024, "rows"), dim("N", 1024, "columns")];

pub(crate) const RELU: OpSpec = OpSpec {
    name: "relu",
    description: "max(x[M,N], 0)",
    params: ROWS,
    origin: super::registry::Origin::BuiltIn,
    build: build_relu,
};

pub(crate) const GELU: OpSpec = OpSpec {
    name: "gelu",
    description: "0.5 * x * (1 + erf(x / sqrt 2)) on x[M,N] (exact GELU)",
    params: ROWS,
    origin: super::registry::Origin::BuiltIn,
    build: build_gelu,
};

pub(crate) const BIAS_ADD: OpSpec = OpSpec {
    name: "bias_add",
    description: "x[M,N] + bias[N]",
    params: ROWS,
    origin: super::registry::Origin::BuiltIn,
    build: build_bias_add,
};

fn build_relu(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (m, n) = (p.get("M"), p.get("N"));
    let x = placeholder("x", &[m, n], DType::F32);
    let out = compute("relu", &[m, n], |ix| max(x.at([&ix[0], &ix[1]]), 0.0));
    ComputeDag::new(&[x], &[out]).map_err(dag_error("relu"))
}

fn build_gelu(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (m, n) = (p.get("M"), p.get("N"));
    let x = placeholder("x", &[m, n], DType::F32);
    let out = compute("gelu", &[m, n], |ix| {
        let v = x.at([&ix[0], &ix[1]]);
        &v * 0.5 * (erf(&v * std::f32::consts::FRAC_1_SQRT_2) + 1.0)
    });
    ComputeDag::new(&[x], &[out]).map_err(dag_error("gelu"))
}

fn build_bias_add(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (m, n) = (p.get("M"), p.get("N"));
    let x = placeholder("x", &[m, n], DType::F32);
    let bias = placeholder("bias", &[n], DType::F32);
    let out = compute("bias_add", &[m, n], |ix| {
        x.at([&ix[0], &ix[1]]) + bias.at([&ix[1]])
    });
    ComputeDag::new(&[x, bias], &[out]).map_err(dag_error("bias_add"))
}
