//! The stencil primitives as symbols JIT code calls: `tessera_<name>`
//! (e.g. `tessera_avx512_stencil`).

use std::sync::OnceLock;

use crate::runtime::Target;
use crate::runtime::micro_kernels::Isa;
use crate::runtime::stencil::{self, StencilPrimitive};

fn table() -> &'static [(&'static str, &'static StencilPrimitive)] {
    static TABLE: OnceLock<Vec<(&'static str, &'static StencilPrimitive)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        stencil::all_primitives()
            .iter()
            .map(|p| {
                // Leaked once per primitive, for the life of the process.
                let symbol: &'static str =
                    Box::leak(format!("tessera_{}", p.name).into_boxed_str());
                (symbol, p)
            })
            .collect()
    })
}

/// The symbol and primitive for `isa`, when this build has one.
pub(crate) fn stencil_symbol(isa: Isa) -> Option<(&'static str, &'static StencilPrimitive)> {
    table().iter().find(|(_, p)| p.isa == isa).copied()
}

/// Every stencil primitive `target` may call, as `(symbol, address)` for
/// the JIT.
pub(crate) fn stencil_symbols(target: &Target) -> Vec<(&'static str, *const u8)> {
    let allowed = stencil::allowed_isas(target);
    table()
        .iter()
        .filter(|(_, p)| allowed.contains(&p.isa))
        .map(|(symbol, p)| (*symbol, p.func as *const u8))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_are_named_after_the_primitives_and_follow_the_cap() {
        for p in stencil::all_primitives() {
            let (symbol, found) = stencil_symbol(p.isa).expect("a symbol per primitive");
            assert_eq!(symbol, format!("tessera_{}_stencil", p.isa.name()));
            assert_eq!(found.name, p.name);
        }
        let host = Target::host();
        let names: Vec<&str> = stencil_symbols(&host).iter().map(|(s, _)| *s).collect();
        let want: Vec<String> = stencil::allowed_isas(&host)
            .iter()
            .map(|isa| format!("tessera_{}_stencil", isa.name()))
            .collect();
        assert_eq!(names, want);
        assert!(stencil_symbols(&host.with_isa_cap(Isa::Sse)).is_empty());
    }
}
