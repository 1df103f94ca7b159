//! Normalisations: BatchNormalization (inference), Softmax over trailing
//! axes, LayerNormalization (the registry's `softmax` and `layer_norm` where
//! they fit) and LRN across channels.

use crate::te::{Expr, compute, exp, pow, reduce_axis, reduce_max, sqrt, sum};

use super::super::error::GraphError;
use super::Lowered;
use super::builder::{KernelBuilder, Value, shape_text};
use super::reduce::Rows;
use super::window::{PadDim, pad_stage};

/// A BatchNormalization node: `(x − mean[c]) · scale[c] / sqrt(var[c] + ε)
/// + bias[c]`, channel axis 1; the per-channel factor is its own stage.
pub(super) fn batch_norm(mut b: KernelBuilder<'_>, epsilon: f32) -> Result<Lowered, GraphError> {
    let x = b.input_shape(0)?;
    if x.len() < 2 {
        return Err(GraphError::bad_node(
            b.node,
            format!("the input {} has no channel axis", shape_text(&x)),
        ));
    }
    let c = x[1];
    let data = b.tensor(0, "data")?;
    let mut params = Vec::with_capacity(4);
    for (i, name) in [(1, "scale"), (2, "bias"), (3, "mean"), (4, "var")] {
        params.push(channel_param(&mut b, i, name, c)?);
    }
    let [scale, bias, mean, var] = <[Value; 4]>::try_from(params).map_err(|_| {
        GraphError::lower(b.node, "expected four per-channel parameters")
    })?;
    let channels = b.dims(&[c])?;
    let factor = compute("factor", &channels, |ix| {
        let at = || vec![ix[0].clone()];
        scale.at(at()) / sqrt(var.at(at()) + epsilon)
    });
    let dims = b.dims(&x)?;
    let out = compute("batch_norm", &dims, |ix| {
        let at = || vec![ix[1].clone()];
        (data.at(ix) - mean.at(at())) * factor.at(at()) + bias.at(at())
    });
    b.finish(out)
}

/// Data input `index` as one value per channel: a literal or a `[C]` placeholder.
fn channel_param(
    b: &mut KernelBuilder<'_>,
    index: usize,
    name: &str,
    c: usize,
) -> Result<Value, GraphError> {
    let shape = b.input_shape(index)?;
    if shape.iter().product::<usize>() != c {
        return Err(GraphError::bad_node(
            b.node,
            format!(
                "{name} has shape {}; it needs one value per channel ({c})",
                shape_text(&shape)
            ),
        ));
    }
    match b.scalar_constant(index)? {
        Some(v) => Ok(Value::Literal(v)),
        None => Ok(Value::Tensor(b.tensor_as(index, name, &[c])?)),
    }
}

/// A Softmax node over axes `axis..=last_axis`: the maximum subtracted, one
/// division per row.
pub(super) fn softmax(
    mut b: KernelBuilder<'_>,
    axis: usize,
    last_axis: usize,
) -> Result<Lowered, GraphError> {
    let shape = b.input_shape(0)?;
    let rows = Rows::new(&b, &shape, axis, last_axis)?;
    if let ([m, n], 1, 1) = (shape.as_slice(), axis, last_axis) {
        let p = [("M", *m), ("N", *n)];
        return b.registry("softmax", &p, &[0]);
    }
    let x = b.tensor(0, "x")?;
    let full = b.dims(&shape)?;
    let outer = rows.outer_dims();
    let rk = rows.reduce_axes("k");
    let row_max = compute("row_max", &outer, |o| {
        reduce_max(x.at(rows.full(o, &rk)), &rk)
    });
    let shifted_exp = compute("exp", &full, |ix| {
        exp(x.at(ix) - row_max.at(rows.outer(ix)))
    });
    let rs = rows.reduce_axes("k");
    let row_sum = compute("row_sum", &outer, |o| {
        sum(shifted_exp.at(rows.full(o, &rs)), &rs)
    });
    let row_inv = compute("row_inv", &outer, |o| 1.0f32 / row_sum.at(o));
    let out = compute("softmax", &full, |ix| {
        shifted_exp.at(ix) * row_inv.at(rows.outer(ix))
    });
    b.finish(out)
}

/// A LayerNormalization node over the axes from `axis` on; scale (and the
/// optional bias) broadcast against the input from the right.
pub(super) fn layer_norm(
    mut b: KernelBuilder<'_>,
    axis: usize,
    epsilon: f32,
) -> Result<Lowered, GraphError> {
    let shape = b.input_shape(0)?;
    let last = shape.len().saturating_sub(1);
    let rows = Rows::new(&b, &shape, axis, last)?;
    if let ([m, n], 1) = (shape.as_slice(), axis) {
        let (m, n) = (*m, *n);
        let fits = |b: &KernelBuilder<'_>, i: usize| -> Result<bool, GraphError> {
            let s = b.input_shape(i)?;
            Ok((s == [n] || s == [1, n]) && b.scalar_constant(i)?.is_none())
        };
        if epsilon == crate::ops::LAYER_NORM_EPS && b.has_input(2) && fits(&b, 1)? && fits(&b, 2)? {
            return b.registry("layer_norm", &[("M", m), ("N", n)], &[0, 1, 2]);
        }
    }
    let x = b.tensor(0, "x")?;
    let scale = b.broadcast(1, "scale", &shape)?;
    let bias = if b.has_input(2) {
        Some(b.broadcast(2, "bias", &shape)?)
    } else {
        None
    };
    let full = b.dims(&shape)?;
    let outer = rows.outer_dims();
    let inv_n = 1.0 / rows.len() as f32;
    let rk = rows.reduce_axes("k");
    let mean = compute("mean", &outer, |o| sum(x.at(rows.full(o, &rk)) * inv_n, &rk));
    let rv = rows.reduce_axes("k");
    let variance = compute("variance", &outer, |o| {
        let d = x.at(rows.full(o, &rv)) - mean.at(o);
        sum(&d * &d * inv_n, &rv)
    });
    let rstd = compute("rstd", &outer, |o| {
        1.0f32 / sqrt(variance.at(o) + epsilon)
    });
    let out = compute("layer_norm", &full, |ix| {
        let o = rows.outer(ix);
        let scaled = (x.at(ix) - mean.at(o.clone())) * rstd.at(o) * scale.at(ix);
        match &bias {
            Some(bias) => scaled + bias.at(ix),
            None => scaled,
        }
    });
    b.finish(out)
}

/// An LRN node: `x / (bias + alpha/size · Σ x[c′]²)^beta` over the channels
/// `c − ⌊(size−1)/2⌋ ..= c + ⌈(size−1)/2⌉` inside the input.
pub(super) fn lrn(
    mut b: KernelBuilder<'_>,
    size: i64,
    alpha: f32,
    beta: f32,
    bias: f32,
) -> Result<Lowered, GraphError> {
    let shape = b.input_shape(0)?;
    if shape.len() < 2 || size < 1 {
        return Err(GraphError::bad_node(
            b.node,
            format!(
                "LRN needs an input [N,C,…] and size ≥ 1; got {} and size {size}",
                shape_text(&shape)
            ),
        ));
    }
    let x = b.tensor(0, "x")?;
    let full = b.dims(&shape)?;
    let before = (size - 1) / 2;
    let padded = pad_stage(
        &x,
        &[PadDim {
            dim: 1,
            begin: before,
            extent: full[1] + size - 1,
        }],
        0.0,
    );
    let r = reduce_axis(size, "r");
    let squares = compute("square_sum", &full, |ix| {
        let mut at: Vec<Expr> = ix.to_vec();
        at[1] = &ix[1] + &r;
        let v = padded.at(at);
        sum(&v * &v, [&r])
    });
    let scale = alpha / size as f32;
    let out = compute("lrn", &full, |ix| {
        x.at(ix) / pow(squares.at(ix) * scale + bias, beta)
    });
    b.finish(out)
}
