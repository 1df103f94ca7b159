//! Conv nodes: the registry's `conv1d`, `conv2d`, `group_conv2d`,
//! `depthwise_conv2d` and `conv3d` where the attributes fit them exactly,
//! otherwise a te convolution (any group, stride, dilation and asymmetric
//! padding per dimension) with the bias as a second stage.

use crate::te::{Expr, compute, floordiv, reduce_axis, sum};

use super::super::error::GraphError;
use super::super::ir::{ConvAttrs, layout};
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
    let symmetric = a.pads_begin == a.pads_end
        && uniform(&a.strides)
        && uniform(&a.pads_begin)
        && uniform(&a.dilations);
    // 2-D, one group, symmetric: the registry's convolutions with a bias
    // tensor per channel (NCHW or NHWC), or without a bias (NHWC; NCHW's
    // below with the other registry convolutions).
    let bias_tensor = has_bias && b.scalar_constant(2)?.is_none() && b.input_shape(2)? == [g.k];
    if let ([h, w], [r, s], 1, true) = (g.input.as_slice(), g.kernel.as_slice(), g.group, symmetric)
    {
        let p = [("N", g.n), ("C", g.c), ("H", *h), ("W", *w), ("K", g.k)];
        let q = [
            ("R", *r),
            ("S", *s),
            ("stride", a.strides[0] as usize),
            ("pad", a.pads_begin[0] as usize),
            ("dilation", a.dilations[0] as usize),
        ];
        let params = [&p[..], &q].concat();
        match (a.channels_last, bias_tensor, has_bias) {
            (true, true, _) => return b.registry("conv2d_nhwc_bias", &params, &[0, 1, 2]),
            (true, false, false) => return b.registry("conv2d_nhwc", &params, &[0, 1]),
            (false, true, _) => return b.registry("conv2d_bias", &params, &[0, 1, 2]),
            _ => {}
        }
    }
    let registry_fits = !has_bias && symmetric && !a.channels_last;
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
                let p = [
                    ("N", n),
                    ("C", c),
                    ("H", *h),
                    ("W", *w),
                    ("R", *r),
                    ("S", *s),
                ];
                return b.registry("depthwise_conv2d", &[&p[..], &common].concat(), &[0, 1]);
            }
            ([h, w], [r, s], groups) => {
                let p = [("N", n), ("C", c), ("H", *h), ("W", *w), ("K", k)];
                let q = [("R", *r), ("S", *s)];
                let params = [&p[..], &q, &common, &[("groups", groups)]].concat();
                return b.registry("group_conv2d", &params, &[0, 1]);
            }
            ([d, h, w], [t, r, s], 1) => {
                let p = [
                    ("N", n),
                    ("C", c),
                    ("D", *d),
                    ("H", *h),
                    ("W", *w),
                    ("K", k),
                ];
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
    // Where the spatial dimensions of the data and output start, and where
    // their channels are.
    let (first_spatial, channel_axis) = if a.channels_last {
        (1, spatial + 1)
    } else {
        (2, 1)
    };
    let pads: Vec<PadDim> = (0..spatial)
        .map(|d| PadDim {
            dim: d + first_spatial,
            begin: a.pads_begin[d],
            extent: (output[d] - 1) * a.strides[d] + a.dilations[d] * (kernel[d] - 1) + 1,
        })
        .collect();
    let padded = pad_stage(&data, &pads, 0.0);
    let rc = reduce_axis(cg, "rc");
    let taps: Vec<Expr> = (0..spatial)
        .map(|d| reduce_axis(kernel[d], &format!("r{d}")))
        .collect();
    let out_channels_first = [&[g.n, g.k][..], &g.output].concat();
    let out_shape = if a.channels_last {
        b.dims(&layout::channels_last(&out_channels_first))?
    } else {
        b.dims(&out_channels_first)?
    };
    let conv = compute("conv", &out_shape, |ix| {
        let out_channel = &ix[channel_axis];
        let channel = if g.group == 1 {
            rc.clone()
        } else {
            floordiv(out_channel, kg) * cg + &rc
        };
        let windows = (0..spatial).map(|d| {
            window_index(
                &ix[d + first_spatial],
                &taps[d],
                a.strides[d],
                a.dilations[d],
            )
        });
        let (at_data, at_weight): (Vec<Expr>, Vec<Expr>) = if a.channels_last {
            (
                std::iter::once(ix[0].clone())
                    .chain(windows)
                    .chain([channel])
                    .collect(),
                taps.iter()
                    .cloned()
                    .chain([rc.clone(), out_channel.clone()])
                    .collect(),
            )
        } else {
            (
                [ix[0].clone(), channel]
                    .into_iter()
                    .chain(windows)
                    .collect(),
                [out_channel.clone(), rc.clone()]
                    .into_iter()
                    .chain(taps.iter().cloned())
                    .collect(),
            )
        };
        let axes: Vec<&Expr> = std::iter::once(&rc).chain(&taps).collect();
        sum(padded.at(at_data) * weight.at(at_weight), axes)
    });
    let out = match bias {
        None => conv,
        Some(bias) => compute("bias_add", &out_shape, |ix| {
            conv.at(ix.to_vec()) + bias.at(vec![ix[channel_axis].clone()])
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
    let (x, w) = if a.channels_last {
        (
            layout::channels_first(&b.input_shape(0)?),
            layout::weight_channels_first(&b.input_shape(1)?),
        )
    } else {
        (b.input_shape(0)?, b.input_shape(1)?)
    };
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
    if kernel
        .iter()
        .zip(&a.kernel)
        .any(|(&kw, &ka)| kw as i64 != ka)
    {
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

#[cfg(test)]
mod tests {
    use super::super::test_support::{Case, assert_close, assert_jit_matches, ravel, tabulate};
    use crate::graph::GraphError;
    use crate::graph::ir::{ConvAttrs, Op};

    fn attrs(
        kernel: &[i64],
        strides: &[i64],
        begin: &[i64],
        end: &[i64],
        dil: &[i64],
        group: i64,
    ) -> ConvAttrs {
        ConvAttrs {
            kernel: kernel.to_vec(),
            strides: strides.to_vec(),
            pads_begin: begin.to_vec(),
            pads_end: end.to_vec(),
            dilations: dil.to_vec(),
            group,
            channels_last: false,
        }
    }

    /// ONNX Conv, written as plain loops over every output and tap.
    fn reference(
        x: &[f64],
        xs: &[usize],
        w: &[f64],
        ws: &[usize],
        bias: Option<&[f64]>,
        a: &ConvAttrs,
        out: &[usize],
    ) -> Vec<f64> {
        let spatial = xs.len() - 2;
        let (cg, kg) = (ws[1], ws[0] / a.group as usize);
        let kernel = &ws[2..];
        tabulate(out, |o| {
            let (n, k) = (o[0], o[1]);
            let g = k / kg;
            let mut total = bias.map_or(0.0, |b| b[k]);
            let taps: usize = kernel.iter().product();
            for c in 0..cg {
                for t in 0..taps {
                    let tap = super::super::test_support::unravel(t, kernel);
                    let mut at = vec![n, g * cg + c];
                    let mut inside = true;
                    for d in 0..spatial {
                        let p = o[d + 2] as i64 * a.strides[d] + tap[d] as i64 * a.dilations[d]
                            - a.pads_begin[d];
                        inside &= p >= 0 && p < xs[d + 2] as i64;
                        at.push(p.max(0) as usize);
                    }
                    if inside {
                        let mut wat = vec![k, c];
                        wat.extend_from_slice(&tap);
                        total += x[ravel(&at, xs)] * w[ravel(&wat, ws)];
                    }
                }
            }
            total
        })
    }

    struct Conv<'a> {
        x: &'a [usize],
        w: &'a [usize],
        bias: bool,
        attrs: ConvAttrs,
        out: &'a [usize],
    }

    /// Lowers the conv, checks it against the loops and returns the kernel's registry op.
    fn check(c: &Conv<'_>, jit: bool) -> Option<(String, String)> {
        let mut case = Case::new();
        case.input("x", c.x).random_constant("w", c.w);
        let mut inputs = vec!["x", "w"];
        if c.bias {
            case.random_constant("b", &[c.w[0]]);
            inputs.push("b");
        }
        let node = case.node(Op::Conv(c.attrs.clone()), &inputs, c.out);
        let (kernel, got) = case.run(&node);
        assert_eq!(kernel.inputs, inputs);
        let b = case.data("b");
        let want = reference(
            &case.data("x"),
            c.x,
            &case.data("w"),
            c.w,
            c.bias.then_some(b.as_slice()),
            &c.attrs,
            c.out,
        );
        let terms = c.w[1..].iter().product::<usize>() + 1;
        assert_close(&got, &want, terms, &format!("conv {:?}", c.attrs));
        if jit {
            assert_jit_matches(&case, &kernel, terms, "conv");
        }
        kernel.registry_op
    }

    #[test]
    fn plain_convolutions_are_registry_ops() {
        let c = Conv {
            x: &[1, 3, 7, 7],
            w: &[4, 3, 3, 3],
            bias: false,
            attrs: attrs(&[3, 3], &[2, 2], &[1, 1], &[1, 1], &[1, 1], 1),
            out: &[1, 4, 4, 4],
        };
        assert_eq!(
            check(&c, false),
            Some((
                "conv2d".into(),
                "N=1,C=3,H=7,W=7,K=4,R=3,S=3,stride=2,pad=1,dilation=1".into()
            ))
        );
        let grouped = Conv {
            x: &[1, 4, 6, 6],
            w: &[6, 2, 3, 3],
            bias: false,
            attrs: attrs(&[3, 3], &[1, 1], &[1, 1], &[1, 1], &[2, 2], 2),
            out: &[1, 6, 4, 4],
        };
        assert_eq!(
            check(&grouped, false).map(|r| r.0),
            Some("group_conv2d".into())
        );
        let depthwise = Conv {
            x: &[2, 3, 5, 6],
            w: &[3, 1, 3, 3],
            bias: false,
            attrs: attrs(&[3, 3], &[1, 1], &[1, 1], &[1, 1], &[1, 1], 3),
            out: &[2, 3, 5, 6],
        };
        assert_eq!(
            check(&depthwise, false).map(|r| r.0),
            Some("depthwise_conv2d".into())
        );
        let one_d = Conv {
            x: &[1, 2, 9],
            w: &[3, 2, 3],
            bias: false,
            attrs: attrs(&[3], &[2], &[1], &[1], &[1], 1),
            out: &[1, 3, 5],
        };
        assert_eq!(check(&one_d, false).map(|r| r.0), Some("conv1d".into()));
        let biased = Conv {
            x: &[1, 3, 5, 5],
            w: &[2, 3, 3, 3],
            bias: true,
            attrs: attrs(&[3, 3], &[1, 1], &[1, 1], &[1, 1], &[1, 1], 1),
            out: &[1, 2, 5, 5],
        };
        assert_eq!(
            check(&biased, true),
            Some((
                "conv2d_bias".into(),
                "N=1,C=3,H=5,W=5,K=2,R=3,S=3,stride=1,pad=1,dilation=1".into()
            ))
        );
    }

    #[test]
    fn other_convolutions_are_built_with_te() {
        let cases = [
            // Bias and unequal strides.
            Conv {
                x: &[1, 3, 5, 5],
                w: &[2, 3, 3, 3],
                bias: true,
                attrs: attrs(&[3, 3], &[1, 2], &[1, 1], &[1, 1], &[1, 1], 1),
                out: &[1, 2, 5, 3],
            },
            // Asymmetric pads, unequal strides.
            Conv {
                x: &[1, 2, 7, 6],
                w: &[3, 2, 3, 2],
                bias: false,
                attrs: attrs(&[3, 2], &[2, 1], &[0, 1], &[2, 0], &[1, 1], 1),
                out: &[1, 3, 4, 6],
            },
            // Dilation 2, stride 2, groups 2, bias.
            Conv {
                x: &[2, 4, 9, 9],
                w: &[4, 2, 3, 3],
                bias: true,
                attrs: attrs(&[3, 3], &[2, 2], &[2, 2], &[2, 2], &[2, 2], 2),
                out: &[2, 4, 5, 5],
            },
            // Depthwise with bias and asymmetric padding.
            Conv {
                x: &[1, 3, 6, 6],
                w: &[3, 1, 3, 3],
                bias: true,
                attrs: attrs(&[3, 3], &[1, 1], &[1, 0], &[1, 3], &[1, 1], 3),
                out: &[1, 3, 6, 7],
            },
            // 1-D with asymmetric pads and dilation.
            Conv {
                x: &[1, 2, 8],
                w: &[2, 2, 3],
                bias: true,
                attrs: attrs(&[3], &[1], &[2], &[0], &[2], 1),
                out: &[1, 2, 6],
            },
        ];
        for (i, c) in cases.iter().enumerate() {
            assert_eq!(check(c, i == 0 || i == 2), None, "case {i}");
        }
    }

    #[test]
    fn convolutions_over_four_dimensions_are_unsupported() {
        let mut case = Case::new();
        case.input("x", &[1, 1, 2, 2, 2, 2])
            .random_constant("w", &[1, 1, 1, 1, 1, 1]);
        let a = attrs(&[1; 4], &[1; 4], &[0; 4], &[0; 4], &[1; 4], 1);
        let node = case.node(Op::Conv(a), &["x", "w"], &[1, 1, 2, 2, 2, 2]);
        assert!(matches!(
            case.lower(&node),
            Err(GraphError::Unsupported { .. })
        ));
    }

    #[test]
    fn a_wrong_output_shape_is_a_bad_node() {
        let mut case = Case::new();
        case.input("x", &[1, 1, 5, 5])
            .random_constant("w", &[1, 1, 3, 3]);
        let a = attrs(&[3, 3], &[1, 1], &[0, 0], &[0, 0], &[1, 1], 1);
        let node = case.node(Op::Conv(a), &["x", "w"], &[1, 1, 5, 5]);
        assert!(matches!(case.lower(&node), Err(GraphError::BadNode { .. })));
    }
}
