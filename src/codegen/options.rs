//! Code generation options.

/// Cranelift's optimisation level (a tunable: `speed` can spill tiled
/// kernels and compiles much slower; measure both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum OptLevel {
    /// No mid-end optimisation (fast compiles).
    #[default]
    None,
    /// Cranelift's `speed` level.
    Speed,
}

/// How a loop-IR function is compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct CodegenOptions {
    /// Cranelift optimisation level.
    pub opt_level: OptLevel,
    /// Bit-stable floating point: no FMA contraction.
    pub strict_fp: bool,
    /// Keep the machine-code listing of the entry function ([`Kernel::listing`](super::Kernel::listing)).
    pub listing: bool,
}
