//! Buffer accesses of a store: the flat element offset of each access as an
//! affine function of the enclosing loop variables, and what follows from
//! it — bytes, distinct bytes, cache lines, reuse and strides.

use std::collections::HashMap;

use crate::te::{BinOp, Expr, ExprKind};

/// The cache line size the line counts assume.
pub(crate) const CACHE_LINE: f64 = 64.0;

/// `Σ coeff · var + constant`; `non_affine` lists variables the offset
/// depends on in a non-affine way (division, modulo, products of variables).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Affine {
    pub coeffs: HashMap<u64, i64>,
    pub non_affine: Vec<u64>,
}

impl Affine {
    fn scaled(mut self, k: i64) -> Affine {
        for c in self.coeffs.values_mut() {
            *c = c.saturating_mul(k);
        }
        self
    }

    fn plus(mut self, other: Affine, sign: i64) -> Affine {
        for (v, c) in other.coeffs {
            *self.coeffs.entry(v).or_insert(0) += sign * c;
        }
        self.non_affine.extend(other.non_affine);
        self
    }

    fn opaque(e: &Expr) -> Affine {
        let mut vars = Vec::new();
        e.visit(&mut |x| {
            if let ExprKind::Var(v) = x.kind() {
                vars.push(v.id());
            }
        });
        Affine {
            coeffs: HashMap::new(),
            non_affine: vars,
        }
    }

    /// How the offset moves per step of loop `var`: `Some(stride)` when
    /// affine in it, `None` when it depends on it otherwise.
    pub fn stride(&self, var: u64) -> Option<i64> {
        if self.non_affine.contains(&var) {
            None
        } else {
            Some(self.coeffs.get(&var).copied().unwrap_or(0))
        }
    }

    /// Whether the offset depends on `var` at all.
    pub fn depends_on(&self, var: u64) -> bool {
        self.stride(var) != Some(0)
    }
}

fn constant(e: &Expr) -> Option<i64> {
    match e.kind() {
        ExprKind::Const(crate::te::Const::Int(v)) => Some(*v),
        _ => None,
    }
}

/// The affine form of an integer index expression.
pub(crate) fn affine(e: &Expr) -> Affine {
    match e.kind() {
        ExprKind::Const(_) => Affine::default(),
        ExprKind::Var(v) => Affine {
            coeffs: HashMap::from([(v.id(), 1)]),
            non_affine: Vec::new(),
        },
        ExprKind::Binary(BinOp::Add, a, b) => affine(a).plus(affine(b), 1),
        ExprKind::Binary(BinOp::Sub, a, b) => affine(a).plus(affine(b), -1),
        ExprKind::Binary(BinOp::Mul, a, b) => match (constant(a), constant(b)) {
            (Some(k), _) => affine(b).scaled(k),
            (_, Some(k)) => affine(a).scaled(k),
            _ => Affine::opaque(e),
        },
        ExprKind::Neg(a) => affine(a).scaled(-1),
        ExprKind::Cast(a) => affine(a),
        _ => Affine::opaque(e),
    }
}

/// The flat element offset of `indices` into a row-major buffer of `shape`.
pub(crate) fn flat_offset(indices: &[Expr], shape: &[i64]) -> Affine {
    let mut total = Affine::default();
    let mut stride = 1i64;
    for (index, &extent) in indices.iter().zip(shape).rev() {
        total = total.plus(affine(index).scaled(stride), 1);
        stride = stride.saturating_mul(extent.max(1));
    }
    total
}

/// One enclosing loop, as the access analysis sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LoopInfo {
    pub var: u64,
    pub extent: f64,
}

/// How a buffer is accessed by a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AccessKind {
    Read,
    Write,
    ReadWrite,
}

/// Where reuse comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReuseKind {
    /// A loop the access does not depend on revisits the same elements.
    LoopMultipleRead,
    /// The same element is read and written by the same statement.
    SerialReadWrite,
    /// Every iteration touches new elements.
    None,
}

/// The derived quantities of one access (before the log transform).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct AccessFeatures {
    pub kind: AccessKind,
    pub bytes: f64,
    pub unique_bytes: f64,
    pub lines: f64,
    pub unique_lines: f64,
    pub reuse: ReuseKind,
    pub reuse_distance_iters: f64,
    pub reuse_distance_bytes: f64,
    pub reuse_count: f64,
    pub innermost_stride: f64,
    pub contiguous: bool,
    pub element_bytes: f64,
}

/// Analyses an access with flat offset `offset` to a buffer of
/// `buffer_elements` elements of `element_bytes`, inside `loops` (outer first).
pub(crate) fn analyse(
    kind: AccessKind,
    offset: &Affine,
    loops: &[LoopInfo],
    element_bytes: f64,
    buffer_elements: f64,
) -> AccessFeatures {
    let trips: f64 = loops.iter().map(|l| l.extent).product();
    let bytes = trips * element_bytes;
    let dependent: Vec<(f64, f64)> = loops
        .iter()
        .filter(|l| offset.depends_on(l.var))
        .map(|l| {
            let stride = offset
                .stride(l.var)
                .map_or(f64::INFINITY, |s| s.unsigned_abs() as f64);
            (l.extent, stride)
        })
        .collect();
    let unique_elements = dependent
        .iter()
        .map(|(e, _)| e)
        .product::<f64>()
        .min(buffer_elements.max(1.0));
    let unique_bytes = unique_elements * element_bytes;
    // The loop with the smallest stride walks along cache lines; the others
    // start new ones.
    let smallest = dependent
        .iter()
        .map(|(_, s)| *s)
        .fold(f64::INFINITY, f64::min);
    let per_line = if smallest.is_finite() && smallest * element_bytes < CACHE_LINE {
        CACHE_LINE / (smallest.max(1.0) * element_bytes)
    } else {
        1.0
    };
    let unique_lines = (unique_elements / per_line)
        .max(1.0)
        .min((buffer_elements * element_bytes / CACHE_LINE).max(1.0));
    let lines = (trips / per_line).max(1.0);
    let innermost_stride = loops.last().map_or(0.0, |l| {
        offset
            .stride(l.var)
            .map_or(f64::INFINITY, |s| s.unsigned_abs() as f64)
    });
    // Reuse: the innermost loop this access does not depend on.
    let reuse_at = loops.iter().rposition(|l| !offset.depends_on(l.var));
    let (reuse, reuse_count, distance_iters, distance_bytes) = match reuse_at {
        Some(p) => {
            let inner = &loops[p + 1..];
            let iters: f64 = inner.iter().map(|l| l.extent).product();
            let touched: f64 = inner
                .iter()
                .filter(|l| offset.depends_on(l.var))
                .map(|l| l.extent)
                .product();
            (
                ReuseKind::LoopMultipleRead,
                loops[p].extent,
                iters,
                touched * element_bytes,
            )
        }
        None if kind == AccessKind::ReadWrite => {
            (ReuseKind::SerialReadWrite, 1.0, 1.0, element_bytes)
        }
        None => (ReuseKind::None, 0.0, 0.0, 0.0),
    };
    AccessFeatures {
        kind,
        bytes,
        unique_bytes,
        lines,
        unique_lines,
        reuse,
        reuse_distance_iters: distance_iters,
        reuse_distance_bytes: distance_bytes,
        reuse_count,
        innermost_stride: if innermost_stride.is_finite() {
            innermost_stride
        } else {
            1e9
        },
        contiguous: innermost_stride == 1.0,
        element_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::te::{IterKind, Var};

    #[test]
    fn offsets_of_row_major_indices() {
        let i = Var::new("i", 8, IterKind::Spatial);
        let k = Var::new("k", 4, IterKind::Spatial);
        let off = flat_offset(&[i.expr() * 2 + 1, k.expr()], &[16, 4]);
        assert_eq!(off.stride(i.id()), Some(8));
        assert_eq!(off.stride(k.id()), Some(1));
        let odd = flat_offset(&[crate::te::floordiv(i.expr(), 2)], &[4]);
        assert_eq!(odd.stride(i.id()), None);
        assert!(odd.depends_on(i.id()));
    }
}
