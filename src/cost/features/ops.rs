//! Counting the arithmetic of one store: what its value and index
//! expressions compute, by kind.

use crate::te::{BinOp, Expr, ExprKind, Intrinsic};

/// Operation counts of one evaluation of a store.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct OpCounts {
    pub float_add_sub: f64,
    pub float_mul: f64,
    /// `a * b + c` pairs (contracted to one FMA by the code generator).
    pub float_fma: f64,
    pub float_div: f64,
    pub float_min_max: f64,
    pub float_cmp: f64,
    /// exp, log, sqrt, tanh, sigmoid, erf, pow, abs.
    pub float_math: f64,
    pub int_add_sub: f64,
    pub int_mul: f64,
    pub int_div_mod: f64,
    /// Integer and boolean comparisons and logic.
    pub int_cmp: f64,
    pub select: f64,
    pub cast: f64,
}

impl OpCounts {
    /// Counts the operations of `e` (and its sub-expressions).
    pub fn add_expr(&mut self, e: &Expr) {
        e.visit(&mut |x| self.count(x));
    }

    fn count(&mut self, e: &Expr) {
        let float = e.dtype().is_float();
        match e.kind() {
            ExprKind::Binary(op, a, b) => {
                let operand_float = a.dtype().is_float();
                match (op, operand_float) {
                    (BinOp::Add | BinOp::Sub, true) => {
                        let fused = [a, b]
                            .iter()
                            .any(|x| matches!(x.kind(), ExprKind::Binary(BinOp::Mul, ..)));
                        if fused {
                            self.float_fma += 1.0;
                            // The multiply is counted on its own visit; an FMA
                            // replaces the pair, so take it back out.
                            self.float_mul -= 1.0;
                        } else {
                            self.float_add_sub += 1.0;
                        }
                    }
                    (BinOp::Mul, true) => self.float_mul += 1.0,
                    (BinOp::Div, true) => self.float_div += 1.0,
                    (BinOp::Min | BinOp::Max, true) => self.float_min_max += 1.0,
                    (BinOp::Add | BinOp::Sub, false) => self.int_add_sub += 1.0,
                    (BinOp::Mul, false) => self.int_mul += 1.0,
                    (BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod, _) => self.int_div_mod += 1.0,
                    _ => self.int_cmp += 1.0,
                }
            }
            ExprKind::Cmp(_, a, _) => {
                if a.dtype().is_float() {
                    self.float_cmp += 1.0;
                } else {
                    self.int_cmp += 1.0;
                }
            }
            ExprKind::Not(_) => self.int_cmp += 1.0,
            ExprKind::Neg(_) if float => self.float_add_sub += 1.0,
            ExprKind::Neg(_) => self.int_add_sub += 1.0,
            ExprKind::Select { .. } => self.select += 1.0,
            ExprKind::Cast(_) => self.cast += 1.0,
            ExprKind::Call(f, _) => match f {
                Intrinsic::Abs if !float => self.int_cmp += 1.0,
                _ => self.float_math += 1.0,
            },
            _ => {}
        }
    }

    /// Floating-point operations (an FMA counts two).
    pub fn flops(&self) -> f64 {
        self.float_add_sub
            + self.float_mul
            + 2.0 * self.float_fma
            + self.float_div
            + self.float_min_max
            + self.float_cmp
            + self.float_math
    }

    /// The counts in feature order.
    pub fn values(&self) -> [f64; 13] {
        [
            self.float_add_sub,
            self.float_mul,
            self.float_fma,
            self.float_div,
            self.float_min_max,
            self.float_cmp,
            self.float_math,
            self.int_add_sub,
            self.int_mul,
            self.int_div_mod,
            self.int_cmp,
            self.select,
            self.cast,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::te::{DType, exp, placeholder};

    #[test]
    fn a_multiply_add_is_one_fma() {
        let a = placeholder("A", &[4], DType::F32);
        let i = Expr::i32(1);
        let e = a.at([&i]) * a.at([&i]) + exp(a.at([&i]));
        let mut c = OpCounts::default();
        c.add_expr(&e);
        assert_eq!(
            (c.float_fma, c.float_mul, c.float_add_sub, c.float_math),
            (1.0, 0.0, 0.0, 1.0)
        );
        assert_eq!(c.flops(), 3.0);
    }
}
