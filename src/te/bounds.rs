//! Interval analysis of index expressions: proves every tensor read stays in
//! bounds for all values of the loop variables.
//!
//! Reads under a `select` are analysed with the facts its condition
//! establishes (`h >= pad && h < H + pad` bounds `h` in the chosen branch), so
//! padding written with `select` passes while an unguarded `A[i + 1]` fails.
//! A fact applies to any sub-expression structurally equal to the compared one.

use std::fmt;

use super::expr::{BinOp, CmpOp, Const, Expr, ExprKind};

const INF: i128 = 1 << 100;

/// A closed integer interval; bounds at ±`INF` mean unbounded. `lo > hi` is empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Interval {
    pub lo: i128,
    pub hi: i128,
}

fn clamp(v: i128) -> i128 {
    v.clamp(-INF, INF)
}

impl Interval {
    pub const UNBOUNDED: Interval = Interval { lo: -INF, hi: INF };

    pub fn new(lo: i128, hi: i128) -> Interval {
        Interval {
            lo: clamp(lo),
            hi: clamp(hi),
        }
    }

    pub fn point(v: i128) -> Interval {
        Interval::new(v, v)
    }

    pub fn is_empty(self) -> bool {
        self.lo > self.hi
    }

    pub fn intersect(self, o: Interval) -> Interval {
        Interval::new(self.lo.max(o.lo), self.hi.min(o.hi))
    }

    fn union(self, o: Interval) -> Interval {
        if self.is_empty() {
            return o;
        }
        if o.is_empty() {
            return self;
        }
        Interval::new(self.lo.min(o.lo), self.hi.max(o.hi))
    }

    fn from_corners(values: [i128; 4]) -> Interval {
        let lo = values.iter().copied().min().unwrap_or(-INF);
        let hi = values.iter().copied().max().unwrap_or(INF);
        Interval::new(lo, hi)
    }

    fn corners(self, o: Interval, f: impl Fn(i128, i128) -> i128) -> Interval {
        Interval::from_corners([
            f(self.lo, o.lo),
            f(self.lo, o.hi),
            f(self.hi, o.lo),
            f(self.hi, o.hi),
        ])
    }

    /// Whether the interval lies within `0..extent`.
    pub fn within(self, extent: i64) -> bool {
        self.is_empty() || (self.lo >= 0 && self.hi < extent as i128)
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo <= -INF {
            write!(f, "(-inf, ")?;
        } else {
            write!(f, "[{}, ", self.lo)?;
        }
        if self.hi >= INF {
            write!(f, "+inf)")
        } else {
            write!(f, "{}]", self.hi)
        }
    }
}

/// An interval known for an expression inside the branch of a select.
pub(crate) type Fact = (Expr, Interval);

fn floor_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

fn divide(a: Interval, b: Interval, floor: bool) -> Interval {
    if b.lo <= 0 && b.hi >= 0 {
        return Interval::UNBOUNDED;
    }
    a.corners(b, |x, y| if floor { floor_div(x, y) } else { x / y })
}

fn floor_mod(a: Interval, b: Interval) -> Interval {
    if b.lo > 0 {
        if a.lo >= 0 && a.hi < b.lo {
            a
        } else {
            Interval::new(0, b.hi - 1)
        }
    } else if b.hi < 0 {
        Interval::new(b.lo + 1, 0)
    } else {
        Interval::UNBOUNDED
    }
}

/// The range of the integer expression `e` for all loop-variable values
/// consistent with `facts`.
pub(crate) fn range_of(e: &Expr, facts: &[Fact]) -> Interval {
    let base = match e.kind() {
        ExprKind::Const(Const::Int(v)) => Interval::point(*v as i128),
        ExprKind::Const(Const::Bool(b)) => Interval::point(*b as i128),
        ExprKind::Const(Const::Float(_)) => Interval::UNBOUNDED,
        ExprKind::Var(v) => Interval::new(0, v.extent() as i128 - 1),
        ExprKind::Neg(a) => {
            let r = range_of(a, facts);
            Interval::new(-r.hi, -r.lo)
        }
        ExprKind::Binary(op, a, b) => {
            let (x, y) = (range_of(a, facts), range_of(b, facts));
            match op {
                BinOp::Add => Interval::new(x.lo + y.lo, x.hi + y.hi),
                BinOp::Sub => Interval::new(x.lo - y.hi, x.hi - y.lo),
                BinOp::Mul => x.corners(y, |p, q| p.saturating_mul(q)),
                BinOp::Div => divide(x, y, false),
                BinOp::FloorDiv => divide(x, y, true),
                BinOp::FloorMod => floor_mod(x, y),
                BinOp::Min => Interval::new(x.lo.min(y.lo), x.hi.min(y.hi)),
                BinOp::Max => Interval::new(x.lo.max(y.lo), x.hi.max(y.hi)),
                BinOp::And | BinOp::Or => Interval::new(0, 1),
            }
        }
        ExprKind::Cmp(..) | ExprKind::Not(_) => Interval::new(0, 1),
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
            Interval::UNBOUNDED
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
    match op {
        CmpOp::Lt => Some(Interval::new(-INF, r.hi - 1)),
        CmpOp::Le => Some(Interval::new(-INF, r.hi)),
        CmpOp::Gt => Some(Interval::new(r.lo + 1, INF)),
        CmpOp::Ge => Some(Interval::new(r.lo, INF)),
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
                if !range.within(extent) {
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
        assert_eq!(range_of(&floordiv(&i, &j), &[]), Interval::UNBOUNDED);
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
