//! Vectorized reduction loops: `for k vectorized { acc[i] = acc[i] ⊕ term }`
//! with an associative ⊕ (float sum, max or min) runs with lane-wise
//! partial results — a few vector accumulators over the reduced axis,
//! combined and reduced horizontally once at the end, then folded into
//! `acc[i]` — the rfactor idea applied to vector lanes. Several
//! accumulators hide the latency of the vector add. A sum reassociates
//! (within `measure`'s rounding tolerance); max and min do not.

use cranelift_codegen::ir::{InstBuilder, Value, condcodes::IntCC, types};

use crate::te::{BinOp, DType, Expr, ExprKind, Var, VarId};
use crate::tir::{BufferId, PrimFunc, Stmt};

use super::super::error::CodegenError;
use super::memory::group_type;
use super::vector::{Lane, VectorPlan, uses};
use super::{Binding, FnTranslator, Val};

/// Most vector accumulators of one reduction loop (independent chains of
/// the vector add: its latency over its throughput, with room to spare).
pub(crate) const MAX_ACCUMULATORS: i64 = 4;

/// The update `buffer[indices] = buffer[indices] ⊕ term` of a reduction
/// loop, where neither the indices nor `term`'s reads of `buffer` involve
/// the loop variable (term does not read `buffer` at all).
pub(crate) struct ReductionUpdate<'a> {
    /// The accumulated buffer.
    pub buffer: BufferId,
    /// The element updated (independent of the loop variable).
    pub indices: &'a [Expr],
    /// ⊕: `Add`, `Max` or `Min`, on floats.
    pub op: BinOp,
    /// The read of the accumulator, `buffer[indices]`.
    pub accumulator: &'a Expr,
    /// What each iteration folds in.
    pub term: &'a Expr,
}

impl ReductionUpdate<'_> {
    /// Whether lane-wise partial results change the rounding (a sum does).
    pub fn reassociates(&self) -> bool {
        self.op == BinOp::Add
    }
}

/// The body of a reduction loop over `var` as an update, if it is one.
pub(crate) fn reduction_update<'a>(
    body: &'a Stmt,
    var: VarId,
    func: &PrimFunc,
) -> Option<ReductionUpdate<'a>> {
    let store = match body {
        Stmt::Seq(items) if items.len() == 1 => &items[0],
        other => other,
    };
    let Stmt::Store {
        buffer,
        indices,
        value,
    } = store
    else {
        return None;
    };
    let ExprKind::Binary(op, a, b) = value.kind() else {
        return None;
    };
    let dtype = func.buffers[*buffer].dtype;
    if !dtype.is_float()
        || !matches!(op, BinOp::Add | BinOp::Max | BinOp::Min)
        || indices.iter().any(|i| uses(i, var))
    {
        return None;
    }
    let handles = func.handle_map();
    let reads_buffer = |e: &Expr| {
        e.any(&mut |x| {
            matches!(x.kind(), ExprKind::Read(h, _) if handles.get(&h.id()) == Some(buffer))
        })
    };
    let is_accumulator = |e: &Expr| {
        matches!(e.kind(), ExprKind::Read(h, idx)
            if handles.get(&h.id()) == Some(buffer) && idx.as_slice() == indices.as_slice())
    };
    let (accumulator, term) = if is_accumulator(a) {
        (a, b)
    } else if is_accumulator(b) {
        (b, a)
    } else {
        return None;
    };
    (!reads_buffer(term) && term.dtype() == dtype).then_some(ReductionUpdate {
        buffer: *buffer,
        indices,
        op: *op,
        accumulator,
        term,
    })
}

impl FnTranslator<'_, '_, '_> {
    /// `for var in 0..extent vectorized { body }` where `body` is a
    /// reduction update and `plan` has accumulators: the chunks fold `term`
    /// into the accumulators in turn, whole rounds of them in a loop; the
    /// accumulators are combined, reduced across lanes and folded into the
    /// updated element; the iterations after the last chunk run as scalar code.
    pub fn vector_reduction(
        &mut self,
        var: &Var,
        extent: i64,
        body: &Stmt,
        plan: &VectorPlan,
    ) -> Result<(), CodegenError> {
        let func = self.func();
        let update = reduction_update(body, var.id(), func).ok_or_else(|| {
            CodegenError::Unsupported("a reduction plan for a non-reduction".into())
        })?;
        let dtype = func.buffers[update.buffer].dtype;
        let (lanes, count) = (plan.lanes, plan.accumulators);
        let vector_type = group_type(dtype, lanes);
        let identity = self.identity(update.op, dtype);
        let identity = self.b.ins().splat(vector_type, identity);
        let accumulators: Vec<_> = (0..count)
            .map(|_| {
                let v = self.b.declare_var(vector_type);
                self.b.def_var(v, identity);
                v
            })
            .collect();
        let rounds = plan.chunks / count;
        let fold_round = |t: &mut Self, round_base: Val, chunks: i64| -> Result<(), CodegenError> {
            for (a, &acc) in accumulators.iter().enumerate().take(chunks as usize) {
                let base = t.index_add(round_base, Val::Int(a as i64 * lanes));
                let lane = Lane {
                    var: var.id(),
                    lanes,
                    base,
                };
                let term = t.vexpr(update.term, &lane, false)?;
                let term = t.as_vector(term, dtype, lanes);
                let current = t.b.use_var(acc);
                let next = t.combine(update.op, current, term);
                t.b.def_var(acc, next);
            }
            t.env.remove(&var.id());
            Ok(())
        };
        if rounds == 1 {
            fold_round(self, Val::Int(0), count)?;
        } else if rounds > 1 {
            let counter = self.b.declare_var(types::I64);
            let zero = self.b.ins().iconst(types::I64, 0);
            self.b.def_var(counter, zero);
            let (round_block, exit) = (self.b.create_block(), self.b.create_block());
            self.b.ins().jump(round_block, &[]);
            self.b.switch_to_block(round_block);
            let r = self.b.use_var(counter);
            let round_base = self.index_scale(Val::Dyn(r), count * lanes);
            fold_round(self, round_base, count)?;
            let current = self.b.use_var(counter);
            let next = self.b.ins().iadd_imm_s(current, 1);
            self.b.def_var(counter, next);
            let more = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, next, rounds);
            self.b.ins().brif(more, round_block, &[], exit, &[]);
            self.b.switch_to_block(exit);
        }
        fold_round(self, Val::Int(rounds * count * lanes), plan.chunks % count)?;
        let mut partials: Vec<Value> = accumulators.iter().map(|&a| self.b.use_var(a)).collect();
        let whole = self.tree(update.op, &mut partials);
        let mut lane_values: Vec<Value> = (0..lanes)
            .map(|i| self.b.ins().extractlane(whole, i as u8))
            .collect();
        let across = self.tree(update.op, &mut lane_values);
        let old = self.expr(update.accumulator, false)?;
        let old = self.materialize(old, dtype);
        let new = self.combine(update.op, old, across);
        let flat = self.flat_index(update.buffer, update.indices, false)?;
        self.store_value(update.buffer, flat, new)?;
        for i in plan.chunks * lanes..extent {
            self.env.insert(var.id(), Binding::Const(i));
            self.stmt(body)?;
        }
        self.env.remove(&var.id());
        Ok(())
    }

    /// The identity of ⊕ on `dtype`, as a scalar.
    fn identity(&mut self, op: BinOp, dtype: DType) -> Value {
        let value = match op {
            BinOp::Max => f64::NEG_INFINITY,
            BinOp::Min => f64::INFINITY,
            _ => 0.0,
        };
        self.materialize(Val::Float(value), dtype)
    }

    /// `x ⊕ y` on floats (scalars or vectors).
    fn combine(&mut self, op: BinOp, x: Value, y: Value) -> Value {
        match op {
            BinOp::Max | BinOp::Min => {
                super::min_max::float_min_max(&mut self.b, op == BinOp::Max, x, y)
            }
            _ => self.b.ins().fadd(x, y),
        }
    }

    /// `values` combined by ⊕ pairwise (a balanced tree, not a chain).
    fn tree(&mut self, op: BinOp, values: &mut Vec<Value>) -> Value {
        while values.len() > 1 {
            let half = values.len().div_ceil(2);
            for i in 0..values.len() / 2 {
                values[i] = self.combine(op, values[i], values[i + half]);
            }
            values.truncate(half);
        }
        values[0]
    }
}
