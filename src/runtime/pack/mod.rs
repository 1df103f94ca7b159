//! Packing routines: the 2-D strided copy that packs a GEMM operand into a
//! panel, written with `std::arch` at the machine's full width (Cranelift
//! lowers the same copy to 128-bit code at best, and a transposing one to
//! lane-wise scalar gathers). JIT code calls them through one C ABI
//! ([`PackFn`]) with `i64` arguments:
//!
//! `dst[r*dst_rs + c] = src[r*src_rs + c*src_cs]` for `r < rows`, `c < cols`.
//!
//! Every routine takes a fast path by the strides: `src_cs == 1` (plain:
//! vector loads and stores), `src_rs == 1` (transposed: in-register 4×4 /
//! 8×8 transposes, scalar edges), `src_cs` in 2..=4 (strided: contiguous
//! loads deinterleaved with shuffles) and any other stride element by
//! element. None reads or writes outside the region. One routine per
//! instruction set ([`Isa`]); the registry ([`all_routines`], [`find`],
//! [`routine_for`]) says which are compiled in, [`allowed_isas`] which a
//! [`Target`] may call.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod driver;
mod generic;
mod registry;
#[cfg(target_arch = "x86_64")]
mod sse;
#[cfg(test)]
mod tests;

pub use registry::{all_routines, allowed_isas, find, pack_isas, routine_for};

use super::Target;
use super::micro_kernels::{Isa, span};

/// The C ABI of every packing routine:
/// `dst[r*dst_rs + c] = src[r*src_rs + c*src_cs]` for `r < rows`,
/// `c < cols` (strides in elements; `rows` or `cols` ≤ 0 copies nothing).
///
/// # Safety
///
/// The caller guarantees that the CPU supports the routine's [`Isa`], that
/// every element of the region is valid to read (src) and write (dst), and
/// that the dst region does not overlap the src region. Nothing outside the
/// region is touched. Use [`run`] for a checked call.
pub type PackFn = unsafe extern "C" fn(
    src: *const f32,
    src_rs: i64,
    src_cs: i64,
    dst: *mut f32,
    dst_rs: i64,
    rows: i64,
    cols: i64,
);

/// One compiled packing routine.
#[derive(Clone, Copy, Debug)]
pub struct PackRoutine {
    /// `<isa>_pack`, e.g. `avx2_pack`; unique in [`all_routines`].
    pub name: &'static str,
    /// The instruction set it needs.
    pub isa: Isa,
    /// The entry point; see [`PackFn`] for its contract.
    pub func: PackFn,
}

/// Why [`run`] refused to call a packing routine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackError {
    /// The routine's instruction set is wider than the target allows.
    #[error(
        "packing routine `{routine}` needs {needs}, but this target allows only {host} \
         (cap: {cap}); pick one of allowed_isas(target)"
    )]
    NotAvailable {
        /// The routine's name.
        routine: &'static str,
        /// Its instruction set.
        needs: Isa,
        /// The widest instruction set the target allows.
        host: Isa,
        /// What capped it, e.g. `TESSERA_ISA=sse`, or `none`.
        cap: String,
    },
    /// A slice ends before the last element of its region.
    #[error(
        "{operand} is too short: the {rows}x{cols} region with these strides needs \
         {needed} elements, the slice has {len}"
    )]
    SliceTooShort {
        /// `src` or `dst`.
        operand: &'static str,
        /// Rows of the region.
        rows: usize,
        /// Columns of the region.
        cols: usize,
        /// Elements needed (`usize::MAX` on overflow).
        needed: usize,
        /// The slice's length.
        len: usize,
    },
    /// dst's row stride is smaller than `cols`: its rows would overlap.
    #[error("dst's row stride {dst_rs} is smaller than cols = {cols}: rows would overlap")]
    OverlappingRows {
        /// dst's row stride.
        dst_rs: usize,
        /// Columns asked for.
        cols: usize,
    },
}

fn check_len(
    operand: &'static str,
    (rows, cols): (usize, usize),
    (rs, cs): (usize, usize),
    len: usize,
) -> Result<(), PackError> {
    match span(rows, cols, rs, cs) {
        Some(needed) if needed <= len => Ok(()),
        needed => Err(PackError::SliceTooShort {
            operand,
            rows,
            cols,
            needed: needed.unwrap_or(usize::MAX),
            len,
        }),
    }
}

fn to_i64(x: usize) -> i64 {
    // Every value reaching here is bounded by a slice length (≤ isize::MAX).
    i64::try_from(x).unwrap_or(i64::MAX)
}

/// Calls routine `p` on slices, after checking that `target` may run it,
/// that dst's rows do not overlap, and that both slices cover their
/// regions. `(src_rs, src_cs)` and `dst_rs` are the strides of
/// [`PackFn`]'s formula.
pub fn run(
    target: &Target,
    p: &PackRoutine,
    src: &[f32],
    (src_rs, src_cs): (usize, usize),
    dst: &mut [f32],
    dst_rs: usize,
    (rows, cols): (usize, usize),
) -> Result<(), PackError> {
    if p.isa > target.isa() {
        return Err(PackError::NotAvailable {
            routine: p.name,
            needs: p.isa,
            host: target.isa(),
            cap: target.cap_description(),
        });
    }
    if rows > 1 && dst_rs < cols {
        return Err(PackError::OverlappingRows { dst_rs, cols });
    }
    check_len("src", (rows, cols), (src_rs, src_cs), src.len())?;
    check_len("dst", (rows, cols), (dst_rs, 1), dst.len())?;
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    // SAFETY: the target allows the ISA (a target's CPU is this host's);
    // both slices cover their regions (checked above); `dst` is a unique
    // borrow, so it does not overlap `src`.
    unsafe {
        (p.func)(
            src.as_ptr(),
            to_i64(src_rs),
            to_i64(src_cs),
            dst.as_mut_ptr(),
            to_i64(dst_rs),
            to_i64(rows),
            to_i64(cols),
        )
    }
    Ok(())
}

/// The scalar reference of [`PackFn`]'s formula on slices (panics if a
/// slice is too short).
pub fn reference(
    src: &[f32],
    (src_rs, src_cs): (usize, usize),
    dst: &mut [f32],
    dst_rs: usize,
    (rows, cols): (usize, usize),
) {
    for r in 0..rows {
        for c in 0..cols {
            dst[r * dst_rs + c] = src[r * src_rs + c * src_cs];
        }
    }
}
