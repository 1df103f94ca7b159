//! Test-only JIT harness: compiles `out[i] = f(x[i], y[i])` loops over arrays
//! with cranelift-jit, so the emitted intrinsics can be run on many inputs.

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    AbiParam, FuncRef, InstBuilder, MemFlagsData, Type, UserFuncName, types,
};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};

use super::super::{Imports, emit_intrinsic, host_symbols};
use crate::te::Intrinsic;

/// Cranelift optimisation level of a test build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Opt {
    None,
    Speed,
    /// `speed`, with the ISA's `has_fma` off: every `fma` is a libcall.
    SpeedNoFma,
}

/// A compiled `fn(x, y, out, n)`: `out[i] = f(x[i], y[i])` for `i < n`
/// (elements, stepping by the lane count; `y` is read only for pow).
pub(super) struct Kernel {
    /// Keeps the code alive.
    _module: JITModule,
    entry: extern "C" fn(*const u8, *const u8, *mut u8, i64),
    lanes: usize,
}

impl Kernel {
    /// Runs the kernel on `x` (and `y` for pow) into `out`; the length must
    /// be a multiple of the lane count.
    pub(super) fn run<T: Copy>(&self, x: &[T], y: &[T], out: &mut [T]) {
        assert_eq!(x.len(), out.len());
        assert_eq!(y.len(), out.len());
        assert_eq!(
            x.len() % self.lanes,
            0,
            "length must be a multiple of the lane count"
        );
        (self.entry)(
            x.as_ptr().cast(),
            y.as_ptr().cast(),
            out.as_mut_ptr().cast(),
            x.len() as i64,
        );
    }

    /// `f` applied to each element of `x` (unary intrinsics).
    pub(super) fn map<T: Copy + Default>(&self, x: &[T]) -> Vec<T> {
        let mut out = vec![T::default(); x.len()];
        self.run(x, x, &mut out);
        out
    }
}

/// [`Imports`] for a JIT module, caching one `FuncRef` per symbol.
struct ModuleImports<'m> {
    module: &'m mut JITModule,
    refs: HashMap<&'static str, FuncRef>,
}

impl Imports for ModuleImports<'_> {
    fn import(
        &mut self,
        builder: &mut FunctionBuilder<'_>,
        symbol: &'static str,
        params: &[Type],
        ret: Type,
    ) -> FuncRef {
        if let Some(&r) = self.refs.get(symbol) {
            return r;
        }
        let mut sig = self.module.make_signature();
        sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
        sig.returns.push(AbiParam::new(ret));
        let id = self
            .module
            .declare_function(symbol, Linkage::Import, &sig)
            .expect("declare host function");
        let r = self.module.declare_func_in_func(id, builder.func);
        self.refs.insert(symbol, r);
        r
    }
}

/// A JIT module for the host ISA with the verifier on and the math host
/// symbols (plus `extra`) registered.
pub(super) fn jit_module(opt: Opt, extra: &[(&'static str, *const u8)]) -> JITModule {
    let mut flags = settings::builder();
    let level = match opt {
        Opt::None => "none",
        Opt::Speed | Opt::SpeedNoFma => "speed",
    };
    flags.set("opt_level", level).expect("opt_level");
    flags
        .set("enable_verifier", "true")
        .expect("enable_verifier");
    flags
        .set("use_colocated_libcalls", "false")
        .expect("colocated");
    flags.set("is_pic", "false").expect("is_pic");
    let mut isa_builder = cranelift_native::builder().expect("host ISA");
    if opt == Opt::SpeedNoFma {
        isa_builder.set("has_fma", "false").expect("has_fma");
    }
    let isa = isa_builder
        .finish(settings::Flags::new(flags))
        .expect("ISA flags");
    let mut builder = JITBuilder::with_isa(isa, default_libcall_names());
    builder.symbols(host_symbols());
    builder.symbols(extra.iter().copied());
    JITModule::new(builder)
}

/// Compiles the array loop for intrinsic `f` on values of type `ty`.
pub(super) fn compile(f: Intrinsic, ty: Type, opt: Opt) -> Kernel {
    compile_with(ty, opt, &[], |b, imports, args| {
        emit_intrinsic(b, imports, f, &args[..f.arity()])
    })
}

/// Compiles the array loop with a custom body `emit(builder, imports, [x, y])`
/// (used by the benchmarks for a plain host call per element). With
/// `TESSERA_MATH_DISASM` set, prints the generated machine code.
pub(super) fn compile_with(
    ty: Type,
    opt: Opt,
    extra_symbols: &[(&'static str, *const u8)],
    emit: impl FnOnce(
        &mut FunctionBuilder<'_>,
        &mut dyn Imports,
        [cranelift_codegen::ir::Value; 2],
    ) -> cranelift_codegen::ir::Value,
) -> Kernel {
    let mut module = jit_module(opt, extra_symbols);
    let ptr = module.target_config().pointer_type();
    let mut ctx = module.make_context();
    for _ in 0..3 {
        ctx.func.signature.params.push(AbiParam::new(ptr));
    }
    ctx.func.signature.params.push(AbiParam::new(types::I64));
    let id = module
        .declare_function("kernel", Linkage::Local, &ctx.func.signature)
        .expect("declare kernel");
    ctx.func.name = UserFuncName::user(0, id.as_u32());

    let lanes = ty.lane_count() as i64;
    let bytes = i64::from(ty.bytes());
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        let header = b.create_block();
        let body = b.create_block();
        let exit = b.create_block();
        b.append_block_params_for_function_params(entry);
        let i = b.append_block_param(header, types::I64);

        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let (px, py, pout, n) = (params[0], params[1], params[2], params[3]);
        let zero = b.ins().iconst(types::I64, 0);
        b.ins().jump(header, &[zero.into()]);

        b.switch_to_block(header);
        let more = b.ins().icmp(IntCC::SignedLessThan, i, n);
        b.ins().brif(more, body, &[], exit, &[]);

        b.switch_to_block(body);
        let offset = b.ins().imul_imm_s(i, bytes / lanes);
        let flags = MemFlagsData::new().with_notrap();
        let ax = b.ins().iadd(px, offset);
        let ay = b.ins().iadd(py, offset);
        let aout = b.ins().iadd(pout, offset);
        let x = b.ins().load(ty, flags, ax, 0);
        let y = b.ins().load(ty, flags, ay, 0);
        let r = {
            let mut imports = ModuleImports {
                module: &mut module,
                refs: HashMap::new(),
            };
            emit(&mut b, &mut imports, [x, y])
        };
        b.ins().store(flags, r, aout, 0);
        let next = b.ins().iadd_imm_s(i, lanes);
        b.ins().jump(header, &[next.into()]);

        b.switch_to_block(exit);
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(module.target_config());
    }
    ctx.set_disasm(std::env::var("TESSERA_MATH_DISASM").is_ok());
    module
        .define_function(id, &mut ctx)
        .expect("compile kernel");
    if let Some(code) = ctx.compiled_code().and_then(|c| c.vcode.clone()) {
        println!("{code}");
    }
    module.clear_context(&mut ctx);
    module.finalize_definitions().expect("finalize");
    let code = module.get_finalized_function(id);
    // SAFETY: `code` is the function just defined, with exactly this
    // signature in the host's default (C) calling convention.
    let entry = unsafe {
        std::mem::transmute::<*const u8, extern "C" fn(*const u8, *const u8, *mut u8, i64)>(code)
    };
    Kernel {
        _module: module,
        entry,
        lanes: lanes as usize,
    }
}
