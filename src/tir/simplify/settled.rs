//! Deciding cheaply whether the e-graph is worth running on a folded
//! expression. Skipping it never changes a result's value, only how small the
//! result gets; the shapes recognised here are ones no rule can shrink.
//!
//! The common settled shapes are the index expressions and guards lowering
//! emits: sums of distinct variables times constants in any nesting
//! (`(i0*8 + i1)*4 + i2`), a fused variable's `floordiv(f, 56)` and
//! `floormod(f, 56)`, and bounds on them (`i0*8 + i1 < 100`).

use super::convert::{is_lang, var_range};
use super::interval::{Overflow, Range, floor_div, gcd};
use crate::te::{BinOp, CmpOp, Const, Expr, ExprKind, VarId};

/// Whether running the e-graph on the folded expression `e` could shrink it.
pub(super) fn worth_egg(e: &Expr) -> bool {
    lang_nodes_beyond(e, 3) && !settled(e)
}

/// Whether `e` has more than `limit` language nodes (stops counting early).
fn lang_nodes_beyond(e: &Expr, limit: usize) -> bool {
    fn count(e: &Expr, left: &mut usize) -> bool {
        if *left == 0 {
            return true;
        }
        *left -= 1;
        is_lang(e) && e.children().into_iter().any(|c| count(c, left))
    }
    let mut left = limit;
    count(e, &mut left)
}

/// Shapes already as small as the rules can make them.
fn settled(e: &Expr) -> bool {
    if !is_lang(e) {
        return true;
    }
    match e.kind() {
        ExprKind::Var(_) | ExprKind::Const(_) => true,
        ExprKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul, ..) => linear(e),
        // A division or modulo of a settled sum, as an atom.
        ExprKind::Binary(BinOp::FloorDiv | BinOp::FloorMod, ..) => linear(e),
        ExprKind::Binary(BinOp::Min | BinOp::Max, a, b) => a != b && linear(a) && linear(b),
        ExprKind::Binary(op @ (BinOp::And | BinOp::Or), ..) => logic_settled(e, *op),
        ExprKind::Not(a) => !matches!(a.kind(), ExprKind::Cmp(..) | ExprKind::Not(_)) && settled(a),
        ExprKind::Cmp(op, a, b) => comparison_settled(*op, a, b),
        ExprKind::Select {
            cond,
            then,
            otherwise,
        } => {
            !matches!(cond.kind(), ExprKind::Not(_))
                && then != otherwise
                && settled(cond)
                && settled(then)
                && settled(otherwise)
        }
        _ => false,
    }
}

fn linear(e: &Expr) -> bool {
    Linear::default().chain(e).is_some()
}

/// A chain of `&&` (or of `||`) whose operands are settled, pairwise
/// different, and hold no two bounds on one expression that could merge.
fn logic_settled(e: &Expr, op: BinOp) -> bool {
    fn flatten<'a>(e: &'a Expr, op: BinOp, out: &mut Vec<&'a Expr>) {
        match e.kind() {
            ExprKind::Binary(o, a, b) if *o == op => {
                flatten(a, op, out);
                flatten(b, op, out);
            }
            _ => out.push(e),
        }
    }
    let mut operands = Vec::new();
    flatten(e, op, &mut operands);
    let mut bounds: Vec<(&Expr, bool)> = Vec::new();
    for (n, x) in operands.iter().enumerate() {
        if !settled(x) || operands[..n].contains(x) {
            return false;
        }
        if let Some(bound) = bound_of(x) {
            if bounds.contains(&bound) {
                return false;
            }
            bounds.push(bound);
        }
    }
    true
}

/// `(expression, is_upper)` if `e` bounds an expression by a constant.
fn bound_of(e: &Expr) -> Option<(&Expr, bool)> {
    let ExprKind::Cmp(op, a, b) = e.kind() else {
        return None;
    };
    let upper = match op {
        CmpOp::Lt | CmpOp::Le => true,
        CmpOp::Gt | CmpOp::Ge => false,
        CmpOp::Eq | CmpOp::Ne => return None,
    };
    match (a.as_int(), b.as_int()) {
        (None, Some(_)) => Some((a, upper)),
        (Some(_), None) => Some((b, !upper)),
        _ => None,
    }
}

/// A comparison of linear forms with nothing to cancel, move or divide out.
fn comparison_settled(op: CmpOp, a: &Expr, b: &Expr) -> bool {
    let mut lin = Linear::default();
    match (a.as_int(), b.as_int()) {
        (Some(_), Some(_)) => false,
        (None, Some(c)) => bound_settled(&mut lin, op, a, c),
        (Some(c), None) => bound_settled(&mut lin, flip(op), b, c),
        (None, None) => match (lin.chain(a), lin.chain(b)) {
            (Some(ta), Some(tb)) => !ta
                .iter()
                .any(|(k, _)| *k != 1 && tb.iter().any(|(l, _)| l == k)),
            _ => false,
        },
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

/// `side op c` is settled: no constant term to move, no common factor to
/// divide out, no quotient to multiply out, and no split `a*k + b` with
/// `0 <= b < k` that a bound on `a` alone could replace.
fn bound_settled(lin: &mut Linear, op: CmpOp, side: &Expr, c: i64) -> bool {
    if matches!(side.kind(), ExprKind::Binary(BinOp::FloorDiv, ..)) {
        return false;
    }
    let Some(terms) = lin.chain(side) else {
        return false;
    };
    if lin.consts != 0 || terms.iter().map(|(k, _)| *k).fold(0, gcd) != 1 {
        return false;
    }
    // The strict upper bound this comparison is equivalent to (or the
    // negation of): side < bound.
    let bound = match op {
        CmpOp::Lt | CmpOp::Ge => c as i128,
        CmpOp::Le | CmpOp::Gt => c as i128 + 1,
        CmpOp::Eq | CmpOp::Ne => return true,
    };
    let ranges: Vec<Range> = terms.iter().map(|(_, t)| range_of(t)).collect();
    terms.iter().enumerate().all(|(n, (k, _))| {
        if *k <= 1 {
            return true;
        }
        let rest = ranges
            .iter()
            .enumerate()
            .filter(|(m, _)| *m != n)
            .try_fold(Range::point(0), |acc, (_, r)| acc.checked_add(*r));
        let k = *k as i128;
        let r = bound - floor_div(bound, k) * k;
        !matches!(rest, Some(b) if b.lo >= 0 && (b.hi as i128) < k && (r == 0 || (b.hi as i128) < r))
    })
}

/// The range of a settled linear form (unknown for anything else).
fn range_of(e: &Expr) -> Range {
    match e.kind() {
        ExprKind::Var(v) => var_range(v),
        ExprKind::Const(Const::Int(v)) => Range::point(*v),
        ExprKind::Binary(op, a, b) if is_lang(e) => match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::FloorDiv | BinOp::FloorMod => {
                range_of(a).binary(*op, range_of(b), Overflow::Wrap)
            }
            _ => Range::FULL,
        },
        _ => Range::FULL,
    }
}

/// Checks sums of distinct variables times constants, in any nesting
/// (`(i*8 + j)*4 + k`): no variable twice, at most one constant term, no
/// coefficient that could be factored out of two terms of one sum.
/// `floordiv(s, c)` and `floormod(s, c)` count as variables when no rule
/// applies to them: `s` is a variable or a sum of variables whose
/// coefficients are all coprime to `c` (a second use of one of its variables
/// could recombine them, so that is checked too).
#[derive(Default)]
struct Linear {
    vars: Vec<VarId>,
    consts: usize,
}

impl Linear {
    /// The `(coefficient, term)` pairs of the sum `e` (coefficient 1 for a
    /// variable or atom), or `None` if `e` is not a settled linear form.
    fn chain<'a>(&mut self, e: &'a Expr) -> Option<Vec<(u64, &'a Expr)>> {
        let mut terms = Vec::new();
        flatten(e, &mut terms);
        let mut out: Vec<(u64, &Expr)> = Vec::with_capacity(terms.len());
        for t in terms {
            match t.kind() {
                ExprKind::Const(Const::Int(_)) => {
                    self.consts += 1;
                    if self.consts > 1 {
                        return None;
                    }
                }
                ExprKind::Var(v) => {
                    self.claim(v.id())?;
                    out.push((1, t));
                }
                ExprKind::Binary(BinOp::FloorDiv | BinOp::FloorMod, ..) if is_lang(t) => {
                    self.atom(t)?;
                    out.push((1, t));
                }
                ExprKind::Binary(BinOp::Mul, x, y) if is_lang(t) => {
                    let (inner, k) = match (x.as_int(), y.as_int()) {
                        (None, Some(k)) => (x, k),
                        (Some(k), None) => (y, k),
                        _ => return None,
                    };
                    let k = k.unsigned_abs();
                    if k <= 1 || out.iter().any(|(c, _)| *c == k) {
                        return None;
                    }
                    match inner.kind() {
                        ExprKind::Var(_)
                        | ExprKind::Binary(
                            BinOp::Add | BinOp::Sub | BinOp::FloorDiv | BinOp::FloorMod,
                            ..,
                        ) => {
                            self.chain(inner)?;
                        }
                        _ => return None,
                    }
                    out.push((k, t));
                }
                _ => return None,
            }
        }
        Some(out)
    }

    /// Claims the variables of `floordiv(s, c)` / `floormod(s, c)` if no rule
    /// applies to it (see the type's documentation).
    fn atom(&mut self, t: &Expr) -> Option<()> {
        let ExprKind::Binary(op, s, c) = t.kind() else {
            return None;
        };
        let c = c.as_int().filter(|&c| c > 1)?;
        match s.kind() {
            ExprKind::Var(v) => self.claim(v.id()),
            // floormod(floordiv(v, a), b): a digit of v (floordiv of a
            // floordiv would merge).
            ExprKind::Binary(BinOp::FloorDiv, v, a)
                if *op == BinOp::FloorMod && a.as_int().is_some_and(|a| a > 1) =>
            {
                match v.kind() {
                    ExprKind::Var(v) => self.claim(v.id()),
                    _ => None,
                }
            }
            ExprKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul, ..) => {
                let mut coefs = Vec::new();
                var_coefficients(s, 1, &mut coefs)?;
                for (v, k) in coefs {
                    if gcd(k, c.unsigned_abs()) != 1 {
                        return None;
                    }
                    self.claim(v)?;
                }
                Some(())
            }
            _ => None,
        }
    }

    /// Records a use of variable `id`; `None` if it was used before.
    fn claim(&mut self, id: VarId) -> Option<()> {
        if self.vars.contains(&id) {
            return None;
        }
        self.vars.push(id);
        Some(())
    }
}

/// The coefficient of each variable in the expanded sum `e` (scaled by
/// `scale`); `None` if `e` holds anything but variables, `+`, `-` and
/// products with constants, or a constant term.
fn var_coefficients(e: &Expr, scale: u64, out: &mut Vec<(VarId, u64)>) -> Option<()> {
    match e.kind() {
        ExprKind::Var(v) => {
            out.push((v.id(), scale));
            Some(())
        }
        ExprKind::Binary(BinOp::Add | BinOp::Sub, a, b) if is_lang(e) => {
            var_coefficients(a, scale, out)?;
            var_coefficients(b, scale, out)
        }
        ExprKind::Binary(BinOp::Mul, a, b) if is_lang(e) => match (a.as_int(), b.as_int()) {
            (None, Some(k)) => var_coefficients(a, scale.checked_mul(k.unsigned_abs())?, out),
            (Some(k), None) => var_coefficients(b, scale.checked_mul(k.unsigned_abs())?, out),
            _ => None,
        },
        _ => None,
    }
}

/// The terms of a sum or difference.
fn flatten<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e.kind() {
        ExprKind::Binary(BinOp::Add | BinOp::Sub, a, b) if is_lang(e) => {
            flatten(a, out);
            flatten(b, out);
        }
        _ => out.push(e),
    }
}
