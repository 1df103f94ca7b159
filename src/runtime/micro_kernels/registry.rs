//! The table of the micro-kernels compiled into this build, and lookup by
//! name. Which of them code may call is its
//! [`Target`](crate::runtime::Target)'s to say.

use std::sync::OnceLock;

use super::{MicroKernel, generic};

/// Every kernel compiled into this build, narrowest ISA first.
pub fn all_kernels() -> &'static [MicroKernel] {
    static ALL: OnceLock<Vec<MicroKernel>> = OnceLock::new();
    ALL.get_or_init(|| [generic::kernels(), simd_kernels()].concat())
}

/// The vector kernels of this architecture, narrowest ISA first.
#[cfg(target_arch = "x86_64")]
fn simd_kernels() -> Vec<MicroKernel> {
    [
        super::sse::kernels(),
        super::avx2::kernels(),
        super::avx512::kernels(),
    ]
    .concat()
}

/// No vector kernels off x86-64: the scalar one serves.
#[cfg(not(target_arch = "x86_64"))]
fn simd_kernels() -> Vec<MicroKernel> {
    Vec::new()
}

/// The compiled-in kernel called `name` (e.g. `avx512_6x32`), whether or
/// not a target may call it.
pub fn find(name: &str) -> Option<&'static MicroKernel> {
    all_kernels().iter().find(|k| k.name == name)
}
