//! Bound inference: the region of a producer that one iteration of its
//! host loop needs, from the consumer's read indices.
//!
//! Each index's [`Affine`] form is split into `outer + Σ cᵥ·v + c` where the
//! `v` are the loops inside the host loop (ranging over their whole extent)
//! and `outer` depends only on loops outside it (fixed during the iteration).
//! The region of a dimension is then `outer + [lo, hi]` with constant bounds;
//! reads whose outer parts differ, or indices that are not affine in the inner
//! loops, fall back to the whole dimension.

use std::collections::HashSet;

use crate::arith::{Affine, Interval, Overflow};
use crate::te::{Expr, ExprKind, VarId};

/// `index` as `(inner, outer)` forms that sum to it: `inner` the terms of
/// the loops in `inner` with the constant, `outer` the rest; `None` when an
/// inner loop appears other than linearly.
fn decompose(index: &Expr, inner: &HashSet<VarId>) -> Option<(Affine, Affine)> {
    let uses_inner =
        |e: &Expr| e.any(&mut |x| matches!(x.kind(), ExprKind::Var(v) if inner.contains(&v.id())));
    let (inside, outside) =
        Affine::of(index).partition(|atom| atom.as_var().is_some() && uses_inner(atom));
    if outside.terms.iter().any(|(atom, _)| uses_inner(atom)) {
        return None;
    }
    Some((inside, outside))
}

/// The outer part as a canonical, comparable list.
fn outer_key(outer: &Affine) -> Vec<(String, i64)> {
    let mut key: Vec<(String, i64)> = outer
        .terms
        .iter()
        .filter(|(_, c)| *c != 0)
        .map(|(a, c)| (a.to_string(), *c))
        .collect();
    key.sort();
    key
}

/// The region of one dimension: `offset + 0..extent`.
#[derive(Clone, Debug)]
pub(crate) struct DimRegion {
    pub offset: Expr,
    pub extent: i64,
}

/// The region of a dimension of extent `full` covered by `indices` (one per
/// read) when the variables in `inner` take every value of their range.
pub(crate) fn dim_region(indices: &[Expr], inner: &HashSet<VarId>, full: i64) -> DimRegion {
    let whole = DimRegion {
        offset: Expr::i64(0),
        extent: full,
    };
    // (outer part key, first outer part, lowest and highest offset)
    type Span = (Vec<(String, i64)>, Affine, i64, i64);
    let mut bounds: Option<Span> = None;
    for index in indices {
        let Some((inside, outside)) = decompose(index, inner) else {
            return whole;
        };
        let loop_range = |atom: &Expr| {
            atom.as_var()
                .map_or(Interval::FULL, |v| Interval::of_extent(v.extent()))
        };
        let Interval { lo, hi } = inside.bounds(loop_range, Overflow::Wrap);
        let key = outer_key(&outside);
        bounds = match bounds {
            None => Some((key, outside, lo, hi)),
            Some((k, first, l, h)) if k == key => Some((k, first, l.min(lo), h.max(hi))),
            Some(_) => return whole,
        };
    }
    let Some((_, outer, lo, hi)) = bounds else {
        return whole;
    };
    let extent = hi as i128 - lo as i128 + 1;
    if extent >= full as i128 {
        return whole;
    }
    let offset =
        outer
            .terms
            .iter()
            .filter(|(_, c)| *c != 0)
            .fold(Expr::i64(lo), |acc, (atom, c)| match c {
                1 => acc + atom,
                c => acc + atom * *c,
            });
    DimRegion {
        offset,
        extent: extent as i64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::te::{IterKind, Var};

    #[test]
    fn tile_of_a_split_loop() {
        let outer = Var::new("i.0", 8, IterKind::Spatial);
        let inner = Var::new("i.1", 4, IterKind::Spatial);
        let index = outer.expr() * 4 + inner.expr();
        let inner_set: HashSet<VarId> = [inner.id()].into();
        let r = dim_region(&[index], &inner_set, 32);
        assert_eq!(r.extent, 4);
        assert_eq!(r.offset.to_string(), "(0 + (i.0 * 4))");
    }

    #[test]
    fn stencil_reads_are_united() {
        let x = Var::new("x", 16, IterKind::Spatial);
        let r = Var::new("r", 3, IterKind::Reduce);
        let inner: HashSet<VarId> = [r.id()].into();
        let a = x.expr() * 2 + r.expr();
        let b = x.expr() * 2 + r.expr() + 1;
        let region = dim_region(&[a, b], &inner, 64);
        assert_eq!(region.extent, 4);
    }

    #[test]
    fn non_affine_or_mismatched_reads_cover_everything() {
        let f = Var::new("f", 64, IterKind::Spatial);
        let inner: HashSet<VarId> = [f.id()].into();
        let r = dim_region(&[crate::te::floordiv(f.expr(), 8)], &inner, 8);
        assert_eq!(r.extent, 8);
        let x = Var::new("x", 4, IterKind::Spatial);
        let y = Var::new("y", 4, IterKind::Spatial);
        let none = HashSet::new();
        let r = dim_region(&[x.expr(), y.expr()], &none, 10);
        assert_eq!(r.extent, 10);
    }
}
