//! Code generation options.

use crate::runtime::Target;

/// Cranelift's optimisation level. `speed` is the default: measured on the
/// committed tiled schedules (1 thread, 1024³ matmul and 56×56×64 conv2d) it
/// runs 2.8× and 6× faster than `none` and compiles in about the same time
/// (1–5 ms); `none` remains a tunable knob.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub enum OptLevel {
    /// No mid-end optimisation.
    None,
    /// Cranelift's `speed` level.
    #[default]
    Speed,
}

/// How a loop-IR function is compiled, and for which [`Target`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CodegenOptions {
    /// Cranelift optimisation level.
    pub opt_level: OptLevel,
    /// Bit-stable floating point: no FMA contraction.
    pub strict_fp: bool,
    /// Keep the machine-code listing of the entry function ([`Kernel::listing`](super::Kernel::listing)).
    pub listing: bool,
    /// The machine the code is for: which micro-kernels it may call.
    pub target: Target,
}

impl CodegenOptions {
    /// The default options (`speed`, FMA contraction allowed, no listing)
    /// for `target`.
    pub fn for_target(target: Target) -> CodegenOptions {
        CodegenOptions {
            opt_level: OptLevel::default(),
            strict_fp: false,
            listing: false,
            target,
        }
    }
}

impl Default for CodegenOptions {
    /// The default options for this machine as `TESSERA_ISA` caps it
    /// ([`Target::from_env`]).
    fn default() -> Self {
        CodegenOptions::for_target(Target::from_env())
    }
}
