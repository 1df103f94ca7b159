//! Vectorized loops: 128-bit vector code (f32x4, f64x2, i32x4, i64x2).
//!
//! A loop of extent E runs ⌊E/L⌋ chunks of L lanes, then the remainder as
//! scalar iterations. In a chunk the loop variable is `base + lane`; an
//! expression that does not use it is computed once (scalar, splat where
//! needed). Loads and stores whose flat index moves by exactly one element
//! per lane are contiguous vector accesses; others gather or scatter lane by
//! lane. Float arithmetic, FMA, comparisons with select, negation and math
//! intrinsics are vector operations; anything else is computed lane by lane. A statement a
//! chunk cannot run as vectors (a condition that varies across lanes) runs
//! lane by lane. A loop that updates one element with an associative
//! operator (a vectorized reduction loop) runs with lane-wise accumulators
//! ([`super::vector_reduce`]); any other update of one element that lanes
//! would race on runs serially.

use cranelift_codegen::ir::{Endianness, InstBuilder, MemFlagsData, Value, types};

use crate::arith::Interval;

use crate::arith::Affine;
use crate::te::{BinOp, CmpOp, DType, Expr, ExprKind, Var, VarId};
use crate::tir::{BufferId, Stmt};

use super::super::error::CodegenError;
use super::super::math::emit_intrinsic;
use super::memory::{group_type, vector_lanes};
use super::{Binding, FnTranslator, Val, clif_type};

/// Vectorized loops with at most this many chunks are fully unrolled.
pub(crate) const MAX_UNROLLED_CHUNKS: i64 = 8;

/// The vectorized loop variable in a chunk.
#[derive(Clone, Copy)]
pub(crate) struct Lane {
    pub(super) var: VarId,
    pub(super) lanes: i64,
    /// The variable's value in lane 0.
    pub(super) base: Val,
}

/// A value in a chunk: the same in every lane, or a vector.
pub(super) enum VVal {
    Uniform(Val),
    Vector(Value),
}

pub(super) fn uses(e: &Expr, var: VarId) -> bool {
    e.any(&mut |x| matches!(x.kind(), ExprKind::Var(v) if v.id() == var))
}

/// Whether the lanes of a chunk for which `cond` holds form an interval:
/// `cond` is a conjunction of orderings (`<`, `<=`, `>`, `>=`) between
/// expressions affine in the lane variable `var` (or free of it), each of
/// which holds on a half-line of lanes.
fn lanes_form_an_interval(cond: &Expr, var: VarId) -> bool {
    match cond.kind() {
        ExprKind::Binary(BinOp::And, a, b) => {
            lanes_form_an_interval(a, var) && lanes_form_an_interval(b, var)
        }
        ExprKind::Cmp(op, a, b) => {
            matches!(op, CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge)
                && [a, b]
                    .iter()
                    .all(|e| Affine::of(e).coefficient(var).is_some())
        }
        _ => !uses(cond, var),
    }
}

/// The lanes every store of `s` uses, if they agree.
fn body_lanes(s: &Stmt, func: &crate::tir::PrimFunc) -> Option<i64> {
    let mut lanes = None;
    let mut agree = true;
    s.visit(&mut |x| {
        if let Stmt::Store { buffer, .. } = x {
            let l = vector_lanes(func.buffers[*buffer].dtype);
            match lanes {
                None => lanes = Some(l),
                Some(prev) if prev != l => agree = false,
                _ => {}
            }
        }
    });
    lanes.filter(|&l| agree && l > 1)
}

/// How code generation runs a vectorized loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VectorPlan {
    /// Lanes per vector (128 bits of the stores' type).
    pub lanes: i64,
    /// Chunks of `lanes` iterations run as vectors.
    pub chunks: i64,
    /// Whether the chunks are unrolled (at most [`MAX_UNROLLED_CHUNKS`]) rather
    /// than run by a loop.
    pub unrolled: bool,
    /// Iterations after the last chunk, run as scalar code.
    pub remainder: i64,
    /// For a lane-wise reduction (the body updates one element with an
    /// associative operator, see [`super::vector_reduce`]): the vector
    /// accumulators the chunks rotate through; 0 for an ordinary loop.
    pub accumulators: i64,
}

/// Whether some store of `body` ignores `var` (every lane writes the same
/// element) to a buffer `body` also reads: a recurrence that lanes would
/// race on.
fn has_lane_recurrence(body: &Stmt, var: VarId, func: &crate::tir::PrimFunc) -> bool {
    let handles = func.handle_map();
    let mut read = Vec::new();
    body.visit_exprs(&mut |e| {
        e.visit(&mut |x| {
            if let ExprKind::Read(handle, _) = x.kind()
                && let Some(&b) = handles.get(&handle.id())
            {
                read.push(b);
            }
        })
    });
    let mut recurrence = false;
    body.visit(&mut |s| {
        if let Stmt::Store {
            buffer, indices, ..
        } = s
        {
            recurrence |= !indices.iter().any(|i| uses(i, var)) && read.contains(buffer);
        }
    });
    recurrence
}

/// The plan of `for var in 0..extent vectorized { body }`; none when its
/// stores have no common vector width or it is a recurrence other than a
/// lane-wise reduction (`strict_fp` excludes sums, whose lanes reassociate):
/// the loop then runs serially.
pub(crate) fn vector_plan(
    var: VarId,
    extent: i64,
    body: &Stmt,
    func: &crate::tir::PrimFunc,
    strict_fp: bool,
) -> Option<VectorPlan> {
    let lanes = body_lanes(body, func)?;
    let chunks = extent / lanes;
    let accumulators = match super::vector_reduce::reduction_update(body, var, func) {
        Some(update) if update.reassociates() && strict_fp => return None,
        Some(_) => chunks.min(super::vector_reduce::MAX_ACCUMULATORS),
        None if has_lane_recurrence(body, var, func) => return None,
        None => 0,
    };
    Some(VectorPlan {
        lanes,
        chunks,
        unrolled: chunks > 0 && chunks <= MAX_UNROLLED_CHUNKS,
        remainder: extent - chunks * lanes,
        accumulators,
    })
}

impl FnTranslator<'_, '_, '_> {
    /// `for var in 0..extent vectorized { body }`.
    pub fn vector_loop(&mut self, var: &Var, extent: i64, body: &Stmt) -> Result<(), CodegenError> {
        if self.copy_loop(var, extent, body)? {
            return Ok(());
        }
        let strict_fp = self.options().strict_fp;
        let Some(plan) = vector_plan(var.id(), extent, body, self.func(), strict_fp) else {
            let start = self.b.ins().iconst(types::I64, 0);
            let end = self.b.ins().iconst(types::I64, extent);
            return self.serial_loop(var.id(), start, end, body);
        };
        if plan.accumulators > 0 {
            return self.vector_reduction(var, extent, body, &plan);
        }
        let (lanes, chunks) = (plan.lanes, plan.chunks);
        if plan.unrolled {
            for c in 0..chunks {
                let lane = Lane {
                    var: var.id(),
                    lanes,
                    base: Val::Int(c * lanes),
                };
                self.vector_stmt(body, &lane)?;
            }
        } else if chunks > 0 {
            let counter = self.b.declare_var(types::I64);
            let zero = self.b.ins().iconst(types::I64, 0);
            self.b.def_var(counter, zero);
            let body_block = self.b.create_block();
            let exit = self.b.create_block();
            self.b.ins().jump(body_block, &[]);
            self.b.switch_to_block(body_block);
            let c = self.b.use_var(counter);
            let base = self.index_scale(Val::Dyn(c), lanes);
            self.index_ranges
                .insert(var.id(), Interval::new(0, (chunks - 1) * lanes));
            let lane = Lane {
                var: var.id(),
                lanes,
                base,
            };
            self.vector_stmt(body, &lane)?;
            let current = self.b.use_var(counter);
            let next = self.b.ins().iadd_imm_s(current, 1);
            self.b.def_var(counter, next);
            let more = self.b.ins().icmp_imm_s(
                cranelift_codegen::ir::condcodes::IntCC::SignedLessThan,
                next,
                chunks,
            );
            self.b.ins().brif(more, body_block, &[], exit, &[]);
            self.b.switch_to_block(exit);
        }
        for i in chunks * lanes..extent {
            self.env.insert(var.id(), Binding::Const(i));
            self.stmt(body)?;
        }
        self.env.remove(&var.id());
        Ok(())
    }

    /// `if c { then } else { otherwise }`, each side emitted by its closure.
    fn branch(
        &mut self,
        c: Value,
        then: impl FnOnce(&mut Self) -> Result<(), CodegenError>,
        otherwise: impl FnOnce(&mut Self) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        let (then_block, else_block, merge) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().brif(c, then_block, &[], else_block, &[]);
        self.b.switch_to_block(then_block);
        then(self)?;
        self.b.ins().jump(merge, &[]);
        self.b.switch_to_block(else_block);
        otherwise(self)?;
        self.b.ins().jump(merge, &[]);
        self.b.switch_to_block(merge);
        Ok(())
    }

    /// Whether `s` reads or writes a buffer promoted to variables (whose
    /// accesses were planned lane by lane where a condition guards them).
    fn touches_promoted(&self, s: &Stmt) -> bool {
        let mut promoted = false;
        s.visit(&mut |x| {
            if let Stmt::Store { buffer, .. } = x {
                promoted |= self.is_promoted(*buffer);
            }
        });
        s.visit_exprs(&mut |e| {
            e.visit(&mut |x| {
                if let ExprKind::Read(t, _) = x.kind()
                    && let Ok(buffer) = self.buffer_of(t)
                {
                    promoted |= self.is_promoted(buffer);
                }
            });
        });
        promoted
    }

    pub(super) fn bind_lane(&mut self, lane: &Lane, i: i64) {
        let v = self.index_add(lane.base, Val::Int(i));
        let binding = match v {
            Val::Int(c) => Binding::Const(c),
            other => Binding::Value(self.materialize(other, DType::I64)),
        };
        self.env.insert(lane.var, binding);
    }

    /// Runs `s` once per lane, as scalar code.
    fn per_lane_stmt(&mut self, s: &Stmt, lane: &Lane) -> Result<(), CodegenError> {
        for i in 0..lane.lanes {
            self.bind_lane(lane, i);
            self.stmt(s)?;
        }
        self.env.remove(&lane.var);
        Ok(())
    }

    fn vector_stmt(&mut self, s: &Stmt, lane: &Lane) -> Result<(), CodegenError> {
        match s {
            Stmt::Seq(items) => items.iter().try_for_each(|i| self.vector_stmt(i, lane)),
            Stmt::Store {
                buffer,
                indices,
                value,
            } if vector_lanes(self.func().buffers[*buffer].dtype) == lane.lanes => {
                self.vector_store(*buffer, indices, value, lane)
            }
            Stmt::IfThenElse {
                cond,
                then,
                otherwise,
            } if !uses(cond, lane.var) => {
                let c = match self.expr(cond, false)? {
                    Val::Bool(true) => return self.vector_stmt(then, lane),
                    Val::Bool(false) => {
                        return otherwise
                            .as_deref()
                            .map_or(Ok(()), |o| self.vector_stmt(o, lane));
                    }
                    other => self.materialize(other, DType::Bool),
                };
                self.branch(
                    c,
                    |t| t.vector_stmt(then, lane),
                    |t| {
                        otherwise
                            .as_deref()
                            .map_or(Ok(()), |o| t.vector_stmt(o, lane))
                    },
                )
            }
            Stmt::IfThenElse { cond, then, .. }
                if lanes_form_an_interval(cond, lane.var) && !self.touches_promoted(then) =>
            {
                // The lanes that pass are an interval: both ends passing
                // means every lane does (a full tile of a split that does
                // not divide), and the chunk runs as vectors.
                let [first, last] = [0, lane.lanes - 1].map(|i| {
                    self.bind_lane(lane, i);
                    let c = self.expr(cond, false);
                    self.env.remove(&lane.var);
                    c.map(|c| self.materialize(c, DType::Bool))
                });
                let all = self.b.ins().band(first?, last?);
                self.branch(
                    all,
                    |t| t.vector_stmt(then, lane),
                    |t| t.per_lane_stmt(s, lane),
                )
            }
            other => self.per_lane_stmt(other, lane),
        }
    }

    /// The flat index of `indices` in lane 0 and its step per lane.
    pub(super) fn lane_index(
        &mut self,
        buffer: BufferId,
        indices: &[Expr],
        lane: &Lane,
        speculative: bool,
    ) -> Result<(Val, Option<i64>), CodegenError> {
        let shape = self.func().buffers[buffer].shape.clone();
        let mut step = Some(0i64);
        let mut stride = 1i64;
        for (index, extent) in indices.iter().zip(&shape).rev() {
            step = match (step, Affine::of(index).coefficient(lane.var)) {
                (Some(s), Some(c)) => Some(s + c * stride),
                _ => None,
            };
            stride *= extent;
        }
        self.bind_lane(lane, 0);
        let flat = self.flat_index(buffer, indices, speculative);
        self.env.remove(&lane.var);
        Ok((flat?, step))
    }

    fn vector_store(
        &mut self,
        buffer: BufferId,
        indices: &[Expr],
        value: &Expr,
        lane: &Lane,
    ) -> Result<(), CodegenError> {
        let dtype = self.func().buffers[buffer].dtype;
        let v = self.vexpr(value, lane, false)?;
        let v = self.as_vector(v, dtype, lane.lanes);
        let (flat, step) = self.lane_index(buffer, indices, lane, false)?;
        if step == Some(1) {
            if let Some(var) = self.promoted_vector(buffer, flat, lane.lanes) {
                self.b.def_var(var, v);
                return Ok(());
            }
            if let Some(super::memory::Storage::Memory(base)) = self.storage.get(&buffer) {
                let base = *base;
                let (addr, offset) = self.address(buffer, base, flat);
                self.b.ins().store(MemFlagsData::trusted(), v, addr, offset);
                return Ok(());
            }
        }
        for i in 0..lane.lanes {
            let x = self.b.ins().extractlane(v, i as u8);
            self.bind_lane(lane, i);
            let flat = self.flat_index(buffer, indices, false)?;
            self.store_value(buffer, flat, x)?;
        }
        self.env.remove(&lane.var);
        Ok(())
    }

    pub(super) fn as_vector(&mut self, v: VVal, dtype: DType, lanes: i64) -> Value {
        match v {
            VVal::Vector(x) => x,
            VVal::Uniform(u) => {
                let x = self.materialize(u, dtype);
                self.b.ins().splat(group_type(dtype, lanes), x)
            }
        }
    }

    /// `e` computed lane by lane (scalar code) into a vector.
    pub(super) fn per_lane(
        &mut self,
        e: &Expr,
        lane: &Lane,
        speculative: bool,
    ) -> Result<Value, CodegenError> {
        let dtype = e.dtype();
        let mut vector = None;
        for i in 0..lane.lanes {
            self.bind_lane(lane, i);
            let x = self.expr(e, speculative)?;
            let x = self.materialize(x, dtype);
            vector = Some(match vector {
                None => self.b.ins().splat(group_type(dtype, lane.lanes), x),
                Some(v) => self.b.ins().insertlane(v, x, i as u8),
            });
        }
        self.env.remove(&lane.var);
        vector.ok_or_else(|| CodegenError::Unsupported("a vector of no lanes".into()))
    }

    /// `e` in a chunk; its dtype has `lane.lanes` lanes per vector.
    pub(super) fn vexpr(
        &mut self,
        e: &Expr,
        lane: &Lane,
        speculative: bool,
    ) -> Result<VVal, CodegenError> {
        if !uses(e, lane.var) {
            return Ok(VVal::Uniform(self.expr(e, speculative)?));
        }
        let dtype = e.dtype();
        Ok(VVal::Vector(match e.kind() {
            ExprKind::Read(handle, indices) => {
                self.vector_read(e, handle, indices, lane, speculative)?
            }
            ExprKind::Binary(op, a, b) if dtype.is_float() => self
                .vector_float_binary(*op, dtype, a, b, lane, speculative)?
                .map_or_else(|| self.per_lane(e, lane, speculative), Ok)?,
            ExprKind::Neg(a) if dtype.is_float() => {
                let x = self.vexpr(a, lane, speculative)?;
                let x = self.as_vector(x, dtype, lane.lanes);
                self.b.ins().fneg(x)
            }
            ExprKind::Call(f, args) if dtype.is_float() => {
                let mut values = Vec::with_capacity(args.len());
                for a in args {
                    let v = self.vexpr(a, lane, speculative)?;
                    values.push(self.as_vector(v, dtype, lane.lanes));
                }
                emit_intrinsic(&mut self.b, &mut self.imports, *f, &values)
            }
            ExprKind::Select {
                cond,
                then,
                otherwise,
            } => match self.vector_condition(cond, lane, speculative, dtype)? {
                Some(mask) => {
                    let t = self.vexpr(then, lane, true)?;
                    let t = self.as_vector(t, dtype, lane.lanes);
                    let o = self.vexpr(otherwise, lane, true)?;
                    let o = self.as_vector(o, dtype, lane.lanes);
                    self.b.ins().bitselect(mask, t, o)
                }
                None => self.per_lane(e, lane, speculative)?,
            },
            _ => self.per_lane(e, lane, speculative)?,
        }))
    }

    fn vector_float_binary(
        &mut self,
        op: BinOp,
        dtype: DType,
        a: &Expr,
        b: &Expr,
        lane: &Lane,
        speculative: bool,
    ) -> Result<Option<Value>, CodegenError> {
        let lanes = lane.lanes;
        if let Some((x, y, z)) = self.contractible(op, a, b) {
            let x = self.vexpr(x, lane, speculative)?;
            let x = self.as_vector(x, dtype, lanes);
            let y = self.vexpr(y, lane, speculative)?;
            let y = self.as_vector(y, dtype, lanes);
            let z = self.vexpr(z, lane, speculative)?;
            let z = self.as_vector(z, dtype, lanes);
            return Ok(Some(self.b.ins().fma(x, y, z)));
        }
        if !matches!(
            op,
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Min | BinOp::Max
        ) {
            return Ok(None);
        }
        let x = self.vexpr(a, lane, speculative)?;
        let x = self.as_vector(x, dtype, lanes);
        let y = self.vexpr(b, lane, speculative)?;
        let y = self.as_vector(y, dtype, lanes);
        if matches!(op, BinOp::Min | BinOp::Max) {
            let max = op == BinOp::Max;
            return Ok(Some(super::min_max::float_min_max(&mut self.b, max, x, y)));
        }
        let ins = self.b.ins();
        Ok(Some(match op {
            BinOp::Add => ins.fadd(x, y),
            BinOp::Sub => ins.fsub(x, y),
            BinOp::Mul => ins.fmul(x, y),
            _ => ins.fdiv(x, y),
        }))
    }

    /// A lane mask (as a vector of `dtype`) for `cond`, when it is a float
    /// comparison of the chunk's lane width.
    fn vector_condition(
        &mut self,
        cond: &Expr,
        lane: &Lane,
        speculative: bool,
        dtype: DType,
    ) -> Result<Option<Value>, CodegenError> {
        let ExprKind::Cmp(op, a, b) = cond.kind() else {
            return self.lane_mask(cond, lane, speculative, dtype);
        };
        let operand = a.dtype();
        if operand.is_int() {
            return self.lane_mask(cond, lane, speculative, dtype);
        }
        if !operand.is_float()
            || vector_lanes(operand) != lane.lanes
            || clif_type(operand) != clif_type(dtype)
        {
            return Ok(None);
        }
        let x = self.vexpr(a, lane, speculative)?;
        let x = self.as_vector(x, operand, lane.lanes);
        let y = self.vexpr(b, lane, speculative)?;
        let y = self.as_vector(y, operand, lane.lanes);
        let mask = self.b.ins().fcmp(super::expr::float_cc(*op), x, y);
        let flags = MemFlagsData::new().with_endianness(Endianness::Little);
        Ok(Some(self.b.ins().bitcast(
            group_type(dtype, lane.lanes),
            flags,
            mask,
        )))
    }
}
