//! Pooling nodes: MaxPool and AveragePool (the registry's `max_pool2d` /
//! `avg_pool2d` where their semantics match exactly, otherwise te with
//! asymmetric padding, ceil mode and both divisor rules), and
//! GlobalAveragePool.

use crate::te::{DType, Expr, cast, compute, max, min, reduce_axis, reduce_max, sum};

use super::super::error::GraphError;
use super::super::ir::{PoolAttrs, layout};
use super::Lowered;
use super::builder::{KernelBuilder, shape_text};
use super::window::{PadDim, pad_stage, window_index};

/// Which pool.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum PoolKind {
    /// Maximum over the window's elements inside the input.
    Max,
    /// Mean over the window.
    Avg,
}

/// A MaxPool or AveragePool node.
///
/// Window `o` of a dimension starts at `o·stride − pad_begin`. Max ignores
/// padding. Average divides by the window's positions inside the padded
/// input (`count_include_pad`) or inside the input itself; in ceil mode the
/// windows overhanging the padded input count only what they cover.
pub(super) fn pool(
    mut b: KernelBuilder<'_>,
    a: &PoolAttrs,
    kind: PoolKind,
) -> Result<Lowered, GraphError> {
    // The checks read channels-first shapes.
    let (x, out) = if a.channels_last {
        (
            layout::channels_first(&b.input_shape(0)?),
            layout::channels_first(&b.output_shape()?),
        )
    } else {
        (b.input_shape(0)?, b.output_shape()?)
    };
    let spatial = check(&b, a, &x, &out)?;
    let floor = floor_extents(a, &x);
    let uniform = |v: &[i64]| v.windows(2).all(|w| w[0] == w[1]);
    let symmetric = a.pads_begin == a.pads_end && uniform(&a.pads_begin);
    let undilated = a.dilations.iter().all(|&d| d == 1);
    let registry_fits = !a.channels_last && spatial == 2 && symmetric && undilated;
    if registry_fits && uniform(&a.strides) && out[2..] == floor[..] {
        let (r, s) = (a.kernel[0], a.kernel[1]);
        let pad = a.pads_begin[0];
        let (op, fits) = match kind {
            PoolKind::Max => ("max_pool2d", true),
            PoolKind::Avg => ("avg_pool2d", a.count_include_pad || pad == 0),
        };
        if fits && 2 * pad <= r.min(s) {
            let params = [
                ("N", x[0]),
                ("C", x[1]),
                ("H", x[2]),
                ("W", x[3]),
                ("R", r as usize),
                ("S", s as usize),
                ("stride", a.strides[0] as usize),
                ("pad", pad as usize),
            ];
            return b.registry(op, &params, &[0]);
        }
    }
    let data = b.tensor(0, "data")?;
    // Channels-first extents (the window arithmetic), and where the spatial
    // dimensions and the channels are in the tensors.
    let out_dims = b.dims(&out)?;
    let in_dims = b.dims(&x)?;
    let (first_spatial, channel_axis) = if a.channels_last {
        (1, spatial + 1)
    } else {
        (2, 1)
    };
    let out_shape = if a.channels_last {
        b.dims(&layout::channels_last(&out))?
    } else {
        out_dims.clone()
    };
    let pads: Vec<PadDim> = (0..spatial)
        .map(|d| PadDim {
            dim: d + first_spatial,
            begin: a.pads_begin[d],
            extent: (out_dims[d + 2] - 1) * a.strides[d] + span(a, d),
        })
        .collect();
    let fill = match kind {
        PoolKind::Max => f32::NEG_INFINITY,
        PoolKind::Avg => 0.0,
    };
    let padded = pad_stage(&data, &pads, fill);
    let taps: Vec<Expr> = (0..spatial)
        .map(|d| reduce_axis(a.kernel[d], &format!("r{d}")))
        .collect();
    let stage = match kind {
        PoolKind::Max => "max_pool",
        PoolKind::Avg => "sum_pool",
    };
    let pooled = compute(stage, &out_shape, |ix| {
        let windows = (0..spatial).map(|d| {
            window_index(
                &ix[d + first_spatial],
                &taps[d],
                a.strides[d],
                a.dilations[d],
            )
        });
        let at: Vec<Expr> = if a.channels_last {
            std::iter::once(ix[0].clone())
                .chain(windows)
                .chain([ix[channel_axis].clone()])
                .collect()
        } else {
            [ix[0].clone(), ix[1].clone()]
                .into_iter()
                .chain(windows)
                .collect()
        };
        match kind {
            PoolKind::Max => reduce_max(padded.at(at), &taps),
            PoolKind::Avg => sum(padded.at(at), &taps),
        }
    });
    if kind == PoolKind::Max {
        return b.finish(pooled);
    }
    // Per dimension: window o covers padded positions [o·s, o·s + k) ∩ [lo, hi).
    let bounds: Vec<(i64, i64)> = (0..spatial)
        .map(|d| {
            let input_end = a.pads_begin[d] + in_dims[d + 2];
            if a.count_include_pad {
                (0, input_end + a.pads_end[d])
            } else {
                (a.pads_begin[d], input_end)
            }
        })
        .collect();
    let count = |d: usize, o: i64| {
        let start = o * a.strides[d];
        let (lo, hi) = bounds[d];
        (start + a.kernel[d]).min(hi) - start.max(lo)
    };
    let constant = (0..spatial).all(|d| (0..out_dims[d + 2]).all(|o| count(d, o) == a.kernel[d]));
    let avg = compute("avg_pool", &out_shape, |ix| {
        let total = pooled.at(ix);
        if constant {
            let window: i64 = a.kernel.iter().product();
            return total / window as f32;
        }
        let mut divisor: Option<Expr> = None;
        for d in 0..spatial {
            let (lo, hi) = bounds[d];
            let start = if a.strides[d] == 1 {
                ix[d + first_spatial].clone()
            } else {
                &ix[d + first_spatial] * a.strides[d]
            };
            let end = min(&start + a.kernel[d], hi);
            let begin = if lo == 0 { start } else { max(start, lo) };
            let n = end - begin;
            divisor = Some(match divisor {
                Some(p) => p * n,
                None => n,
            });
        }
        match divisor {
            Some(n) => total / cast(DType::F32, n),
            None => total,
        }
    });
    b.finish(avg)
}

/// Checks shapes and attributes; returns the number of spatial dimensions.
fn check(
    b: &KernelBuilder<'_>,
    a: &PoolAttrs,
    x: &[usize],
    out: &[usize],
) -> Result<usize, GraphError> {
    let spatial = a.kernel.len();
    if !(1..=3).contains(&spatial) {
        return Err(GraphError::unsupported(
            b.node,
            format!("pooling over {spatial} spatial dimensions; supported: 1-D, 2-D and 3-D"),
        ));
    }
    let bad = |what: String| GraphError::bad_node(b.node, what);
    if [&a.strides, &a.pads_begin, &a.pads_end]
        .iter()
        .any(|v| v.len() != spatial)
    {
        return Err(bad(format!(
            "strides {:?} and pads {:?}/{:?} need one entry per kernel dimension ({spatial})",
            a.strides, a.pads_begin, a.pads_end
        )));
    }
    if a.strides.iter().chain(&a.kernel).any(|&v| v < 1) {
        return Err(bad(format!(
            "kernel {:?} and strides {:?} must be at least 1",
            a.kernel, a.strides
        )));
    }
    if a.pads_begin.iter().chain(&a.pads_end).any(|&v| v < 0) {
        return Err(GraphError::unsupported(
            b.node,
            "negative pads; supported: pads of 0 or more",
        ));
    }
    if x.len() != spatial + 2 || out.len() != spatial + 2 || out[..2] != x[..2] {
        return Err(bad(format!(
            "input {} and output {} do not fit a {spatial}-D pool over [N,C,…]",
            shape_text(x),
            shape_text(out)
        )));
    }
    for d in 0..spatial {
        let padded = x[d + 2] as i64 + a.pads_begin[d] + a.pads_end[d];
        let span = padded - self::span(a, d);
        if span < 0 {
            return Err(bad(format!(
                "the window {} does not fit the padded input {padded} in spatial dimension {d}",
                self::span(a, d)
            )));
        }
        let floor = span / a.strides[d] + 1;
        let ceil = (span + a.strides[d] - 1) / a.strides[d] + 1;
        let o = out[d + 2] as i64;
        let last_start = (o - 1) * a.strides[d];
        let starts_inside = last_start < x[d + 2] as i64 + a.pads_begin[d];
        let allowed = if a.ceil_mode {
            (floor..=ceil).contains(&o) && starts_inside
        } else {
            o == floor
        };
        if !allowed {
            return Err(bad(format!(
                "output extent {o} in spatial dimension {d} does not follow from input {}, kernel {}, \
                 stride {}, pads {}+{} (ceil_mode {})",
                x[d + 2],
                a.kernel[d],
                a.strides[d],
                a.pads_begin[d],
                a.pads_end[d],
                a.ceil_mode
            )));
        }
    }
    Ok(spatial)
}

/// The output's spatial extents with output sizes rounded down.
fn floor_extents(a: &PoolAttrs, x: &[usize]) -> Vec<usize> {
    (0..a.kernel.len())
        .map(|d| {
            let padded = x[d + 2] as i64 + a.pads_begin[d] + a.pads_end[d];
            ((padded - span(a, d)) / a.strides[d] + 1) as usize
        })
        .collect()
}

/// The extent a window covers in dimension `d` (dilated).
fn span(a: &PoolAttrs, d: usize) -> i64 {
    a.dilations.get(d).copied().unwrap_or(1) * (a.kernel[d] - 1) + 1
}

/// A GlobalAveragePool node: `avg_pool2d` over the whole plane for 2-D
/// inputs, otherwise a sum over the spatial dimensions and a division.
pub(super) fn global_average_pool(mut b: KernelBuilder<'_>) -> Result<Lowered, GraphError> {
    let x = b.input_shape(0)?;
    if x.len() < 3 {
        return Err(GraphError::bad_node(
            b.node,
            format!(
                "the input {} needs spatial dimensions after [N,C]",
                shape_text(&x)
            ),
        ));
    }
    if let [n, c, h, w] = x[..]
        && b.output_shape()? == [n, c, 1, 1]
    {
        let params = [
            ("N", n),
            ("C", c),
            ("H", h),
            ("W", w),
            ("R", h),
            ("S", w),
            ("stride", 1),
            ("pad", 0),
        ];
        return b.registry("avg_pool2d", &params, &[0]);
    }
    let data = b.tensor(0, "data")?;
    let dims = b.dims(&x)?;
    let mut out = dims.clone();
    out[2..].fill(1);
    let taps: Vec<Expr> = (2..dims.len())
        .map(|d| reduce_axis(dims[d], &format!("r{d}")))
        .collect();
    let total = compute("sum", &out, |ix| {
        let at: Vec<Expr> = [ix[0].clone(), ix[1].clone()]
            .into_iter()
            .chain(taps.iter().cloned())
            .collect();
        sum(data.at(at), &taps)
    });
    let count: i64 = dims[2..].iter().product();
    let mean = compute("mean", &out, |ix| total.at(ix) / count as f32);
    b.finish(mean)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{Case, assert_close, assert_jit_matches, ravel, tabulate};
    use crate::graph::ir::{Op, PoolAttrs};

    fn attrs(
        k: &[i64],
        s: &[i64],
        begin: &[i64],
        end: &[i64],
        ceil: bool,
        include: bool,
    ) -> PoolAttrs {
        PoolAttrs {
            kernel: k.to_vec(),
            strides: s.to_vec(),
            pads_begin: begin.to_vec(),
            pads_end: end.to_vec(),
            dilations: vec![1; k.len()],
            ceil_mode: ceil,
            count_include_pad: include,
            channels_last: false,
        }
    }

    /// ONNX 2-D pooling as loops: window (oy, ox) starts at o·s − pad_begin;
    /// the average's divisor counts the window inside the padded input
    /// (count_include_pad) or inside the input.
    fn reference(x: &[f64], xs: &[usize], a: &PoolAttrs, out: &[usize], max: bool) -> Vec<f64> {
        tabulate(out, |o| {
            let mut best = f64::NEG_INFINITY;
            let (mut total, mut inside, mut padded) = (0.0, 0, 0);
            for r in 0..a.kernel[0] {
                for s in 0..a.kernel[1] {
                    let y = o[2] as i64 * a.strides[0] + r - a.pads_begin[0];
                    let x_ = o[3] as i64 * a.strides[1] + s - a.pads_begin[1];
                    let (h, w) = (xs[2] as i64, xs[3] as i64);
                    if y < h + a.pads_end[0] && x_ < w + a.pads_end[1] {
                        padded += 1;
                    }
                    if (0..h).contains(&y) && (0..w).contains(&x_) {
                        let v = x[ravel(&[o[0], o[1], y as usize, x_ as usize], xs)];
                        best = best.max(v);
                        total += v;
                        inside += 1;
                    }
                }
            }
            if max {
                best
            } else if a.count_include_pad {
                total / padded as f64
            } else {
                total / inside as f64
            }
        })
    }

    fn check(xs: &[usize], a: PoolAttrs, out: &[usize], max: bool, jit: bool) -> Option<String> {
        let mut case = Case::new();
        case.input("x", xs);
        let op = if max {
            Op::MaxPool(a.clone())
        } else {
            Op::AveragePool(a.clone())
        };
        let node = case.node(op, &["x"], out);
        let (kernel, got) = case.run(&node);
        let want = reference(&case.data("x"), xs, &a, out, max);
        let terms = (a.kernel[0] * a.kernel[1]) as usize;
        assert_close(&got, &want, terms, &format!("pool max={max} {a:?}"));
        if jit {
            assert_jit_matches(&case, &kernel, terms, "pool");
        }
        kernel.registry_op.map(|r| r.0)
    }

    #[test]
    fn pools_matching_the_registry_use_it() {
        let a = attrs(&[3, 3], &[2, 2], &[1, 1], &[1, 1], false, false);
        assert_eq!(
            check(&[1, 2, 7, 7], a.clone(), &[1, 2, 4, 4], true, false),
            Some("max_pool2d".into())
        );
        // Average with padding that does not count is not the registry's.
        assert_eq!(check(&[1, 2, 7, 7], a, &[1, 2, 4, 4], false, true), None);
        let counted = attrs(&[3, 3], &[2, 2], &[1, 1], &[1, 1], false, true);
        assert_eq!(
            check(&[1, 2, 7, 7], counted, &[1, 2, 4, 4], false, false),
            Some("avg_pool2d".into())
        );
        let unpadded = attrs(&[2, 2], &[2, 2], &[0, 0], &[0, 0], false, false);
        assert_eq!(
            check(&[2, 3, 6, 6], unpadded, &[2, 3, 3, 3], false, false),
            Some("avg_pool2d".into())
        );
        // Ceil mode that adds no window is the floor pool.
        let ceil_same = attrs(&[2, 2], &[2, 2], &[0, 0], &[0, 0], true, false);
        assert_eq!(
            check(&[1, 1, 6, 6], ceil_same, &[1, 1, 3, 3], true, false),
            Some("max_pool2d".into())
        );
    }

    #[test]
    fn ceil_mode_and_asymmetric_pads_are_built_with_te() {
        for include in [false, true] {
            let ceil = attrs(&[3, 3], &[2, 2], &[0, 0], &[0, 0], true, include);
            assert_eq!(
                check(&[1, 2, 6, 6], ceil.clone(), &[1, 2, 3, 3], false, true),
                None
            );
            assert_eq!(
                check(&[1, 2, 6, 6], ceil, &[1, 2, 3, 3], true, include),
                None
            );
            let asym = attrs(&[3, 2], &[1, 2], &[1, 0], &[0, 1], false, include);
            assert_eq!(
                check(&[1, 2, 5, 6], asym.clone(), &[1, 2, 4, 3], false, false),
                None
            );
            assert_eq!(check(&[1, 2, 5, 6], asym, &[1, 2, 4, 3], true, false), None);
            let ceil_padded = attrs(&[3, 3], &[2, 2], &[1, 1], &[1, 1], true, include);
            assert_eq!(
                check(&[1, 1, 6, 6], ceil_padded, &[1, 1, 4, 4], false, include),
                None
            );
        }
    }

    #[test]
    fn an_output_extent_ceil_mode_cannot_give_is_a_bad_node() {
        let mut case = Case::new();
        case.input("x", &[1, 1, 6, 6]);
        let a = attrs(&[3, 3], &[2, 2], &[0, 0], &[0, 0], false, false);
        let node = case.node(Op::MaxPool(a), &["x"], &[1, 1, 3, 3]);
        assert!(matches!(
            case.lower(&node),
            Err(crate::graph::GraphError::BadNode { .. })
        ));
    }

    #[test]
    fn global_average_pool_means_every_plane() {
        for (xs, registry) in [
            (&[2, 3, 4, 5][..], true),
            (&[2, 3, 7][..], false),
            (&[1, 2, 2, 3, 2][..], false),
        ] {
            let mut case = Case::new();
            case.input("x", xs);
            let mut out = xs.to_vec();
            out[2..].fill(1);
            let node = case.node(Op::GlobalAveragePool, &["x"], &out);
            let (kernel, got) = case.run(&node);
            assert_eq!(kernel.registry_op.is_some(), registry);
            if registry {
                assert_eq!(
                    kernel.registry_op.as_ref().map(|r| r.0.as_str()),
                    Some("avg_pool2d")
                );
            }
            let x = case.data("x");
            let plane: usize = xs[2..].iter().product();
            let want = tabulate(&out, |o| {
                let start = (o[0] * xs[1] + o[1]) * plane;
                x[start..start + plane].iter().sum::<f64>() / plane as f64
            });
            assert_close(&got, &want, plane, "global average pool");
            if !registry {
                assert_jit_matches(&case, &kernel, plane, "global average pool");
            }
        }
    }
}
