//! A cheap bottom-up pass run before the e-graph: constant folding, the
//! identities `x + 0`, `x * 1`, `x * 0`, `x - x`, and everything the value
//! ranges decide on their own (guards, `floordiv`/`floormod` of small values,
//! min/max, select). It never makes an expression larger, and often leaves
//! nothing for the e-graph to do.

use super::convert::{is_lang, leaf_range, var_range};
use super::interval::{self, Overflow, Range, eval};
use crate::te::{BinOp, CmpOp, Const, DType, Expr, ExprKind};

/// A folded expression and the range of its value.
pub(super) struct Folded {
    pub expr: Expr,
    pub range: Range,
}

impl Folded {
    fn new(expr: Expr, range: Range) -> Folded {
        Folded { expr, range }
    }

    fn int(v: i64) -> Folded {
        Folded::new(Expr::i64(v), Range::point(v))
    }

    fn boolean(b: bool) -> Folded {
        Folded::new(Expr::bool(b), Range::of_bool(b))
    }
}

/// Folds `e`. Opaque sub-expressions are simplified by
/// [`simplify`](super::simplify) on the way.
pub(super) fn fold(e: &Expr) -> Folded {
    if !is_lang(e) {
        let expr = super::simplify_inside(e);
        let range = leaf_range(&expr);
        return Folded::new(expr, range);
    }
    let folded = match e.kind() {
        ExprKind::Const(Const::Int(v)) => return Folded::new(e.clone(), Range::point(*v)),
        ExprKind::Const(Const::Bool(b)) => return Folded::new(e.clone(), Range::of_bool(*b)),
        ExprKind::Var(v) => {
            let range = var_range(v);
            // A variable of extent 1 is always 0.
            return match range.as_point() {
                Some(p) => Folded::int(p),
                None => Folded::new(e.clone(), range),
            };
        }
        ExprKind::Neg(a) => fold_neg(e, fold(a)),
        ExprKind::Not(a) => fold_not(e, fold(a)),
        ExprKind::Binary(op @ (BinOp::And | BinOp::Or), a, b) => fold_logic(e, *op, a, b),
        ExprKind::Binary(op, a, b) => fold_arith(e, *op, fold(a), fold(b)),
        ExprKind::Cmp(op, a, b) => fold_cmp(e, *op, fold(a), fold(b)),
        ExprKind::Select {
            cond,
            then,
            otherwise,
        } => fold_select(e, fold(cond), then, otherwise),
        // Excluded by `is_lang`.
        _ => return Folded::new(e.clone(), leaf_range(e)),
    };
    match folded.range.as_point() {
        Some(v) if !matches!(folded.expr.kind(), ExprKind::Const(_)) => match e.dtype() {
            DType::Bool => Folded::boolean(v != 0),
            _ => Folded::int(v),
        },
        _ => folded,
    }
}

/// `e` with its operands replaced, reusing `e` when they did not change.
fn rebuild(e: &Expr, new: &[&Expr]) -> Expr {
    let old = e.children();
    if old.len() == new.len() && old.iter().zip(new).all(|(o, n)| *o == *n) {
        return e.clone();
    }
    let kind = match (e.kind(), new) {
        (ExprKind::Neg(_), [a]) => ExprKind::Neg((*a).clone()),
        (ExprKind::Not(_), [a]) => ExprKind::Not((*a).clone()),
        (ExprKind::Binary(op, ..), [a, b]) => ExprKind::Binary(*op, (*a).clone(), (*b).clone()),
        (ExprKind::Cmp(op, ..), [a, b]) => ExprKind::Cmp(*op, (*a).clone(), (*b).clone()),
        (ExprKind::Select { .. }, [c, t, o]) => ExprKind::Select {
            cond: (*c).clone(),
            then: (*t).clone(),
            otherwise: (*o).clone(),
        },
        _ => return e.clone(),
    };
    Expr::new(e.dtype(), kind)
}

fn fold_neg(e: &Expr, a: Folded) -> Folded {
    if let Some(v) = a.expr.as_int() {
        return Folded::int(v.wrapping_neg());
    }
    if let ExprKind::Neg(inner) = a.expr.kind() {
        // -(-x) = x modulo 2^64.
        return Folded::new(inner.clone(), a.range.checked_neg().unwrap_or(Range::FULL));
    }
    let range = a.range.checked_neg().unwrap_or(Range::FULL);
    Folded::new(rebuild(e, &[&a.expr]), range)
}

fn fold_not(e: &Expr, a: Folded) -> Folded {
    if let ExprKind::Not(inner) = a.expr.kind() {
        return Folded::new(inner.clone(), Range::BOOL);
    }
    let range = interval::not(a.range);
    Folded::new(rebuild(e, &[&a.expr]), range)
}

/// `&&` and `||` short-circuit: the right operand is only folded (and kept)
/// when the left one does not decide the result.
fn fold_logic(e: &Expr, op: BinOp, a: &Expr, b: &Expr) -> Folded {
    let is_and = op == BinOp::And;
    let a = fold(a);
    match a.range.as_point() {
        // false && b, true || b: decided without evaluating b.
        Some(v) if (v != 0) != is_and => return Folded::boolean(v != 0),
        // true && b, false || b: the result is b.
        Some(_) => return fold(b),
        None => {}
    }
    let b = fold(b);
    match b.range.as_point() {
        // a && true, a || false: the result is a.
        Some(v) if (v != 0) == is_and => return a,
        _ => {}
    }
    if a.expr == b.expr {
        return a;
    }
    let range = if is_and {
        interval::and(a.range, b.range)
    } else {
        interval::or(a.range, b.range)
    };
    Folded::new(rebuild(e, &[&a.expr, &b.expr]), range)
}

/// The range of `a op b`.
fn arith_range(op: BinOp, a: Range, b: Range) -> Range {
    a.binary(op, b, Overflow::Wrap)
}

fn fold_arith(e: &Expr, op: BinOp, a: Folded, b: Folded) -> Folded {
    let (ka, kb) = (a.expr.as_int(), b.expr.as_int());
    if let (Some(x), Some(y)) = (ka, kb)
        && let Some(v) = eval(op, x, y)
    {
        return Folded::int(v);
    }
    let divisor = kb.filter(|&c| c > 0);
    match op {
        BinOp::Add if ka == Some(0) => return b,
        BinOp::Add | BinOp::Sub if kb == Some(0) => return a,
        BinOp::Sub if a.expr == b.expr => return Folded::int(0),
        BinOp::Mul if ka == Some(1) => return b,
        BinOp::Mul if kb == Some(1) => return a,
        BinOp::Mul if ka == Some(0) || kb == Some(0) => return Folded::int(0),
        BinOp::Mul => {
            if let Some(c2) = kb
                && let ExprKind::Binary(BinOp::Mul, x, c1) = a.expr.kind()
                && let Some(c1) = c1.as_int()
            {
                // (x * c1) * c2 = x * (c1 * c2) modulo 2^64.
                let range = a.range.checked_mul(b.range).unwrap_or(Range::FULL);
                let k = Expr::i64(c1.wrapping_mul(c2));
                let expr = Expr::new(DType::I64, ExprKind::Binary(BinOp::Mul, x.clone(), k));
                return Folded::new(expr, range);
            }
        }
        BinOp::Div | BinOp::FloorDiv if kb == Some(1) => return a,
        BinOp::FloorMod if kb == Some(1) => return Folded::int(0),
        BinOp::FloorMod => {
            if let Some(c) = divisor
                && a.range.within(0, c - 1)
            {
                return a;
            }
        }
        BinOp::Min | BinOp::Max if a.expr == b.expr => return a,
        BinOp::Min if a.range.hi <= b.range.lo => return a,
        BinOp::Min if b.range.hi <= a.range.lo => return b,
        BinOp::Max if a.range.lo >= b.range.hi => return a,
        BinOp::Max if b.range.lo >= a.range.hi => return b,
        _ => {}
    }
    let range = arith_range(op, a.range, b.range);
    Folded::new(rebuild(e, &[&a.expr, &b.expr]), range)
}

fn fold_cmp(e: &Expr, op: CmpOp, a: Folded, b: Folded) -> Folded {
    if a.expr == b.expr {
        return Folded::boolean(matches!(op, CmpOp::Eq | CmpOp::Le | CmpOp::Ge));
    }
    let range = interval::compare(op, a.range, b.range);
    Folded::new(rebuild(e, &[&a.expr, &b.expr]), range)
}

fn fold_select(e: &Expr, cond: Folded, then: &Expr, otherwise: &Expr) -> Folded {
    match cond.range.as_point() {
        Some(0) => return fold(otherwise),
        Some(_) => return fold(then),
        None => {}
    }
    let (t, o) = (fold(then), fold(otherwise));
    if t.expr == o.expr {
        return t;
    }
    let range = interval::select(cond.range, t.range, o.range);
    Folded::new(rebuild(e, &[&cond.expr, &t.expr, &o.expr]), range)
}
