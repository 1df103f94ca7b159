//! Data movement: Transpose, Concat (one stage, a `select` per input
//! boundary), Gather with constant indices (affine where the indices form
//! arithmetic runs) and Slice.

use crate::te::{Expr, compute, select};

use super::super::error::GraphError;
use super::Lowered;
use super::builder::{KernelBuilder, shape_text};

/// A Transpose node: output dimension `i` is input dimension `perm[i]`.
pub(super) fn transpose(mut b: KernelBuilder<'_>, perm: &[usize]) -> Result<Lowered, GraphError> {
    let x = b.input_shape(0)?;
    let mut seen = vec![false; x.len()];
    let valid = perm.len() == x.len()
        && perm
            .iter()
            .all(|&p| p < seen.len() && !std::mem::replace(&mut seen[p], true));
    if !valid {
        return Err(GraphError::bad_node(
            b.node,
            format!(
                "perm {perm:?} is not a permutation of the input's {} axes",
                x.len()
            ),
        ));
    }
    let out: Vec<usize> = perm.iter().map(|&p| x[p]).collect();
    let data = b.value(0, "x")?;
    let dims = b.dims(&out)?;
    let y = compute("transpose", &dims, |ix| {
        let mut at = vec![Expr::i64(0); perm.len()];
        for (i, &p) in perm.iter().enumerate() {
            at[p] = ix[i].clone();
        }
        data.at(at)
    });
    b.finish(y)
}

/// A Concat node: input `i` fills `offset[i]..offset[i+1]` of the axis.
pub(super) fn concat(mut b: KernelBuilder<'_>, axis: usize) -> Result<Lowered, GraphError> {
    let count = b.node.inputs.len();
    if count == 0 {
        return Err(GraphError::bad_node(
            b.node,
            "Concat needs at least one input",
        ));
    }
    let first = b.input_shape(0)?;
    let mut offsets = vec![0usize];
    for i in 0..count {
        let s = b.input_shape(i)?;
        let fits = axis < first.len()
            && s.len() == first.len()
            && s.iter()
                .zip(&first)
                .enumerate()
                .all(|(d, (a, c))| d == axis || a == c);
        if !fits {
            return Err(GraphError::bad_node(
                b.node,
                format!(
                    "input {i} {} does not join input 0 {} along axis {axis}",
                    shape_text(&s),
                    shape_text(&first)
                ),
            ));
        }
        offsets.push(offsets[i] + s[axis]);
    }
    let values = (0..count)
        .map(|i| b.value(i, &format!("x{i}")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = first.clone();
    out[axis] = offsets[count];
    let dims = b.dims(&out)?;
    let starts = b.dims(&offsets)?;
    let y = compute("concat", &dims, |ix| {
        let read = |i: usize| {
            let mut at = ix.to_vec();
            if starts[i] > 0 {
                at[axis] = &ix[axis] - starts[i];
            }
            values[i].at(at)
        };
        let mut value = read(count - 1);
        for i in (0..count - 1).rev() {
            value = select(ix[axis].lt(starts[i + 1]), read(i), value);
        }
        value
    });
    b.finish(y)
}

/// A run of indices in arithmetic progression: positions `start..start+len`
/// hold `first + step·(p − start)`.
#[derive(Debug, PartialEq, Eq)]
struct Run {
    start: usize,
    first: i64,
    step: i64,
}

/// `indices` cut greedily into maximal arithmetic runs.
fn runs(indices: &[i64]) -> Vec<Run> {
    let mut runs = Vec::new();
    let mut p = 0;
    while p < indices.len() {
        let step = indices.get(p + 1).map_or(0, |next| next - indices[p]);
        let mut end = p + 1;
        while end < indices.len() && indices[end] - indices[end - 1] == step {
            end += 1;
        }
        runs.push(Run {
            start: p,
            first: indices[p],
            step,
        });
        p = end;
    }
    runs
}

/// A Gather node with constant indices: output =
/// `data.shape[..axis] ++ indices_shape ++ data.shape[axis+1..]`.
pub(super) fn gather(
    mut b: KernelBuilder<'_>,
    axis: usize,
    indices: &[i64],
    indices_shape: &[usize],
) -> Result<Lowered, GraphError> {
    let x = b.input_shape(0)?;
    let bad = |b: &KernelBuilder<'_>, what: String| GraphError::bad_node(b.node, what);
    if axis >= x.len() {
        return Err(bad(
            &b,
            format!("axis {axis} is not an axis of {}", shape_text(&x)),
        ));
    }
    if indices.len() != indices_shape.iter().product::<usize>() || indices.is_empty() {
        return Err(bad(
            &b,
            format!(
                "{} indices do not fill the indices shape {} (or there are none)",
                indices.len(),
                shape_text(indices_shape)
            ),
        ));
    }
    if let Some(i) = indices
        .iter()
        .find(|&&i| i < 0 || i as u64 >= x[axis] as u64)
    {
        return Err(bad(
            &b,
            format!(
                "index {i} is out of range for axis {axis} of extent {}",
                x[axis]
            ),
        ));
    }
    let data = b.value(0, "data")?;
    let out: Vec<usize> = x[..axis]
        .iter()
        .chain(indices_shape)
        .chain(&x[axis + 1..])
        .copied()
        .collect();
    let dims = b.dims(&out)?;
    let q = indices_shape.len();
    let runs = runs(indices);
    let y = compute("gather", &dims, |ix| {
        // Row-major position among the indices.
        let mut flat: Option<Expr> = None;
        let mut stride = 1i64;
        for t in (0..q).rev() {
            let extent = dims[axis + t];
            if extent > 1 {
                let term = if stride == 1 {
                    ix[axis + t].clone()
                } else {
                    &ix[axis + t] * stride
                };
                flat = Some(match flat {
                    Some(f) => term + f,
                    None => term,
                });
            }
            stride *= extent;
        }
        let flat = flat.unwrap_or_else(|| Expr::i64(0));
        let read = |run: &Run| {
            let index = if run.step == 0 {
                Expr::i64(run.first)
            } else {
                let offset = if run.start == 0 {
                    flat.clone()
                } else {
                    &flat - run.start as i64
                };
                let scaled = if run.step == 1 {
                    offset
                } else {
                    offset * run.step
                };
                if run.first == 0 {
                    scaled
                } else {
                    scaled + run.first
                }
            };
            let at: Vec<Expr> = ix[..axis]
                .iter()
                .cloned()
                .chain(std::iter::once(index))
                .chain(ix[axis + q..].iter().cloned())
                .collect();
            data.at(at)
        };
        let Some((last, rest)) = runs.split_last() else {
            return Expr::f32(0.0);
        };
        let mut value = read(last);
        for (i, run) in rest.iter().enumerate().rev() {
            value = select(flat.lt(runs[i + 1].start as i64), read(run), value);
        }
        value
    });
    b.finish(y)
}

/// A Slice node: output element `i` of dimension `d` is input element
/// `starts[d] + steps[d]·i`; the output shape gives the extents.
pub(super) fn slice(
    mut b: KernelBuilder<'_>,
    starts: &[i64],
    steps: &[i64],
) -> Result<Lowered, GraphError> {
    let x = b.input_shape(0)?;
    let out = b.output_shape()?;
    if starts.len() != x.len() || steps.len() != x.len() || out.len() != x.len() {
        return Err(GraphError::bad_node(
            b.node,
            format!(
                "starts {starts:?} and steps {steps:?} need one entry per axis of the input {} (output {})",
                shape_text(&x),
                shape_text(&out)
            ),
        ));
    }
    for d in 0..x.len() {
        let (start, step, extent) = (starts[d], steps[d], x[d] as i64);
        let last = start + step * (out[d] as i64 - 1);
        if step == 0 || out[d] == 0 || !(0..extent).contains(&start) || !(0..extent).contains(&last)
        {
            return Err(GraphError::bad_node(
                b.node,
                format!(
                    "axis {d}: start {start}, step {step} and {} outputs read outside 0..{extent}",
                    out[d]
                ),
            ));
        }
    }
    let data = b.value(0, "data")?;
    let dims = b.dims(&out)?;
    let y = compute("slice", &dims, |ix| {
        let at: Vec<Expr> = ix
            .iter()
            .enumerate()
            .map(|(d, i)| {
                let scaled = if steps[d] == 1 {
                    i.clone()
                } else {
                    i * steps[d]
                };
                if starts[d] == 0 {
                    scaled
                } else {
                    scaled + starts[d]
                }
            })
            .collect();
        data.at(at)
    });
    b.finish(y)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{Case, assert_close, assert_jit_matches, ravel, tabulate};
    use super::{Run, runs};
    use crate::graph::ir::Op;

    #[test]
    fn transpose_permutes_axes() {
        let xs = [2, 3, 4];
        for perm in [[2, 0, 1], [1, 0, 2], [0, 1, 2]] {
            let mut case = Case::new();
            case.input("x", &xs);
            let out: Vec<usize> = perm.iter().map(|&p| xs[p]).collect();
            let node = case.node(
                Op::Transpose {
                    perm: perm.to_vec(),
                },
                &["x"],
                &out,
            );
            let (_, got) = case.run(&node);
            let x = case.data("x");
            let want = tabulate(&out, |o| {
                let mut at = [0; 3];
                for i in 0..3 {
                    at[perm[i]] = o[i];
                }
                x[ravel(&at, &xs)]
            });
            assert_close(&got, &want, 0, &format!("transpose {perm:?}"));
        }
    }

    #[test]
    fn concat_of_three_inputs_on_every_axis() {
        let parts = [[2, 3, 4], [1, 3, 4], [3, 3, 4]];
        for axis in 0..3 {
            let mut case = Case::new();
            let shapes: Vec<Vec<usize>> = parts
                .iter()
                .map(|p| {
                    let mut s = vec![2, 3, 4];
                    s[axis] = p[0] + axis; // extents 2/1/3 (+axis) along the axis
                    s
                })
                .collect();
            for (i, s) in shapes.iter().enumerate() {
                case.input(&format!("x{i}"), s);
            }
            let mut out = shapes[0].clone();
            out[axis] = shapes.iter().map(|s| s[axis]).sum();
            let node = case.node(Op::Concat { axis }, &["x0", "x1", "x2"], &out);
            let (kernel, got) = case.run(&node);
            let data: Vec<Vec<f64>> = (0..3).map(|i| case.data(&format!("x{i}"))).collect();
            let want = tabulate(&out, |o| {
                let mut at = o.to_vec();
                for (i, s) in shapes.iter().enumerate() {
                    if at[axis] < s[axis] {
                        return data[i][ravel(&at, s)];
                    }
                    at[axis] -= s[axis];
                }
                f64::NAN
            });
            assert_close(&got, &want, 0, &format!("concat axis {axis}"));
            assert_jit_matches(&case, &kernel, 0, "concat");
        }
    }

    #[test]
    fn concat_inlines_a_one_element_constant() {
        let mut case = Case::new();
        case.input("x", &[3]).constant("one", &[1], vec![7.0]);
        let node = case.node(Op::Concat { axis: 0 }, &["one", "x"], &[4]);
        let (kernel, got) = case.run(&node);
        assert_eq!(kernel.inputs, ["x"]);
        let x = case.data("x");
        assert_close(&got, &[7.0, x[0], x[1], x[2]], 0, "concat with a literal");
    }

    #[test]
    fn indices_split_into_arithmetic_runs() {
        let run = |start, first, step| Run { start, first, step };
        assert_eq!(runs(&[4]), [run(0, 4, 0)]);
        assert_eq!(runs(&[1, 3, 5, 7]), [run(0, 1, 2)]);
        assert_eq!(
            runs(&[2, 2, 0, 1, 2, 9]),
            [run(0, 2, 0), run(2, 0, 1), run(5, 9, 0)]
        );
    }

    fn check_gather(xs: &[usize], axis: usize, indices: &[i64], ishape: &[usize], jit: bool) {
        let mut case = Case::new();
        case.input("x", xs);
        let out: Vec<usize> = xs[..axis]
            .iter()
            .chain(ishape)
            .chain(&xs[axis + 1..])
            .copied()
            .collect();
        let op = Op::Gather {
            axis,
            indices: indices.to_vec(),
            indices_shape: ishape.to_vec(),
        };
        let node = case.node(op, &["x"], &out);
        let (kernel, got) = case.run(&node);
        let x = case.data("x");
        let q = ishape.len();
        let want = tabulate(&out, |o| {
            let which = ravel(&o[axis..axis + q], ishape);
            let mut at: Vec<usize> = o[..axis].to_vec();
            at.push(indices[which] as usize);
            at.extend_from_slice(&o[axis + q..]);
            x[ravel(&at, xs)]
        });
        assert_close(
            &got,
            &want,
            0,
            &format!("gather {indices:?} on axis {axis}"),
        );
        if jit {
            assert_jit_matches(&case, &kernel, 0, "gather");
        }
    }

    #[test]
    fn gather_with_progressions_scalars_and_arbitrary_indices() {
        check_gather(&[5, 3], 0, &[1, 2, 3], &[3], false);
        check_gather(&[5, 3], 0, &[4, 2, 0], &[3], false);
        check_gather(&[2, 6, 3], 1, &[3], &[], false);
        check_gather(&[2, 6, 3], 1, &[5, 0, 2, 2, 1, 4], &[2, 3], true);
        check_gather(&[4, 5], 1, &[0, 1, 2, 4, 4, 3], &[3, 2], true);
        check_gather(&[7], 0, &[6, 0], &[2, 1], false);
    }

    #[test]
    fn out_of_range_indices_are_bad_nodes() {
        let mut case = Case::new();
        case.input("x", &[3, 2]);
        let op = Op::Gather {
            axis: 0,
            indices: vec![3],
            indices_shape: vec![1],
        };
        let node = case.node(op, &["x"], &[1, 2]);
        assert!(matches!(
            case.lower(&node),
            Err(crate::graph::GraphError::BadNode { .. })
        ));
    }

    #[test]
    fn slice_with_positive_and_negative_steps() {
        let xs = [4, 6, 5];
        let cases: [(&[i64], &[i64], &[usize]); 3] = [
            (&[1, 0, 2], &[1, 2, 1], &[3, 3, 3]),
            (&[3, 5, 4], &[-1, -2, -3], &[4, 3, 2]),
            (&[0, 1, 0], &[2, 1, 1], &[2, 4, 5]),
        ];
        for (i, (starts, steps, out)) in cases.into_iter().enumerate() {
            let mut case = Case::new();
            case.input("x", &xs);
            let op = Op::Slice {
                starts: starts.to_vec(),
                steps: steps.to_vec(),
            };
            let node = case.node(op, &["x"], out);
            let (kernel, got) = case.run(&node);
            let x = case.data("x");
            let want = tabulate(out, |o| {
                let at: Vec<usize> = (0..3)
                    .map(|d| (starts[d] + steps[d] * o[d] as i64) as usize)
                    .collect();
                x[ravel(&at, &xs)]
            });
            assert_close(&got, &want, 0, &format!("slice {starts:?} {steps:?}"));
            if i == 1 {
                assert_jit_matches(&case, &kernel, 0, "slice");
            }
        }
        let mut case = Case::new();
        case.input("x", &[4]);
        let node = case.node(
            Op::Slice {
                starts: vec![2],
                steps: vec![1],
            },
            &["x"],
            &[3],
        );
        assert!(matches!(
            case.lower(&node),
            Err(crate::graph::GraphError::BadNode { .. })
        ));
    }
}
