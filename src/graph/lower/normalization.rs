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
    let [scale, bias, mean, var] = <[Value; 4]>::try_from(params)
        .map_err(|_| GraphError::lower(b.node, "expected four per-channel parameters"))?;
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
    if let Some((&n, rows)) = shape.split_last()
        && axis == rows.len()
        && last_axis == rows.len()
    {
        let p = [("M", rows.iter().product()), ("N", n)];
        return b.registry("softmax", &p, &[0]);
    }
    let x = b.tensor(0, "x")?;
    let full = b.dims(&shape)?;
    let outer = rows.outer_dims();
    let rk = rows.reduce_axes("k");
    let row_max = compute("row_max", &outer, |o| {
        reduce_max(x.at(rows.full(o, &rk)), &rk)
    });
    let shifted_exp = compute(
        "exp",
        &full,
        |ix| exp(x.at(ix) - row_max.at(rows.outer(ix))),
    );
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
    if let Some((&n, rows)) = shape.split_last()
        && axis == rows.len()
    {
        let m: usize = rows.iter().product();
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
    let mean = compute("mean", &outer, |o| {
        sum(x.at(rows.full(o, &rk)) * inv_n, &rk)
    });
    let rv = rows.reduce_axes("k");
    let variance = compute("variance", &outer, |o| {
        let d = x.at(rows.full(o, &rv)) - mean.at(o);
        sum(&d * &d * inv_n, &rv)
    });
    let rstd = compute("rstd", &outer, |o| 1.0f32 / sqrt(variance.at(o) + epsilon));
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

#[cfg(test)]
mod tests {
    use super::super::test_support::{
        Case, assert_close, assert_jit_matches, ravel, tabulate, unravel,
    };
    use crate::graph::ir::Op;

    #[test]
    fn batch_norm_normalises_each_channel() {
        let mut case = Case::new();
        let xs = [2, 3, 2, 2];
        case.input("x", &xs)
            .random_constant("scale", &[3])
            .random_constant("bias", &[3])
            .random_constant("mean", &[3])
            .constant("var", &[3], vec![0.5, 1.0, 2.0]);
        let node = case.node(
            Op::BatchNormalization { epsilon: 1e-3 },
            &["x", "scale", "bias", "mean", "var"],
            &xs,
        );
        let (kernel, got) = case.run(&node);
        assert_eq!(kernel.inputs, ["x", "scale", "bias", "mean", "var"]);
        let (x, s, b, m, v) = (
            case.data("x"),
            case.data("scale"),
            case.data("bias"),
            case.data("mean"),
            case.data("var"),
        );
        let eps = f64::from(1e-3f32);
        let want = tabulate(&xs, |o| {
            let c = o[1];
            (x[ravel(o, &xs)] - m[c]) / (v[c] + eps).sqrt() * s[c] + b[c]
        });
        assert_close(&got, &want, 6, "batch norm");
    }

    /// Softmax over axes `lo..=hi` as loops.
    fn softmax_reference(x: &[f64], shape: &[usize], lo: usize, hi: usize) -> Vec<f64> {
        let row = |o: &[usize]| -> Vec<usize> {
            let inner: Vec<usize> = shape[lo..=hi].to_vec();
            let n: usize = inner.iter().product();
            (0..n)
                .map(|p| {
                    let mut at = o.to_vec();
                    at.splice(lo..=hi, unravel(p, &inner));
                    ravel(&at, shape)
                })
                .collect()
        };
        tabulate(shape, |o| {
            let members = row(o);
            let max = members
                .iter()
                .map(|&p| x[p])
                .fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = members.iter().map(|&p| (x[p] - max).exp()).sum();
            (x[ravel(o, shape)] - max).exp() / total
        })
    }

    #[test]
    fn softmax_over_the_last_axis_of_a_matrix_is_the_registry_op() {
        let mut case = Case::new();
        case.input("x", &[3, 7]);
        let node = case.node(
            Op::Softmax {
                axis: 1,
                last_axis: 1,
            },
            &["x"],
            &[3, 7],
        );
        let (kernel, got) = case.run(&node);
        assert_eq!(
            kernel.registry_op,
            Some(("softmax".into(), "M=3,N=7".into()))
        );
        assert_close(
            &got,
            &softmax_reference(&case.data("x"), &[3, 7], 1, 1),
            8,
            "softmax",
        );
    }

    #[test]
    fn softmax_over_middle_trailing_and_all_axes() {
        let shape = [2, 3, 4];
        for (lo, hi, jit) in [
            (1, 1, true),
            (0, 0, false),
            (1, 2, false),
            (0, 2, true),
            (2, 2, false),
        ] {
            let mut case = Case::new();
            case.input("x", &shape);
            let node = case.node(
                Op::Softmax {
                    axis: lo,
                    last_axis: hi,
                },
                &["x"],
                &shape,
            );
            let (kernel, got) = case.run(&node);
            // Over the last axis alone, any rank is the registry's softmax.
            let last = shape.len() - 1;
            assert_eq!(kernel.registry_op.is_some(), (lo, hi) == (last, last));
            let want = softmax_reference(&case.data("x"), &shape, lo, hi);
            assert_close(&got, &want, 16, &format!("softmax {lo}..={hi}"));
            if jit {
                assert_jit_matches(&case, &kernel, 16, "softmax");
            }
        }
    }

    fn layer_norm_reference(
        x: &[f64],
        shape: &[usize],
        axis: usize,
        scale: &[f64],
        bias: Option<&[f64]>,
        eps: f64,
    ) -> Vec<f64> {
        let n: usize = shape[axis..].iter().product();
        let rows: Vec<(f64, f64)> = x
            .chunks(n)
            .map(|r| {
                let mean = r.iter().sum::<f64>() / n as f64;
                let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
                (mean, var)
            })
            .collect();
        (0..x.len())
            .map(|p| {
                let (mean, var) = rows[p / n];
                let i = p % n;
                (x[p] - mean) / (var + eps).sqrt() * scale[i] + bias.map_or(0.0, |b| b[i])
            })
            .collect()
    }

    #[test]
    fn layer_norm_of_matrices_with_the_registry_epsilon_is_the_registry_op() {
        let mut case = Case::new();
        case.input("x", &[3, 8])
            .random_constant("g", &[8])
            .random_constant("b", &[8]);
        let node = case.node(
            Op::LayerNormalization {
                axis: 1,
                epsilon: 1e-5,
            },
            &["x", "g", "b"],
            &[3, 8],
        );
        let (kernel, got) = case.run(&node);
        assert_eq!(kernel.registry_op.map(|r| r.0), Some("layer_norm".into()));
        let want = layer_norm_reference(
            &case.data("x"),
            &[3, 8],
            1,
            &case.data("g"),
            Some(&case.data("b")),
            f64::from(1e-5f32),
        );
        assert_close(&got, &want, 16, "layer norm");
        let other = case.node(
            Op::LayerNormalization {
                axis: 1,
                epsilon: 1e-6,
            },
            &["x", "g", "b"],
            &[3, 8],
        );
        assert!(case.kernel(&other).registry_op.is_none());
    }

    #[test]
    fn layer_norm_over_trailing_axes_with_and_without_bias() {
        let shape = [2, 3, 4];
        for (axis, with_bias) in [(2, true), (1, false), (1, true)] {
            let mut case = Case::new();
            let norm = &shape[axis..];
            case.input("x", &shape)
                .random_constant("g", norm)
                .random_constant("b", norm);
            let inputs: &[&str] = if with_bias {
                &["x", "g", "b"]
            } else {
                &["x", "g"]
            };
            let node = case.node(
                Op::LayerNormalization {
                    axis,
                    epsilon: 1e-3,
                },
                inputs,
                &shape,
            );
            let (kernel, got) = case.run(&node);
            assert!(kernel.registry_op.is_none());
            let b = case.data("b");
            let want = layer_norm_reference(
                &case.data("x"),
                &shape,
                axis,
                &case.data("g"),
                with_bias.then_some(b.as_slice()),
                f64::from(1e-3f32),
            );
            assert_close(&got, &want, 24, &format!("layer norm axis {axis}"));
            if axis == 1 && with_bias {
                assert_jit_matches(&case, &kernel, 24, "layer norm");
            }
        }
    }

    #[test]
    fn lrn_sums_squares_over_a_channel_window() {
        for size in [3, 4] {
            let xs = [1, 5, 2, 3];
            let mut case = Case::new();
            case.input("x", &xs);
            let (alpha, beta, bias) = (1e-2f32, 0.75f32, 2.0f32);
            let node = case.node(
                Op::Lrn {
                    size,
                    alpha,
                    beta,
                    bias,
                },
                &["x"],
                &xs,
            );
            let (kernel, got) = case.run(&node);
            let x = case.data("x");
            let (lo, hi) = ((size - 1) / 2, size - 1 - (size - 1) / 2);
            let want = tabulate(&xs, |o| {
                let mut sq = 0.0;
                for c in (o[1] as i64 - lo)..=(o[1] as i64 + hi) {
                    if (0..xs[1] as i64).contains(&c) {
                        let v = x[ravel(&[o[0], c as usize, o[2], o[3]], &xs)];
                        sq += v * v;
                    }
                }
                let base = f64::from(bias) + f64::from(alpha) / size as f64 * sq;
                x[ravel(o, &xs)] / base.powf(f64::from(beta))
            });
            assert_close(&got, &want, size as usize + 8, &format!("lrn size {size}"));
            assert_jit_matches(&case, &kernel, size as usize + 8, "lrn");
        }
    }
}
