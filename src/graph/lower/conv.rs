//! Conv nodes: the registry's `conv1d`, `conv2d`, `group_conv2d`,
//! `depthwise_conv2d` and `conv3d` where the attributes fit them exactly,
//! otherwise a te convolution (any group, stride, dilation and asymmetric
//! padding per dimension) with the bias as a second stage.

use crate::te::{Expr, compute, floordiv, reduce_axis, sum};

use super::super::error::GraphError;
use super::super::ir::ConvAttrs;
use super::Lowered;
use super::builder::{KernelBuilder, Value, shape_text};
use super::window::{PadDim, pad_stage, window_index};

/// The checked geometry of a convolution.
struct Geometry {
    n: usize,
    c: usize,
    k: usize,
    group: usize,
    input: Vec<usize>,
    kernel: Vec<usize>,
    output: Vec<usize>,
}

/// A Conv node.
pub(super) fn conv(mut b: KernelBuilder<'_>, a: &ConvAttrs) -> Result<Lowered, GraphError> {
    let g = geometry(&b, a)?;
    let has_bias = b.has_input(2);
    let uniform = |v: &[i64]| v.windows(2).all(|w| w[0] == w[1]);
    let registry_fits = !has_bias
        && a.pads_begin == a.pads_end
        && uniform(&a.strides)
        && uniform(&a.pads_begin)
        && uniform(&a.dilations);
    if registry_fits {
        let (st, pd, dil) = (
            a.strides[0] as usize,
            a.pads_begin[0] as usize,
            a.dilations[0] as usize,
        );
        let (n, c, k) = (g.n, g.c, g.k);
        let common = [("stride", st), ("pad", pd), ("dilation", dil)];
        match (g.input.as_slice(), g.kernel.as_slice(), g.group) {
            ([l], [r], 1) => {
                let p = [("N", n), ("C", c), ("L", *l), ("K", k), ("R", *r)];
                return b.registry("conv1d", &[&p[..], &common].concat(), &[0, 1]);
            }
            ([h, w], [r, s], 1) => {
                let p = [("N", n), ("C", c), ("H", *h), ("W", *w), ("K", k)];
                let q = [("R", *r), ("S", *s)];
                return b.registry("conv2d", &[&p[..], &q, &common].concat(), &[0, 1]);
            }
            ([h, w], [r, s], groups) if groups == c && k == c => {
                let p = [("N", n), ("C", c), ("H", *h), ("W", *w), ("R", *r), ("S", *s)];
                return b.registry("depthwise_conv2d", &[&p[..], &common].concat(), &[0, 1]);
            }
            ([h, w], [r, s], groups) => {
                let p = [("N", n), ("C", c), ("H", *h), ("W", *w), ("K", k)];
                let q = [("R", *r), ("S", *s)];
                let params = [&p[..], &q, &common, &[("groups", groups)]].concat();
                return b.registry("group_conv2d", &params, &[0, 1]);
            }
            ([d, h, w], [t, r, s], 1) => {
                let p = [("N", n), ("C", c), ("D", *d), ("H", *h), ("W", *w), ("K", k)];
                let q = [("T", *t), ("R", *r), ("S", *s)];
                return b.registry("conv3d", &[&p[..], &q, &common].concat(), &[0, 1]);
            }
            _ => {}
        }
    }
    let (cg, kg) = ((g.c / g.group) as i64, (g.k / g.group) as i64);
    let data = b.tensor(0, "data")?;
    let weight = b.tensor(1, "weight")?;
    let bias = if has_bias {
        let shape = b.input_shape(2)?;
        if shape.iter().product::<usize>() != g.k {
            return Err(GraphError::bad_node(
                b.node,
                format!(
                    "the bias has shape {}; it needs one value per output channel ({})",
                    shape_text(&shape),
                    g.k
                ),
            ));
        }
        Some(match b.scalar_constant(2)? {
            Some(v) => Value::Literal(v),
            None => Value::Tensor(b.tensor_as(2, "bias", &[g.k])?),
        })
    } else {
        None
    };
    let spatial = g.input.len();
    let kernel = b.dims(&g.kernel)?;
    let output = b.dims(&g.output)?;
    let pads: Vec<PadDim> = (0..spatial)
        .map(|d| PadDim {
            dim: d + 2,
            begin: a.pads_begin[d],
            extent: (output[d] - 1) * a.strides[d] + a.dilations[d] * (kernel[d] - 1) + 1,
        })
        .collect();
    let padded = pad_stage(&data, &pads, 0.0);
    let rc = reduce_axis(cg, "rc");
    let taps: Vec<Expr> = (0..spatial)
        .map(|d| reduce_axis(kernel[d], &format!("r{d}")))
        .collect();
    let out_shape = b.dims(&[&[g.n, g.k][..], &g.output].concat())?;
    let conv = compute("conv", &out_shape, |ix| {
        let channel = if g.group == 1 {
            rc.clone()
        } else {
            floordiv(&ix[1], kg) * cg + &rc
        };
        let mut at_data = vec![ix[0].clone(), channel];
        let mut at_weight = vec![ix[1].clone(), rc.clone()];
        for d in 0..spatial {
            at_data.push(window_index(
                &ix[d + 2],
                &taps[d],
                a.strides[d],
                a.dilations[d],
            ));
            at_weight.push(taps[d].clone());
        }
        let axes: Vec<&Expr> = std::iter::once(&rc).chain(&taps).collect();
        sum(padded.at(at_data) * weight.at(at_weight), axes)
    });
    let out = match bias {
        None => conv,
        Some(bias) => compute("bias_add", &out_shape, |ix| {
            conv.at(ix.to_vec()) + bias.at(vec![ix[1].clone()])
        }),
    };
    b.finish(out)
}

/// Checks the attributes against the input and weight shapes and computes
/// the output's spatial extents.
fn geometry(b: &KernelBuilder<'_>, a: &ConvAttrs) -> Result<Geometry, GraphError> {
    let spatial = a.kernel.len();
    if !(1..=3).contains(&spatial) {
        return Err(GraphError::unsupported(
            b.node,
            format!(
                "a convolution over {spatial} spatial dimensions; supported: 1-D (NCL), 2-D (NCHW) and 3-D (NCDHW)"
            ),
        ));
    }
    let bad = |what: String| GraphError::bad_node(b.node, what);
    for (name, v) in [
        ("strides", &a.strides),
        ("pads_begin", &a.pads_begin),
        ("pads_end", &a.pads_end),
        ("dilations", &a.dilations),
    ] {
        if v.len() != spatial {
            return Err(bad(format!(
                "{name} has {} entries for a {spatial}-D kernel",
                v.len()
            )));
        }
    }
    if a.strides.iter().chain(&a.dilations).any(|&v| v < 1) {
        return Err(bad(format!(
            "strides {:?} and dilations {:?} must be at least 1",
            a.strides, a.dilations
        )));
    }
    if a.pads_begin.iter().chain(&a.pads_end).any(|&v| v < 0) {
        return Err(GraphError::unsupported(
            b.node,
            format!(
                "negative pads {:?}/{:?}; supported: pads of 0 or more",
                a.pads_begin, a.pads_end
            ),
        ));
    }
    let x = b.input_shape(0)?;
    let w = b.input_shape(1)?;
    if x.len() != spatial + 2 || w.len() != spatial + 2 {
        return Err(bad(format!(
            "input {} and weight {} must both have rank {} for a {spatial}-D kernel",
            shape_text(&x),
            shape_text(&w),
            spatial + 2
        )));
    }
    let (n, c, k) = (x[0], x[1], w[0]);
    let group = usize::try_from(a.group).unwrap_or(0);
    if group == 0 || c % group != 0 || k % group != 0 || w[1] * group != c {
        return Err(bad(format!(
            "group {} does not fit input channels {c}, output channels {k} and weight {}",
            a.group,
            shape_text(&w)
        )));
    }
    let kernel = w[2..].to_vec();
    if kernel.iter().zip(&a.kernel).any(|(&kw, &ka)| kw as i64 != ka) {
        return Err(bad(format!(
            "kernel_shape {:?} differs from the weight's {}",
            a.kernel,
            shape_text(&w)
        )));
    }
    let mut output = Vec::with_capacity(spatial);
    for d in 0..spatial {
        let padded = x[d + 2] as i64 + a.pads_begin[d] + a.pads_end[d];
        let span = a.dilations[d] * (kernel[d] as i64 - 1) + 1;
        if padded < span {
            return Err(bad(format!(
                "the kernel spans {span} in spatial dimension {d} but the padded input is {padded}"
            )));
        }
        output.push(((padded - span) / a.strides[d] + 1) as usize);
    }
    Ok(Geometry {
        n,
        c,
        k,
        group,
        input: x[2..].to_vec(),
        kernel,
        output,
    })
}
