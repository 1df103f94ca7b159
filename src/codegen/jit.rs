//! The JIT compilation driver: host ISA, JIT module, the host symbols
//! compiled code may call, and the kernel's parameters. The entry function
//! itself is translated by [`define_kernel`], shared with the object-file
//! backend.

use std::sync::OnceLock;
use std::time::Instant;

use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, default_libcall_names};

use crate::runtime::Target;
use crate::runtime::copy::tessera_copy;
use crate::runtime::parallel::tessera_parallel_for;
use crate::runtime::workspace::{tessera_alloc, tessera_free};
use crate::tir::PrimFunc;

use super::error::CodegenError;
use super::kernel::{EntryFn, Kernel, KernelParam};
use super::math::host_symbols;
use super::micro_kernel_symbols::micro_kernel_symbols;
use super::options::{CodegenOptions, OptLevel};
use super::pack_symbols::pack_symbols;
use super::row_math_symbols::row_math_symbols;
use super::stencil_symbols::stencil_symbols;
use super::translate::define_kernel;

/// The host ISA with every feature the CPU has; `pic` for position-independent
/// code (object files linked into PIE executables or shared libraries).
pub(super) fn build_isa(opt_level: OptLevel, pic: bool) -> Result<OwnedTargetIsa, String> {
    let mut flags = settings::builder();
    let level = match opt_level {
        OptLevel::None => "none",
        OptLevel::Speed => "speed",
    };
    flags.set("opt_level", level).map_err(|e| e.to_string())?;
    flags
        .set("enable_verifier", "false")
        .map_err(|e| e.to_string())?;
    flags
        .set("is_pic", if pic { "true" } else { "false" })
        .map_err(|e| e.to_string())?;
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
    cell.get_or_init(|| build_isa(opt_level, false))
        .clone()
        .map_err(CodegenError::Host)
}

fn runtime_symbols(target: &Target) -> Vec<(&'static str, *const u8)> {
    let mut symbols = vec![
        ("tessera_parallel_for", tessera_parallel_for as *const u8),
        ("tessera_alloc", tessera_alloc as *const u8),
        ("tessera_free", tessera_free as *const u8),
        ("tessera_copy", tessera_copy as *const u8),
    ];
    symbols.extend(host_symbols());
    symbols.extend(micro_kernel_symbols(target));
    symbols.extend(row_math_symbols(target));
    symbols.extend(stencil_symbols(target));
    symbols.extend(pack_symbols(target));
    symbols
}

/// The parameters of `func`'s entry point, in argument order (inputs, then
/// outputs): what a compiled kernel, JIT or ahead-of-time, is called with.
pub fn kernel_params(func: &PrimFunc) -> Vec<KernelParam> {
    func.params
        .iter()
        .map(|&p| {
            let b = &func.buffers[p];
            KernelParam {
                name: b.name.clone(),
                shape: b.shape.iter().map(|&d| d as usize).collect(),
                dtype: b.dtype,
            }
        })
        .collect()
}

/// Compiles `func` to native code.
pub fn compile(func: &PrimFunc, options: &CodegenOptions) -> Result<Kernel, CodegenError> {
    let start = Instant::now();
    let isa = host_isa(options.opt_level)?;
    let mut builder = JITBuilder::with_isa(isa, default_libcall_names());
    for (name, address) in runtime_symbols(&options.target) {
        builder.symbol(name, address);
    }
    let mut module = JITModule::new(builder);
    let name = if func.name.is_empty() {
        "kernel"
    } else {
        func.name.as_str()
    };
    let defined = define_kernel(
        &mut module,
        func,
        options,
        name,
        &func.name,
        Linkage::Export,
    )?;
    module
        .finalize_definitions()
        .map_err(|e| CodegenError::Cranelift(e.to_string()))?;
    let code = module.get_finalized_function(defined.id);
    // SAFETY: the function was just defined with the `EntryFn` signature.
    let entry: EntryFn = unsafe { std::mem::transmute::<*const u8, EntryFn>(code) };
    let mut kernel = Kernel::new(
        name.to_string(),
        module,
        entry,
        kernel_params(func),
        func.num_inputs,
        start.elapsed(),
    );
    kernel.set_listing(defined.listing);
    Ok(kernel)
}
