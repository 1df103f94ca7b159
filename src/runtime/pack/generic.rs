//! The portable scalar packing routine (any architecture): the fallback
//! below SSE and what `TESSERA_ISA=generic` selects.

use super::driver::scalar;
use super::{Isa, PackRoutine};

/// The scalar routine.
pub(super) fn routine() -> PackRoutine {
    PackRoutine {
        name: "generic_pack",
        isa: Isa::Generic,
        func: generic_pack,
    }
}

/// [`super::PackFn`] element by element.
///
/// # Safety
///
/// As [`super::PackFn`].
unsafe extern "C" fn generic_pack(
    src: *const f32,
    src_rs: i64,
    src_cs: i64,
    dst: *mut f32,
    dst_rs: i64,
    rows: i64,
    cols: i64,
) {
    let (rows, cols) = (rows.max(0) as isize, cols.max(0) as isize);
    // SAFETY: forwarded contract.
    unsafe {
        scalar(
            src,
            src_rs as isize,
            src_cs as isize,
            dst,
            dst_rs as isize,
            0..rows,
            0..cols,
        )
    }
}
