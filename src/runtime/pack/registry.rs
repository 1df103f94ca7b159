//! The table of the packing routines compiled into this build, lookup by
//! name or ISA, and the ISAs a target may call.

use std::sync::OnceLock;

use super::{Isa, PackRoutine, generic};
use crate::runtime::Target;

/// Every routine compiled into this build, narrowest ISA first.
pub fn all_routines() -> &'static [PackRoutine] {
    static ALL: OnceLock<Vec<PackRoutine>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut all = vec![generic::routine()];
        all.extend(simd_routines());
        all
    })
}

#[cfg(target_arch = "x86_64")]
fn simd_routines() -> Vec<PackRoutine> {
    vec![
        super::sse::routine(),
        super::avx2::routine(),
        super::avx512::routine(),
    ]
}

/// No vector routines off x86-64: the scalar one serves.
#[cfg(not(target_arch = "x86_64"))]
fn simd_routines() -> Vec<PackRoutine> {
    Vec::new()
}

/// The compiled-in routine called `name` (e.g. `avx2_pack`).
pub fn find(name: &str) -> Option<&'static PackRoutine> {
    all_routines().iter().find(|p| p.name == name)
}

/// The compiled-in routine of `isa`.
pub fn routine_for(isa: Isa) -> Option<&'static PackRoutine> {
    all_routines().iter().find(|p| p.isa == isa)
}

/// The ISAs with a packing routine in this build, narrowest first.
pub fn pack_isas() -> Vec<Isa> {
    all_routines().iter().map(|p| p.isa).collect()
}

/// The ISAs whose routine `target` may call (its ISA, capped), narrowest
/// first; always at least [`Isa::Generic`].
pub fn allowed_isas(target: &Target) -> Vec<Isa> {
    pack_isas()
        .into_iter()
        .filter(|&isa| isa <= target.isa())
        .collect()
}
