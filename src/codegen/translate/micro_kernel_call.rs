//! A micro-kernel call (a tensorized block): the operands' addresses and
//! strides, passed to `tessera_micro_kernel_<name>` with the C ABI of
//! [`GemmFn`](crate::runtime::micro_kernels::GemmFn).

use std::mem::{offset_of, size_of};

use cranelift_codegen::ir::{
    InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, Value, types,
};

use crate::runtime::micro_kernels::{Addend, CLAMP_LOWER, CLAMP_UPPER, Epilogue, MAX_ADDENDS};
use crate::te::{DType, Expr};
use crate::tir::{BufferId, KernelEpilogue, MicroKernelCall, MicroKernelOperand};

use super::super::error::CodegenError;
use super::super::micro_kernel_symbols::micro_kernel_symbol;
use super::FnTranslator;
use super::memory::Storage;

impl FnTranslator<'_, '_, '_> {
    /// The address of `operand`'s element (0, 0).
    pub(super) fn operand_address(
        &mut self,
        operand: &MicroKernelOperand,
    ) -> Result<Value, CodegenError> {
        self.element_address(operand.buffer, &operand.offset)
    }

    /// The address of element `offset` (flat) of f32 buffer `id`, which a
    /// runtime call reads or writes.
    pub(super) fn element_address(
        &mut self,
        id: BufferId,
        offset: &Expr,
    ) -> Result<Value, CodegenError> {
        let buffer = &self.func().buffers[id];
        let name = buffer.name.clone();
        if buffer.dtype != DType::F32 {
            return Err(CodegenError::Unsupported(format!(
                "operand '{name}' of a runtime call is {}, not f32",
                buffer.dtype
            )));
        }
        let base = match self.storage.get(&id) {
            Some(Storage::Memory(base)) => *base,
            _ => {
                return Err(CodegenError::Unsupported(format!(
                    "operand '{name}' of a runtime call is not in memory"
                )));
            }
        };
        let flat = self.expr(offset, false)?;
        Ok(self.flat_address(id, base, flat))
    }

    /// A runtime call's three counts and its `accumulate`, as `i64` values.
    pub(super) fn call_counts(
        &mut self,
        counts: &[Expr; 3],
        accumulate: &Expr,
    ) -> Result<([Value; 3], Value), CodegenError> {
        let mut values = Vec::with_capacity(3);
        for count in counts {
            let v = self.expr(count, false)?;
            values.push(self.materialize(v, DType::I64));
        }
        let accumulate = self.expr(accumulate, false)?;
        let accumulate = self.materialize(accumulate, DType::I64);
        let counts = [values[0], values[1], values[2]];
        Ok((counts, accumulate))
    }

    /// `call.c (+)= call.a · call.b` through the micro-kernel (adding to C
    /// where `call.accumulate` is nonzero).
    pub fn micro_kernel_call(&mut self, call: &MicroKernelCall) -> Result<(), CodegenError> {
        let (symbol, kernel) = micro_kernel_symbol(&call.kernel).ok_or_else(|| {
            CodegenError::Unsupported(format!("no micro-kernel '{}'", call.kernel))
        })?;
        let target = self.options().target;
        if !target.can_run(kernel) {
            return Err(CodegenError::Unsupported(format!(
                "micro-kernel '{}' needs {}, which this target does not allow (CPU supports {}; cap: {}); the widest here is {}",
                kernel.name,
                kernel.isa.name(),
                target.cpu_isa().name(),
                target.cap_description(),
                target.isa().name()
            )));
        }
        if call.m > kernel.mr as i64 || call.n > kernel.nr as i64 {
            return Err(CodegenError::Unsupported(format!(
                "a {}×{} block does not fit micro-kernel '{}'",
                call.m, call.n, kernel.name
            )));
        }
        let a = self.operand_address(&call.a)?;
        let b = self.operand_address(&call.b)?;
        let c = self.operand_address(&call.c)?;
        let int = |this: &mut Self, v: i64| this.b.ins().iconst(types::I64, v);
        let (counts, accumulate) = self.call_counts(&call.counts, &call.accumulate)?;
        let epilogue = match &call.epilogue {
            Some(epilogue) => self.epilogue_struct(epilogue)?,
            None => int(self, 0),
        };
        let args = [
            counts[2],
            a,
            int(self, call.a.row_stride),
            int(self, call.a.col_stride),
            b,
            int(self, call.b.row_stride),
            c,
            int(self, call.c.row_stride),
            counts[0],
            counts[1],
            accumulate,
            epilogue,
        ];
        let f = self
            .imports
            .get(&mut self.b, symbol, &[types::I64; 12], None)?;
        self.b.ins().call(f, &args);
        Ok(())
    }

    /// The address of a stack [`Epilogue`] (a micro-kernel's or a stencil
    /// primitive's) holding `epilogue`'s addends'
    /// addresses and strides and its clamps, laid out as the kernels read it.
    pub(super) fn epilogue_struct(
        &mut self,
        epilogue: &KernelEpilogue,
    ) -> Result<Value, CodegenError> {
        if epilogue.addends.len() > MAX_ADDENDS {
            return Err(CodegenError::Unsupported(format!(
                "a micro-kernel epilogue with {} addends (the kernels take at most {MAX_ADDENDS})",
                epilogue.addends.len()
            )));
        }
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            size_of::<Epilogue>() as u32,
            3,
        ));
        let base = self.b.ins().stack_addr(types::I64, slot, 0);
        let flags = MemFlagsData::trusted();
        for k in 0..MAX_ADDENDS {
            let at = offset_of!(Epilogue, addends) + k * size_of::<Addend>();
            let (data, row_stride, col_stride) = match epilogue.addends.get(k) {
                Some(addend) => (
                    self.operand_address(addend)?,
                    addend.row_stride,
                    addend.col_stride,
                ),
                None => (self.b.ins().iconst(types::I64, 0), 0, 0),
            };
            let row_stride = self.b.ins().iconst(types::I64, row_stride);
            let col_stride = self.b.ins().iconst(types::I64, col_stride);
            for (value, offset) in [
                (data, offset_of!(Addend, data)),
                (row_stride, offset_of!(Addend, row_stride)),
                (col_stride, offset_of!(Addend, col_stride)),
            ] {
                self.b.ins().store(flags, value, base, (at + offset) as i32);
            }
        }
        let lower = self.b.ins().f32const(epilogue.lower.unwrap_or(0.0));
        let upper = self.b.ins().f32const(epilogue.upper.unwrap_or(0.0));
        let clamp =
            epilogue.lower.map_or(0, |_| CLAMP_LOWER) | epilogue.upper.map_or(0, |_| CLAMP_UPPER);
        let clamp = self.b.ins().iconst(types::I64, clamp);
        for (value, offset) in [
            (lower, offset_of!(Epilogue, lower)),
            (upper, offset_of!(Epilogue, upper)),
            (clamp, offset_of!(Epilogue, clamp)),
        ] {
            self.b.ins().store(flags, value, base, offset as i32);
        }
        Ok(base)
    }
}
