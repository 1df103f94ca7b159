//! The kernel entry function, `extern "C" fn(args: *const *mut u8)`,
//! translated into any Cranelift module: the JIT for the tuner and for
//! loaded kernels, an object file for ahead-of-time deployment.

use std::collections::HashMap;

use cranelift_codegen::ir::{AbiParam, InstBuilder, MemFlagsData, types};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, Module};

use crate::tir::PrimFunc;

use super::super::error::CodegenError;
use super::super::options::CodegenOptions;
use super::super::parallel_work::serialise_small_parallel_loops;
use super::memory::Storage;
use super::{FnTranslator, Shared};

/// The entry function defined in a module.
pub(crate) struct DefinedKernel {
    /// Its id in the module.
    pub id: FuncId,
    /// The machine-code listing, if [`CodegenOptions::listing`] asked for it.
    pub listing: Option<String>,
}

/// Declares `name` with `linkage` in `module` and defines it as `func`'s
/// entry point: one pointer per parameter buffer (inputs, then outputs) in
/// the array its single argument points to. Parallel loop bodies (of the
/// loops whose work repays a fork) become local functions named
/// `<prefix>_parallel<n>`; host functions (runtime,
/// math) are declared as imports.
pub(crate) fn define_kernel(
    module: &mut dyn Module,
    func: &PrimFunc,
    options: &CodegenOptions,
    name: &str,
    prefix: &str,
    linkage: Linkage,
) -> Result<DefinedKernel, CodegenError> {
    let func = &*serialise_small_parallel_loops(func);
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(types::I64));
    let id = module
        .declare_function(name, linkage, &sig)
        .map_err(|e| CodegenError::Cranelift(e.to_string()))?;
    let mut ctx = module.make_context();
    ctx.func.signature = sig;
    let mut fbc = FunctionBuilderContext::new();
    {
        let mut free_sig = module.make_signature();
        free_sig.params.push(AbiParam::new(types::I64));
        let fallback = module
            .declare_function("tessera_free", Linkage::Import, &free_sig)
            .map_err(|e| CodegenError::Cranelift(e.to_string()))?;
        let mut shared = Shared {
            module: &mut *module,
            func,
            prefix,
            options: *options,
            declared: HashMap::from([("tessera_free", fallback)]),
            outlined: 0,
            fallback,
            handles: func.handle_map(),
        };
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fbc);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let args = b.block_params(entry)[0];
        let mut t = FnTranslator::new(b, &mut shared, false);
        for (position, &buffer) in func.params.iter().enumerate() {
            let base = t.b.ins().load(
                types::I64,
                MemFlagsData::trusted(),
                args,
                (position * 8) as i32,
            );
            t.storage.insert(buffer, Storage::Memory(base));
        }
        t.plan_allocations(&func.body)?;
        t.stmt(&func.body)?;
        t.finish()?;
    }
    ctx.set_disasm(options.listing);
    module
        .define_function(id, &mut ctx)
        .map_err(|e| CodegenError::Cranelift(format!("{e:?}")))?;
    let listing = ctx.compiled_code().and_then(|c| c.vcode.clone());
    Ok(DefinedKernel { id, listing })
}
