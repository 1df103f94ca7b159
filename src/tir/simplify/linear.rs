//! Linear normalisation, a cheap step before the e-graph: a sum of terms
//! `+ - *const neg` is collected into coefficients of its atoms (anything
//! else: variables, divisions, leaves), cancelling (`(i + r) - i → r`),
//! merging (`i*3 + i → i*4`) and recombining fused-loop pairs
//! (`floordiv(x, c)*c + floormod(x, c) → x`,
//! `floormod(floordiv(x, a), b)*a + floormod(x, a) → floormod(x, a*b)`). The collected form is rebuilt
//! compactly (atoms with equal coefficients share one multiplication) and
//! kept only when it has fewer nodes.
//!
//! All of it is exact in the ring of `i64` values modulo 2^64, so wrapping
//! changes nothing; the recombinations hold there too (their quotients and
//! remainders by positive constants are exact).

use super::convert::is_lang;
use super::node_count;
use crate::te::{BinOp, Const, DType, Expr, ExprKind};

/// `e` with every linear sub-expression in its smallest collected form.
pub(super) fn linearize(e: &Expr) -> Expr {
    if !is_lang(e) {
        return e.clone();
    }
    if is_linear(e) {
        let relinked = map_atoms(e);
        let mut form = Form::default();
        form.collect(&relinked, 1);
        form.recombine();
        let built = form.build();
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

/// `constant + Σ coefficient × atom`, coefficients modulo 2^64.
#[derive(Default)]
struct Form {
    terms: Vec<(Expr, i64)>,
    constant: i64,
}

impl Form {
    fn collect(&mut self, e: &Expr, scale: i64) {
        if is_linear(e) {
            match e.kind() {
                ExprKind::Binary(BinOp::Add, a, b) => {
                    self.collect(a, scale);
                    self.collect(b, scale);
                    return;
                }
                ExprKind::Binary(BinOp::Sub, a, b) => {
                    self.collect(a, scale);
                    self.collect(b, scale.wrapping_neg());
                    return;
                }
                ExprKind::Neg(a) => {
                    self.collect(a, scale.wrapping_neg());
                    return;
                }
                ExprKind::Binary(BinOp::Mul, a, b) => {
                    if let Some(k) = b.as_int() {
                        self.collect(a, scale.wrapping_mul(k));
                        return;
                    }
                    if let Some(k) = a.as_int() {
                        self.collect(b, scale.wrapping_mul(k));
                        return;
                    }
                }
                _ => {}
            }
        }
        match e.kind() {
            ExprKind::Const(Const::Int(v)) => {
                self.constant = self.constant.wrapping_add(scale.wrapping_mul(*v));
            }
            _ => self.add_atom(e, scale),
        }
    }

    fn add_atom(&mut self, atom: &Expr, coef: i64) {
        match self.terms.iter_mut().find(|(a, _)| a == atom) {
            Some((_, c)) => *c = c.wrapping_add(coef),
            None => self.terms.push((atom.clone(), coef)),
        }
    }

    /// Puts split pairs back together: `floordiv(x, a)*(k*a) +
    /// floormod(x, a)*k` is `x*k`, and `floormod(floordiv(x, a), b)*(k*a) +
    /// floormod(x, a)*k` is `floormod(x, a*b)*k`.
    fn recombine(&mut self) {
        'search: loop {
            for i in 0..self.terms.len() {
                let Some((x, a, whole)) = high_part(&self.terms[i].0) else {
                    continue;
                };
                let p = self.terms[i].1;
                let low = self.terms.iter().position(|(t, q)| {
                    *q != 0
                        && q.wrapping_mul(a) == p
                        && matches!(t.kind(), ExprKind::Binary(BinOp::FloorMod, y, d)
                            if *y == x && d.as_int() == Some(a))
                });
                if let Some(j) = low {
                    let q = self.terms[j].1;
                    self.terms.remove(i.max(j));
                    self.terms.remove(i.min(j));
                    self.collect(&whole, q);
                    continue 'search;
                }
            }
            return;
        }
    }

    /// A compact expression: atoms with one coefficient share a product,
    /// larger coefficients first, subtraction for negative coefficients, the
    /// constant last.
    fn build(&self) -> Expr {
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
            return self
                .subtract_negatives(start, &groups)
                .unwrap_or_else(|| Expr::i64(self.constant));
        }
        let acc = self.subtract_negatives(acc, &groups);
        match (acc, self.constant) {
            (None, k) => Expr::i64(k),
            (Some(a), 0) => a,
            (Some(a), k) if k < 0 && k != i64::MIN => bin(BinOp::Sub, a, Expr::i64(-k)),
            (Some(a), k) => bin(BinOp::Add, a, Expr::i64(k)),
        }
    }

    fn subtract_negatives(
        &self,
        mut acc: Option<Expr>,
        groups: &[(i64, Vec<&Expr>)],
    ) -> Option<Expr> {
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
