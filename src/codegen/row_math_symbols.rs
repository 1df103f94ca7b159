//! The row primitives as symbols JIT code calls: `tessera_row_math_<name>`
//! (e.g. `tessera_row_math_avx2_exp`).

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::runtime::Target;
use crate::runtime::row_math::{self, RowPrimitive};

fn table() -> &'static HashMap<String, (&'static str, &'static RowPrimitive)> {
    static TABLE: OnceLock<HashMap<String, (&'static str, &'static RowPrimitive)>> =
        OnceLock::new();
    TABLE.get_or_init(|| {
        row_math::all_primitives()
            .iter()
            .map(|p| {
                // Leaked once per primitive, for the life of the process.
                let symbol: &'static str =
                    Box::leak(format!("tessera_row_math_{}", p.name).into_boxed_str());
                (p.name.to_string(), (symbol, p))
            })
            .collect()
    })
}

/// The symbol and primitive called `name`.
pub(crate) fn row_math_symbol(name: &str) -> Option<(&'static str, &'static RowPrimitive)> {
    table().get(name).copied()
}

/// Every row primitive `target` may call, as `(symbol, address)` for the JIT.
pub(crate) fn row_math_symbols(target: &Target) -> Vec<(&'static str, *const u8)> {
    let allowed = row_math::allowed_isas(target);
    table()
        .values()
        .filter(|(_, p)| allowed.contains(&p.isa))
        .map(|(symbol, p)| (*symbol, p.func as *const u8))
        .collect()
}
