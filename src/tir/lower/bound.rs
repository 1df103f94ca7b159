//! Bound inference: the region of a producer that one iteration of its
//! host loop needs, from the consumer's read indices.
//!
//! Each index is decomposed into `outer + Σ cᵥ·v + c` where the `v` are the
//! loops inside the host loop (ranging over their whole extent) and `outer`
//! depends only on loops outside it (fixed during the iteration). The region
//! of a dimension is then `outer + [lo, hi]` with constant bounds; reads whose
//! outer parts differ, or indices that are not affine in the inner loops,
//! fall back to the whole dimension.

use std::collections::HashSet;

use crate::te::{BinOp, Const, Expr, ExprKind, Var};

/// `Σ outer + Σ inner + constant`.
#[derive(Clone, Debug, Default)]
struct Linear {
    outer: Vec<(Expr, i64)>,
    inner: Vec<(Var, i64)>,
    constant: i64,
}

fn contains_inner(e: &Expr, inner: &HashSet<u64>) -> bool {
    e.any(&mut |x| matches!(x.kind(), ExprKind::Var(v) if inner.contains(&v.id())))
}

impl Linear {
    fn scaled(mut self, k: i64) -> Linear {
        self.outer.iter_mut().for_each(|(_, c)| *c *= k);
        self.inner.iter_mut().for_each(|(_, c)| *c *= k);
        self.constant *= k;
        self
    }

    fn plus(mut self, other: Linear) -> Linear {
        for (atom, c) in other.outer {
            match self.outer.iter_mut().find(|(a, _)| *a == atom) {
                Some((_, existing)) => *existing += c,
                None => self.outer.push((atom, c)),
            }
        }
        for (v, c) in other.inner {
            match self.inner.iter_mut().find(|(w, _)| *w == v) {
                Some((_, existing)) => *existing += c,
                None => self.inner.push((v, c)),
            }
        }
        self.constant += other.constant;
        self.outer.retain(|(_, c)| *c != 0);
        self.inner.retain(|(_, c)| *c != 0);
        self
    }

    /// The outer part as a canonical, comparable list.
    fn outer_key(&self) -> Vec<(String, i64)> {
        let mut key: Vec<(String, i64)> = self
            .outer
            .iter()
            .map(|(a, c)| (a.to_string(), *c))
            .collect();
        key.sort();
        key
    }
}

fn linearize(e: &Expr, inner: &HashSet<u64>) -> Option<Linear> {
    let atom = || Linear {
        outer: vec![(e.clone(), 1)],
        ..Linear::default()
    };
    match e.kind() {
        ExprKind::Const(Const::Int(c)) => Some(Linear {
            constant: *c,
            ..Linear::default()
        }),
        ExprKind::Var(v) if inner.contains(&v.id()) => Some(Linear {
            inner: vec![(v.clone(), 1)],
            ..Linear::default()
        }),
        ExprKind::Binary(BinOp::Add, a, b) => Some(linearize(a, inner)?.plus(linearize(b, inner)?)),
        ExprKind::Binary(BinOp::Sub, a, b) => {
            Some(linearize(a, inner)?.plus(linearize(b, inner)?.scaled(-1)))
        }
        ExprKind::Neg(a) => Some(linearize(a, inner)?.scaled(-1)),
        ExprKind::Binary(BinOp::Mul, a, b) => match (a.as_int(), b.as_int()) {
            (_, Some(k)) => Some(linearize(a, inner)?.scaled(k)),
            (Some(k), _) => Some(linearize(b, inner)?.scaled(k)),
            _ if contains_inner(e, inner) => None,
            _ => Some(atom()),
        },
        _ if contains_inner(e, inner) => None,
        _ => Some(atom()),
    }
}

/// The region of one dimension: `offset + 0..extent`.
#[derive(Clone, Debug)]
pub(crate) struct DimRegion {
    pub offset: Expr,
    pub extent: i64,
}

/// The region of a dimension of extent `full` covered by `indices` (one per
/// read) when the variables in `inner` take every value of their range.
pub(crate) fn dim_region(indices: &[Expr], inner: &HashSet<u64>, full: i64) -> DimRegion {
    let whole = DimRegion {
        offset: Expr::i64(0),
        extent: full,
    };
    // (outer part key, first decomposition, lowest and highest constant offset)
    type Span = (Vec<(String, i64)>, Linear, i64, i64);
    let mut bounds: Option<Span> = None;
    for index in indices {
        let Some(lin) = linearize(index, inner) else {
            return whole;
        };
        let spread = |negative: bool| -> i64 {
            lin.inner
                .iter()
                .filter(|(_, c)| (*c < 0) == negative)
                .map(|(v, c)| c * (v.extent() - 1))
                .sum()
        };
        let lo = lin.constant + spread(true);
        let hi = lin.constant + spread(false);
        let key = lin.outer_key();
        bounds = match bounds {
            None => Some((key, lin, lo, hi)),
            Some((k, first, l, h)) if k == key => Some((k, first, l.min(lo), h.max(hi))),
            Some(_) => return whole,
        };
    }
    let Some((_, lin, lo, hi)) = bounds else {
        return whole;
    };
    let extent = hi - lo + 1;
    if extent >= full {
        return whole;
    }
    let offset = lin
        .outer
        .iter()
        .fold(Expr::i64(lo), |acc, (atom, c)| match c {
            1 => acc + atom,
            c => acc + atom * *c,
        });
    DimRegion { offset, extent }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::te::IterKind;

    #[test]
    fn tile_of_a_split_loop() {
        let outer = Var::new("i.0", 8, IterKind::Spatial);
        let inner = Var::new("i.1", 4, IterKind::Spatial);
        let index = outer.expr() * 4 + inner.expr();
        let inner_set: HashSet<u64> = [inner.id()].into();
        let r = dim_region(&[index], &inner_set, 32);
        assert_eq!(r.extent, 4);
        assert_eq!(r.offset.to_string(), "(0 + (i.0 * 4))");
    }

    #[test]
    fn stencil_reads_are_united() {
        let x = Var::new("x", 16, IterKind::Spatial);
        let r = Var::new("r", 3, IterKind::Reduce);
        let inner: HashSet<u64> = [r.id()].into();
        let a = x.expr() * 2 + r.expr();
        let b = x.expr() * 2 + r.expr() + 1;
        let region = dim_region(&[a, b], &inner, 64);
        assert_eq!(region.extent, 4);
    }

    #[test]
    fn non_affine_or_mismatched_reads_cover_everything() {
        let f = Var::new("f", 64, IterKind::Spatial);
        let inner: HashSet<u64> = [f.id()].into();
        let r = dim_region(&[crate::te::floordiv(f.expr(), 8)], &inner, 8);
        assert_eq!(r.extent, 8);
        let x = Var::new("x", 4, IterKind::Spatial);
        let y = Var::new("y", 4, IterKind::Spatial);
        let none = HashSet::new();
        let r = dim_region(&[x.expr(), y.expr()], &none, 10);
        assert_eq!(r.extent, 10);
    }
}
