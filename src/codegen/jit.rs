//! The compilation driver: host ISA, JIT module, the entry function, and
//! the host symbols compiled code may call.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Instant;

use cranelift_codegen::ir::{AbiParam, InstBuilder, MemFlagsData, types};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};

use crate::runtime::parallel::{tessera_alloc, tessera_free, tessera_parallel_for};
use crate::tir::PrimFunc;

use super::error::CodegenError;
use super::kernel::{EntryFn, Kernel, KernelParam};
use super::math::host_symbols;
use super::options::{CodegenOptions, OptLevel};
use super::translate::memory_storage;
use super::translate::{FnTranslator, Shared};

fn build_isa(opt_level: OptLevel) -> Result<OwnedTargetIsa, String> {
    let mut flags = settings::builder();
    let level = match opt_level {
        OptLevel::None => "none",
        OptLevel::Speed => "speed",
    };
    flags.set("opt_level", level).map_err(|e| e.to_string())?;
    flags
        .set("enable_verifier", "false")
        .map_err(|e| e.to_string())?;
    flags.set("is_pic", "false").map_err(|e| e.to_string())?;
    let isa = cranelift_native::builder().map_err(str::to_string)?;
    isa.finish(settings::Flags::new(flags))
        .map_err(|e| e.to_string())
}

/// The host ISA with every feature the CPU has (cached per opt level).
pub fn host_isa(opt_level: OptLevel) -> Result<OwnedTargetIsa, CodegenError> {
    static NONE: OnceLock<Result<OwnedTargetIsa, String>> = OnceLock::new();
    static SPEED: OnceLock<Result<OwnedTargetIsa, String>> = OnceLock::new();
    let cell = match opt_level {
        OptLevel::None => &NONE,
        OptLevel::Speed => &SPEED,
    };
    cell.get_or_init(|| build_isa(opt_level))
        .clone()
        .map_err(CodegenError::Host)
}

fn runtime_symbols() -> Vec<(&'static str, *const u8)> {
    let mut symbols = vec![
        ("tessera_parallel_for", tessera_parallel_for as *const u8),
        ("tessera_alloc", tessera_alloc as *const u8),
        ("tessera_free", tessera_free as *const u8),
    ];
    symbols.extend(host_symbols());
    symbols
}

/// Compiles `func` to native code.
pub fn compile(func: &PrimFunc, options: &CodegenOptions) -> Result<Kernel, CodegenError> {
    let start = Instant::now();
    let isa = host_isa(options.opt_level)?;
    let mut builder = JITBuilder::with_isa(isa, default_libcall_names());
    for (name, address) in runtime_symbols() {
        builder.symbol(name, address);
    }
    let mut module = JITModule::new(builder);
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(types::I64));
    let name = if func.name.is_empty() {
        "kernel"
    } else {
        func.name.as_str()
    };
    let id = module
        .declare_function(name, Linkage::Export, &sig)
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
            module: &mut module,
            func,
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
            t.storage.insert(buffer, memory_storage(base));
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
    module
        .finalize_definitions()
        .map_err(|e| CodegenError::Cranelift(e.to_string()))?;
    let code = module.get_finalized_function(id);
    // SAFETY: the function was just defined with the `EntryFn` signature.
    let entry: EntryFn = unsafe { std::mem::transmute::<*const u8, EntryFn>(code) };
    let params = func
        .params
        .iter()
        .map(|&p| {
            let b = &func.buffers[p];
            KernelParam {
                name: b.name.clone(),
                shape: b.shape.iter().map(|&d| d as usize).collect(),
                dtype: b.dtype,
            }
        })
        .collect();
    let mut kernel = Kernel::new(
        name.to_string(),
        module,
        entry,
        params,
        func.num_inputs,
        start.elapsed(),
    );
    kernel.set_listing(listing);
    Ok(kernel)
}
