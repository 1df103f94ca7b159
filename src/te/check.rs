//! Validation of one compute stage: reduction structure, variable scoping,
//! dtypes and read bounds.

use std::collections::HashSet;

use super::bounds::find_out_of_bounds;
use super::dtype::DType;
use super::error::{DagError, OutOfBoundsRead};
use super::expr::{BinOp, CmpOp, Expr, ExprKind, IterKind, Var};
use super::ids::VarId;
use super::tensor::{ComputeOp, Tensor};

/// Checks the rule of the compute stage `tensor`.
pub(crate) fn check_stage(tensor: &Tensor, op: &ComputeOp) -> Result<(), DagError> {
    let stage = tensor.name();
    let mut bound: HashSet<VarId> = op.axes.iter().map(Var::id).collect();
    let value = match op.body.kind() {
        ExprKind::Reduce(r) => {
            check_reduce_axes(stage, &r.axes)?;
            if r.source.dtype() == DType::Bool {
                return Err(DagError::BoolReduction {
                    stage: stage.into(),
                });
            }
            bound.extend(r.axes.iter().map(Var::id));
            &r.source
        }
        _ => &op.body,
    };
    reject_nested_reduce(stage, value)?;
    check_scoping(stage, value, &bound)?;
    check_types(stage, value)?;
    check_bounds(stage, value)
}

fn check_reduce_axes(stage: &str, axes: &[Var]) -> Result<(), DagError> {
    let mut seen = HashSet::new();
    for axis in axes {
        if axis.kind() != IterKind::Reduce {
            return Err(DagError::NotAReduceAxis {
                stage: stage.into(),
                axis: axis.name().into(),
            });
        }
        if axis.extent() < 1 {
            return Err(DagError::InvalidReduceExtent {
                stage: stage.into(),
                axis: axis.name().into(),
                extent: axis.extent(),
            });
        }
        if !seen.insert(axis.id()) {
            return Err(DagError::DuplicateReduceAxis {
                stage: stage.into(),
                axis: axis.name().into(),
            });
        }
    }
    Ok(())
}

fn reject_nested_reduce(stage: &str, e: &Expr) -> Result<(), DagError> {
    let mut found = false;
    e.visit(&mut |x| found |= matches!(x.kind(), ExprKind::Reduce(_)));
    if found {
        return Err(DagError::NestedReduce {
            stage: stage.into(),
            expr: e.to_string(),
        });
    }
    Ok(())
}

fn check_scoping(stage: &str, e: &Expr, bound: &HashSet<VarId>) -> Result<(), DagError> {
    let mut stray = None;
    e.visit(&mut |x| {
        if let ExprKind::Var(v) = x.kind()
            && stray.is_none()
            && !bound.contains(&v.id())
        {
            stray = Some(v.name().to_string());
        }
    });
    match stray {
        Some(var) => Err(DagError::UnboundVar {
            stage: stage.into(),
            var,
        }),
        None => Ok(()),
    }
}

fn operand_error(stage: &str, e: &Expr, expected: &'static str, got: DType) -> DagError {
    DagError::InvalidOperandType {
        stage: stage.into(),
        expr: e.to_string(),
        expected,
        got,
    }
}

fn same_dtype(stage: &str, e: &Expr, a: &Expr, b: &Expr) -> Result<DType, DagError> {
    if a.dtype() != b.dtype() {
        return Err(DagError::DtypeMismatch {
            stage: stage.into(),
            expr: e.to_string(),
            left: a.dtype(),
            right: b.dtype(),
        });
    }
    Ok(a.dtype())
}

fn require_bool(stage: &str, e: &Expr, cond: &Expr) -> Result<(), DagError> {
    if cond.dtype() != DType::Bool {
        return Err(DagError::NonBoolCondition {
            stage: stage.into(),
            expr: e.to_string(),
            got: cond.dtype(),
        });
    }
    Ok(())
}

fn check_types(stage: &str, e: &Expr) -> Result<(), DagError> {
    for child in e.children() {
        check_types(stage, child)?;
    }
    match e.kind() {
        ExprKind::Const(_) | ExprKind::Var(_) | ExprKind::Cast(_) | ExprKind::Reduce(_) => Ok(()),
        ExprKind::Neg(a) if a.dtype() == DType::Bool => {
            Err(operand_error(stage, e, "numeric", a.dtype()))
        }
        ExprKind::Neg(_) => Ok(()),
        ExprKind::Not(a) => require_bool(stage, e, a),
        ExprKind::Binary(op, a, b) => {
            let d = same_dtype(stage, e, a, b)?;
            match op {
                BinOp::And | BinOp::Or => require_bool(stage, e, a),
                BinOp::FloorDiv | BinOp::FloorMod if !d.is_int() => {
                    Err(operand_error(stage, e, "integer", d))
                }
                _ if d == DType::Bool && !matches!(op, BinOp::And | BinOp::Or) => {
                    Err(operand_error(stage, e, "numeric", d))
                }
                _ => Ok(()),
            }
        }
        ExprKind::Cmp(op, a, b) => {
            let d = same_dtype(stage, e, a, b)?;
            if d == DType::Bool && !matches!(op, CmpOp::Eq | CmpOp::Ne) {
                return Err(operand_error(stage, e, "numeric", d));
            }
            Ok(())
        }
        ExprKind::Select {
            cond,
            then,
            otherwise,
        } => {
            require_bool(stage, e, cond)?;
            same_dtype(stage, e, then, otherwise).map(|_| ())
        }
        ExprKind::Call(f, args) => {
            if let [a, b] = args.as_slice() {
                same_dtype(stage, e, a, b)?;
            }
            let d = args.first().map(Expr::dtype).unwrap_or(DType::Bool);
            if args.len() != f.arity() || !(d.is_float() || (f.accepts_int() && d.is_int())) {
                let expected = if f.accepts_int() { "numeric" } else { "float" };
                return Err(operand_error(stage, e, expected, d));
            }
            Ok(())
        }
        ExprKind::Read(tensor, indices) => {
            if indices.len() != tensor.ndim() {
                return Err(DagError::RankMismatch {
                    stage: stage.into(),
                    tensor: tensor.name().into(),
                    read: e.to_string(),
                    expected: tensor.ndim(),
                    got: indices.len(),
                });
            }
            match indices.iter().position(|i| !i.dtype().is_int()) {
                Some(dim) => Err(DagError::NonIntegerIndex {
                    stage: stage.into(),
                    read: e.to_string(),
                    dim,
                    got: indices[dim].dtype(),
                }),
                None => Ok(()),
            }
        }
    }
}

fn check_bounds(stage: &str, e: &Expr) -> Result<(), DagError> {
    match find_out_of_bounds(e, &[]) {
        None => Ok(()),
        Some(oob) => {
            let (tensor, index, extent) = match oob.read.kind() {
                ExprKind::Read(t, idx) => (
                    t.name().to_string(),
                    idx[oob.dim].to_string(),
                    t.shape()[oob.dim],
                ),
                _ => (String::new(), String::new(), 0),
            };
            Err(DagError::IndexOutOfBounds(Box::new(OutOfBoundsRead {
                stage: stage.into(),
                tensor,
                read: oob.read.to_string(),
                dim: oob.dim,
                index,
                range: oob.range.to_string(),
                extent,
            })))
        }
    }
}
