//! Tensorize: the hand-written GEMM micro-kernels (`runtime::micro_kernels`) and
//! the schedule step that replaces a loop block by a call of one: random
//! tiles around every kernel against the reference, through the IR
//! interpreter and the JIT; blocks that do not match are typed errors.

use crate::common;

use tessera::runtime::Target;
use tessera::runtime::micro_kernels::{self, Isa, MicroKernel, MicroKernelError};

/// The machine these tests run on, as `TESSERA_ISA` caps it. A test that
/// needs a narrower ISA builds its own capped target from it
/// ([`Target::with_isa_cap`]): nothing is process-wide, so the tests run
/// in parallel.
fn host() -> Target {
    Target::from_env()
}

/// Deterministic values in [-1, 1) (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
        (bits as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// The micro-kernel ISAs these tests cover here, printed for the running
/// test and checked against `TESSERA_REQUIRE_ISA`: every test that would
/// leave out an ISA the host or `TESSERA_ISA` lacks takes its kernels from
/// this, so the ones left out are said, never silently dropped.
fn coverage() -> common::IsaCoverage {
    common::isa_coverage(&host())
}

mod constant_copies;
mod epilogue;
mod kernels;
mod pack;
mod sketches;
mod stencil;
pub(crate) mod step;
