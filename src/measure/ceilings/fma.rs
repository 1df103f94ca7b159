//! The register-only FMA loops the compute ceilings time: independent
//! chains of f32 multiply-adds, one loop of f32x4 JIT-compiled by
//! Cranelift (the code tessera's kernels are made of) and one per wider ISA
//! in inline assembly behind runtime detection (AVX2+FMA on 256 bits,
//! AVX-512F on 512 bits).
//!
//! Every loop runs [`CHAINS`] accumulators, each updated `acc = acc·m + c`
//! [`UNROLL`] times per iteration: enough independent FMAs to cover the
//! latency (4–5 cycles) of two FMA pipes, within 16 vector registers. The
//! wide loops are assembly rather than intrinsics so that they run at full
//! speed in a debug build too: a ceiling that a debug build measured too low
//! would let a JIT-compiled kernel exceed it.

use cranelift_codegen::ir::{AbiParam, InstBuilder, MemFlagsData, condcodes::IntCC, types};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};

use crate::codegen::{CodegenError, OptLevel, host_isa};
use crate::runtime::micro_kernels::Isa;

/// Independent accumulators of every loop.
pub const CHAINS: usize = 12;
/// Updates of each accumulator per loop iteration.
pub const UNROLL: usize = 4;

/// Flops of one loop iteration at `lanes` f32 lanes: `CHAINS × UNROLL`
/// FMAs of two flops per lane.
pub fn flops_per_iteration(lanes: usize) -> f64 {
    (CHAINS * UNROLL * lanes * 2) as f64
}

/// The f32x4 loop as Cranelift compiles it for this host (with the same ISA
/// flags as tessera's kernels), ready to run.
pub struct CraneliftFmaLoop {
    module: Option<JITModule>,
    entry: extern "C" fn(i64, *mut f32),
    /// The loop's machine code, as Cranelift lists it.
    listing: String,
}

impl CraneliftFmaLoop {
    /// JIT-compiles the loop for the host: of `fma` instructions when the
    /// host ISA has FMA, else of a multiply and an add each.
    pub fn compile() -> Result<CraneliftFmaLoop, CodegenError> {
        let isa = host_isa(OptLevel::Speed)?;
        let fused = isa
            .isa_flags()
            .iter()
            .any(|f| f.name == "has_fma" && f.as_bool() == Some(true));
        let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
        let mut sig = module.make_signature();
        sig.params.push(AbiParam::new(types::I64));
        sig.params.push(AbiParam::new(types::I64));
        let id = module
            .declare_function("f32x4_fma_ceiling", Linkage::Export, &sig)
            .map_err(|e| CodegenError::Cranelift(e.to_string()))?;
        let mut ctx = module.make_context();
        ctx.func.signature = sig;
        let mut builder_context = FunctionBuilderContext::new();
        define_loop(
            FunctionBuilder::new(&mut ctx.func, &mut builder_context),
            module.isa().frontend_config(),
            fused,
        );
        ctx.set_disasm(true);
        module
            .define_function(id, &mut ctx)
            .map_err(|e| CodegenError::Cranelift(format!("{e:?}")))?;
        let listing = ctx
            .compiled_code()
            .and_then(|c| c.vcode.clone())
            .unwrap_or_default();
        module
            .finalize_definitions()
            .map_err(|e| CodegenError::Cranelift(e.to_string()))?;
        let code = module.get_finalized_function(id);
        // SAFETY: defined just above with this signature (iterations, a
        // pointer to 4 writable f32).
        let entry: extern "C" fn(i64, *mut f32) = unsafe { std::mem::transmute(code) };
        Ok(CraneliftFmaLoop {
            module: Some(module),
            entry,
            listing,
        })
    }

    /// Instructions of the listing that fuse a multiply and an add
    /// (`vfmadd…` on x86-64, `fmla` on AArch64).
    pub fn fused_instructions(&self) -> usize {
        self.listing
            .lines()
            .filter(|line| line.contains("vfmadd") || line.contains("fmla"))
            .count()
    }

    /// A function that runs `iterations` iterations and returns the flops
    /// done; it stays valid while `self` lives.
    pub fn runner(&self) -> impl Fn(u64) -> f64 + Send + Sync + Copy + use<> {
        let entry = self.entry;
        move |iterations| {
            let mut sink = [0f32; 4];
            entry(iterations.max(1) as i64, sink.as_mut_ptr());
            std::hint::black_box(sink);
            iterations.max(1) as f64 * flops_per_iteration(4)
        }
    }
}

impl Drop for CraneliftFmaLoop {
    fn drop(&mut self) {
        if let Some(module) = self.module.take() {
            // SAFETY: the entry point is not called after `self` is dropped
            // (runners are used only while the loop lives).
            unsafe { module.free_memory() };
        }
    }
}

/// `fn(iterations, out)`: [`CHAINS`] f32x4 accumulators, each updated
/// `acc = acc·m + c` [`UNROLL`] times per iteration; their sum is stored to
/// `out` so that nothing is dead.
fn define_loop(
    mut b: FunctionBuilder,
    frontend: cranelift_codegen::isa::TargetFrontendConfig,
    fused: bool,
) {
    let vector = types::F32X4;
    let entry = b.create_block();
    let body = b.create_block();
    let exit = b.create_block();
    b.append_block_params_for_function_params(entry);
    for _ in 0..CHAINS {
        b.append_block_param(body, vector);
        b.append_block_param(exit, vector);
    }
    b.append_block_param(body, types::I64);
    b.switch_to_block(entry);
    let (iterations, out) = (b.block_params(entry)[0], b.block_params(entry)[1]);
    let scalar = |b: &mut FunctionBuilder, x: f32| {
        let s = b.ins().f32const(x);
        b.ins().splat(vector, s)
    };
    let m = scalar(&mut b, 0.5);
    let c = scalar(&mut b, 1.0);
    let mut start: Vec<_> = (0..CHAINS)
        .map(|k| scalar(&mut b, k as f32 * 0.125).into())
        .collect();
    start.push(iterations.into());
    b.ins().jump(body, &start);

    b.switch_to_block(body);
    let params = b.block_params(body).to_vec();
    let mut accs = params[..CHAINS].to_vec();
    for _ in 0..UNROLL {
        for acc in &mut accs {
            *acc = if fused {
                b.ins().fma(*acc, m, c)
            } else {
                let product = b.ins().fmul(*acc, m);
                b.ins().fadd(product, c)
            };
        }
    }
    let left = b.ins().iadd_imm_s(params[CHAINS], -1);
    let more = b.ins().icmp_imm_s(IntCC::SignedGreaterThan, left, 0);
    let mut again: Vec<_> = accs.iter().map(|&a| a.into()).collect();
    again.push(left.into());
    let done: Vec<_> = accs.iter().map(|&a| a.into()).collect();
    b.ins().brif(more, body, &again, exit, &done);

    b.switch_to_block(exit);
    let finals = b.block_params(exit).to_vec();
    let sum = finals[1..]
        .iter()
        .fold(finals[0], |sum, &acc| b.ins().fadd(sum, acc));
    b.ins().store(MemFlagsData::trusted(), sum, out, 0);
    b.ins().return_(&[]);
    b.seal_all_blocks();
    b.finalize(frontend);
}

/// A loop run for a number of iterations, returning the flops it did.
pub type FmaLoop = fn(u64) -> f64;

/// The widest loop this CPU runs through `std::arch`, as a function of
/// iterations returning flops, with the ISA it uses; `None` where the CPU
/// has nothing wider than the f32x4 of Cranelift's code.
pub fn widest_loop() -> Option<(Isa, FmaLoop)> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Some((Isa::Avx512, |n| {
                // SAFETY: AVX-512F was detected just above.
                unsafe { x86::fma_zmm(n.max(1)) };
                n.max(1) as f64 * flops_per_iteration(16)
            }));
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Some((Isa::Avx2Fma, |n| {
                // SAFETY: AVX2 and FMA were detected just above.
                unsafe { x86::fma_ymm(n.max(1)) };
                n.max(1) as f64 * flops_per_iteration(8)
            }));
        }
    }
    None
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The wide FMA loops in assembly: 12 accumulators (registers 0–11),
    //! `m` and `c` broadcast in registers 14 and 15.

    use std::arch::asm;

    /// One iteration's FMAs on the registers named `$r` (`ymm`, `zmm`):
    /// `acc = acc·m + c` for each of the 12 accumulators, [`super::UNROLL`]
    /// times.
    macro_rules! fma_iteration {
        ($r:literal) => {
            fma_iteration!(@unrolled $r, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
        };
        (@unrolled $r:literal, [$($n:literal),*]) => {
            concat!(
                $("vfmadd213ps ", $r, $n, ", ", $r, "14, ", $r, "15\n",)*
                $("vfmadd213ps ", $r, $n, ", ", $r, "14, ", $r, "15\n",)*
                $("vfmadd213ps ", $r, $n, ", ", $r, "14, ", $r, "15\n",)*
                $("vfmadd213ps ", $r, $n, ", ", $r, "14, ", $r, "15\n",)*
            )
        };
    }

    /// The `m` and `c` of `acc = acc·m + c`: the accumulators converge to 2
    /// and never overflow or go subnormal.
    static CONSTANTS: [f32; 2] = [0.5, 1.0];

    /// A loop of `iterations` (≥ 1) iterations on the registers named `$r`;
    /// the clobbered registers (accumulators, then `m` and `c`) are zeroed
    /// by `$zero` first.
    macro_rules! fma_loop {
        ($(#[$doc:meta])* fn $name:ident feature $feature:literal, reg $r:literal, zero $zero:literal,
         clobbers [$($clobber:tt),*]) => {
            $(#[$doc])*
            #[target_feature(enable = $feature)]
            pub unsafe fn $name(iterations: u64) {
                // SAFETY: reads the two constants; touches only the registers it names.
                unsafe {
                    asm!(
                        $(concat!($zero, " ", $clobber, ", ", $clobber, ", ", $clobber),)*
                        concat!("vbroadcastss ", $r, "14, dword ptr [{k}]"),
                        concat!("vbroadcastss ", $r, "15, dword ptr [{k} + 4]"),
                        "2:",
                        fma_iteration!($r),
                        "dec {n}",
                        "jnz 2b",
                        "vzeroupper",
                        k = in(reg) CONSTANTS.as_ptr(),
                        n = inout(reg) iterations => _,
                        $(out($clobber) _,)*
                        options(nostack, readonly),
                    );
                }
            }
        };
    }

    fma_loop! {
        /// On 256-bit registers.
        ///
        /// # Safety
        /// The CPU must support AVX2 and FMA.
        fn fma_ymm feature "avx2,fma", reg "ymm", zero "vxorps",
        clobbers ["ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7", "ymm8", "ymm9", "ymm10", "ymm11",
                  "ymm14", "ymm15"]
    }

    fma_loop! {
        /// On 512-bit registers.
        ///
        /// # Safety
        /// The CPU must support AVX-512F.
        fn fma_zmm feature "avx512f", reg "zmm", zero "vpxord",
        clobbers ["zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11",
                  "zmm14", "zmm15"]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cranelift_loop_is_made_of_fmas_when_the_host_has_them() {
        let fma_loop = CraneliftFmaLoop::compile().expect("compiles");
        let has_fma = crate::runtime::host_device()
            .features
            .iter()
            .any(|f| f == "has_fma");
        if cfg!(target_arch = "x86_64") {
            let expected = if has_fma { CHAINS * UNROLL } else { 0 };
            assert_eq!(
                fma_loop.fused_instructions(),
                expected,
                "{}",
                fma_loop.listing
            );
        }
        let flops = (fma_loop.runner())(3);
        assert_eq!(flops, 3.0 * flops_per_iteration(4));
    }

    #[test]
    fn the_widest_loop_is_the_cpus_widest_isa() {
        let cpu_isa = crate::runtime::Target::host().cpu_isa();
        match widest_loop() {
            Some((isa, run)) => {
                assert_eq!(isa, cpu_isa);
                assert_eq!(run(2), 2.0 * flops_per_iteration(isa.lanes()));
            }
            None => assert!(cpu_isa <= Isa::Sse, "{cpu_isa:?} has a wide loop"),
        }
    }
}
