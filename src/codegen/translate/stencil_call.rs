//! A stencil-primitive call (a block tensorized with a stencil intrinsic):
//! the operands' addresses and strides, passed to the primitive's symbol
//! with the C ABI of [`StencilFn`](crate::runtime::stencil::StencilFn).

use cranelift_codegen::ir::{InstBuilder, types};

use crate::tir::StencilCall;

use super::super::error::CodegenError;
use super::super::stencil_symbols::stencil_symbol;
use super::FnTranslator;

impl FnTranslator<'_, '_, '_> {
    /// `call.out (+)= Σ weight · input` over the window, through the stencil
    /// primitive (adding to the output where `call.accumulate` is nonzero).
    pub fn stencil_call(&mut self, call: &StencilCall) -> Result<(), CodegenError> {
        let name = call.primitive();
        let (symbol, primitive) = stencil_symbol(call.isa)
            .ok_or_else(|| CodegenError::Unsupported(format!("no stencil primitive '{name}'")))?;
        let target = self.options().target;
        if primitive.isa > target.isa() {
            return Err(CodegenError::Unsupported(format!(
                "stencil primitive '{name}' needs {}, which this target does not allow (CPU supports {}; cap: {}); the widest here is {}",
                primitive.isa.name(),
                target.cpu_isa().name(),
                target.cap_description(),
                target.isa().name()
            )));
        }
        let out = self.element_address(call.out.buffer, &call.out.offset)?;
        let input = self.element_address(call.input.buffer, &call.input.offset)?;
        let weight = self.element_address(call.weight.buffer, &call.weight.offset)?;
        let (counts, accumulate) = self.call_counts(&call.counts, &call.accumulate)?;
        let int = |this: &mut Self, v: i64| this.b.ins().iconst(types::I64, v);
        let epilogue = match &call.epilogue {
            Some(epilogue) => self.epilogue_struct(epilogue)?,
            None => int(self, 0),
        };
        let [in_x, in_r, in_s, in_y] = call.input.strides;
        let [_, w_r, w_s, _] = call.weight.strides;
        let args = [
            out,
            input,
            weight,
            counts[0],
            counts[1],
            counts[2],
            int(self, in_x),
            int(self, in_r),
            int(self, in_s),
            int(self, w_r),
            int(self, w_s),
            accumulate,
            int(self, call.rows),
            int(self, call.out.strides[3]),
            int(self, in_y),
            epilogue,
        ];
        let f = self
            .imports
            .get(&mut self.b, symbol, &[types::I64; 16], None)?;
        self.b.ins().call(f, &args);
        Ok(())
    }
}
