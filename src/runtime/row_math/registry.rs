//! The table of the row primitives compiled into this build, lookup by name
//! or by (function, ISA), and the ISAs a target may use them at.

use std::sync::OnceLock;

use super::RowPrimitive;
use crate::runtime::Target;
use crate::runtime::micro_kernels::Isa;
use crate::te::Intrinsic;

/// Every row primitive compiled into this build, narrowest ISA first.
pub fn all_primitives() -> &'static [RowPrimitive] {
    static ALL: OnceLock<Vec<RowPrimitive>> = OnceLock::new();
    ALL.get_or_init(compiled)
}

#[cfg(target_arch = "x86_64")]
fn compiled() -> Vec<RowPrimitive> {
    [super::avx2::primitives(), super::avx512::primitives()].concat()
}

/// No row primitives off x86-64 (the inline f32x4 kernels serve).
#[cfg(not(target_arch = "x86_64"))]
fn compiled() -> Vec<RowPrimitive> {
    Vec::new()
}

/// The compiled-in primitive called `name` (e.g. `avx2_exp`).
pub fn find(name: &str) -> Option<&'static RowPrimitive> {
    all_primitives().iter().find(|p| p.name == name)
}

/// The compiled-in primitive computing `function` with `isa`.
pub fn primitive_for(function: Intrinsic, isa: Isa) -> Option<&'static RowPrimitive> {
    all_primitives()
        .iter()
        .find(|p| p.function == function && p.isa == isa)
}

/// The ISAs that have row primitives in this build, narrowest first.
pub fn row_math_isas() -> Vec<Isa> {
    let mut isas: Vec<Isa> = all_primitives().iter().map(|p| p.isa).collect();
    isas.sort();
    isas.dedup();
    isas
}

/// The row-math ISAs `target` may run (its ISA, capped), narrowest first;
/// empty on a target capped below AVX2 (e.g. `TESSERA_ISA=sse`).
pub fn allowed_isas(target: &Target) -> Vec<Isa> {
    row_math_isas()
        .into_iter()
        .filter(|&isa| isa <= target.isa())
        .collect()
}
