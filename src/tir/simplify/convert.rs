//! Conversion between [`Expr`] and the e-graph language.
//!
//! Only `i64` and `bool` nodes of the kinds the language has are converted;
//! anything else (floats, `i32`, reads, casts, calls) becomes an opaque leaf
//! kept in a side table and restored unchanged on the way back.

use egg::{Id, RecExpr};

use super::analysis::{IndexAnalysis, LeafInfo, Ty};
use super::interval::Range;
use super::language::{IndexLang, LeafSlot, VarSlot};
use crate::te::{BinOp, CmpOp, Const, DType, Expr, ExprKind, Var};

/// Whether `e`'s own node is part of the e-graph language (its children may
/// still be opaque leaves).
pub(super) fn is_lang(e: &Expr) -> bool {
    let int = |x: &Expr| x.dtype() == DType::I64;
    let boolean = |x: &Expr| x.dtype() == DType::Bool;
    match (e.dtype(), e.kind()) {
        (DType::I64, ExprKind::Const(Const::Int(_))) => true,
        (DType::I64, ExprKind::Var(_)) => true,
        (DType::I64, ExprKind::Neg(a)) => int(a),
        (DType::I64, ExprKind::Binary(op, a, b)) => {
            !matches!(op, BinOp::And | BinOp::Or) && int(a) && int(b)
        }
        (DType::Bool, ExprKind::Const(Const::Bool(_))) => true,
        (DType::Bool, ExprKind::Not(a)) => boolean(a),
        (DType::Bool, ExprKind::Binary(BinOp::And | BinOp::Or, a, b)) => boolean(a) && boolean(b),
        (DType::Bool, ExprKind::Cmp(_, a, b)) => int(a) && int(b),
        (
            d @ (DType::I64 | DType::Bool),
            ExprKind::Select {
                cond,
                then,
                otherwise,
            },
        ) => boolean(cond) && then.dtype() == d && otherwise.dtype() == d,
        _ => false,
    }
}

/// Whether evaluating the opaque expression `e` may fault: it reads a tensor
/// (possibly out of bounds) or divides by a value that may be zero.
pub(super) fn may_fault(e: &Expr) -> bool {
    let mut fault = false;
    e.visit(&mut |x| {
        fault |= match x.kind() {
            ExprKind::Read(..) | ExprKind::Reduce(_) => true,
            ExprKind::Binary(BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod, _, b) => {
                b.dtype().is_int() && !matches!(b.as_int(), Some(c) if c != 0)
            }
            _ => false,
        };
    });
    fault
}

/// The range known for an opaque `i64` or `bool` expression.
pub(super) fn leaf_range(e: &Expr) -> Range {
    match (e.dtype(), e.kind()) {
        (DType::Bool, _) => Range::BOOL,
        (DType::I64, ExprKind::Cast(a)) if a.dtype() == DType::I32 => {
            Range::new(i32::MIN as i64, i32::MAX as i64)
        }
        (DType::I64, ExprKind::Cast(a)) if a.dtype() == DType::Bool => Range::BOOL,
        _ => Range::FULL,
    }
}

/// The range of a loop variable.
pub(super) fn var_range(v: &Var) -> Range {
    Range::of_extent(v.extent())
}

/// An expression converted to the e-graph language, with its side tables.
pub(super) struct Converted {
    pub expr: RecExpr<IndexLang>,
    pub vars: Vec<Var>,
    pub leaves: Vec<Expr>,
}

impl Converted {
    /// Converts `e`, whose node must satisfy [`is_lang`]; sub-expressions that
    /// do not become leaves as they are (they are not simplified here).
    pub fn new(e: &Expr) -> Converted {
        let mut c = Converted {
            expr: RecExpr::default(),
            vars: Vec::new(),
            leaves: Vec::new(),
        };
        c.add(e);
        c
    }

    /// The analysis for this expression's variables and leaves.
    pub fn analysis(&self) -> IndexAnalysis {
        IndexAnalysis {
            var_extents: self.vars.iter().map(Var::extent).collect(),
            leaves: self
                .leaves
                .iter()
                .map(|l| LeafInfo {
                    ty: if l.dtype() == DType::Bool {
                        Ty::Bool
                    } else {
                        Ty::Int
                    },
                    range: leaf_range(l),
                    may_fault: may_fault(l),
                })
                .collect(),
        }
    }

    /// The node count of each leaf, by slot.
    pub fn leaf_sizes(&self) -> Vec<usize> {
        self.leaves.iter().map(super::node_count).collect()
    }

    fn leaf(&mut self, e: &Expr) -> Id {
        let slot = match self.leaves.iter().position(|l| l == e) {
            Some(i) => i,
            None => {
                self.leaves.push(e.clone());
                self.leaves.len() - 1
            }
        };
        self.expr.add(IndexLang::Leaf(LeafSlot(slot as u32)))
    }

    fn var(&mut self, v: &Var) -> Id {
        let slot = match self.vars.iter().position(|w| w == v) {
            Some(i) => i,
            None => {
                self.vars.push(v.clone());
                self.vars.len() - 1
            }
        };
        self.expr.add(IndexLang::Var(VarSlot(slot as u32)))
    }

    fn add(&mut self, e: &Expr) -> Id {
        if !is_lang(e) {
            return self.leaf(e);
        }
        let node = match e.kind() {
            ExprKind::Const(Const::Int(v)) => IndexLang::Num(*v),
            ExprKind::Const(Const::Bool(b)) => IndexLang::Bool(*b),
            ExprKind::Var(v) => return self.var(v),
            ExprKind::Neg(a) => IndexLang::Neg(self.add(a)),
            ExprKind::Not(a) => IndexLang::Not(self.add(a)),
            ExprKind::Binary(op, a, b) => {
                let ids = [self.add(a), self.add(b)];
                match op {
                    BinOp::Add => IndexLang::Add(ids),
                    BinOp::Sub => IndexLang::Sub(ids),
                    BinOp::Mul => IndexLang::Mul(ids),
                    BinOp::Div => IndexLang::Div(ids),
                    BinOp::FloorDiv => IndexLang::FloorDiv(ids),
                    BinOp::FloorMod => IndexLang::FloorMod(ids),
                    BinOp::Min => IndexLang::Min(ids),
                    BinOp::Max => IndexLang::Max(ids),
                    BinOp::And => IndexLang::And(ids),
                    BinOp::Or => IndexLang::Or(ids),
                }
            }
            ExprKind::Cmp(op, a, b) => {
                let ids = [self.add(a), self.add(b)];
                match op {
                    CmpOp::Lt => IndexLang::Lt(ids),
                    CmpOp::Le => IndexLang::Le(ids),
                    CmpOp::Gt => IndexLang::Gt(ids),
                    CmpOp::Ge => IndexLang::Ge(ids),
                    CmpOp::Eq => IndexLang::Eq(ids),
                    CmpOp::Ne => IndexLang::Ne(ids),
                }
            }
            ExprKind::Select {
                cond,
                then,
                otherwise,
            } => IndexLang::Select([self.add(cond), self.add(then), self.add(otherwise)]),
            // Excluded by `is_lang`.
            _ => return self.leaf(e),
        };
        self.expr.add(node)
    }

    /// Rebuilds an [`Expr`] from an extracted term over this conversion's
    /// variables and leaves; `None` if the term refers to an unknown slot.
    pub fn back(&self, rec: &RecExpr<IndexLang>) -> Option<Expr> {
        let mut built: Vec<Expr> = Vec::with_capacity(rec.as_ref().len());
        for node in rec.as_ref() {
            let child = |id: &Id| built.get(usize::from(*id)).cloned();
            let bin = |op: BinOp, [a, b]: &[Id; 2]| -> Option<Expr> {
                Some(Expr::new(
                    DType::I64,
                    ExprKind::Binary(op, child(a)?, child(b)?),
                ))
            };
            let logic = |op: BinOp, [a, b]: &[Id; 2]| -> Option<Expr> {
                Some(Expr::new(
                    DType::Bool,
                    ExprKind::Binary(op, child(a)?, child(b)?),
                ))
            };
            let cmp = |op: CmpOp, [a, b]: &[Id; 2]| -> Option<Expr> {
                Some(tidy_comparison(op, child(a)?, child(b)?))
            };
            let e = match node {
                IndexLang::Num(v) => Expr::i64(*v),
                IndexLang::Bool(b) => Expr::bool(*b),
                IndexLang::Var(slot) => self.vars.get(slot.0 as usize)?.expr(),
                IndexLang::Leaf(slot) => self.leaves.get(slot.0 as usize)?.clone(),
                IndexLang::Add([a, b]) => tidy_sum(child(a)?, child(b)?),
                IndexLang::Sub(ids) => bin(BinOp::Sub, ids)?,
                IndexLang::Mul([a, b]) => tidy_product(child(a)?, child(b)?),
                IndexLang::Div(ids) => bin(BinOp::Div, ids)?,
                IndexLang::FloorDiv(ids) => bin(BinOp::FloorDiv, ids)?,
                IndexLang::FloorMod(ids) => bin(BinOp::FloorMod, ids)?,
                IndexLang::Min(ids) => bin(BinOp::Min, ids)?,
                IndexLang::Max(ids) => bin(BinOp::Max, ids)?,
                IndexLang::Neg(a) => Expr::new(DType::I64, ExprKind::Neg(child(a)?)),
                IndexLang::Lt(ids) => cmp(CmpOp::Lt, ids)?,
                IndexLang::Le(ids) => cmp(CmpOp::Le, ids)?,
                IndexLang::Gt(ids) => cmp(CmpOp::Gt, ids)?,
                IndexLang::Ge(ids) => cmp(CmpOp::Ge, ids)?,
                IndexLang::Eq(ids) => cmp(CmpOp::Eq, ids)?,
                IndexLang::Ne(ids) => cmp(CmpOp::Ne, ids)?,
                IndexLang::And(ids) => logic(BinOp::And, ids)?,
                IndexLang::Or(ids) => logic(BinOp::Or, ids)?,
                IndexLang::Not(a) => Expr::new(DType::Bool, ExprKind::Not(child(a)?)),
                IndexLang::Select([c, t, o]) => {
                    let then = child(t)?;
                    Expr::new(
                        then.dtype(),
                        ExprKind::Select {
                            cond: child(c)?,
                            then,
                            otherwise: child(o)?,
                        },
                    )
                }
            };
            built.push(e);
        }
        built.pop()
    }
}

/// `a op b` with a constant operand written last (`x >= 58`, not `58 <= x`).
fn tidy_comparison(op: CmpOp, a: Expr, b: Expr) -> Expr {
    let flipped = match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
        CmpOp::Eq | CmpOp::Ne => op,
    };
    let kind = if a.as_int().is_some() && b.as_int().is_none() {
        ExprKind::Cmp(flipped, b, a)
    } else {
        ExprKind::Cmp(op, a, b)
    };
    Expr::new(DType::Bool, kind)
}

fn int_binary(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::new(DType::I64, ExprKind::Binary(op, a, b))
}

/// `a * b` with a constant factor written last (`x * 4`, not `4 * x`).
fn tidy_product(a: Expr, b: Expr) -> Expr {
    if a.as_int().is_some() && b.as_int().is_none() {
        int_binary(BinOp::Mul, b, a)
    } else {
        int_binary(BinOp::Mul, a, b)
    }
}

/// `a + b` as a left-nested sum with its terms in the conventional order:
/// larger constant coefficients first, the constant term last
/// (`i*32 + j*4 + k + 1`). Same nodes, same value (addition modulo 2^64 is
/// associative and commutative); extraction leaves the order arbitrary.
fn tidy_sum(a: Expr, b: Expr) -> Expr {
    fn terms(e: Expr, out: &mut Vec<Expr>) {
        match e.kind() {
            ExprKind::Binary(BinOp::Add, x, y) if e.dtype() == DType::I64 => {
                terms(x.clone(), out);
                terms(y.clone(), out);
            }
            _ => out.push(e),
        }
    }
    fn weight(e: &Expr) -> u64 {
        match e.kind() {
            ExprKind::Const(_) => 0,
            ExprKind::Binary(BinOp::Mul, x, y) => match (x.as_int(), y.as_int()) {
                (_, Some(k)) | (Some(k), _) => k.unsigned_abs().max(1),
                _ => 1,
            },
            _ => 1,
        }
    }
    let mut all = Vec::new();
    terms(a, &mut all);
    terms(b, &mut all);
    // Stable: equal weights keep the extracted order.
    all.sort_by_key(|t| std::cmp::Reverse(weight(t)));
    let mut iter = all.into_iter();
    let Some(first) = iter.next() else {
        return Expr::i64(0);
    };
    iter.fold(first, |acc, t| int_binary(BinOp::Add, acc, t))
}
