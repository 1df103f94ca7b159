//! Free functions and methods that build expressions: select, min/max,
//! floor division, casts, math intrinsics, comparisons and reductions.

use super::dtype::DType;
use super::expr::{BinOp, CmpOp, Expr, ExprKind, Intrinsic, Operand, Reduce, ReduceOp, unify};

pub(crate) fn binary(op: BinOp, a: impl Into<Operand>, b: impl Into<Operand>) -> Expr {
    let (a, b) = unify(a.into(), b.into());
    Expr::new(a.dtype(), ExprKind::Binary(op, a, b))
}

fn compare(op: CmpOp, a: impl Into<Operand>, b: impl Into<Operand>) -> Expr {
    let (a, b) = unify(a.into(), b.into());
    Expr::new(DType::Bool, ExprKind::Cmp(op, a, b))
}

/// `if cond { then } else { otherwise }`; only the chosen branch is evaluated,
/// so the other may read out of bounds (this is how padding is written).
pub fn select(
    cond: impl Into<Operand>,
    then: impl Into<Operand>,
    otherwise: impl Into<Operand>,
) -> Expr {
    let cond = cond.into().into_expr_hint(Some(DType::Bool));
    let (then, otherwise) = unify(then.into(), otherwise.into());
    Expr::new(
        then.dtype(),
        ExprKind::Select {
            cond,
            then,
            otherwise,
        },
    )
}

/// The larger of two values (elementwise; see [`reduce_max`] for the reduction).
pub fn max(a: impl Into<Operand>, b: impl Into<Operand>) -> Expr {
    binary(BinOp::Max, a, b)
}

/// The smaller of two values (elementwise; see [`reduce_min`] for the reduction).
pub fn min(a: impl Into<Operand>, b: impl Into<Operand>) -> Expr {
    binary(BinOp::Min, a, b)
}

/// Integer division rounding towards negative infinity.
pub fn floordiv(a: impl Into<Operand>, b: impl Into<Operand>) -> Expr {
    binary(BinOp::FloorDiv, a, b)
}

/// Remainder of [`floordiv`]; has the sign of the divisor.
pub fn floormod(a: impl Into<Operand>, b: impl Into<Operand>) -> Expr {
    binary(BinOp::FloorMod, a, b)
}

/// Converts `value` to `dtype` (float→int truncates towards zero, saturating).
pub fn cast(dtype: DType, value: impl Into<Operand>) -> Expr {
    let value = value.into().into_expr();
    Expr::new(dtype, ExprKind::Cast(value))
}

fn call1(f: Intrinsic, x: impl Into<Operand>) -> Expr {
    let x = x.into().into_expr();
    Expr::new(x.dtype(), ExprKind::Call(f, vec![x]))
}

/// e^x
pub fn exp(x: impl Into<Operand>) -> Expr {
    call1(Intrinsic::Exp, x)
}

/// Natural logarithm.
pub fn log(x: impl Into<Operand>) -> Expr {
    call1(Intrinsic::Log, x)
}

/// Square root.
pub fn sqrt(x: impl Into<Operand>) -> Expr {
    call1(Intrinsic::Sqrt, x)
}

/// Hyperbolic tangent.
pub fn tanh(x: impl Into<Operand>) -> Expr {
    call1(Intrinsic::Tanh, x)
}

/// The logistic function 1 / (1 + e^-x).
pub fn sigmoid(x: impl Into<Operand>) -> Expr {
    call1(Intrinsic::Sigmoid, x)
}

/// Absolute value.
pub fn abs(x: impl Into<Operand>) -> Expr {
    call1(Intrinsic::Abs, x)
}

/// The error function.
pub fn erf(x: impl Into<Operand>) -> Expr {
    call1(Intrinsic::Erf, x)
}

/// x^y for floats.
pub fn pow(x: impl Into<Operand>, y: impl Into<Operand>) -> Expr {
    let (x, y) = unify(x.into(), y.into());
    Expr::new(x.dtype(), ExprKind::Call(Intrinsic::Pow, vec![x, y]))
}

fn reduce<'a>(
    op: ReduceOp,
    source: impl Into<Operand>,
    axes: impl IntoIterator<Item = &'a Expr>,
) -> Expr {
    let source = source.into().into_expr();
    let axes = axes
        .into_iter()
        .map(|a| match a.as_var() {
            Some(v) => v.clone(),
            // Not a variable: keep a marker the DAG check reports with its text.
            None => super::expr::Var::invalid_axis(a),
        })
        .collect();
    Expr::new(
        source.dtype(),
        ExprKind::Reduce(Reduce { op, source, axes }),
    )
}

/// Sum of `source` over the reduction axes `axes` (made by [`reduce_axis`](super::reduce_axis)).
pub fn sum<'a>(source: impl Into<Operand>, axes: impl IntoIterator<Item = &'a Expr>) -> Expr {
    reduce(ReduceOp::Sum, source, axes)
}

/// Maximum of `source` over the reduction axes `axes`.
pub fn reduce_max<'a>(
    source: impl Into<Operand>,
    axes: impl IntoIterator<Item = &'a Expr>,
) -> Expr {
    reduce(ReduceOp::Max, source, axes)
}

/// Minimum of `source` over the reduction axes `axes`.
pub fn reduce_min<'a>(
    source: impl Into<Operand>,
    axes: impl IntoIterator<Item = &'a Expr>,
) -> Expr {
    reduce(ReduceOp::Min, source, axes)
}

impl Expr {
    /// `self < other`
    pub fn lt(&self, other: impl Into<Operand>) -> Expr {
        compare(CmpOp::Lt, self, other)
    }

    /// `self <= other`
    pub fn le(&self, other: impl Into<Operand>) -> Expr {
        compare(CmpOp::Le, self, other)
    }

    /// `self > other`
    pub fn gt(&self, other: impl Into<Operand>) -> Expr {
        compare(CmpOp::Gt, self, other)
    }

    /// `self >= other`
    pub fn ge(&self, other: impl Into<Operand>) -> Expr {
        compare(CmpOp::Ge, self, other)
    }

    /// `self == other` (named so to leave `==` for structural equality).
    pub fn equal(&self, other: impl Into<Operand>) -> Expr {
        compare(CmpOp::Eq, self, other)
    }

    /// `self != other`
    pub fn not_equal(&self, other: impl Into<Operand>) -> Expr {
        compare(CmpOp::Ne, self, other)
    }

    /// Logical and of two booleans (also `a & b`).
    pub fn and(&self, other: impl Into<Operand>) -> Expr {
        binary(BinOp::And, self, other)
    }

    /// Logical or of two booleans (also `a | b`).
    pub fn or(&self, other: impl Into<Operand>) -> Expr {
        binary(BinOp::Or, self, other)
    }

    /// Converts to `dtype`.
    pub fn cast(&self, dtype: DType) -> Expr {
        cast(dtype, self)
    }
}
