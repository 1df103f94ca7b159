//! Parallel loops: the body is outlined into its own function
//! `(ptrs, values, begin, end)` and run by the runtime's thread pool through
//! `tessera_parallel_for`. Buffers travel in a pointer table indexed by
//! buffer id; loop variables the body uses travel in a value table.

use std::collections::HashMap;

use cranelift_codegen::ir::{
    AbiParam, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, types,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{Linkage, Module};

use crate::arith::Interval;
use crate::te::{Var, VarId};
use crate::tir::Stmt;

use super::super::error::CodegenError;
use super::memory::Storage;
use super::{Binding, FnTranslator, Shared};

impl FnTranslator<'_, '_, '_> {
    /// `for var in 0..extent parallel { body }`.
    pub fn parallel_loop(
        &mut self,
        var: &Var,
        extent: i64,
        body: &Stmt,
    ) -> Result<(), CodegenError> {
        let buffers = self.func().buffers.len();
        // The pointer table: every buffer in memory, at its id.
        let table = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            (buffers.max(1) * 8) as u32,
            3,
        ));
        let ptrs = self.b.ins().stack_addr(types::I64, table, 0);
        let mut known = Vec::new();
        for id in 0..buffers {
            if let Some(Storage::Memory(base)) = self.storage.get(&id) {
                self.b
                    .ins()
                    .store(MemFlagsData::trusted(), *base, ptrs, (id * 8) as i32);
                known.push(id);
            }
        }
        // The value table: the free variables that are not constants.
        let free = body.free_vars();
        let mut constants = Vec::new();
        let mut dynamic = Vec::new();
        for id in free {
            match self.env.get(&id) {
                Some(Binding::Const(c)) => constants.push((id, *c)),
                Some(Binding::Var(v)) => {
                    let x = self.b.use_var(*v);
                    dynamic.push((id, x));
                }
                Some(Binding::Value(x)) => dynamic.push((id, *x)),
                None => {}
            }
        }
        let values_slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            (dynamic.len().max(1) * 8) as u32,
            3,
        ));
        let values = self.b.ins().stack_addr(types::I64, values_slot, 0);
        for (k, (_, x)) in dynamic.iter().enumerate() {
            self.b
                .ins()
                .store(MemFlagsData::trusted(), *x, values, (k * 8) as i32);
        }
        let dynamic_ids: Vec<VarId> = dynamic.iter().map(|(id, _)| *id).collect();
        let outlined = outline(
            self.imports.shared,
            var.id(),
            body,
            &known,
            &constants,
            &dynamic_ids,
            &self.index_ranges,
        )?;
        let fref = self
            .imports
            .shared
            .module
            .declare_func_in_func(outlined, self.b.func);
        let addr = self.b.ins().func_addr(types::I64, fref);
        let run = self
            .imports
            .get(&mut self.b, "tessera_parallel_for", &[types::I64; 4], None)?;
        let extent = self.b.ins().iconst(types::I64, extent);
        self.b.ins().call(run, &[addr, ptrs, values, extent]);
        Ok(())
    }
}

/// Builds the outlined body and returns its function id.
fn outline(
    shared: &mut Shared,
    var: VarId,
    body: &Stmt,
    buffers: &[usize],
    constants: &[(VarId, i64)],
    dynamic: &[VarId],
    ranges: &HashMap<VarId, Interval>,
) -> Result<cranelift_module::FuncId, CodegenError> {
    shared.outlined += 1;
    let name = format!("{}_parallel{}", shared.prefix, shared.outlined);
    let mut sig = shared.module.make_signature();
    sig.params.extend([AbiParam::new(types::I64); 4]);
    let id = shared
        .module
        .declare_function(&name, Linkage::Local, &sig)
        .map_err(|e| CodegenError::Cranelift(e.to_string()))?;
    let mut ctx = shared.module.make_context();
    ctx.func.signature = sig;
    let mut fbc = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fbc);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let (ptrs, values, begin, end) = (params[0], params[1], params[2], params[3]);
        let mut t = FnTranslator::new(b, shared, true);
        for &id in buffers {
            let base =
                t.b.ins()
                    .load(types::I64, MemFlagsData::trusted(), ptrs, (id * 8) as i32);
            t.storage.insert(id, Storage::Memory(base));
        }
        for (id, c) in constants {
            t.env.insert(*id, Binding::Const(*c));
        }
        for (k, id) in dynamic.iter().enumerate() {
            let x =
                t.b.ins()
                    .load(types::I64, MemFlagsData::trusted(), values, (k * 8) as i32);
            t.env.insert(*id, Binding::Value(x));
        }
        t.index_ranges.clone_from(ranges);
        t.plan_allocations(body)?;
        t.serial_loop(var, begin, end, body)?;
        t.finish()?;
    }
    shared
        .module
        .define_function(id, &mut ctx)
        .map_err(|e| CodegenError::Cranelift(format!("{e:?}")))?;
    Ok(id)
}
