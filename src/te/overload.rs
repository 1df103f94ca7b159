//! Operator overloading so tensor expressions read like the math:
//! `a.at([&i, &k]) * b.at([&k, &j]) + 1.0`.

use std::ops::{Add, BitAnd, BitOr, Div, Mul, Neg, Not, Sub};

use super::builders::binary;
use super::dtype::DType;
use super::expr::{BinOp, Expr, ExprKind, Operand};

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:expr) => {
        impl<R: Into<Operand>> $trait<R> for Expr {
            type Output = Expr;
            fn $method(self, rhs: R) -> Expr {
                binary($op, self, rhs)
            }
        }

        impl<R: Into<Operand>> $trait<R> for &Expr {
            type Output = Expr;
            fn $method(self, rhs: R) -> Expr {
                binary($op, self, rhs)
            }
        }

        binary_operator!(@literal $trait, $method, $op, f32, f64, i32, i64);
    };
    (@literal $trait:ident, $method:ident, $op:expr, $($lit:ty),*) => {
        $(
            impl $trait<Expr> for $lit {
                type Output = Expr;
                fn $method(self, rhs: Expr) -> Expr {
                    binary($op, self, rhs)
                }
            }

            impl $trait<&Expr> for $lit {
                type Output = Expr;
                fn $method(self, rhs: &Expr) -> Expr {
                    binary($op, self, rhs)
                }
            }
        )*
    };
}

binary_operator!(Add, add, BinOp::Add);
binary_operator!(Sub, sub, BinOp::Sub);
binary_operator!(Mul, mul, BinOp::Mul);
binary_operator!(Div, div, BinOp::Div);

impl<R: Into<Operand>> BitAnd<R> for Expr {
    type Output = Expr;
    fn bitand(self, rhs: R) -> Expr {
        binary(BinOp::And, self, rhs)
    }
}

impl<R: Into<Operand>> BitAnd<R> for &Expr {
    type Output = Expr;
    fn bitand(self, rhs: R) -> Expr {
        binary(BinOp::And, self, rhs)
    }
}

impl<R: Into<Operand>> BitOr<R> for Expr {
    type Output = Expr;
    fn bitor(self, rhs: R) -> Expr {
        binary(BinOp::Or, self, rhs)
    }
}

impl<R: Into<Operand>> BitOr<R> for &Expr {
    type Output = Expr;
    fn bitor(self, rhs: R) -> Expr {
        binary(BinOp::Or, self, rhs)
    }
}

impl Neg for Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        Expr::new(self.dtype(), ExprKind::Neg(self))
    }
}

impl Neg for &Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        -self.clone()
    }
}

impl Not for Expr {
    type Output = Expr;
    fn not(self) -> Expr {
        Expr::new(DType::Bool, ExprKind::Not(self))
    }
}

impl Not for &Expr {
    type Output = Expr;
    fn not(self) -> Expr {
        !self.clone()
    }
}
