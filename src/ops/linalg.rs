//! Matrix products: matmul (plain and with B transposed), batch_matmul, dense.

use super::error::OpError;
use super::registry::{OpSpec, dag_error};
use super::shape::{ShapeParams, dim};
use crate::te::{ComputeDag, DType, Tensor, compute, max, placeholder, reduce_axis, sum};

const MNK: &[super::ParamSpec] = &[
    dim("M", 512, "rows of the output"),
    dim("N", 512, "columns of the output"),
    dim("K", 512, "reduction length"),
];

pub(crate) const MATMUL: OpSpec = OpSpec {
    name: "matmul",
    description: "C[M,N] = A[M,K] · B[K,N]",
    params: MNK,
    origin: super::registry::Origin::BuiltIn,
    build: build_matmul,
};

pub(crate) const MATMUL_NT: OpSpec = OpSpec {
    name: "matmul_nt",
    description: "C[M,N] = A[M,K] · B[N,K]ᵀ (B stored transposed)",
    params: MNK,
    origin: super::registry::Origin::BuiltIn,
    build: build_matmul_nt,
};

pub(crate) const BATCH_MATMUL: OpSpec = OpSpec {
    name: "batch_matmul",
    description: "C[B,M,N] = A[B,M,K] · B[B,K,N], one product per batch",
    params: &[
        dim("B", 8, "batch"),
        dim("M", 128, "rows of each output"),
        dim("N", 128, "columns of each output"),
        dim("K", 128, "reduction length"),
    ],
    origin: super::registry::Origin::BuiltIn,
    build: build_batch_matmul,
};

const DENSE_PARAMS: &[super::ParamSpec] = &[
    dim("M", 128, "batch rows"),
    dim("N", 512, "output features"),
    dim("K", 512, "input features"),
];

pub(crate) const DENSE: OpSpec = OpSpec {
    name: "dense",
    description: "out[M,N] = data[M,K] · weight[N,K]ᵀ (fully connected layer)",
    params: DENSE_PARAMS,
    origin: super::registry::Origin::BuiltIn,
    build: |p| build_dense(p, false, false),
};

pub(crate) const DENSE_BIAS: OpSpec = OpSpec {
    name: "dense_bias",
    description: "dense + bias[N]",
    params: DENSE_PARAMS,
    origin: super::registry::Origin::BuiltIn,
    build: |p| build_dense(p, true, false),
};

pub(crate) const DENSE_BIAS_RELU: OpSpec = OpSpec {
    name: "dense_bias_relu",
    description: "relu(dense + bias[N])",
    params: DENSE_PARAMS,
    origin: super::registry::Origin::BuiltIn,
    build: |p| build_dense(p, true, true),
};

fn build_matmul(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (m, n, k) = (p.get("M"), p.get("N"), p.get("K"));
    let a = placeholder("A", &[m, k], DType::F32);
    let b = placeholder("B", &[k, n], DType::F32);
    let r = reduce_axis(k, "k");
    let c = compute("C", &[m, n], |ix| {
        sum(a.at([&ix[0], &r]) * b.at([&r, &ix[1]]), [&r])
    });
    ComputeDag::new(&[a, b], &[c]).map_err(dag_error("matmul"))
}

fn build_matmul_nt(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (m, n, k) = (p.get("M"), p.get("N"), p.get("K"));
    let a = placeholder("A", &[m, k], DType::F32);
    let b = placeholder("B", &[n, k], DType::F32);
    let c = matmul_transposed(&a, &b, m, n, k, "C");
    ComputeDag::new(&[a, b], &[c]).map_err(dag_error("matmul_nt"))
}

/// `out[m,n] = Σk a[m,k]·b[n,k]`
fn matmul_transposed(a: &Tensor, b: &Tensor, m: i64, n: i64, k: i64, name: &str) -> Tensor {
    let r = reduce_axis(k, "k");
    compute(name, &[m, n], |ix| {
        sum(a.at([&ix[0], &r]) * b.at([&ix[1], &r]), [&r])
    })
}

fn build_batch_matmul(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (batch, m, n, k) = (p.get("B"), p.get("M"), p.get("N"), p.get("K"));
    let a = placeholder("A", &[batch, m, k], DType::F32);
    let b = placeholder("B", &[batch, k, n], DType::F32);
    let r = reduce_axis(k, "k");
    let c = compute("C", &[batch, m, n], |ix| {
        sum(
            a.at([&ix[0], &ix[1], &r]) * b.at([&ix[0], &r, &ix[2]]),
            [&r],
        )
    });
    ComputeDag::new(&[a, b], &[c]).map_err(dag_error("batch_matmul"))
}

fn build_dense(p: &ShapeParams, bias: bool, relu: bool) -> Result<ComputeDag, OpError> {
    let (m, n, k) = (p.get("M"), p.get("N"), p.get("K"));
    let data = placeholder("data", &[m, k], DType::F32);
    let weight = placeholder("weight", &[n, k], DType::F32);
    let mut out = matmul_transposed(&data, &weight, m, n, k, "dense");
    let mut inputs = vec![data, weight];
    let name = match (bias, relu) {
        (false, _) => "dense",
        (true, false) => "dense_bias",
        (true, true) => "dense_bias_relu",
    };
    if bias {
        let b = placeholder("bias", &[n], DType::F32);
        let product = out;
        out = compute("bias_add", &[m, n], |ix| {
            product.at([&ix[0], &ix[1]]) + b.at([&ix[1]])
        });
        inputs.push(b);
    }
    if relu {
        let pre = out;
        out = compute("relu", &[m, n], |ix| max(pre.at([&ix[0], &ix[1]]), 0.0));
    }
    ComputeDag::new(&inputs, &[out]).map_err(dag_error(name))
}
