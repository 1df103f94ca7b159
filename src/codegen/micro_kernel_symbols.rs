//! The micro-kernels as symbols JIT code calls: `tessera_micro_kernel_<name>`.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::runtime::Target;
use crate::runtime::micro_kernels::{self, MicroKernel};

fn table() -> &'static HashMap<&'static str, (&'static str, &'static MicroKernel)> {
    static TABLE: OnceLock<HashMap<&'static str, (&'static str, &'static MicroKernel)>> =
        OnceLock::new();
    TABLE.get_or_init(|| {
        micro_kernels::all_kernels()
            .iter()
            .map(|k| {
                // Leaked once per kernel, for the life of the process.
                let symbol: &'static str =
                    Box::leak(format!("tessera_micro_kernel_{}", k.name).into_boxed_str());
                (k.name, (symbol, k))
            })
            .collect()
    })
}

/// The symbol and kernel of the micro-kernel `name`.
pub(crate) fn micro_kernel_symbol(name: &str) -> Option<(&'static str, &'static MicroKernel)> {
    table().get(name).copied()
}

/// Every micro-kernel `target` may call, as `(symbol, address)` for the JIT.
pub(crate) fn micro_kernel_symbols(target: &Target) -> Vec<(&'static str, *const u8)> {
    table()
        .values()
        .filter(|(_, k)| target.can_run(k))
        .map(|(symbol, k)| (*symbol, k.func as *const u8))
        .collect()
}
