//! Shared pieces of sliding-window lowerings (Conv, pools, LRN): the padding
//! stage with independent padding before and after each dimension.

use crate::te::{Expr, Tensor, compute, select};

/// One padded dimension: `begin` elements of fill before the input, and the
/// padded extent (which may stop before the input's end when the window
/// never reads its last elements).
#[derive(Clone, Copy, Debug)]
pub(super) struct PadDim {
    /// The dimension of the input.
    pub dim: usize,
    /// Fill elements before the input.
    pub begin: i64,
    /// The padded extent.
    pub extent: i64,
}

/// `input` seen through `pads` with `fill` outside it: element `p` of a
/// padded dimension is input element `p − begin`. `input` itself when no
/// padded dimension reads outside the input.
pub(super) fn pad_stage(input: &Tensor, pads: &[PadDim], fill: f32) -> Tensor {
    let needs = |p: &PadDim| p.begin > 0 || p.extent > input.shape()[p.dim];
    if !pads.iter().any(needs) {
        return input.clone();
    }
    let mut shape = input.shape().to_vec();
    for p in pads {
        shape[p.dim] = p.extent;
    }
    compute("pad", &shape, |ix| {
        let mut inside: Option<Expr> = None;
        let mut and = |c: Expr| {
            inside = Some(match inside.take() {
                Some(prev) => prev & c,
                None => c,
            });
        };
        for p in pads {
            if p.begin > 0 {
                and(ix[p.dim].ge(p.begin));
            }
            let end = input.shape()[p.dim] + p.begin;
            if p.extent > end {
                and(ix[p.dim].lt(end));
            }
        }
        let source: Vec<Expr> = ix
            .iter()
            .enumerate()
            .map(|(d, i)| match pads.iter().find(|p| p.dim == d) {
                Some(p) if p.begin > 0 => i - p.begin,
                _ => i.clone(),
            })
            .collect();
        match inside {
            Some(cond) => select(cond, input.at(source), fill),
            None => input.at(source),
        }
    })
}

/// `index · stride + tap · dilation` (unit factors omitted).
pub(super) fn window_index(index: &Expr, tap: &Expr, stride: i64, dilation: i64) -> Expr {
    let scaled = |e: &Expr, f: i64| if f == 1 { e.clone() } else { e * f };
    scaled(index, stride) + scaled(tap, dilation)
}
