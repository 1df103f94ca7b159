//! A packing call (from a `pack` step): the operands' addresses and
//! strides, passed to `tessera_pack_<isa>` with the C ABI of
//! [`PackFn`](crate::runtime::pack::PackFn).

use cranelift_codegen::ir::{InstBuilder, types};

use crate::te::DType;
use crate::tir::PackCall;

use super::super::error::CodegenError;
use super::super::pack_symbols::pack_symbol;
use super::FnTranslator;

impl FnTranslator<'_, '_, '_> {
    /// `call.dst = call.src` over the block, through the packing routine.
    pub fn pack_call(&mut self, call: &PackCall) -> Result<(), CodegenError> {
        let name = call.routine();
        let (symbol, routine) = pack_symbol(&name)
            .ok_or_else(|| CodegenError::Unsupported(format!("no packing routine '{name}'")))?;
        let target = self.options().target;
        if routine.isa > target.isa() {
            return Err(CodegenError::Unsupported(format!(
                "packing routine '{name}' needs {}, which this target does not allow (CPU supports {}; cap: {}); the widest here is {}",
                routine.isa.name(),
                target.cpu_isa().name(),
                target.cap_description(),
                target.isa().name()
            )));
        }
        if call.dst.col_stride != 1 {
            return Err(CodegenError::Unsupported(format!(
                "packing routine '{name}' writes rows contiguously; dst's column stride is {}",
                call.dst.col_stride
            )));
        }
        let src = self.operand_address(&call.src)?;
        let dst = self.operand_address(&call.dst)?;
        let mut counts = Vec::with_capacity(2);
        for count in &call.counts {
            let v = self.expr(count, false)?;
            counts.push(self.materialize(v, DType::I64));
        }
        let int = |this: &mut Self, v: i64| this.b.ins().iconst(types::I64, v);
        let args = [
            src,
            int(self, call.src.row_stride),
            int(self, call.src.col_stride),
            dst,
            int(self, call.dst.row_stride),
            counts[0],
            counts[1],
        ];
        let f = self
            .imports
            .get(&mut self.b, symbol, &[types::I64; 7], None)?;
        self.b.ins().call(f, &args);
        Ok(())
    }
}
