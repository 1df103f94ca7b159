//! The runtime of compiled kernels: aligned host buffers, the thread pool
//! that runs parallel loops, the per-thread workspace of their
//! intermediates, the description of the host device and the target code
//! is generated for.

mod buffer;
pub mod copy;
mod device;
pub mod micro_kernels;
pub mod pack;
pub mod parallel;
pub mod row_math;
pub mod stencil;
mod target;
pub mod workspace;

pub use buffer::{BUFFER_ALIGN, BufferError, NdBuffer};
pub use device::{CacheLevel, DeviceDescription, DeviceKey, host_device};
pub use parallel::{num_threads, set_num_threads};
pub use target::{ISA_ENV, Target};

/// The instruction set of the `tensorize` intrinsic `name`: a GEMM
/// micro-kernel's or a stencil primitive's; `None` when this build has
/// neither.
pub fn intrinsic_isa(name: &str) -> Option<micro_kernels::Isa> {
    micro_kernels::find(name)
        .map(|k| k.isa)
        .or_else(|| stencil::find(name).map(|p| p.isa))
}
