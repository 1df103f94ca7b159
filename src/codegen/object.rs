//! Ahead-of-time compilation: a kernel as a relocatable object file.
//!
//! The object is translated by the same code as the JIT kernel
//! ([`compile`](super::compile)), for the host ISA with every feature the
//! CPU has, as position-independent code (so that it links into PIE
//! executables and shared libraries). It exports one function with the JIT
//! kernel's entry ABI, `void symbol(void **args)`: one pointer per parameter
//! buffer, inputs then outputs, dense row-major. The runtime functions it
//! calls stay undefined imports, to be provided by the program it is linked
//! into, e.g. by the C runtime that `deploy::aot` writes:
//! [`RUNTIME_IMPORTS`].

use cranelift_codegen::isa::TargetIsa;
use cranelift_module::{Linkage, default_libcall_names};
use cranelift_object::{ObjectBuilder, ObjectModule};

use crate::tir::PrimFunc;

use super::error::CodegenError;
use super::jit::build_isa;
use super::options::CodegenOptions;
use super::translate::define_kernel;

/// Every symbol an object file may import from the program it is linked
/// into. Parallel loops call `tessera_parallel_for`, buffers too large for
/// the stack `tessera_alloc`/`tessera_free` (64-byte aligned), contiguous
/// copies `tessera_copy` (`memmove`), f64 math and
/// f32 `pow` the `tessera_*_f64`/`tessera_pow_f32` functions (C signatures:
/// see `tessera_runtime.c` written by `deploy::aot`).
pub const RUNTIME_IMPORTS: &[&str] = &[
    "tessera_parallel_for",
    "tessera_alloc",
    "tessera_free",
    "tessera_copy",
    "tessera_exp_f64",
    "tessera_log_f64",
    "tessera_tanh_f64",
    "tessera_sigmoid_f64",
    "tessera_erf_f64",
    "tessera_pow_f64",
    "tessera_pow_f32",
];

/// Whether `symbol` can name the exported function (a C identifier).
pub(crate) fn is_c_identifier(symbol: &str) -> bool {
    let mut chars = symbol.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The target objects are compiled for: the host triple, followed by the ISA
/// extensions the code may use (an object runs only on CPUs that have them),
/// e.g. `x86_64-unknown-linux-gnu with sse41 avx avx2 fma`.
pub fn object_target(options: &CodegenOptions) -> Result<String, CodegenError> {
    let isa = build_isa(options.opt_level, true).map_err(CodegenError::Host)?;
    Ok(describe(&*isa))
}

fn describe(isa: &dyn TargetIsa) -> String {
    let features: Vec<String> = isa
        .isa_flags()
        .iter()
        .filter(|f| f.as_bool() == Some(true))
        .map(|f| f.name.strip_prefix("has_").unwrap_or(f.name).to_string())
        .collect();
    if features.is_empty() {
        isa.triple().to_string()
    } else {
        format!("{} with {}", isa.triple(), features.join(" "))
    }
}

/// Compiles `func` into a relocatable object file (the host's format, e.g.
/// ELF on Linux) exporting one function `symbol` with the kernel entry ABI.
/// `symbol` must be a C identifier and not one of [`RUNTIME_IMPORTS`].
pub fn compile_object(
    func: &PrimFunc,
    options: &CodegenOptions,
    symbol: &str,
) -> Result<Vec<u8>, CodegenError> {
    // Micro-kernel calls link against `tessera_kernels.c` (deploy::aot);
    // the row primitives, packing routines and stencils have no C
    // counterpart yet.
    let (mut row_math, mut packed, mut stencil) = (false, false, false);
    func.body.visit(&mut |s| {
        row_math |= matches!(s, crate::tir::Stmt::RowMathCall(_));
        packed |= matches!(s, crate::tir::Stmt::PackCall(_));
        stencil |= matches!(s, crate::tir::Stmt::StencilCall(_));
    });
    if stencil {
        return Err(CodegenError::Unsupported(
            "a stencil tensorize step calls tessera's Rust stencil primitives, which have no C counterpart for object files yet (micro-kernels do: tessera_kernels.c); deploy it without --aot".into(),
        ));
    }
    if packed {
        return Err(CodegenError::Unsupported(
            "a pack step calls tessera's Rust packing routines, which have no C counterpart for object files yet (micro-kernels do: tessera_kernels.c); deploy it without --aot".into(),
        ));
    }
    if row_math {
        return Err(CodegenError::Unsupported(
            "a row_math kernel calls tessera's Rust row primitives, which have no C counterpart for object files yet (micro-kernels do: tessera_kernels.c); deploy it without --aot".into(),
        ));
    }
    if !is_c_identifier(symbol) {
        return Err(CodegenError::Unsupported(format!(
            "object symbol '{symbol}' is not a C identifier (letters, digits, '_'; not starting with a digit)"
        )));
    }
    if RUNTIME_IMPORTS.contains(&symbol) {
        return Err(CodegenError::Unsupported(format!(
            "object symbol '{symbol}' is the name of a runtime function the kernel calls"
        )));
    }
    let isa = build_isa(options.opt_level, true).map_err(CodegenError::Host)?;
    // No `.eh_frame` unwind tables: cranelift-object writes them with
    // absolute relocations, which would force text relocations on a shared
    // library linking the kernel (the kernels never unwind).
    let builder = ObjectBuilder::new(isa, format!("{symbol}.o"), default_libcall_names())
        .map_err(|e| CodegenError::Host(e.to_string()))?;
    let mut module = ObjectModule::new(builder);
    define_kernel(&mut module, func, options, symbol, symbol, Linkage::Export)?;
    module
        .finish()
        .emit()
        .map_err(|e| CodegenError::Cranelift(format!("object file: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_must_be_c_identifiers() {
        assert!(is_c_identifier("matmul_512"));
        assert!(is_c_identifier("_k"));
        assert!(!is_c_identifier(""));
        assert!(!is_c_identifier("9lives"));
        assert!(!is_c_identifier("a-b"));
        assert!(!is_c_identifier("a b"));
    }

    #[test]
    fn runtime_names_are_refused() {
        let func = PrimFunc {
            name: "k".into(),
            buffers: Vec::new(),
            params: Vec::new(),
            num_inputs: 0,
            body: crate::tir::Stmt::Seq(Vec::new()),
        };
        let options = CodegenOptions::default();
        let err = compile_object(&func, &options, "tessera_free").expect_err("a runtime name");
        assert!(err.to_string().contains("runtime function"), "{err}");
        let object = compile_object(&func, &options, "k").expect("an empty kernel compiles");
        assert!(!object.is_empty());
    }

    #[test]
    fn runtime_imports_cover_the_host_symbols() {
        for (name, _) in super::super::math::host_symbols() {
            assert!(
                RUNTIME_IMPORTS.contains(&name),
                "{name} missing from RUNTIME_IMPORTS"
            );
        }
    }
}
