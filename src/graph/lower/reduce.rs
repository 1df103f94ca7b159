//! Reductions: ReduceMean over any axes, and [`Rows`], the split of a shape
//! into kept ("outer") axes and a contiguous run of reduced axes that
//! Softmax and LayerNormalization normalise over.

use crate::te::{Expr, compute, reduce_axis, sum};

use super::super::error::GraphError;
use super::Lowered;
use super::builder::{KernelBuilder, shape_text};

/// A shape whose axes `lo..=hi` are reduced and the others kept.
pub(super) struct Rows {
    shape: Vec<i64>,
    lo: usize,
    hi: usize,
}

impl Rows {
    /// The split of `shape` at axes `lo..=hi`, or an error when they are not axes of it.
    pub(super) fn new(
        b: &KernelBuilder<'_>,
        shape: &[usize],
        lo: usize,
        hi: usize,
    ) -> Result<Rows, GraphError> {
        if lo > hi || hi >= shape.len() {
            return Err(GraphError::bad_node(
                b.node,
                format!(
                    "axes {lo}..={hi} are not axes of the input {}",
                    shape_text(shape)
                ),
            ));
        }
        Ok(Rows {
            shape: b.dims(shape)?,
            lo,
            hi,
        })
    }

    fn kept(&self) -> usize {
        self.shape.len() - (self.hi - self.lo + 1)
    }

    /// The kept axes' extents (`[1]` when every axis is reduced).
    pub(super) fn outer_dims(&self) -> Vec<i64> {
        if self.kept() == 0 {
            return vec![1];
        }
        let mut dims = self.shape[..self.lo].to_vec();
        dims.extend_from_slice(&self.shape[self.hi + 1..]);
        dims
    }

    /// The number of elements reduced per row.
    pub(super) fn len(&self) -> i64 {
        self.shape[self.lo..=self.hi].iter().product()
    }

    /// One reduction axis per reduced dimension.
    pub(super) fn reduce_axes(&self, name: &str) -> Vec<Expr> {
        (self.lo..=self.hi)
            .map(|d| reduce_axis(self.shape[d], &format!("{name}{d}")))
            .collect()
    }

    /// The row index of full index `ix`.
    pub(super) fn outer(&self, ix: &[Expr]) -> Vec<Expr> {
        if self.kept() == 0 {
            return vec![Expr::i64(0)];
        }
        ix[..self.lo]
            .iter()
            .chain(&ix[self.hi + 1..])
            .cloned()
            .collect()
    }

    /// The full index of row `outer` at reduced position `reduced`.
    pub(super) fn full(&self, outer: &[Expr], reduced: &[Expr]) -> Vec<Expr> {
        if self.kept() == 0 {
            return reduced.to_vec();
        }
        outer[..self.lo]
            .iter()
            .chain(reduced)
            .chain(&outer[self.lo..])
            .cloned()
            .collect()
    }
}

/// A ReduceMean node: the sum over `axes`, then one division.
pub(super) fn reduce_mean(
    mut b: KernelBuilder<'_>,
    axes: &[usize],
    keepdims: bool,
) -> Result<Lowered, GraphError> {
    let shape = b.input_shape(0)?;
    if axes.iter().any(|&a| a >= shape.len()) || axes.windows(2).any(|w| w[0] >= w[1]) {
        return Err(GraphError::bad_node(
            b.node,
            format!(
                "axes {axes:?} must be ascending axes of the input {}",
                shape_text(&shape)
            ),
        ));
    }
    let x = b.tensor(0, "x")?;
    let dims = b.dims(&shape)?;
    // Per input axis: the reduction axis, or the output axis indexing it.
    let mut out = Vec::new();
    let mut source = Vec::new();
    let mut taps = Vec::new();
    for (d, &extent) in dims.iter().enumerate() {
        if axes.contains(&d) {
            let r = reduce_axis(extent, &format!("r{d}"));
            taps.push(r.clone());
            source.push(Err(r));
            if keepdims {
                out.push(1);
            }
        } else {
            source.push(Ok(out.len()));
            out.push(extent);
        }
    }
    let at = |ix: &[Expr]| -> Vec<Expr> {
        source
            .iter()
            .map(|s| match s {
                Ok(o) => ix[*o].clone(),
                Err(r) => r.clone(),
            })
            .collect()
    };
    if taps.is_empty() {
        let copy = compute("copy", &out, |ix| x.at(at(ix)));
        return b.finish(copy);
    }
    let total = compute("sum", &out, |ix| sum(x.at(at(ix)), &taps));
    let count: i64 = axes.iter().map(|&a| dims[a]).product();
    let mean = compute("mean", &out, |ix| total.at(ix) / count as f32);
    b.finish(mean)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{Case, assert_close, assert_jit_matches, ravel, unravel};
    use crate::graph::ir::Op;

    #[test]
    fn reduce_mean_over_any_axes_with_and_without_kept_dimensions() {
        let shape = [2, 3, 4];
        let cases: [(&[usize], bool, &[usize]); 5] = [
            (&[2], true, &[2, 3, 1]),
            (&[1], false, &[2, 4]),
            (&[0, 2], true, &[1, 3, 1]),
            (&[0, 1, 2], false, &[]),
            (&[], false, &[2, 3, 4]),
        ];
        for (axes, keepdims, out) in cases {
            let mut case = Case::new();
            case.input("x", &shape);
            let node = case.node(
                Op::ReduceMean {
                    axes: axes.to_vec(),
                    keepdims,
                },
                &["x"],
                out,
            );
            let (kernel, got) = case.run(&node);
            let x = case.data("x");
            // Accumulate every input element into its output cell.
            let out_len: usize = out.iter().product();
            let mut want = vec![0.0; out_len];
            let count: usize = axes.iter().map(|&a| shape[a]).product();
            for (p, v) in x.iter().enumerate() {
                let ix = unravel(p, &shape);
                let kept: Vec<usize> = (0..shape.len())
                    .filter_map(|d| match (axes.contains(&d), keepdims) {
                        (false, _) => Some(ix[d]),
                        (true, true) => Some(0),
                        (true, false) => None,
                    })
                    .collect();
                want[ravel(&kept, out)] += v / count as f64;
            }
            assert_close(&got, &want, count, &format!("reduce mean {axes:?}"));
            if axes.len() == 2 {
                assert_jit_matches(&case, &kernel, count, "reduce mean");
            }
        }
    }
}
