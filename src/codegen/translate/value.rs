//! Values during translation: compile-time constants are folded (so the
//! indices of unrolled loops are known), everything else is an SSA value.

use cranelift_codegen::ir::{InstBuilder, Value, condcodes::IntCC, types};

use crate::te::DType;

use super::{FnTranslator, clif_type};
use crate::te::eval::wrap;

/// A translated value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Val {
    /// A known integer (of the expression's integer dtype).
    Int(i64),
    /// A known float.
    Float(f64),
    /// A known boolean.
    Bool(bool),
    /// A value computed at run time.
    Dyn(Value),
}

impl FnTranslator<'_, '_, '_> {
    /// The value as an SSA value of `dtype`'s Cranelift type.
    pub fn materialize(&mut self, v: Val, dtype: DType) -> Value {
        let ty = clif_type(dtype);
        match v {
            Val::Dyn(x) => x,
            Val::Int(i) if dtype.is_float() => self.float_const(dtype, i as f64),
            Val::Float(f) if dtype.is_float() => self.float_const(dtype, f),
            Val::Float(f) => self.b.ins().iconst(ty, f as i64),
            Val::Int(i) => self.b.ins().iconst(ty, wrap(dtype, i)),
            Val::Bool(x) => self.b.ins().iconst(ty, i64::from(x)),
        }
    }

    fn float_const(&mut self, dtype: DType, v: f64) -> Value {
        if dtype == DType::F32 {
            self.b.ins().f32const(v as f32)
        } else {
            self.b.ins().f64const(v)
        }
    }

    /// `a + b` on `i64` index values, folded when both are known.
    pub fn index_add(&mut self, a: Val, b: Val) -> Val {
        match (a, b) {
            (Val::Int(x), Val::Int(y)) => Val::Int(x.wrapping_add(y)),
            (Val::Int(0), other) | (other, Val::Int(0)) => other,
            (Val::Int(k), Val::Dyn(x)) | (Val::Dyn(x), Val::Int(k)) => {
                Val::Dyn(self.b.ins().iadd_imm_s(x, k))
            }
            (a, b) => {
                let (x, y) = (
                    self.materialize(a, DType::I64),
                    self.materialize(b, DType::I64),
                );
                Val::Dyn(self.b.ins().iadd(x, y))
            }
        }
    }

    /// `a · k` on an `i64` index value and a constant.
    pub fn index_scale(&mut self, a: Val, k: i64) -> Val {
        match a {
            Val::Int(x) => Val::Int(x.wrapping_mul(k)),
            _ if k == 1 => a,
            _ if k == 0 => Val::Int(0),
            other => {
                let x = self.materialize(other, DType::I64);
                if k > 0 && (k as u64).is_power_of_two() {
                    Val::Dyn(self.b.ins().ishl_imm_s(x, k.trailing_zeros() as i64))
                } else {
                    Val::Dyn(self.b.ins().imul_imm_s(x, k))
                }
            }
        }
    }

    /// `clamp(v, 0, len - 1)`: a safe element index for speculative loads.
    pub fn clamp_index(&mut self, v: Val, len: i64) -> Val {
        match v {
            Val::Int(i) => Val::Int(i.clamp(0, (len - 1).max(0))),
            other => {
                let x = self.materialize(other, DType::I64);
                let zero = self.b.ins().iconst(types::I64, 0);
                let last = self.b.ins().iconst(types::I64, (len - 1).max(0));
                let low = self.b.ins().smax(x, zero);
                Val::Dyn(self.b.ins().smin(low, last))
            }
        }
    }

    /// A boolean SSA value from an integer comparison.
    pub fn int_compare(&mut self, cc: IntCC, a: Value, b: Value) -> Value {
        self.b.ins().icmp(cc, a, b)
    }
}
