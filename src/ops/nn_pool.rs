//! 2-D pooling over NCHW data.

use super::error::OpError;
use super::registry::{OpSpec, dag_error};
use super::shape::{ParamSpec, ShapeParams, dim, pad};
use super::window::{out_extent, pad_dims};
use crate::te::{ComputeDag, DType, compute, placeholder, reduce_axis, reduce_max, sum};

const POOL_PARAMS: &[ParamSpec] = &[
    dim("N", 1, "batch"),
    dim("C", 64, "channels"),
    dim("H", 56, "input height"),
    dim("W", 56, "input width"),
    dim("R", 3, "window height"),
    dim("S", 3, "window width"),
    dim("stride", 2, "stride of both spatial dimensions"),
    pad("pad", 1, "padding on each side; at most half the window"),
];

pub(crate) const MAX_POOL2D: OpSpec = OpSpec {
    name: "max_pool2d",
    description: "2-D max pooling, NCHW: data[N,C,H,W] -> out[N,C,OH,OW] (padding ignored)",
    params: POOL_PARAMS,
    origin: super::registry::Origin::BuiltIn,
    build: |p| build_pool(p, PoolKind::Max),
};

pub(crate) const AVG_POOL2D: OpSpec = OpSpec {
    name: "avg_pool2d",
    description: "2-D average pooling, NCHW: data[N,C,H,W] -> out[N,C,OH,OW] (padding counts as 0)",
    params: POOL_PARAMS,
    origin: super::registry::Origin::BuiltIn,
    build: |p| build_pool(p, PoolKind::Avg),
};

#[derive(Clone, Copy)]
enum PoolKind {
    Max,
    Avg,
}

fn build_pool(p: &ShapeParams, kind: PoolKind) -> Result<ComputeDag, OpError> {
    let op = match kind {
        PoolKind::Max => "max_pool2d",
        PoolKind::Avg => "avg_pool2d",
    };
    let (n, c, h, w) = (p.get("N"), p.get("C"), p.get("H"), p.get("W"));
    let (r, s, st, pd) = (p.get("R"), p.get("S"), p.get("stride"), p.get("pad"));
    if 2 * pd > r.min(s) {
        return Err(OpError::InvalidShape {
            op: op.into(),
            reason: format!(
                "pad={pd} is more than half the window R={r}, S={s}: some windows would hold only padding; \
                 use pad <= {}",
                r.min(s) / 2
            ),
        });
    }
    let (oh, ow) = (out_extent(op, p, "H", "R")?, out_extent(op, p, "W", "S")?);
    let data = placeholder("data", &[n, c, h, w], DType::F32);
    let fill = match kind {
        PoolKind::Max => f32::NEG_INFINITY,
        PoolKind::Avg => 0.0,
    };
    let padded = pad_dims(&data, &[2, 3], pd, fill);
    let (rr, rs) = (reduce_axis(r, "rr"), reduce_axis(s, "rs"));
    let out = compute(op, &[n, c, oh, ow], |ix| {
        let value = padded.at([
            ix[0].clone(),
            ix[1].clone(),
            &ix[2] * st + &rr,
            &ix[3] * st + &rs,
        ]);
        match kind {
            PoolKind::Max => reduce_max(value, [&rr, &rs]),
            PoolKind::Avg => sum(value, [&rr, &rs]),
        }
    });
    let out = match kind {
        PoolKind::Max => out,
        PoolKind::Avg => {
            let total = out;
            let window = (r * s) as f32;
            compute("avg", &[n, c, oh, ow], |ix| {
                total.at([&ix[0], &ix[1], &ix[2], &ix[3]]) / window
            })
        }
    };
    ComputeDag::new(&[data], &[out]).map_err(dag_error(op))
}
