//! Subgraphs of the Ansor suite: ConvLayer (conv2d + batch norm + ReLU) and
//! TBG (transpose + batch matmul, the attention pattern).

use super::error::OpError;
use super::nn_conv::conv2d_nhwc_stage;
use super::registry::{OpSpec, dag_error};
use super::shape::{ShapeParams, dim, pad};
use crate::te::{ComputeDag, DType, compute, max, placeholder, reduce_axis, sum};

pub(crate) const CONV2D_BN_RELU: OpSpec = OpSpec {
    name: "conv2d_bn_relu",
    description: "ConvLayer, NHWC: relu((conv2d(data, weight) + bias) * bn_scale + bn_offset)",
    params: &[
        dim("N", 1, "batch"),
        dim("H", 56, "input height"),
        dim("W", 56, "input width"),
        dim("C", 64, "input channels"),
        dim("K", 64, "output channels"),
        dim("R", 3, "kernel height"),
        dim("S", 3, "kernel width"),
        dim("stride", 1, "stride of both spatial dimensions"),
        pad("pad", 1, "zero padding on each side"),
        dim("dilation", 1, "kernel dilation"),
    ],
    origin: super::registry::Origin::BuiltIn,
    build: build_conv2d_bn_relu,
};

pub(crate) const TRANSPOSE_BATCH_MATMUL: OpSpec = OpSpec {
    name: "transpose_batch_matmul",
    description: "TBG (attention scores): out[B,H,L,L] = query[B,L,H,D] · value[B,L,H,D] over D, per head",
    params: &[
        dim("B", 1, "batch"),
        dim("L", 128, "sequence length"),
        dim("H", 12, "heads"),
        dim("D", 64, "head dimension"),
    ],
    origin: super::registry::Origin::BuiltIn,
    build: build_transpose_batch_matmul,
};

fn build_conv2d_bn_relu(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let op = "conv2d_bn_relu";
    let (n, h, w, c, k) = (p.get("N"), p.get("H"), p.get("W"), p.get("C"), p.get("K"));
    let (r, s) = (p.get("R"), p.get("S"));
    let data = placeholder("data", &[n, h, w, c], DType::F32);
    let weight = placeholder("weight", &[r, s, c, k], DType::F32);
    let bias = placeholder("bias", &[k], DType::F32);
    let scale = placeholder("bn_scale", &[k], DType::F32);
    let offset = placeholder("bn_offset", &[k], DType::F32);
    let conv = conv2d_nhwc_stage(op, p, &data, &weight)?;
    let shape = conv.shape().to_vec();
    let biased = compute("bias_add", &shape, |ix| {
        conv.at([&ix[0], &ix[1], &ix[2], &ix[3]]) + bias.at([&ix[3]])
    });
    let scaled = compute("bn_mul", &shape, |ix| {
        biased.at([&ix[0], &ix[1], &ix[2], &ix[3]]) * scale.at([&ix[3]])
    });
    let shifted = compute("bn_add", &shape, |ix| {
        scaled.at([&ix[0], &ix[1], &ix[2], &ix[3]]) + offset.at([&ix[3]])
    });
    let out = compute("relu", &shape, |ix| {
        max(shifted.at([&ix[0], &ix[1], &ix[2], &ix[3]]), 0.0)
    });
    ComputeDag::new(&[data, weight, bias, scale, offset], &[out]).map_err(dag_error(op))
}

fn build_transpose_batch_matmul(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (b, l, h, d) = (p.get("B"), p.get("L"), p.get("H"), p.get("D"));
    let query = placeholder("query", &[b, l, h, d], DType::F32);
    let value = placeholder("value", &[b, l, h, d], DType::F32);
    let query_t = compute("query_T", &[b, h, l, d], |ix| {
        query.at([&ix[0], &ix[2], &ix[1], &ix[3]])
    });
    let value_t = compute("value_T", &[b, h, d, l], |ix| {
        value.at([&ix[0], &ix[3], &ix[1], &ix[2]])
    });
    let rd = reduce_axis(d, "k");
    let out = compute("scores", &[b, h, l, l], |ix| {
        sum(
            query_t.at([&ix[0], &ix[1], &ix[2], &rd]) * value_t.at([&ix[0], &ix[1], &rd, &ix[3]]),
            [&rd],
        )
    });
    ComputeDag::new(&[query, value], &[out]).map_err(dag_error("transpose_batch_matmul"))
}
