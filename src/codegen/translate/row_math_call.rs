//! A row-primitive call (from a `row_math` loop): the scratch row's address
//! and length, passed to `tessera_row_math_<name>` with the C ABI of
//! [`RowMathFn`](crate::runtime::row_math::RowMathFn).

use cranelift_codegen::ir::{InstBuilder, types};

use crate::te::DType;
use crate::tir::RowMathCall;

use super::super::error::CodegenError;
use super::super::row_math_symbols::row_math_symbol;
use super::FnTranslator;
use super::memory::Storage;

impl FnTranslator<'_, '_, '_> {
    /// `call.buffer[0..count] = f(call.buffer[0..count])` through the row primitive.
    pub fn row_math_call(&mut self, call: &RowMathCall) -> Result<(), CodegenError> {
        let name = call.primitive();
        let (symbol, primitive) = row_math_symbol(&name)
            .ok_or_else(|| CodegenError::Unsupported(format!("no row primitive '{name}'")))?;
        let target = self.options().target;
        if primitive.isa > target.isa() {
            return Err(CodegenError::Unsupported(format!(
                "row primitive '{name}' needs {}, which this target does not allow (CPU supports {}; cap: {}); the widest here is {}",
                primitive.isa.name(),
                target.cpu_isa().name(),
                target.cap_description(),
                target.isa().name()
            )));
        }
        let buffer = &self.func().buffers[call.buffer];
        if buffer.dtype != DType::F32 || buffer.num_elements() < call.count {
            return Err(CodegenError::Unsupported(format!(
                "row primitive '{name}' needs {} f32 elements; buffer '{}' is {}{:?}",
                call.count, buffer.name, buffer.dtype, buffer.shape
            )));
        }
        let Some(Storage::Memory(base)) = self.storage.get(&call.buffer) else {
            return Err(CodegenError::Unsupported(format!(
                "row primitive '{name}': buffer '{}' is not in memory",
                buffer.name
            )));
        };
        let base = *base;
        let count = self.b.ins().iconst(types::I64, call.count);
        let f = self
            .imports
            .get(&mut self.b, symbol, &[types::I64; 2], None)?;
        self.b.ins().call(f, &[base, count]);
        Ok(())
    }
}
