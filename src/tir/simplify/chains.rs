//! Chains of `&&` (or of `||`), as guards are written: each operand is
//! simplified on its own and the chain is rebuilt in its original order.
//!
//! Running the whole chain through the e-graph would also work, but the
//! commutativity of `&&` makes it explore every order of the operands, which
//! costs time and returns them shuffled. Only a chain whose operands still
//! interact (two bounds on one expression, a repeated operand) goes to the
//! e-graph afterwards.

use super::{saturate, settled, simplify};
use crate::te::{BinOp, DType, Expr, ExprKind};

/// The operands of `e` if it is a chain of at least two `op`s.
pub(super) fn operands(e: &Expr) -> Option<(BinOp, Vec<&Expr>)> {
    fn flatten<'a>(e: &'a Expr, op: BinOp, out: &mut Vec<&'a Expr>) {
        match e.kind() {
            ExprKind::Binary(o, a, b) if *o == op && e.dtype() == DType::Bool => {
                flatten(a, op, out);
                flatten(b, op, out);
            }
            _ => out.push(e),
        }
    }
    let op = match e.kind() {
        ExprKind::Binary(op @ (BinOp::And | BinOp::Or), ..) if e.dtype() == DType::Bool => *op,
        _ => return None,
    };
    let mut out = Vec::new();
    flatten(e, op, &mut out);
    Some((op, out))
}

/// The chain `operands[0] op operands[1] op …`, simplified.
pub(super) fn simplify_chain(op: BinOp, operands: &[&Expr]) -> Expr {
    // `&&` stops at the first false operand, `||` at the first true one;
    // operands equal to the other constant do not matter.
    let (stop, neutral) = match op {
        BinOp::And => (false, true),
        _ => (true, false),
    };
    let mut kept: Vec<Expr> = Vec::with_capacity(operands.len());
    for x in operands {
        let s = simplify(x);
        match s.kind() {
            ExprKind::Const(crate::te::Const::Bool(b)) if *b == neutral => continue,
            ExprKind::Const(crate::te::Const::Bool(b)) if *b == stop => {
                // Later operands are never evaluated; earlier ones may only
                // fault, which the result need not reproduce.
                return Expr::bool(stop);
            }
            _ => {}
        }
        // A repeated operand has the value it had the first time.
        if !kept.contains(&s) {
            kept.push(s);
        }
    }
    let mut it = kept.into_iter();
    let Some(first) = it.next() else {
        return Expr::bool(neutral);
    };
    let chain = it.fold(first, |acc, x| {
        Expr::new(DType::Bool, ExprKind::Binary(op, acc, x))
    });
    if settled::worth_egg(&chain) {
        saturate::run(&chain).unwrap_or(chain)
    } else {
        chain
    }
}
