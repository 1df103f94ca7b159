//! The simplifier's value ranges: [`crate::arith::Interval`]s of wrapping
//! `i64` values ([`crate::arith::Overflow::Wrap`]), shared by the e-graph
//! analysis and the constant-folding pre-pass, plus constant evaluation as
//! the interpreter computes it.
//!
//! A [`Range`] bounds the *wrapped* value an expression takes for every value
//! of its loop variables; it is never empty. Booleans are the range `[0, 1]`
//! (false = 0, true = 1).

pub(super) use crate::arith::interval::{and, compare, not, or, select};
pub(super) use crate::arith::{Interval as Range, Overflow, floor_div, gcd};
use crate::te::BinOp;

/// The value of `a op b` for constant operands, as the interpreter computes
/// it; `None` for a division by zero (left in place: it faults at run time).
pub(super) fn eval(op: BinOp, a: i64, b: i64) -> Option<i64> {
    let floor = |a: i64, b: i64| -> i64 {
        let q = a.wrapping_div(b);
        if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
            q.wrapping_sub(1)
        } else {
            q
        }
    };
    if matches!(op, BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod) && b == 0 {
        return None;
    }
    Some(match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        BinOp::Div => a.wrapping_div(b),
        BinOp::FloorDiv => floor(a, b),
        BinOp::FloorMod => a.wrapping_sub(floor(a, b).wrapping_mul(b)),
        BinOp::Min => a.min(b),
        BinOp::Max => a.max(b),
        BinOp::And | BinOp::Or => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_evaluate_as_the_interpreter_does() {
        assert_eq!(eval(BinOp::FloorDiv, -7, 2), Some(-4));
        assert_eq!(eval(BinOp::FloorMod, -7, 2), Some(1));
        assert_eq!(eval(BinOp::Div, -7, 2), Some(-3));
        assert_eq!(eval(BinOp::Add, i64::MAX, 1), Some(i64::MIN));
        assert_eq!(eval(BinOp::FloorMod, 3, 0), None);
        assert_eq!(eval(BinOp::And, 1, 1), None);
    }
}
