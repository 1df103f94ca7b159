//! Linear normalisation, a cheap step before the e-graph: a sum of terms
//! `+ - *const neg` is collected into coefficients of its atoms (anything
//! else: variables, divisions, leaves), cancelling (`(i + r) - i → r`),
//! merging (`i*3 + i → i*4`) and recombining fused-loop pairs
//! (`floordiv(x, c)*c + floormod(x, c) → x`,
//! `floormod(floordiv(x, a), b)*a + floormod(x, a) → floormod(x, a*b)`). The collected form is rebuilt
//! compactly (atoms with equal coefficients share one multiplication) and
//! kept only when it has fewer nodes.
//!
//! The collecting and the compact rebuild are [`crate::arith::Affine`]'s;
//! this file decides where to apply them and recombines split pairs.
//!
//! All of it is exact in the ring of `i64` values modulo 2^64, so wrapping
//! changes nothing; the recombinations hold there too (their quotients and
//! remainders by positive constants are exact).

use super::convert::is_lang;
use super::node_count;
use crate::arith::{Affine, Decompose};
use crate::te::{BinOp, DType, Expr, ExprKind};

/// `e` with every linear sub-expression in its smallest collected form.
pub(super) fn linearize(e: &Expr) -> Expr {
    if !is_lang(e) {
        return e.clone();
    }
    if is_linear(e) {
        let relinked = map_atoms(e);
        let built = collect(&relinked).to_expr();
        return if node_count(&built) < node_count(&relinked) {
            built
        } else {
            relinked
        };
    }
    rebuild(e, e.children().into_iter().map(linearize).collect())
}

/// An `i64` node of a linear sum.
fn is_linear(e: &Expr) -> bool {
    if e.dtype() != DType::I64 || !is_lang(e) {
        return false;
    }
    match e.kind() {
        ExprKind::Binary(BinOp::Add | BinOp::Sub, ..) | ExprKind::Neg(_) => true,
        ExprKind::Binary(BinOp::Mul, a, b) => a.as_int().is_some() || b.as_int().is_some(),
        _ => false,
    }
}

/// The linear structure of `e` kept, with every atom linearised.
fn map_atoms(e: &Expr) -> Expr {
    if is_linear(e) {
        rebuild(e, e.children().into_iter().map(map_atoms).collect())
    } else {
        linearize(e)
    }
}

/// `e` with new children (reusing `e` when they are the same).
fn rebuild(e: &Expr, new: Vec<Expr>) -> Expr {
    let old = e.children();
    if old.len() == new.len() && old.iter().zip(&new).all(|(o, n)| *o == n) {
        return e.clone();
    }
    let mut it = new.into_iter();
    let mut next = || it.next().unwrap_or_else(|| Expr::i64(0));
    let kind = match e.kind() {
        ExprKind::Neg(_) => ExprKind::Neg(next()),
        ExprKind::Not(_) => ExprKind::Not(next()),
        ExprKind::Binary(op, ..) => ExprKind::Binary(*op, next(), next()),
        ExprKind::Cmp(op, ..) => ExprKind::Cmp(*op, next(), next()),
        ExprKind::Select { .. } => ExprKind::Select {
            cond: next(),
            then: next(),
            otherwise: next(),
        },
        _ => return e.clone(),
    };
    Expr::new(e.dtype(), kind)
}

/// Collects only `i64` nodes: the form equals the expression modulo 2^64.
const EXACT: Decompose = Decompose::EXACT;

/// The collected form of a linear `e`, split pairs put back together.
fn collect(e: &Expr) -> Affine {
    let mut form = Affine::with(e, EXACT);
    recombine(&mut form);
    form
}

/// Puts split pairs back together: `floordiv(x, a)*(k*a) + floormod(x, a)*k`
/// is `x*k`, and `floormod(floordiv(x, a), b)*(k*a) + floormod(x, a)*k` is
/// `floormod(x, a*b)*k`.
fn recombine(form: &mut Affine) {
    'search: loop {
        for i in 0..form.terms.len() {
            let Some((x, a, whole)) = high_part(&form.terms[i].0) else {
                continue;
            };
            let p = form.terms[i].1;
            let low = form.terms.iter().position(|(t, q)| {
                *q != 0
                    && q.wrapping_mul(a) == p
                    && matches!(t.kind(), ExprKind::Binary(BinOp::FloorMod, y, d)
                        if *y == x && d.as_int() == Some(a))
            });
            if let Some(j) = low {
                let q = form.terms[j].1;
                form.terms.remove(i.max(j));
                form.terms.remove(i.min(j));
                form.add_expr(&whole, q, EXACT);
                continue 'search;
            }
        }
        return;
    }
}

/// For the high part of a split of `x` by `a > 0`, `(x, a, whole)`: the
/// expression it forms with `floormod(x, a)` (`x` itself, or
/// `floormod(x, a*b)` for `floormod(floordiv(x, a), b)`).
fn high_part(e: &Expr) -> Option<(Expr, i64, Expr)> {
    let positive = |c: &Expr| c.as_int().filter(|&c| c > 0);
    match e.kind() {
        ExprKind::Binary(BinOp::FloorDiv, x, a) => Some((x.clone(), positive(a)?, x.clone())),
        ExprKind::Binary(BinOp::FloorMod, q, b) => {
            let ExprKind::Binary(BinOp::FloorDiv, x, a) = q.kind() else {
                return None;
            };
            let (a, b) = (positive(a)?, positive(b)?);
            let whole = bin(BinOp::FloorMod, x.clone(), Expr::i64(a.checked_mul(b)?));
            Some((x.clone(), a, whole))
        }
        _ => None,
    }
}

fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::new(DType::I64, ExprKind::Binary(op, a, b))
}
