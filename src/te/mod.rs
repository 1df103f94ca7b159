//! Tensor expressions: placeholders, compute rules and reductions, assembled
//! into a checked [`ComputeDag`] with a stable [`WorkloadKey`], and evaluated
//! by the reference [`interp`]reter.

pub(crate) mod bounds;
mod builders;
mod canonical;
mod check;
mod dag;
mod dtype;
mod error;
pub(crate) mod eval;
mod expr;
mod flops;
mod host_tensor;
mod ids;
pub mod interp;
mod overload;
mod point_eval;
mod printer;
mod rewrite;
mod serial;
mod tensor;

pub use builders::{
    abs, cast, erf, exp, floordiv, floormod, log, max, min, pow, reduce_max, reduce_min, select,
    sigmoid, sqrt, sum, tanh,
};
pub use canonical::WorkloadKey;
pub use dag::{ComputeDag, MAX_TENSOR_ELEMENTS};
pub use dtype::DType;
pub use error::{DagError, OutOfBoundsRead};
pub use expr::{
    BinOp, CmpOp, Const, Expr, ExprKind, Intrinsic, IterKind, Operand, Reduce, ReduceOp, Var,
};
pub use host_tensor::{HostData, HostTensor, LengthMismatch};
pub use ids::{TensorId, VarId};
pub use interp::{InterpError, evaluate, evaluate_all};
pub use point_eval::{evaluate_points, unflatten};
pub use serial::{AxisSpec, ConstValue, DagSpec, ExprSpec, SpecError, TensorSpec};
pub use tensor::{ComputeOp, Tensor, TensorOp, compute, placeholder, reduce_axis};
