//! The one affine form of an integer expression: `constant + Σ coefficient ×
//! atom`, where an atom is whatever the form does not take apart (a loop
//! variable, a division, a read…). Built from a te expression, it answers
//! the questions index analysis asks: the coefficient (stride) of a
//! variable, the flat offset of a row-major access, bounds over variable
//! ranges, substitution, and a compact expression back.
//!
//! Coefficients and the constant are `i64` modulo 2^64 (wrapping), exact for
//! the machine's index arithmetic. Atoms are compared structurally, so a
//! variable is one atom however often it appears; atoms whose coefficient
//! cancels to zero are kept, so a variable hidden in one still counts as a
//! non-affine use.

use super::interval::{Interval, Overflow};
use crate::te::{BinOp, Const, DType, Expr, ExprKind, VarId};

/// Which nodes [`Affine::with`] takes apart besides `+ - neg`, products with
/// an integer constant and integer constants; every other node is an atom.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Decompose {
    /// Look through casts (`(i64) x` is read as `x`), as a cost estimate may;
    /// otherwise a cast is an atom.
    pub through_casts: bool,
    /// Take apart only `i64` nodes, so the form equals the expression modulo
    /// 2^64 (what a rewrite needs); narrower arithmetic stays an atom.
    pub only_i64: bool,
}

impl Decompose {
    /// Only `i64` nodes taken apart, casts kept as atoms: the form equals
    /// the expression modulo 2^64, what a rewrite needs.
    pub const EXACT: Decompose = Decompose {
        through_casts: false,
        only_i64: true,
    };
}

/// `constant + Σ coefficient × atom`, atoms distinct, in first-seen order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Affine {
    /// The constant term.
    pub constant: i64,
    /// Each atom with its coefficient (possibly zero).
    pub terms: Vec<(Expr, i64)>,
}

impl Affine {
    /// The affine form of `e` (casts are atoms).
    pub fn of(e: &Expr) -> Affine {
        Affine::with(e, Decompose::default())
    }

    /// The affine form of `e`, taking apart what `how` says.
    pub fn with(e: &Expr, how: Decompose) -> Affine {
        let mut form = Affine::default();
        form.add_expr(e, 1, how);
        form
    }

    /// The flat element offset of `indices` into a row-major buffer of
    /// `shape`: the stride of a variable is its coefficient here.
    pub fn flat(indices: &[Expr], shape: &[i64], how: Decompose) -> Affine {
        indices
            .iter()
            .zip(shape)
            .fold(Affine::default(), |total, (index, &extent)| {
                let mut next = total.scaled(extent);
                next.add_expr(index, 1, how);
                next
            })
    }

    /// Adds `scale × e` to the form.
    pub fn add_expr(&mut self, e: &Expr, scale: i64, how: Decompose) {
        let linear_node = !how.only_i64 || e.dtype() == DType::I64;
        match e.kind() {
            ExprKind::Binary(BinOp::Add, a, b) if linear_node => {
                self.add_expr(a, scale, how);
                self.add_expr(b, scale, how);
            }
            ExprKind::Binary(BinOp::Sub, a, b) if linear_node => {
                self.add_expr(a, scale, how);
                self.add_expr(b, scale.wrapping_neg(), how);
            }
            ExprKind::Neg(a) if linear_node => self.add_expr(a, scale.wrapping_neg(), how),
            ExprKind::Binary(BinOp::Mul, a, b)
                if linear_node && (a.as_int().is_some() || b.as_int().is_some()) =>
            {
                match (a.as_int(), b.as_int()) {
                    (_, Some(k)) => self.add_expr(a, scale.wrapping_mul(k), how),
                    (Some(k), _) => self.add_expr(b, scale.wrapping_mul(k), how),
                    (None, None) => unreachable!("one factor is a constant"),
                }
            }
            // `floordiv(x, 1)` is `x` (a grouped convolution's one channel
            // per group: `floordiv(c, 1) * 1 + rc`).
            ExprKind::Binary(BinOp::FloorDiv, a, b) if linear_node && b.as_int() == Some(1) => {
                self.add_expr(a, scale, how)
            }
            ExprKind::Cast(a) if how.through_casts => self.add_expr(a, scale, how),
            ExprKind::Const(Const::Int(v)) => {
                self.constant = self.constant.wrapping_add(scale.wrapping_mul(*v));
            }
            ExprKind::Binary(op @ (BinOp::FloorDiv | BinOp::FloorMod), x, d) if linear_node => {
                match d.as_int().filter(|&d| d != 0) {
                    Some(d) if self.merges_with_partner(*op, x, d, scale, how) => {}
                    _ => self.add_term(e, scale),
                }
            }
            _ => self.add_term(e, scale),
        }
    }

    /// Adds `scale × (x op d)` as `b × x` when the form already holds the
    /// other half of `d·floordiv(x, d) + floormod(x, d) = x` with the
    /// coefficient that completes it (`b·d` on the quotient, `b` on the
    /// remainder): the row-major offset of a fused loop's two parts, e.g. a
    /// window's column and channel read as one contiguous run.
    fn merges_with_partner(
        &mut self,
        op: BinOp,
        x: &Expr,
        d: i64,
        scale: i64,
        how: Decompose,
    ) -> bool {
        let (partner_op, wanted) = match op {
            BinOp::FloorDiv => (BinOp::FloorMod, None),
            _ => (BinOp::FloorDiv, Some(scale.wrapping_mul(d))),
        };
        let position = self.terms.iter().position(|(atom, c)| {
            matches!(atom.kind(), ExprKind::Binary(o, px, pd)
                if *o == partner_op && pd.as_int() == Some(d) && px == x)
                && match wanted {
                    Some(quotient) => *c == quotient,
                    None => c.wrapping_mul(d) == scale,
                }
        });
        let Some(position) = position else {
            return false;
        };
        let (_, partner) = self.terms.remove(position);
        let remainder = if op == BinOp::FloorMod {
            scale
        } else {
            partner
        };
        self.add_expr(x, remainder, how);
        true
    }

    /// Adds `coefficient × atom`, merging with an equal atom.
    pub fn add_term(&mut self, atom: &Expr, coefficient: i64) {
        match self.terms.iter_mut().find(|(a, _)| a == atom) {
            Some((_, c)) => *c = c.wrapping_add(coefficient),
            None => self.terms.push((atom.clone(), coefficient)),
        }
    }

    /// `k × self`.
    pub fn scaled(mut self, k: i64) -> Affine {
        self.constant = self.constant.wrapping_mul(k);
        self.terms
            .iter_mut()
            .for_each(|(_, c)| *c = c.wrapping_mul(k));
        self
    }

    /// `self + other`.
    pub fn plus(mut self, other: &Affine) -> Affine {
        self.constant = self.constant.wrapping_add(other.constant);
        for (atom, c) in &other.terms {
            self.add_term(atom, *c);
        }
        self
    }

    /// The form with `atom` replaced by `by`.
    pub fn substitute(&self, atom: &Expr, by: &Affine) -> Affine {
        let Some(position) = self.terms.iter().position(|(a, _)| a == atom) else {
            return self.clone();
        };
        let mut rest = self.clone();
        let (_, c) = rest.terms.remove(position);
        rest.plus(&by.clone().scaled(c))
    }

    /// How the value moves per unit step of the variable `var` (an id):
    /// `Some(coefficient)` when the form is affine in it (zero if it does
    /// not appear), `None` when an atom other than the variable uses it.
    pub fn coefficient(&self, var: VarId) -> Option<i64> {
        let mut coefficient = 0;
        for (atom, c) in &self.terms {
            match atom.kind() {
                ExprKind::Var(v) if v.id() == var => coefficient = *c,
                _ if mentions(atom, var) => return None,
                _ => {}
            }
        }
        Some(coefficient)
    }

    /// Whether the value depends on the variable `var` at all.
    pub fn depends_on(&self, var: VarId) -> bool {
        self.coefficient(var) != Some(0)
    }

    /// `(the terms whose atom satisfies pred, with the constant; the rest)`:
    /// two forms that sum to `self`.
    pub fn partition(&self, pred: impl Fn(&Expr) -> bool) -> (Affine, Affine) {
        let (yes, no): (Vec<_>, Vec<_>) = self.terms.iter().cloned().partition(|(a, _)| pred(a));
        (
            Affine {
                constant: self.constant,
                terms: yes,
            },
            Affine {
                constant: 0,
                terms: no,
            },
        )
    }

    /// The values the form takes when each atom ranges over `range(atom)`
    /// (its atoms independent), under `overflow`.
    pub fn bounds(&self, range: impl Fn(&Expr) -> Interval, overflow: Overflow) -> Interval {
        self.terms
            .iter()
            .fold(Interval::point(self.constant), |acc, (atom, c)| {
                let term = Interval::point(*c).binary(BinOp::Mul, range(atom), overflow);
                acc.binary(BinOp::Add, term, overflow)
            })
    }

    /// A compact `i64` expression of the form: atoms with one coefficient
    /// share a product, larger coefficients first, subtraction for negative
    /// coefficients, the constant last.
    pub fn to_expr(&self) -> Expr {
        let mut groups: Vec<(i64, Vec<&Expr>)> = Vec::new();
        for (atom, c) in self.terms.iter().filter(|(_, c)| *c != 0) {
            match groups.iter_mut().find(|(g, _)| g == c) {
                Some((_, atoms)) => atoms.push(atom),
                None => groups.push((*c, vec![atom])),
            }
        }
        groups.sort_by_key(|(c, _)| std::cmp::Reverse(c.unsigned_abs()));
        let mut acc: Option<Expr> = None;
        // Positive groups first so negative ones become subtractions.
        for (c, atoms) in groups.iter().filter(|(c, _)| *c > 0) {
            // Coefficient-1 atoms join the chain one by one: `a + b + c`,
            // not `a + (b + c)`.
            let terms = if *c == 1 {
                atoms.iter().map(|a| (*a).clone()).collect()
            } else {
                vec![scaled(atoms, *c)]
            };
            for term in terms {
                acc = Some(match acc {
                    Some(a) => bin(BinOp::Add, a, term),
                    None => term,
                });
            }
        }
        if acc.is_none() && self.constant != 0 && self.constant != i64::MIN {
            // Only negative terms: `k - x`.
            let start = Some(Expr::i64(self.constant));
            return subtract_negatives(start, &groups).unwrap_or_else(|| Expr::i64(self.constant));
        }
        let acc = subtract_negatives(acc, &groups);
        match (acc, self.constant) {
            (None, k) => Expr::i64(k),
            (Some(a), 0) => a,
            (Some(a), k) if k < 0 && k != i64::MIN => bin(BinOp::Sub, a, Expr::i64(-k)),
            (Some(a), k) => bin(BinOp::Add, a, Expr::i64(k)),
        }
    }
}

/// Whether `e` uses the variable `var` anywhere.
pub fn mentions(e: &Expr, var: VarId) -> bool {
    e.any(&mut |x| matches!(x.kind(), ExprKind::Var(v) if v.id() == var))
}

/// `acc` minus each negative group.
fn subtract_negatives(mut acc: Option<Expr>, groups: &[(i64, Vec<&Expr>)]) -> Option<Expr> {
    for (c, atoms) in groups.iter().filter(|(c, _)| *c < 0) {
        acc = Some(match acc {
            Some(a) if *c != i64::MIN => bin(BinOp::Sub, a, scaled(atoms, -c)),
            Some(a) => bin(BinOp::Add, a, scaled(atoms, *c)),
            None if *c == -1 => Expr::new(DType::I64, ExprKind::Neg(sum(atoms))),
            None => scaled(atoms, *c),
        });
    }
    acc
}

fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::new(DType::I64, ExprKind::Binary(op, a, b))
}

fn sum(atoms: &[&Expr]) -> Expr {
    let mut it = atoms.iter();
    let first = it.next().map_or_else(|| Expr::i64(0), |a| (*a).clone());
    it.fold(first, |acc, a| bin(BinOp::Add, acc, (*a).clone()))
}

/// `(a + b + …) * c`, without the product when `c` is 1.
fn scaled(atoms: &[&Expr], c: i64) -> Expr {
    let s = sum(atoms);
    if c == 1 {
        s
    } else {
        bin(BinOp::Mul, s, Expr::i64(c))
    }
}

#[cfg(test)]
#[path = "affine_tests.rs"]
mod tests;
