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
        return Err(GraphError::bad_node(b.node, "Concat needs at least one input"));
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
        return Err(bad(&b, format!("axis {axis} is not an axis of {}", shape_text(&x))));
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
    if let Some(i) = indices.iter().find(|&&i| i < 0 || i as u64 >= x[axis] as u64) {
        return Err(bad(
            &b,
            format!("index {i} is out of range for axis {axis} of extent {}", x[axis]),
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
                let scaled = if run.step == 1 { offset } else { offset * run.step };
                if run.first == 0 { scaled } else { scaled + run.first }
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
                let scaled = if steps[d] == 1 { i.clone() } else { i * steps[d] };
                if starts[d] == 0 { scaled } else { scaled + starts[d] }
            })
            .collect();
        data.at(at)
    });
    b.finish(y)
}
