//! The machine's f32x4 FMA ceiling, derived from a measured clock.
//!
//! The clock is measured by running a JIT-compiled chain of dependent
//! integer additions (one cycle each on x86-64) and dividing additions by
//! elapsed time. The f32x4 FMA peak of one core is then
//! `GHz × FMA_PIPES × 4 lanes × 2 flops` (two FMA pipes on the x86-64 cores
//! this project targets), the ceiling of the 128-bit code Cranelift emits.

use std::time::Instant;

use cranelift_codegen::ir::{AbiParam, InstBuilder, condcodes::IntCC, types};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};

use super::error::CodegenError;
use super::jit::host_isa;
use super::options::OptLevel;

/// FMA instructions a core can start per cycle (two 128-bit FMA pipes).
pub const FMA_PIPES: f64 = 2.0;

const CHAIN: i64 = 256;

/// The measured core clock in GHz: the fastest of several runs (a busy,
/// shared machine only ever makes a run slower).
pub fn measure_clock_ghz() -> Result<f64, CodegenError> {
    let isa = host_isa(OptLevel::None)?;
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(types::I64));
    sig.returns.push(AbiParam::new(types::I64));
    let id = module
        .declare_function("clock_chain", Linkage::Export, &sig)
        .map_err(|e| CodegenError::Cranelift(e.to_string()))?;
    let mut ctx = module.make_context();
    ctx.func.signature = sig;
    let mut fbc = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fbc);
        let entry = b.create_block();
        let body = b.create_block();
        let exit = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.append_block_param(body, types::I64);
        b.append_block_param(body, types::I64);
        b.append_block_param(exit, types::I64);
        b.switch_to_block(entry);
        let iterations = b.block_params(entry)[0];
        let zero = b.ins().iconst(types::I64, 0);
        b.ins().jump(body, &[zero.into(), iterations.into()]);
        b.switch_to_block(body);
        let (mut acc, left) = (b.block_params(body)[0], b.block_params(body)[1]);
        for k in 0..CHAIN {
            acc = b.ins().iadd_imm_s(acc, k | 1);
        }
        let left = b.ins().iadd_imm_s(left, -1);
        let more = b.ins().icmp_imm_s(IntCC::SignedGreaterThan, left, 0);
        b.ins()
            .brif(more, body, &[acc.into(), left.into()], exit, &[acc.into()]);
        b.switch_to_block(exit);
        let result = b.block_params(exit)[0];
        b.ins().return_(&[result]);
        b.seal_all_blocks();
        b.finalize(module.isa().frontend_config());
    }
    module
        .define_function(id, &mut ctx)
        .map_err(|e| CodegenError::Cranelift(format!("{e:?}")))?;
    module
        .finalize_definitions()
        .map_err(|e| CodegenError::Cranelift(e.to_string()))?;
    let code = module.get_finalized_function(id);
    // SAFETY: defined just above with this signature.
    let chain: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(code) };
    let iterations = 40_000i64;
    let mut samples = Vec::new();
    for _ in 0..15 {
        let start = Instant::now();
        std::hint::black_box(chain(std::hint::black_box(iterations)));
        let seconds = start.elapsed().as_secs_f64();
        samples.push((iterations * CHAIN) as f64 / seconds / 1e9);
    }
    // SAFETY: `chain` is not used after this.
    unsafe { module.free_memory() };
    Ok(samples.into_iter().fold(0.0, f64::max))
}

/// The f32x4 FMA peak of `cores` cores at `ghz`, in GFLOP/s.
pub fn f32x4_fma_peak_gflops(ghz: f64, cores: usize) -> f64 {
    ghz * FMA_PIPES * 4.0 * 2.0 * cores as f64
}
