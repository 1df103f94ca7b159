//! Buffer accesses of a store: the flat element offset of each access as an
//! [`Affine`] form of the enclosing loop variables, and what follows from
//! it — bytes, distinct bytes, cache lines, reuse and strides.

use crate::arith::{Affine, Decompose};
use crate::te::{Expr, VarId};

/// The cache line size the line counts assume.
pub(crate) const CACHE_LINE: f64 = 64.0;

/// The flat element offset of `indices` into a row-major buffer of `shape`,
/// looking through casts (an estimate: the stride of the cast value).
pub(crate) fn flat_offset(indices: &[Expr], shape: &[i64]) -> Affine {
    let how = Decompose {
        through_casts: true,
        ..Decompose::default()
    };
    Affine::flat(indices, shape, how)
}

/// One enclosing loop, as the access analysis sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LoopInfo {
    pub var: VarId,
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
                .coefficient(l.var)
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
            .coefficient(l.var)
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
    fn offsets_look_through_casts() {
        let i = Var::new("i", 8, IterKind::Spatial);
        let index = crate::te::cast(
            crate::te::DType::I64,
            i.expr().cast(crate::te::DType::I32) * 3,
        );
        assert_eq!(flat_offset(&[index], &[32]).coefficient(i.id()), Some(3));
    }

    #[test]
    fn offsets_of_row_major_indices() {
        let i = Var::new("i", 8, IterKind::Spatial);
        let k = Var::new("k", 4, IterKind::Spatial);
        let off = flat_offset(&[i.expr() * 2 + 1, k.expr()], &[16, 4]);
        assert_eq!(off.coefficient(i.id()), Some(8));
        assert_eq!(off.coefficient(k.id()), Some(1));
        let odd = flat_offset(&[crate::te::floordiv(i.expr(), 2)], &[4]);
        assert_eq!(odd.coefficient(i.id()), None);
        assert!(odd.depends_on(i.id()));
    }
}
