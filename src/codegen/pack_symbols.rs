//! The packing routines as symbols JIT code calls: `tessera_pack_<isa>`.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::runtime::Target;
use crate::runtime::pack::{self, PackRoutine};

fn table() -> &'static HashMap<&'static str, (&'static str, &'static PackRoutine)> {
    static TABLE: OnceLock<HashMap<&'static str, (&'static str, &'static PackRoutine)>> =
        OnceLock::new();
    TABLE.get_or_init(|| {
        pack::all_routines()
            .iter()
            .map(|p| {
                // Leaked once per routine, for the life of the process.
                let symbol: &'static str =
                    Box::leak(format!("tessera_pack_{}", p.isa.name()).into_boxed_str());
                (p.name, (symbol, p))
            })
            .collect()
    })
}

/// The symbol and routine called `name` (e.g. `avx2_pack`).
pub(crate) fn pack_symbol(name: &str) -> Option<(&'static str, &'static PackRoutine)> {
    table().get(name).copied()
}

/// Every packing routine `target` may call, as `(symbol, address)` for the JIT.
pub(crate) fn pack_symbols(target: &Target) -> Vec<(&'static str, *const u8)> {
    table()
        .values()
        .filter(|(_, p)| p.isa <= target.isa())
        .map(|(symbol, p)| (*symbol, p.func as *const u8))
        .collect()
}
