//! Row primitives: f32 transcendental functions applied in place to a row
//! of floats at the machine's full vector width, written with `std::arch`
//! (Cranelift emits only 128-bit vectors). A `row_math` schedule step makes
//! a vectorised loop compute its `exp`/`log`/`tanh`/`sigmoid`/`erf` calls
//! through one of these ([`crate::schedule::Step::RowMath`]).
//!
//! Every primitive has one C ABI ([`RowMathFn`]): `data[j] = f(data[j])`
//! for `0 ≤ j < n`, any `n ≥ 0`. Each is the f32x4 kernel of
//! `codegen::math` ported op for op (same [`constants`], same fused
//! multiply-adds in the same order, same special-value selects), so its
//! results are bit-identical to the inline Cranelift code. Primitives exist
//! per instruction set ([`Isa::Avx2Fma`], [`Isa::Avx512`]); the registry
//! ([`all_primitives`], [`find`], [`primitive_for`]) says which are compiled
//! in, a [`Target`] which this CPU may run ([`allowed_isas`]).

#[cfg(target_arch = "x86_64")]
mod algorithms;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
pub mod constants;
mod registry;

pub use registry::{all_primitives, allowed_isas, find, primitive_for, row_math_isas};

use super::Target;
use super::micro_kernels::Isa;
use crate::te::Intrinsic;

/// The C ABI of every row primitive: `data[j] = f(data[j])` for
/// `0 ≤ j < n` (nothing for `n ≤ 0`).
///
/// # Safety
///
/// The caller guarantees that the CPU supports the primitive's [`Isa`] and
/// that `data` is valid for reading and writing `n` floats. Nothing outside
/// them is touched. Use [`run`] for a checked call.
pub type RowMathFn = unsafe extern "C" fn(data: *mut f32, n: i64);

/// One compiled row primitive.
#[derive(Clone, Copy, Debug)]
pub struct RowPrimitive {
    /// `<isa>_<function>`, e.g. `avx2_exp`; unique in [`all_primitives`].
    pub name: &'static str,
    /// The instruction set it needs.
    pub isa: Isa,
    /// The function it computes.
    pub function: Intrinsic,
    /// The entry point; see [`RowMathFn`].
    pub func: RowMathFn,
}

/// The f32 functions that have row primitives (the transcendental ones).
pub const ROW_MATH_FUNCTIONS: [Intrinsic; 5] = [
    Intrinsic::Exp,
    Intrinsic::Log,
    Intrinsic::Tanh,
    Intrinsic::Sigmoid,
    Intrinsic::Erf,
];

/// Whether `f` (on f32) has row primitives.
pub fn has_row_primitive(f: Intrinsic) -> bool {
    ROW_MATH_FUNCTIONS.contains(&f)
}

/// Why [`run`] refused to call a row primitive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowMathError {
    /// The primitive's instruction set is wider than the target allows.
    #[error(
        "row primitive `{name}` needs {needs}, but this target allows only {host} \
         (CPU supports {cpu}; cap: {cap})"
    )]
    NotAvailable {
        /// The primitive.
        name: &'static str,
        /// Its instruction set.
        needs: Isa,
        /// The widest instruction set the target allows.
        host: Isa,
        /// The widest instruction set the CPU supports.
        cpu: Isa,
        /// What capped it, e.g. `TESSERA_ISA=sse`, or `none`.
        cap: String,
    },
}

/// Applies `primitive` to every element of `data`, after checking that
/// `target` may run it.
pub fn run(
    target: &Target,
    primitive: &RowPrimitive,
    data: &mut [f32],
) -> Result<(), RowMathError> {
    if primitive.isa > target.isa() {
        return Err(RowMathError::NotAvailable {
            name: primitive.name,
            needs: primitive.isa,
            host: target.isa(),
            cpu: target.cpu_isa(),
            cap: target.cap_description(),
        });
    }
    let n = i64::try_from(data.len()).unwrap_or(i64::MAX);
    // SAFETY: the target allows the ISA and every target describes this
    // host's CPU; `data` is a unique borrow of `n` floats.
    unsafe { (primitive.func)(data.as_mut_ptr(), n) };
    Ok(())
}
