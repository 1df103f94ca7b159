//! Elementwise nodes: unary functions, Clip, LeakyRelu, Gelu, the broadcast
//! binary operators and the variadic Sum.

use std::f32::consts::FRAC_1_SQRT_2;

use crate::te::{Expr, abs, compute, erf, exp, max, min, pow, select, sigmoid, sqrt, tanh};

use super::super::error::GraphError;
use super::super::ir::{BinaryOp, UnaryOp};
use super::Lowered;
use super::builder::KernelBuilder;

/// `f(x)` for every element of input 0; `registry` names a 2-D registry op
/// computing the same (`relu`, `gelu`).
fn map_unary(
    mut b: KernelBuilder<'_>,
    stage: &str,
    registry: Option<&str>,
    f: impl Fn(Expr) -> Expr,
) -> Result<Lowered, GraphError> {
    let out = b.output_shape()?;
    if let (Some(op), [m, n]) = (registry, out.as_slice()) {
        if b.input_shape(0)? == out && b.scalar_constant(0)?.is_none() {
            let (m, n) = (*m, *n);
            return b.registry(op, &[("M", m), ("N", n)], &[0]);
        }
    }
    let x = b.broadcast(0, "x", &out)?;
    let dims = b.dims(&out)?;
    let y = compute(stage, &dims, |ix| f(x.at(ix)));
    b.finish(y)
}

/// A [`UnaryOp`] node.
pub(super) fn unary(b: KernelBuilder<'_>, op: UnaryOp) -> Result<Lowered, GraphError> {
    match op {
        UnaryOp::Relu => map_unary(b, "relu", Some("relu"), |x| max(x, 0.0f32)),
        UnaryOp::Sigmoid => map_unary(b, "sigmoid", None, sigmoid),
        UnaryOp::Tanh => map_unary(b, "tanh", None, tanh),
        UnaryOp::Erf => map_unary(b, "erf", None, erf),
        UnaryOp::Sqrt => map_unary(b, "sqrt", None, sqrt),
        UnaryOp::Exp => map_unary(b, "exp", None, exp),
        UnaryOp::Neg => map_unary(b, "neg", None, |x| -x),
        UnaryOp::Abs => map_unary(b, "abs", None, abs),
        UnaryOp::Reciprocal => map_unary(b, "reciprocal", None, |x| 1.0f32 / x),
    }
}

/// `min(max(x, lo), hi)`, an infinite bound omitted.
pub(super) fn clip(b: KernelBuilder<'_>, lo: f32, hi: f32) -> Result<Lowered, GraphError> {
    map_unary(b, "clip", None, |x| {
        let x = if lo == f32::NEG_INFINITY { x } else { max(x, lo) };
        if hi == f32::INFINITY { x } else { min(x, hi) }
    })
}

/// `alpha·x` below 0, `x` from 0 on.
pub(super) fn leaky_relu(b: KernelBuilder<'_>, alpha: f32) -> Result<Lowered, GraphError> {
    map_unary(b, "leaky_relu", None, |x| {
        select(x.lt(0.0f32), &x * alpha, &x)
    })
}

/// `0.5·x·(1 + erf(x/√2))`, or `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
pub(super) fn gelu(b: KernelBuilder<'_>, tanh_form: bool) -> Result<Lowered, GraphError> {
    if tanh_form {
        let k = (2.0f64 / std::f64::consts::PI).sqrt() as f32;
        map_unary(b, "gelu", None, |x| {
            let inner = (&x + &x * &x * &x * 0.044715f32) * k;
            &x * 0.5f32 * (tanh(inner) + 1.0f32)
        })
    } else {
        map_unary(b, "gelu", Some("gelu"), |x| {
            &x * 0.5f32 * (erf(&x * FRAC_1_SQRT_2) + 1.0f32)
        })
    }
}

/// A [`BinaryOp`] node with numpy broadcasting; `Pow` by a literal 2, 0.5
/// or 1 becomes `x·x`, `sqrt(x)` or `x`.
pub(super) fn binary(mut b: KernelBuilder<'_>, op: BinaryOp) -> Result<Lowered, GraphError> {
    let out = b.output_shape()?;
    let lhs = b.broadcast(0, "x0", &out)?;
    let rhs = b.broadcast(1, "x1", &out)?;
    let dims = b.dims(&out)?;
    let stage = match op {
        BinaryOp::Add => "add",
        BinaryOp::Sub => "sub",
        BinaryOp::Mul => "mul",
        BinaryOp::Div => "div",
        BinaryOp::Pow => "pow",
    };
    let y = compute(stage, &dims, |ix| {
        let (a, c) = (lhs.at(ix), rhs.at(ix));
        match op {
            BinaryOp::Add => a + c,
            BinaryOp::Sub => a - c,
            BinaryOp::Mul => a * c,
            BinaryOp::Div => a / c,
            BinaryOp::Pow => match rhs.literal() {
                Some(2.0) => &a * &a,
                Some(0.5) => sqrt(a),
                Some(1.0) => a,
                _ => pow(a, c),
            },
        }
    });
    b.finish(y)
}

/// The broadcast sum of every input.
pub(super) fn sum(mut b: KernelBuilder<'_>) -> Result<Lowered, GraphError> {
    let out = b.output_shape()?;
    if b.node.inputs.is_empty() {
        return Err(GraphError::bad_node(b.node, "Sum needs at least one input"));
    }
    let terms = (0..b.node.inputs.len())
        .map(|i| b.broadcast(i, &format!("x{i}"), &out))
        .collect::<Result<Vec<_>, _>>()?;
    let dims = b.dims(&out)?;
    let y = compute("sum", &dims, |ix| {
        let mut total = terms[0].at(ix);
        for t in &terms[1..] {
            total = total + t.at(ix);
        }
        total
    });
    b.finish(y)
}
