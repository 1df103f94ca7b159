//! Passes over the loop IR: auto-unroll marking, removal of unit loops,
//! simplification of every expression, removal of decided conditionals
//! (their order is [`LOWERING_PASSES`](super::LOWERING_PASSES)).

use std::collections::HashMap;

use crate::te::{Const, Expr, ExprKind, VarId};

use super::ir::{ForKind, PrimFunc, Stmt};
use super::simplify::simplify;

/// How many stores `s` executes at most (every branch taken): the work an
/// interpreter or a timing run of it does.
pub fn store_count(s: &Stmt) -> u64 {
    steps(s)
}

/// Iterations of the innermost statements `s` runs.
fn steps(s: &Stmt) -> u64 {
    match s {
        Stmt::For { extent, body, .. } => (*extent as u64).saturating_mul(steps(body)),
        Stmt::Seq(items) => items.iter().map(steps).fold(0, u64::saturating_add),
        Stmt::Store { .. } => 1,
        // One multiply-accumulate per (i, j, k), as the loops it replaces.
        Stmt::MicroKernelCall(call) => (call.m * call.n * call.kc).max(1) as u64,
        // One function value per element, as the loop it came from.
        Stmt::RowMathCall(call) => call.count.max(1) as u64,
        // One element copied per (row, column), as the loops it replaces.
        Stmt::PackCall(call) => (call.extents[0] * call.extents[1]).max(1) as u64,
        // One multiply-accumulate per (output, window row, window column).
        Stmt::StencilCall(call) => (call.extents.iter().product::<i64>() * call.rows).max(1) as u64,
        Stmt::IfThenElse {
            then, otherwise, ..
        } => steps(then).max(otherwise.as_deref().map_or(0, steps)),
        Stmt::Allocate { body, .. } | Stmt::Let { body, .. } => steps(body),
    }
}

/// `pragma auto_unroll_max_step`: a serial loop whose variable has a
/// `max_step` in `max_steps` becomes unrolled when its nest runs at most
/// `max_step` iterations.
pub fn mark_auto_unroll(s: &mut Stmt, max_steps: &HashMap<VarId, u32>) {
    match s {
        Stmt::For {
            var, kind, body, ..
        } => {
            mark_auto_unroll(body, max_steps);
            let max_step = max_steps.get(&var.id()).copied();
            if *kind == ForKind::Serial
                && max_step.is_some_and(|m| steps(s) <= m as u64)
                && let Stmt::For { kind, .. } = s
            {
                *kind = ForKind::Unrolled;
            }
        }
        Stmt::Seq(items) => items
            .iter_mut()
            .for_each(|i| mark_auto_unroll(i, max_steps)),
        Stmt::IfThenElse {
            then, otherwise, ..
        } => {
            mark_auto_unroll(then, max_steps);
            if let Some(o) = otherwise {
                mark_auto_unroll(o, max_steps);
            }
        }
        Stmt::Allocate { body, .. } | Stmt::Let { body, .. } => mark_auto_unroll(body, max_steps),
        Stmt::Store { .. }
        | Stmt::MicroKernelCall(_)
        | Stmt::RowMathCall(_)
        | Stmt::PackCall(_)
        | Stmt::StencilCall(_) => {}
    }
}

/// Applies `f` to every expression of `s`, rebuilding the tree.
pub fn map_exprs(s: Stmt, f: &mut dyn FnMut(&Expr) -> Expr) -> Stmt {
    let s = map_own_exprs(s, f);
    map_children(s, &mut |child| map_exprs(child, f))
}

/// Applies `f` to the expressions of `s` itself (a store's indices and
/// value, a condition, a let's value, a call's offsets and counts), not to
/// those of its sub-statements.
pub fn map_own_exprs(s: Stmt, f: &mut dyn FnMut(&Expr) -> Expr) -> Stmt {
    match s {
        Stmt::Store {
            buffer,
            indices,
            value,
        } => Stmt::Store {
            buffer,
            indices: indices.iter().map(&mut *f).collect(),
            value: f(&value),
        },
        Stmt::IfThenElse {
            cond,
            then,
            otherwise,
        } => Stmt::IfThenElse {
            cond: f(&cond),
            then,
            otherwise,
        },
        Stmt::Let { var, value, body } => Stmt::Let {
            value: f(&value),
            var,
            body,
        },
        Stmt::MicroKernelCall(mut call) => {
            for operand in call.operands_mut() {
                operand.offset = f(&operand.offset);
            }
            for count in call.counts.iter_mut() {
                *count = f(count);
            }
            call.accumulate = f(&call.accumulate);
            Stmt::MicroKernelCall(call)
        }
        Stmt::PackCall(mut call) => {
            for operand in [&mut call.src, &mut call.dst] {
                operand.offset = f(&operand.offset);
            }
            for count in call.counts.iter_mut() {
                *count = f(count);
            }
            Stmt::PackCall(call)
        }
        Stmt::StencilCall(mut call) => {
            for operand in [&mut call.out, &mut call.input, &mut call.weight] {
                operand.offset = f(&operand.offset);
            }
            for addend in call.epilogue.iter_mut().flat_map(|e| e.addends.iter_mut()) {
                addend.offset = f(&addend.offset);
            }
            for count in call.counts.iter_mut() {
                *count = f(count);
            }
            call.accumulate = f(&call.accumulate);
            Stmt::StencilCall(call)
        }
        other => other,
    }
}

/// Rebuilds `s` with `f` applied to each of its direct sub-statements.
pub fn map_children(s: Stmt, f: &mut dyn FnMut(Stmt) -> Stmt) -> Stmt {
    match s {
        Stmt::For {
            var,
            extent,
            kind,
            body,
        } => Stmt::For {
            var,
            extent,
            kind,
            body: Box::new(f(*body)),
        },
        Stmt::Seq(items) => Stmt::Seq(items.into_iter().map(f).collect()),
        Stmt::IfThenElse {
            cond,
            then,
            otherwise,
        } => Stmt::IfThenElse {
            cond,
            then: Box::new(f(*then)),
            otherwise: otherwise.map(|o| Box::new(f(*o))),
        },
        Stmt::Allocate { buffer, body } => Stmt::Allocate {
            buffer,
            body: Box::new(f(*body)),
        },
        Stmt::Let { var, value, body } => Stmt::Let {
            var,
            value,
            body: Box::new(f(*body)),
        },
        leaf @ (Stmt::Store { .. }
        | Stmt::MicroKernelCall(_)
        | Stmt::RowMathCall(_)
        | Stmt::PackCall(_)
        | Stmt::StencilCall(_)) => leaf,
    }
}

/// Loops of extent 1 are replaced by their body with the variable set to 0.
pub fn remove_unit_loops(s: Stmt) -> Stmt {
    match s {
        Stmt::For {
            var,
            extent: 1,
            body,
            ..
        } => {
            let mut map = HashMap::new();
            map.insert(var.id(), Expr::i64(0));
            let body = map_exprs(*body, &mut |e| e.substitute(&map));
            remove_unit_loops(body)
        }
        other => map_children(other, &mut remove_unit_loops),
    }
}

/// Conditionals whose condition is a constant are replaced by the branch
/// taken; empty statements are dropped from sequences.
pub fn remove_decided_branches(s: Stmt) -> Stmt {
    match s {
        Stmt::IfThenElse {
            cond,
            then,
            otherwise,
        } => match cond.kind() {
            ExprKind::Const(Const::Bool(true)) => remove_decided_branches(*then),
            ExprKind::Const(Const::Bool(false)) => {
                otherwise.map_or(Stmt::nop(), |o| remove_decided_branches(*o))
            }
            _ => map_children(
                Stmt::IfThenElse {
                    cond,
                    then,
                    otherwise,
                },
                &mut remove_decided_branches,
            ),
        },
        Stmt::Seq(items) => {
            let mut items: Vec<Stmt> = items
                .into_iter()
                .map(remove_decided_branches)
                .filter(|i| !matches!(i, Stmt::Seq(v) if v.is_empty()))
                .collect();
            if items.len() == 1 {
                items.pop().unwrap_or_else(Stmt::nop)
            } else {
                Stmt::Seq(items)
            }
        }
        other => map_children(other, &mut remove_decided_branches),
    }
}

/// Every expression of `s` simplified (guards proven true become `true`).
pub fn simplify_exprs(s: Stmt) -> Stmt {
    map_exprs(s, &mut |e| simplify(e))
}

/// The simplification passes of [`LOWERING_PASSES`](super::LOWERING_PASSES),
/// in order, applied to `func`.
pub fn simplify_func(mut func: PrimFunc) -> PrimFunc {
    func.body = super::lower::simplify_body(func.body);
    func
}
