//! Simplification of index and condition expressions with an e-graph (egg).
//!
//! Lowered loop nests compute indices such as `((i0*8 + i1)*4 + i2)`,
//! `floordiv(f, 56)` and guards such as `(i0*8 + i1) < 100`. [`simplify`]
//! shrinks them, using that every loop variable ranges over `0..extent`:
//! `floordiv(i*4 + j, 4)` with `j < 4` becomes `i`, and a guard the ranges
//! decide becomes `true` or `false`.
//!
//! The pipeline, per maximal `i64`/`bool` sub-expression:
//! 1. `prepass`: constant folding and range-decided shortcuts, bottom-up;
//! 2. `settled`: stop when no rule could shrink the result; a chain of
//!    `&&`/`||` is simplified operand by operand (`chains`);
//! 3. `linear`: collect sums into coefficients (cancellation, fused-loop
//!    recombination), kept when smaller; check `settled` again;
//! 4. `saturate`: a bounded e-graph run with the `rules` and the
//!    range/divisibility `analysis`, then extraction of the smallest term
//!    (memoised per thread in `cache`: the tuner meets the same index
//!    expressions over and over, with fresh variables).
//!
//! Everything else (float arithmetic, reads, casts, calls, `i32` arithmetic,
//! which wraps at another width) is opaque: its integer sub-expressions, such
//! as the indices of a read, are simplified on their own, and the node itself
//! is a leaf of the e-graph. The result never has more nodes than the input.
//! Rules may remove a possible fault (a division by zero that no longer
//! matters) but never add one; see `rules`.

mod analysis;
mod appliers;
mod cache;
mod chains;
mod convert;
mod cost;
mod interval;
mod language;
mod linear;
mod prepass;
mod rules;
mod rules_cmp;
mod rules_div;
mod saturate;
mod settled;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_prop;

use crate::te::{Const, Expr, ExprKind, Reduce};

/// Returns an expression equal to `e` for every value of its loop variables
/// (each `v` in `0..v.extent()`), with no more nodes than `e`.
///
/// Deterministic: the e-graph runs under iteration and node limits only.
pub fn simplify(e: &Expr) -> Expr {
    if !convert::is_lang(e) {
        return simplify_inside(e);
    }
    let folded = prepass::fold(e).expr;
    if !settled::worth_egg(&folded) {
        return folded;
    }
    if let Some((op, operands)) = chains::operands(&folded) {
        return chains::simplify_chain(op, &operands);
    }
    let collected = linear::linearize(&folded);
    if !settled::worth_egg(&collected) {
        return collected;
    }
    saturate::run(&collected).unwrap_or(collected)
}

/// Number of nodes of an expression tree (for reporting how much
/// simplification shrinks index arithmetic).
pub fn node_count(e: &Expr) -> usize {
    1 + e.children().into_iter().map(node_count).sum::<usize>()
}

/// `e` (a node outside the e-graph language) with its operands simplified.
fn simplify_inside(e: &Expr) -> Expr {
    let kind = match e.kind() {
        ExprKind::Const(_) | ExprKind::Var(_) => return e.clone(),
        ExprKind::Neg(a) => ExprKind::Neg(simplify(a)),
        ExprKind::Not(a) => ExprKind::Not(simplify(a)),
        ExprKind::Cast(a) => ExprKind::Cast(simplify(a)),
        ExprKind::Binary(op, a, b) => ExprKind::Binary(*op, simplify(a), simplify(b)),
        ExprKind::Cmp(op, a, b) => ExprKind::Cmp(*op, simplify(a), simplify(b)),
        ExprKind::Select {
            cond,
            then,
            otherwise,
        } => {
            let cond = simplify(cond);
            // Only the chosen branch is evaluated, so a decided select is it.
            match cond.kind() {
                ExprKind::Const(Const::Bool(true)) => return simplify(then),
                ExprKind::Const(Const::Bool(false)) => return simplify(otherwise),
                _ => ExprKind::Select {
                    cond,
                    then: simplify(then),
                    otherwise: simplify(otherwise),
                },
            }
        }
        ExprKind::Call(f, args) => ExprKind::Call(*f, args.iter().map(simplify).collect()),
        ExprKind::Read(t, idx) => ExprKind::Read(t.clone(), idx.iter().map(simplify).collect()),
        ExprKind::Reduce(r) => ExprKind::Reduce(Reduce {
            op: r.op,
            source: simplify(&r.source),
            axes: r.axes.clone(),
        }),
    };
    let rebuilt = Expr::new(e.dtype(), kind);
    // Keep the original node (and its sharing) when nothing changed.
    if rebuilt == *e { e.clone() } else { rebuilt }
}
