//! Shared pieces of sliding-window ops (convolutions, pools): output extents
//! with clear errors, and the zero-padding stage.

use super::error::OpError;
use super::shape::ShapeParams;
use crate::te::{Expr, Tensor, compute, select};

/// The output extent of one spatial dimension, or an error naming the parameters.
///
/// `input` and `kernel` name the parameters holding the input and kernel extents.
pub(crate) fn out_extent(
    op: &str,
    p: &ShapeParams,
    input: &str,
    kernel: &str,
) -> Result<i64, OpError> {
    let dilation = p
        .values()
        .iter()
        .find(|(n, _)| *n == "dilation")
        .map_or(1, |(_, v)| *v);
    let (i, k, stride, pad) = (p.get(input), p.get(kernel), p.get("stride"), p.get("pad"));
    let span = dilation * (k - 1) + 1;
    let padded = i + 2 * pad;
    if padded < span {
        return Err(OpError::InvalidShape {
            op: op.into(),
            reason: format!(
                "the kernel {kernel}={k} (dilation {dilation}, span {span}) does not fit the input \
                 {input}={i} padded by pad={pad} ({padded}); use a larger {input} or pad, or a smaller {kernel}"
            ),
        });
    }
    Ok((padded - span) / stride + 1)
}

/// `input` with `pad` elements of `fill` added on both sides of each of
/// `dims`; `input` itself when `pad` is 0.
pub(crate) fn pad_dims(input: &Tensor, dims: &[usize], pad: i64, fill: f32) -> Tensor {
    if pad == 0 {
        return input.clone();
    }
    let mut shape = input.shape().to_vec();
    for &d in dims {
        shape[d] += 2 * pad;
    }
    compute("pad", &shape, |ix| {
        let mut inside: Option<Expr> = None;
        for &d in dims {
            let within = ix[d].ge(pad) & ix[d].lt(input.shape()[d] + pad);
            inside = Some(match inside {
                Some(c) => c & within,
                None => within,
            });
        }
        let source: Vec<Expr> = ix
            .iter()
            .enumerate()
            .map(|(d, i)| {
                if dims.contains(&d) {
                    i - pad
                } else {
                    i.clone()
                }
            })
            .collect();
        select(
            inside.unwrap_or_else(|| Expr::bool(true)),
            input.at(source),
            fill,
        )
    })
}
