//! Interval analysis of index expressions: proves every tensor read stays in
//! bounds for all values of the loop variables.
//!
//! Reads under a `select` are analysed with the facts its condition
//! establishes (`h >= pad && h < H + pad` bounds `h` in the chosen branch), so
//! padding written with `select` passes while an unguarded `A[i + 1]` fails.
//! A fact applies to any sub-expression structurally equal to the compared one.
//!
//! Index values are read as mathematical integers: the [`Interval`]s are
//! [`crate::arith`]'s under [`Overflow::Saturate`] (unbounded ends stay
//! unbounded).

use super::expr::{BinOp, CmpOp, Const, Expr, ExprKind};
use crate::arith::{Interval, Overflow};

/// An interval known for an expression inside the branch of a select.
pub(crate) type Fact = (Expr, Interval);

/// The range of the integer expression `e` for all loop-variable values
/// consistent with `facts`.
pub(crate) fn range_of(e: &Expr, facts: &[Fact]) -> Interval {
    let base = match e.kind() {
        ExprKind::Const(Const::Int(v)) => Interval::point(*v),
        ExprKind::Const(Const::Bool(b)) => Interval::of_bool(*b),
        ExprKind::Const(Const::Float(_)) => Interval::FULL,
        ExprKind::Var(v) => Interval::new(0, v.extent() - 1),
        ExprKind::Neg(a) => range_of(a, facts).negate(Overflow::Saturate),
        ExprKind::Binary(op, a, b) => {
            range_of(a, facts).binary(*op, range_of(b, facts), Overflow::Saturate)
        }
        ExprKind::Cmp(..) | ExprKind::Not(_) => Interval::BOOL,
        ExprKind::Select {
            cond,
            then,
            otherwise,
        } => {
            let t = range_of(then, &with_facts(facts, cond, true));
            let o = range_of(otherwise, &with_facts(facts, cond, false));
            t.union(o)
        }
        ExprKind::Cast(a) if a.dtype().is_int() => range_of(a, facts),
        ExprKind::Cast(_) | ExprKind::Call(..) | ExprKind::Read(..) | ExprKind::Reduce(_) => {
            Interval::FULL
        }
    };
    facts
        .iter()
        .filter(|(fe, _)| fe == e)
        .fold(base, |acc, (_, fi)| acc.intersect(*fi))
}

/// `facts` extended with what `cond` (or its negation) establishes.
pub(crate) fn with_facts(facts: &[Fact], cond: &Expr, holds: bool) -> Vec<Fact> {
    let mut out = facts.to_vec();
    collect_facts(cond, holds, facts, &mut out);
    out
}

fn collect_facts(cond: &Expr, holds: bool, known: &[Fact], out: &mut Vec<Fact>) {
    match cond.kind() {
        ExprKind::Binary(BinOp::And, a, b) if holds => {
            collect_facts(a, true, known, out);
            collect_facts(b, true, known, out);
        }
        ExprKind::Binary(BinOp::Or, a, b) if !holds => {
            collect_facts(a, false, known, out);
            collect_facts(b, false, known, out);
        }
        ExprKind::Not(a) => collect_facts(a, !holds, known, out),
        ExprKind::Cmp(op, a, b) if a.dtype().is_int() => {
            let op = if holds { *op } else { op.negate() };
            let (ra, rb) = (range_of(a, known), range_of(b, known));
            if let Some(f) = bound_from(op, rb) {
                out.push((a.clone(), f));
            }
            if let Some(f) = bound_from(flip(op), ra) {
                out.push((b.clone(), f));
            }
        }
        _ => {}
    }
}

/// `x op other` with `other ∈ r` bounds `x` to the returned interval.
fn bound_from(op: CmpOp, r: Interval) -> Option<Interval> {
    let shifted =
        |i: Interval, k: i64| i.binary(BinOp::Add, Interval::point(k), Overflow::Saturate);
    match op {
        CmpOp::Lt => Some(shifted(Interval::new(i64::MIN, r.hi), -1)),
        CmpOp::Le => Some(Interval::new(i64::MIN, r.hi)),
        CmpOp::Gt => Some(shifted(Interval::new(r.lo, i64::MAX), 1)),
        CmpOp::Ge => Some(Interval::new(r.lo, i64::MAX)),
        CmpOp::Eq => Some(r),
        CmpOp::Ne => None,
    }
}

/// `a op b` ⇔ `b flip(op) a`.
fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
        other => other,
    }
}

/// A read whose index may leave its tensor.
pub(crate) struct OutOfBounds {
    pub read: Expr,
    pub dim: usize,
    pub range: Interval,
}

/// Finds the first tensor read in `e` whose index can leave bounds.
pub(crate) fn find_out_of_bounds(e: &Expr, facts: &[Fact]) -> Option<OutOfBounds> {
    match e.kind() {
        ExprKind::Select {
            cond,
            then,
            otherwise,
        } => find_out_of_bounds(cond, facts)
            .or_else(|| find_out_of_bounds(then, &with_facts(facts, cond, true)))
            .or_else(|| find_out_of_bounds(otherwise, &with_facts(facts, cond, false))),
        ExprKind::Read(tensor, indices) => {
            for (dim, (index, &extent)) in indices.iter().zip(tensor.shape()).enumerate() {
                if let Some(inner) = find_out_of_bounds(index, facts) {
                    return Some(inner);
                }
                let range = range_of(index, facts);
                if !range.within(0, extent - 1) {
                    return Some(OutOfBounds {
                        read: e.clone(),
                        dim,
                        range,
                    });
                }
            }
            None
        }
        _ => e
            .children()
            .into_iter()
            .find_map(|c| find_out_of_bounds(c, facts)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::te::{DType, floordiv, floormod, placeholder, reduce_axis, select};

    fn var(extent: i64) -> Expr {
        reduce_axis(extent, "v")
    }

    #[test]
    fn arithmetic_ranges() {
        let i = var(8);
        let j = var(4);
        assert_eq!(range_of(&(&i * 4 + &j), &[]), Interval::new(0, 31));
        assert_eq!(
            range_of(&floordiv(&i * 4 + &j, 4), &[]),
            Interval::new(0, 7)
        );
        assert_eq!(range_of(&floormod(&i, 3), &[]), Interval::new(0, 2));
        assert_eq!(range_of(&(&i - 1), &[]), Interval::new(-1, 6));
        assert_eq!(range_of(&floordiv(&i, &j), &[]), Interval::FULL);
    }

    #[test]
    fn select_condition_bounds_the_guarded_read() {
        let a = placeholder("A", &[8], DType::F32);
        let h = var(10);
        let guarded = select(h.ge(1) & h.lt(9), a.at([&h - 1]), 0.0);
        assert!(find_out_of_bounds(&guarded, &[]).is_none());
        let unguarded = a.at([&h - 1]);
        let oob = find_out_of_bounds(&unguarded, &[]).map(|o| o.range);
        assert_eq!(oob, Some(Interval::new(-1, 8)));
    }

    #[test]
    fn negated_condition_bounds_the_else_branch() {
        let a = placeholder("A", &[8], DType::F32);
        let h = var(10);
        let e = select(h.ge(8), 0.0, a.at([&h]));
        assert!(find_out_of_bounds(&e, &[]).is_none());
    }
}
