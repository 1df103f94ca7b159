//! Expressions: constant folding for integers, float arithmetic with FMA
//! contraction, comparisons, select (both branches evaluated; their loads
//! are clamped into their buffers), casts, intrinsics and loads.

use cranelift_codegen::ir::{InstBuilder, Value, condcodes::FloatCC, condcodes::IntCC, types};

use crate::te::{BinOp, CmpOp, Const, DType, Expr, ExprKind};

use super::super::error::CodegenError;
use super::super::math::emit_intrinsic;
use super::{Binding, FnTranslator, Val, clif_type};
use crate::te::eval::{compare, int_binary, wrap};

/// Folds an integer operation on constants with the interpreter's semantics
/// (wrapping; none for a division by zero, which is left to run time).
fn fold_int(op: BinOp, dtype: DType, a: i64, b: i64) -> Option<i64> {
    match op {
        BinOp::And | BinOp::Or => None,
        _ => int_binary(op, dtype, a, b).ok(),
    }
}

pub(crate) fn int_cc(op: CmpOp) -> IntCC {
    match op {
        CmpOp::Eq => IntCC::Equal,
        CmpOp::Ne => IntCC::NotEqual,
        CmpOp::Lt => IntCC::SignedLessThan,
        CmpOp::Le => IntCC::SignedLessThanOrEqual,
        CmpOp::Gt => IntCC::SignedGreaterThan,
        CmpOp::Ge => IntCC::SignedGreaterThanOrEqual,
    }
}

pub(crate) fn float_cc(op: CmpOp) -> FloatCC {
    match op {
        CmpOp::Eq => FloatCC::Equal,
        CmpOp::Ne => FloatCC::NotEqual,
        CmpOp::Lt => FloatCC::LessThan,
        CmpOp::Le => FloatCC::LessThanOrEqual,
        CmpOp::Gt => FloatCC::GreaterThan,
        CmpOp::Ge => FloatCC::GreaterThanOrEqual,
    }
}

impl FnTranslator<'_, '_, '_> {
    /// `(x, y, z)` when `op(a, b)` is `x·y + z` and FMA contraction is on.
    ///
    /// An accumulator held in registers (a read of a promoted buffer) is not
    /// contracted: Cranelift's x64 `fma` ties its result to a multiplicand,
    /// so every such FMA costs a register copy and the accumulators rotate
    /// at each loop back-edge, whereas `fadd(acc, x·y)` keeps each
    /// accumulator in place. Measured on the 2×16 matmul tile (1024³, one
    /// thread): 37.4 GFLOP/s with mul + add against 21–30 with FMA.
    pub fn contractible<'e>(
        &self,
        op: BinOp,
        a: &'e Expr,
        b: &'e Expr,
    ) -> Option<(&'e Expr, &'e Expr, &'e Expr)> {
        if self.options().strict_fp || op != BinOp::Add {
            return None;
        }
        let (x, y, addend) = match (a.kind(), b.kind()) {
            (ExprKind::Binary(BinOp::Mul, x, y), _) => (x, y, b),
            (_, ExprKind::Binary(BinOp::Mul, x, y)) => (x, y, a),
            _ => return None,
        };
        let in_registers = match addend.kind() {
            ExprKind::Read(handle, _) => self
                .buffer_of(handle)
                .is_ok_and(|buffer| self.is_promoted(buffer)),
            _ => false,
        };
        (!in_registers).then_some((x, y, addend))
    }

    /// Emits `e`. In a `speculative` context (a select branch, the right side
    /// of `&&`/`||`) loads are clamped into their buffer, since the value may
    /// be discarded where its index is out of range.
    pub fn expr(&mut self, e: &Expr, speculative: bool) -> Result<Val, CodegenError> {
        let dtype = e.dtype();
        Ok(match e.kind() {
            ExprKind::Const(Const::Int(v)) => Val::Int(*v),
            ExprKind::Const(Const::Float(v)) => Val::Float(*v),
            ExprKind::Const(Const::Bool(v)) => Val::Bool(*v),
            ExprKind::Var(v) => match self.env.get(&v.id()) {
                Some(Binding::Const(c)) => Val::Int(*c),
                Some(Binding::Var(var)) => Val::Dyn(self.b.use_var(*var)),
                Some(Binding::Value(x)) => Val::Dyn(*x),
                None => {
                    return Err(CodegenError::Unsupported(format!(
                        "variable '{}' used outside its loop",
                        v.name()
                    )));
                }
            },
            ExprKind::Neg(a) => match (self.expr(a, speculative)?, dtype.is_float()) {
                (Val::Int(x), _) => Val::Int(wrap(dtype, x.wrapping_neg())),
                (Val::Float(x), _) => Val::Float(-x),
                (v, true) => {
                    let x = self.materialize(v, dtype);
                    Val::Dyn(self.b.ins().fneg(x))
                }
                (v, false) => {
                    let x = self.materialize(v, dtype);
                    Val::Dyn(self.b.ins().ineg(x))
                }
            },
            ExprKind::Not(a) => match self.expr(a, speculative)? {
                Val::Bool(x) => Val::Bool(!x),
                v => {
                    let x = self.materialize(v, DType::Bool);
                    Val::Dyn(self.b.ins().bxor_imm_s(x, 1))
                }
            },
            ExprKind::Binary(op, a, b) => self.binary(*op, dtype, a, b, speculative)?,
            ExprKind::Cmp(op, a, b) => self.compare(*op, a, b, speculative)?,
            ExprKind::Select {
                cond,
                then,
                otherwise,
            } => match self.expr(cond, speculative)? {
                Val::Bool(true) => self.expr(then, speculative)?,
                Val::Bool(false) => self.expr(otherwise, speculative)?,
                c => {
                    let c = self.materialize(c, DType::Bool);
                    let t = self.expr(then, true)?;
                    let t = self.materialize(t, dtype);
                    let o = self.expr(otherwise, true)?;
                    let o = self.materialize(o, dtype);
                    Val::Dyn(self.b.ins().select(c, t, o))
                }
            },
            ExprKind::Cast(a) => {
                let v = self.expr(a, speculative)?;
                self.cast(v, a.dtype(), dtype)
            }
            ExprKind::Call(f, args) => {
                let mut values = Vec::with_capacity(args.len());
                for a in args {
                    let v = self.expr(a, speculative)?;
                    values.push(self.materialize(v, a.dtype()));
                }
                Val::Dyn(emit_intrinsic(&mut self.b, &mut self.imports, *f, &values))
            }
            ExprKind::Read(handle, indices) => self.load(handle, indices, speculative)?,
            ExprKind::Reduce(_) => {
                return Err(CodegenError::Unsupported(
                    "a reduction in the loop IR".into(),
                ));
            }
        })
    }

    fn binary(
        &mut self,
        op: BinOp,
        dtype: DType,
        a: &Expr,
        b: &Expr,
        speculative: bool,
    ) -> Result<Val, CodegenError> {
        if matches!(op, BinOp::And | BinOp::Or) {
            let x = self.expr(a, speculative)?;
            let y = self.expr(b, true)?;
            return Ok(match (op, x, y) {
                (BinOp::And, Val::Bool(false), _) | (BinOp::Or, Val::Bool(true), _) => x,
                (_, Val::Bool(_), other) => other,
                (_, other, Val::Bool(true)) if op == BinOp::And => other,
                (_, other, Val::Bool(false)) if op == BinOp::Or => other,
                (_, x, y) => {
                    let (x, y) = (
                        self.materialize(x, DType::Bool),
                        self.materialize(y, DType::Bool),
                    );
                    Val::Dyn(if op == BinOp::And {
                        self.b.ins().band(x, y)
                    } else {
                        self.b.ins().bor(x, y)
                    })
                }
            });
        }
        if dtype.is_float() {
            return self.float_binary(op, dtype, a, b, speculative);
        }
        let x = self.expr(a, speculative)?;
        let y = self.expr(b, speculative)?;
        if let (Val::Int(p), Val::Int(q)) = (x, y)
            && let Some(v) = fold_int(op, dtype, p, q)
        {
            return Ok(Val::Int(v));
        }
        if dtype == DType::I64 {
            match (op, x, y) {
                (BinOp::Add, ..) => return Ok(self.index_add(x, y)),
                (BinOp::Mul, v, Val::Int(k)) | (BinOp::Mul, Val::Int(k), v) => {
                    return Ok(self.index_scale(v, k));
                }
                _ => {}
            }
        }
        let (p, q) = (self.materialize(x, dtype), self.materialize(y, dtype));
        let divisor = match y {
            Val::Int(k) => Some(k),
            _ => None,
        };
        let ins = self.b.ins();
        Ok(Val::Dyn(match op {
            BinOp::Add => ins.iadd(p, q),
            BinOp::Sub => ins.isub(p, q),
            BinOp::Mul => ins.imul(p, q),
            BinOp::Div => ins.sdiv(p, q),
            BinOp::Min => ins.smin(p, q),
            BinOp::Max => ins.smax(p, q),
            BinOp::FloorDiv => match divisor {
                Some(k) if k > 0 && (k as u64).is_power_of_two() => {
                    ins.sshr_imm_s(p, k.trailing_zeros() as i64)
                }
                _ => self.floor_div_dyn(p, q),
            },
            BinOp::FloorMod => match divisor {
                Some(k) if k > 0 && (k as u64).is_power_of_two() => ins.band_imm_s(p, k - 1),
                _ => {
                    let d = self.floor_div_dyn(p, q);
                    let m = self.b.ins().imul(d, q);
                    self.b.ins().isub(p, m)
                }
            },
            BinOp::And | BinOp::Or => {
                return Err(CodegenError::Unsupported(
                    "logical operator on integers".into(),
                ));
            }
        }))
    }

    /// `floor(p / q)` = `sdiv(p, q) - ((srem(p, q) != 0) & ((p ^ q) < 0))`.
    fn floor_div_dyn(&mut self, p: Value, q: Value) -> Value {
        let ins = self.b.ins();
        let quotient = ins.sdiv(p, q);
        let remainder = self.b.ins().srem(p, q);
        let inexact = self.b.ins().icmp_imm_s(IntCC::NotEqual, remainder, 0);
        let signs = self.b.ins().bxor(p, q);
        let negative = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, signs, 0);
        let adjust = self.b.ins().band(inexact, negative);
        let ty = self.b.func.dfg.value_type(p);
        let adjust = self.b.ins().uextend(ty, adjust);
        self.b.ins().isub(quotient, adjust)
    }

    fn float_binary(
        &mut self,
        op: BinOp,
        dtype: DType,
        a: &Expr,
        b: &Expr,
        speculative: bool,
    ) -> Result<Val, CodegenError> {
        if let Some((x, y, addend)) = self.contractible(op, a, b) {
            let x = self.expr(x, speculative)?;
            let y = self.expr(y, speculative)?;
            let z = self.expr(addend, speculative)?;
            let (x, y, z) = (
                self.materialize(x, dtype),
                self.materialize(y, dtype),
                self.materialize(z, dtype),
            );
            return Ok(Val::Dyn(self.b.ins().fma(x, y, z)));
        }
        let x = self.expr(a, speculative)?;
        let y = self.expr(b, speculative)?;
        let (p, q) = (self.materialize(x, dtype), self.materialize(y, dtype));
        if matches!(op, BinOp::Min | BinOp::Max) {
            let max = op == BinOp::Max;
            return Ok(Val::Dyn(super::min_max::float_min_max(
                &mut self.b,
                max,
                p,
                q,
            )));
        }
        let ins = self.b.ins();
        Ok(Val::Dyn(match op {
            BinOp::Add => ins.fadd(p, q),
            BinOp::Sub => ins.fsub(p, q),
            BinOp::Mul => ins.fmul(p, q),
            BinOp::Div => ins.fdiv(p, q),
            other => {
                return Err(CodegenError::Unsupported(format!(
                    "{} on floats",
                    other.symbol()
                )));
            }
        }))
    }

    fn compare(
        &mut self,
        op: CmpOp,
        a: &Expr,
        b: &Expr,
        speculative: bool,
    ) -> Result<Val, CodegenError> {
        let dtype = a.dtype();
        let x = self.expr(a, speculative)?;
        let y = self.expr(b, speculative)?;
        match (x, y) {
            (Val::Int(p), Val::Int(q)) => return Ok(Val::Bool(compare(op, p, q))),
            (Val::Float(p), Val::Float(q)) => return Ok(Val::Bool(compare(op, p, q))),
            (Val::Bool(p), Val::Bool(q)) => return Ok(Val::Bool(compare(op, p, q))),
            _ => {}
        }
        let (p, q) = (self.materialize(x, dtype), self.materialize(y, dtype));
        Ok(Val::Dyn(if dtype.is_float() {
            self.b.ins().fcmp(float_cc(op), p, q)
        } else {
            self.int_compare(int_cc(op), p, q)
        }))
    }

    fn cast(&mut self, v: Val, from: DType, to: DType) -> Val {
        match v {
            Val::Int(i) if to.is_int() => return Val::Int(wrap(to, i)),
            Val::Int(i) if to.is_float() => return Val::Float(i as f64),
            Val::Float(f) if to.is_float() => {
                return Val::Float(if to == DType::F32 { f as f32 as f64 } else { f });
            }
            Val::Bool(b) if to == DType::Bool => return Val::Bool(b),
            _ => {}
        }
        if from == to {
            return v;
        }
        let x = self.materialize(v, from);
        let ty = clif_type(to);
        let ins = self.b.ins();
        Val::Dyn(match (from, to) {
            (DType::F32, DType::F64) => ins.fpromote(types::F64, x),
            (DType::F64, DType::F32) => ins.fdemote(types::F32, x),
            (f, t) if f.is_float() && t.is_int() => ins.fcvt_to_sint_sat(ty, x),
            (f, t) if f.is_int() && t.is_float() => ins.fcvt_from_sint(ty, x),
            (DType::I32, DType::I64) => ins.sextend(types::I64, x),
            (DType::I64, DType::I32) => ins.ireduce(types::I32, x),
            (DType::Bool, t) if t.is_int() => ins.uextend(ty, x),
            (DType::Bool, t) => {
                let wide = ins.uextend(types::I32, x);
                self.b.ins().fcvt_from_sint(clif_type(t), wide)
            }
            (f, _) if f.is_float() => {
                let zero = if f == DType::F32 {
                    ins.f32const(0.0)
                } else {
                    ins.f64const(0.0)
                };
                self.b.ins().fcmp(FloatCC::NotEqual, x, zero)
            }
            _ => ins.icmp_imm_s(IntCC::NotEqual, x, 0),
        })
    }
}
