//! Convolutions: 1-D, 2-D (NCHW, NHWC, grouped, depthwise, transposed,
//! capsule) and 3-D. Padding is a separate `pad` stage the scheduler can inline.

use super::error::OpError;
use super::registry::{OpSpec, dag_error};
use super::shape::{ParamSpec, ShapeParams, dim, pad};
use super::window::{out_extent, pad_dims};
use crate::te::{
    ComputeDag, DType, Expr, Tensor, compute, floordiv, floormod, placeholder, reduce_axis, select,
    sum,
};

const STRIDE: ParamSpec = dim("stride", 1, "stride of every spatial dimension");
const PAD: ParamSpec = pad(
    "pad",
    1,
    "zero padding on each side of every spatial dimension",
);
const DILATION: ParamSpec = dim("dilation", 1, "kernel dilation of every spatial dimension");

const CONV2D_PARAMS: &[ParamSpec] = &[
    dim("N", 1, "batch"),
    dim("C", 64, "input channels"),
    dim("H", 56, "input height"),
    dim("W", 56, "input width"),
    dim("K", 64, "output channels"),
    dim("R", 3, "kernel height"),
    dim("S", 3, "kernel width"),
    STRIDE,
    PAD,
    DILATION,
];

pub(crate) const CONV1D: OpSpec = OpSpec {
    name: "conv1d",
    description: "1-D convolution, NCL: data[N,C,L] * weight[K,C,R] -> out[N,K,OL]",
    params: &[
        dim("N", 1, "batch"),
        dim("C", 64, "input channels"),
        dim("L", 256, "input length"),
        dim("K", 64, "output channels"),
        dim("R", 3, "kernel length"),
        STRIDE,
        PAD,
        DILATION,
    ],
    origin: super::registry::Origin::BuiltIn,
    build: build_conv1d,
};

pub(crate) const CONV2D: OpSpec = OpSpec {
    name: "conv2d",
    description: "2-D convolution, NCHW: data[N,C,H,W] * weight[K,C,R,S] -> out[N,K,OH,OW]",
    params: CONV2D_PARAMS,
    origin: super::registry::Origin::BuiltIn,
    build: build_conv2d,
};

pub(crate) const CONV2D_BIAS: OpSpec = OpSpec {
    name: "conv2d_bias",
    description: "2-D convolution with a bias per output channel, NCHW: data[N,C,H,W] * weight[K,C,R,S] + bias[K] -> out[N,K,OH,OW]",
    params: CONV2D_PARAMS,
    origin: super::registry::Origin::BuiltIn,
    build: build_conv2d_bias,
};

pub(crate) const CONV2D_NHWC: OpSpec = OpSpec {
    name: "conv2d_nhwc",
    description: "2-D convolution, NHWC: data[N,H,W,C] * weight[R,S,C,K] -> out[N,OH,OW,K]",
    params: CONV2D_PARAMS,
    origin: super::registry::Origin::BuiltIn,
    build: build_conv2d_nhwc,
};

pub(crate) const CONV2D_NHWC_BIAS: OpSpec = OpSpec {
    name: "conv2d_nhwc_bias",
    description: "2-D convolution with a bias per output channel, NHWC: data[N,H,W,C] * weight[R,S,C,K] + bias[K] -> out[N,OH,OW,K]",
    params: CONV2D_PARAMS,
    origin: super::registry::Origin::BuiltIn,
    build: build_conv2d_nhwc_bias,
};

pub(crate) const GROUP_CONV2D: OpSpec = OpSpec {
    name: "group_conv2d",
    description: "grouped 2-D convolution, NCHW: data[N,C,H,W] * weight[K,C/groups,R,S] -> out[N,K,OH,OW]",
    params: &[
        dim("N", 1, "batch"),
        dim("C", 64, "input channels"),
        dim("H", 56, "input height"),
        dim("W", 56, "input width"),
        dim("K", 64, "output channels"),
        dim("R", 3, "kernel height"),
        dim("S", 3, "kernel width"),
        STRIDE,
        PAD,
        DILATION,
        dim("groups", 4, "channel groups; divides C and K"),
    ],
    origin: super::registry::Origin::BuiltIn,
    build: build_group_conv2d,
};

pub(crate) const DEPTHWISE_CONV2D: OpSpec = OpSpec {
    name: "depthwise_conv2d",
    description: "depthwise 2-D convolution, NCHW: data[N,C,H,W] * weight[C,R,S] -> out[N,C,OH,OW]",
    params: &[
        dim("N", 1, "batch"),
        dim("C", 64, "channels"),
        dim("H", 56, "input height"),
        dim("W", 56, "input width"),
        dim("R", 3, "kernel height"),
        dim("S", 3, "kernel width"),
        STRIDE,
        PAD,
        DILATION,
    ],
    origin: super::registry::Origin::BuiltIn,
    build: build_depthwise_conv2d,
};

pub(crate) const CONV3D: OpSpec = OpSpec {
    name: "conv3d",
    description: "3-D convolution, NCDHW: data[N,C,D,H,W] * weight[K,C,T,R,S] -> out[N,K,OD,OH,OW]",
    params: &[
        dim("N", 1, "batch"),
        dim("C", 32, "input channels"),
        dim("D", 16, "input depth"),
        dim("H", 28, "input height"),
        dim("W", 28, "input width"),
        dim("K", 32, "output channels"),
        dim("T", 3, "kernel depth"),
        dim("R", 3, "kernel height"),
        dim("S", 3, "kernel width"),
        STRIDE,
        PAD,
        DILATION,
    ],
    origin: super::registry::Origin::BuiltIn,
    build: build_conv3d,
};

pub(crate) const CONV2D_TRANSPOSE: OpSpec = OpSpec {
    name: "conv2d_transpose",
    description: "transposed 2-D convolution, NCHW: data[N,C,H,W], weight[C,K,R,S] -> out[N,K,(H-1)*stride-2*pad+R,…]",
    params: &[
        dim("N", 1, "batch"),
        dim("C", 64, "input channels"),
        dim("H", 14, "input height"),
        dim("W", 14, "input width"),
        dim("K", 32, "output channels"),
        dim("R", 4, "kernel height"),
        dim("S", 4, "kernel width"),
        dim("stride", 2, "stride of every spatial dimension"),
        pad("pad", 1, "padding removed from each side of the output"),
    ],
    origin: super::registry::Origin::BuiltIn,
    build: build_conv2d_transpose,
};

pub(crate) const CONV2D_CAPSULE: OpSpec = OpSpec {
    name: "conv2d_capsule",
    description: "capsule 2-D convolution: data[N,H,W,cap,cap,C] * weight[R,S,cap,cap,C,K] -> out[N,OH,OW,cap,cap,K]",
    params: &[
        dim("N", 1, "batch"),
        dim("H", 16, "input height"),
        dim("W", 16, "input width"),
        dim("C", 32, "input channels"),
        dim("K", 32, "output channels"),
        dim("R", 3, "kernel height"),
        dim("S", 3, "kernel width"),
        STRIDE,
        PAD,
        dim("cap", 4, "capsule size (each capsule is cap x cap)"),
    ],
    origin: super::registry::Origin::BuiltIn,
    build: build_conv2d_capsule,
};

/// `index · stride + tap · dilation` into a padded input (unit factors omitted).
fn window(index: &Expr, tap: &Expr, stride: i64, dilation: i64) -> Expr {
    let scaled = |e: &Expr, f: i64| if f == 1 { e.clone() } else { e * f };
    scaled(index, stride) + scaled(tap, dilation)
}

fn build_conv1d(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (n, c, l, k, r) = (p.get("N"), p.get("C"), p.get("L"), p.get("K"), p.get("R"));
    let (st, pd, dil) = (p.get("stride"), p.get("pad"), p.get("dilation"));
    let ol = out_extent("conv1d", p, "L", "R")?;
    let data = placeholder("data", &[n, c, l], DType::F32);
    let weight = placeholder("weight", &[k, c, r], DType::F32);
    let padded = pad_dims(&data, &[2], pd, 0.0);
    let (rc, rr) = (reduce_axis(c, "rc"), reduce_axis(r, "rr"));
    let out = compute("conv1d", &[n, k, ol], |ix| {
        sum(
            padded.at([&ix[0], &rc, &window(&ix[2], &rr, st, dil)]) * weight.at([&ix[1], &rc, &rr]),
            [&rc, &rr],
        )
    });
    ComputeDag::new(&[data, weight], &[out]).map_err(dag_error("conv1d"))
}

fn build_conv2d(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (data, weight, out) = conv2d_nchw("conv2d", p)?;
    ComputeDag::new(&[data, weight], &[out]).map_err(dag_error("conv2d"))
}

fn build_conv2d_bias(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (data, weight, conv) = conv2d_nchw("conv2d_bias", p)?;
    let bias = placeholder("bias", &[p.get("K")], DType::F32);
    let shape = conv.shape().to_vec();
    let out = compute("conv2d_bias", &shape, |ix| {
        conv.at(ix.to_vec()) + bias.at([&ix[1]])
    });
    ComputeDag::new(&[data, weight, bias], &[out]).map_err(dag_error("conv2d_bias"))
}

/// The placeholders and the convolution stage of an NCHW 2-D convolution.
fn conv2d_nchw(op: &str, p: &ShapeParams) -> Result<(Tensor, Tensor, Tensor), OpError> {
    let (n, c, h, w) = (p.get("N"), p.get("C"), p.get("H"), p.get("W"));
    let (k, r, s) = (p.get("K"), p.get("R"), p.get("S"));
    let (st, pd, dil) = (p.get("stride"), p.get("pad"), p.get("dilation"));
    let (oh, ow) = (out_extent(op, p, "H", "R")?, out_extent(op, p, "W", "S")?);
    let data = placeholder("data", &[n, c, h, w], DType::F32);
    let weight = placeholder("weight", &[k, c, r, s], DType::F32);
    let padded = pad_dims(&data, &[2, 3], pd, 0.0);
    let (rc, rr, rs) = (
        reduce_axis(c, "rc"),
        reduce_axis(r, "rr"),
        reduce_axis(s, "rs"),
    );
    let out = compute("conv2d", &[n, k, oh, ow], |ix| {
        sum(
            padded.at([
                ix[0].clone(),
                rc.clone(),
                window(&ix[2], &rr, st, dil),
                window(&ix[3], &rs, st, dil),
            ]) * weight.at([&ix[1], &rc, &rr, &rs]),
            [&rc, &rr, &rs],
        )
    });
    Ok((data, weight, out))
}

/// The NHWC convolution stage over `data[N,H,W,C]` and `weight[R,S,C,K]`.
///
/// Over fewer than [`SHORT_CHANNEL_RUN`] channels without dilation, the
/// window's columns and the channels are one reduction `rsc` over `S·C`:
/// tap `(s, c)` of a window row is element `s·C + c` of one contiguous run,
/// in the padded input (from `x·stride·C`) as in the weight (`[R, S·C, K]`),
/// so a micro-kernel reads all of it in one call — a long `k` even where
/// `C` alone is short (an image's 3 channels). Otherwise the reduction is
/// `rr, rs, rc`.
pub(crate) fn conv2d_nhwc_stage(
    op: &str,
    p: &ShapeParams,
    data: &Tensor,
    weight: &Tensor,
) -> Result<Tensor, OpError> {
    let (n, c, k) = (p.get("N"), p.get("C"), p.get("K"));
    let (r, s) = (p.get("R"), p.get("S"));
    let (st, pd, dil) = (p.get("stride"), p.get("pad"), p.get("dilation"));
    let (oh, ow) = (out_extent(op, p, "H", "R")?, out_extent(op, p, "W", "S")?);
    let padded = pad_dims(data, &[1, 2], pd, 0.0);
    let rr = reduce_axis(r, "rr");
    // Each tap's window column and channel, and the reduction's axes.
    let (column, channel, axes) = if s > 1 && dil == 1 && c < SHORT_CHANNEL_RUN {
        let rsc = reduce_axis(s * c, "rsc");
        let (column, channel) = (floordiv(&rsc, c), floormod(&rsc, c));
        (column, channel, vec![rr.clone(), rsc])
    } else {
        let (rs, rc) = (reduce_axis(s, "rs"), reduce_axis(c, "rc"));
        (rs.clone(), rc.clone(), vec![rr.clone(), rs, rc])
    };
    Ok(compute("conv2d_nhwc", &[n, oh, ow, k], |ix| {
        sum(
            padded.at([
                ix[0].clone(),
                window(&ix[1], &rr, st, dil),
                window(&ix[2], &column, st, dil),
                channel.clone(),
            ]) * weight.at([&rr, &column, &channel, &ix[3]]),
            &axes,
        )
    }))
}

/// Input channels fewer than this make a short reduction run for a
/// micro-kernel call (its accumulator tile loaded and stored for a few
/// multiply-adds); an NHWC convolution over so few channels reduces over a
/// window row at once (see [`conv2d_nhwc_stage`]). With more, the channels
/// alone are a long enough `k`, and the taps stay loops outside the kernel.
const SHORT_CHANNEL_RUN: i64 = 16;

fn build_conv2d_nhwc(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (n, c, h, w) = (p.get("N"), p.get("C"), p.get("H"), p.get("W"));
    let (k, r, s) = (p.get("K"), p.get("R"), p.get("S"));
    let data = placeholder("data", &[n, h, w, c], DType::F32);
    let weight = placeholder("weight", &[r, s, c, k], DType::F32);
    let out = conv2d_nhwc_stage("conv2d_nhwc", p, &data, &weight)?;
    ComputeDag::new(&[data, weight], &[out]).map_err(dag_error("conv2d_nhwc"))
}

fn build_conv2d_nhwc_bias(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (n, c, h, w) = (p.get("N"), p.get("C"), p.get("H"), p.get("W"));
    let (k, r, s) = (p.get("K"), p.get("R"), p.get("S"));
    let data = placeholder("data", &[n, h, w, c], DType::F32);
    let weight = placeholder("weight", &[r, s, c, k], DType::F32);
    let bias = placeholder("bias", &[k], DType::F32);
    let conv = conv2d_nhwc_stage("conv2d_nhwc_bias", p, &data, &weight)?;
    let shape = conv.shape().to_vec();
    let out = compute("conv2d_nhwc_bias", &shape, |ix| {
        conv.at(ix.to_vec()) + bias.at([&ix[3]])
    });
    ComputeDag::new(&[data, weight, bias], &[out]).map_err(dag_error("conv2d_nhwc_bias"))
}

fn build_group_conv2d(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (n, c, h, w) = (p.get("N"), p.get("C"), p.get("H"), p.get("W"));
    let (k, r, s, groups) = (p.get("K"), p.get("R"), p.get("S"), p.get("groups"));
    let (st, pd, dil) = (p.get("stride"), p.get("pad"), p.get("dilation"));
    if c % groups != 0 || k % groups != 0 {
        return Err(OpError::InvalidShape {
            op: "group_conv2d".into(),
            reason: format!(
                "groups={groups} must divide both C={c} and K={k}; pick a common divisor"
            ),
        });
    }
    let (oh, ow) = (
        out_extent("group_conv2d", p, "H", "R")?,
        out_extent("group_conv2d", p, "W", "S")?,
    );
    let (cg, kg) = (c / groups, k / groups);
    let data = placeholder("data", &[n, c, h, w], DType::F32);
    let weight = placeholder("weight", &[k, cg, r, s], DType::F32);
    let padded = pad_dims(&data, &[2, 3], pd, 0.0);
    let (rc, rr, rs) = (
        reduce_axis(cg, "rc"),
        reduce_axis(r, "rr"),
        reduce_axis(s, "rs"),
    );
    let out = compute("group_conv2d", &[n, k, oh, ow], |ix| {
        let channel = floordiv(&ix[1], kg) * cg + &rc;
        sum(
            padded.at([
                ix[0].clone(),
                channel,
                window(&ix[2], &rr, st, dil),
                window(&ix[3], &rs, st, dil),
            ]) * weight.at([&ix[1], &rc, &rr, &rs]),
            [&rc, &rr, &rs],
        )
    });
    ComputeDag::new(&[data, weight], &[out]).map_err(dag_error("group_conv2d"))
}

fn build_depthwise_conv2d(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (n, c, h, w) = (p.get("N"), p.get("C"), p.get("H"), p.get("W"));
    let (r, s) = (p.get("R"), p.get("S"));
    let (st, pd, dil) = (p.get("stride"), p.get("pad"), p.get("dilation"));
    let op = "depthwise_conv2d";
    let (oh, ow) = (out_extent(op, p, "H", "R")?, out_extent(op, p, "W", "S")?);
    let data = placeholder("data", &[n, c, h, w], DType::F32);
    let weight = placeholder("weight", &[c, r, s], DType::F32);
    let padded = pad_dims(&data, &[2, 3], pd, 0.0);
    let (rr, rs) = (reduce_axis(r, "rr"), reduce_axis(s, "rs"));
    let out = compute(op, &[n, c, oh, ow], |ix| {
        sum(
            padded.at([
                ix[0].clone(),
                ix[1].clone(),
                window(&ix[2], &rr, st, dil),
                window(&ix[3], &rs, st, dil),
            ]) * weight.at([&ix[1], &rr, &rs]),
            [&rr, &rs],
        )
    });
    ComputeDag::new(&[data, weight], &[out]).map_err(dag_error(op))
}

fn build_conv3d(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (n, c, d, h, w) = (p.get("N"), p.get("C"), p.get("D"), p.get("H"), p.get("W"));
    let (k, t, r, s) = (p.get("K"), p.get("T"), p.get("R"), p.get("S"));
    let (st, pd, dil) = (p.get("stride"), p.get("pad"), p.get("dilation"));
    let od = out_extent("conv3d", p, "D", "T")?;
    let (oh, ow) = (
        out_extent("conv3d", p, "H", "R")?,
        out_extent("conv3d", p, "W", "S")?,
    );
    let data = placeholder("data", &[n, c, d, h, w], DType::F32);
    let weight = placeholder("weight", &[k, c, t, r, s], DType::F32);
    let padded = pad_dims(&data, &[2, 3, 4], pd, 0.0);
    let (rc, rt) = (reduce_axis(c, "rc"), reduce_axis(t, "rt"));
    let (rr, rs) = (reduce_axis(r, "rr"), reduce_axis(s, "rs"));
    let out = compute("conv3d", &[n, k, od, oh, ow], |ix| {
        sum(
            padded.at([
                ix[0].clone(),
                rc.clone(),
                window(&ix[2], &rt, st, dil),
                window(&ix[3], &rr, st, dil),
                window(&ix[4], &rs, st, dil),
            ]) * weight.at([&ix[1], &rc, &rt, &rr, &rs]),
            [&rc, &rt, &rr, &rs],
        )
    });
    ComputeDag::new(&[data, weight], &[out]).map_err(dag_error("conv3d"))
}

fn build_conv2d_transpose(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (n, c, h, w) = (p.get("N"), p.get("C"), p.get("H"), p.get("W"));
    let (k, r, s) = (p.get("K"), p.get("R"), p.get("S"));
    let (st, pd) = (p.get("stride"), p.get("pad"));
    let (oh, ow) = ((h - 1) * st - 2 * pd + r, (w - 1) * st - 2 * pd + s);
    if oh < 1 || ow < 1 {
        return Err(OpError::InvalidShape {
            op: "conv2d_transpose".into(),
            reason: format!(
                "the output would be {oh}x{ow}: (H-1)*stride - 2*pad + R must be at least 1 \
                 (H={h}, W={w}, R={r}, S={s}, stride={st}, pad={pd}); use a smaller pad"
            ),
        });
    }
    let data = placeholder("data", &[n, c, h, w], DType::F32);
    let weight = placeholder("weight", &[c, k, r, s], DType::F32);
    let (rc, rr, rs) = (
        reduce_axis(c, "rc"),
        reduce_axis(r, "rr"),
        reduce_axis(s, "rs"),
    );
    let out = compute("conv2d_transpose", &[n, k, oh, ow], |ix| {
        // Output y receives input row (y + pad - r) / stride when that divides evenly.
        let (ty, tx) = (&ix[2] + pd - &rr, &ix[3] + pd - &rs);
        let (iy, ix_) = (floordiv(&ty, st), floordiv(&tx, st));
        let hits = ty.ge(0)
            & floormod(&ty, st).equal(0)
            & iy.lt(h)
            & tx.ge(0)
            & floormod(&tx, st).equal(0)
            & ix_.lt(w);
        let contribution = data.at([&ix[0], &rc, &iy, &ix_]) * weight.at([&rc, &ix[1], &rr, &rs]);
        sum(select(hits, contribution, 0.0), [&rc, &rr, &rs])
    });
    ComputeDag::new(&[data, weight], &[out]).map_err(dag_error("conv2d_transpose"))
}

fn build_conv2d_capsule(p: &ShapeParams) -> Result<ComputeDag, OpError> {
    let (n, h, w, c, k) = (p.get("N"), p.get("H"), p.get("W"), p.get("C"), p.get("K"));
    let (r, s, cap) = (p.get("R"), p.get("S"), p.get("cap"));
    let (st, pd) = (p.get("stride"), p.get("pad"));
    let op = "conv2d_capsule";
    let (oh, ow) = (out_extent(op, p, "H", "R")?, out_extent(op, p, "W", "S")?);
    let data = placeholder("data", &[n, h, w, cap, cap, c], DType::F32);
    let weight = placeholder("weight", &[r, s, cap, cap, c, k], DType::F32);
    let padded = pad_dims(&data, &[1, 2], pd, 0.0);
    let (rr, rs) = (reduce_axis(r, "rr"), reduce_axis(s, "rs"));
    let (rq, rc) = (reduce_axis(cap, "rq"), reduce_axis(c, "rc"));
    let out = compute(op, &[n, oh, ow, cap, cap, k], |ix| {
        sum(
            padded.at([
                ix[0].clone(),
                window(&ix[1], &rr, st, 1),
                window(&ix[2], &rs, st, 1),
                ix[3].clone(),
                rq.clone(),
                rc.clone(),
            ]) * weight.at([&rr, &rs, &rq, &ix[4], &rc, &ix[5]]),
            [&rr, &rs, &rq, &rc],
        )
    });
    ComputeDag::new(&[data, weight], &[out]).map_err(dag_error(op))
}
