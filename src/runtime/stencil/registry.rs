//! The table of the stencil primitives compiled into this build, lookup by
//! name or by ISA, and the ISAs a target may use them at.

use std::sync::OnceLock;

use super::StencilPrimitive;
use crate::runtime::Target;
use crate::runtime::micro_kernels::Isa;

/// Every stencil primitive compiled into this build, narrowest ISA first.
pub fn all_primitives() -> &'static [StencilPrimitive] {
    static ALL: OnceLock<Vec<StencilPrimitive>> = OnceLock::new();
    ALL.get_or_init(compiled)
}

#[cfg(target_arch = "x86_64")]
fn compiled() -> Vec<StencilPrimitive> {
    [super::avx2::primitives(), super::avx512::primitives()].concat()
}

/// No stencil primitives off x86-64 (the loops Cranelift compiles serve).
#[cfg(not(target_arch = "x86_64"))]
fn compiled() -> Vec<StencilPrimitive> {
    Vec::new()
}

/// The compiled-in primitive called `name` (e.g. `avx512_stencil`).
pub fn find(name: &str) -> Option<&'static StencilPrimitive> {
    all_primitives().iter().find(|p| p.name == name)
}

/// The compiled-in primitive for `isa`.
pub fn primitive_for(isa: Isa) -> Option<&'static StencilPrimitive> {
    all_primitives().iter().find(|p| p.isa == isa)
}

/// The ISAs that have stencil primitives in this build, narrowest first.
pub fn stencil_isas() -> Vec<Isa> {
    let mut isas: Vec<Isa> = all_primitives().iter().map(|p| p.isa).collect();
    isas.sort();
    isas.dedup();
    isas
}

/// The stencil ISAs `target` may run (its ISA, capped), narrowest first;
/// empty on a target capped below AVX2 (e.g. `TESSERA_ISA=sse`).
pub fn allowed_isas(target: &Target) -> Vec<Isa> {
    stencil_isas()
        .into_iter()
        .filter(|&isa| isa <= target.isa())
        .collect()
}
