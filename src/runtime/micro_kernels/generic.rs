//! The portable scalar micro-kernel (any architecture): the fallback when no
//! vector kernel is available, and the one `TESSERA_ISA=generic` selects.

use super::{Epilogue, Isa, MicroKernel};

/// The scalar kernels compiled in everywhere.
pub(super) fn kernels() -> Vec<MicroKernel> {
    vec![MicroKernel {
        name: "generic_4x4",
        isa: Isa::Generic,
        mr: 4,
        nr: 4,
        func: generic_4x4,
    }]
}

/// `C[m×n] (+)= A[m×kc] · B[kc×n]` with a 4×4 scalar tile; see
/// [`super::GemmFn`] for the contract.
///
/// # Safety
///
/// As [`super::GemmFn`].
unsafe extern "C" fn generic_4x4(
    kc: i64,
    a: *const f32,
    a_rs: i64,
    a_cs: i64,
    b: *const f32,
    b_rs: i64,
    c: *mut f32,
    c_rs: i64,
    m: i64,
    n: i64,
    accumulate: i64,
    epilogue: *const Epilogue,
) {
    // SAFETY: forwarded contract.
    unsafe {
        tile::<4, 4>(
            kc,
            a,
            a_rs,
            a_cs,
            b,
            b_rs,
            c,
            c_rs,
            m,
            n,
            accumulate,
            epilogue.as_ref(),
        )
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn tile<const MR: usize, const NR: usize>(
    kc: i64,
    a: *const f32,
    a_rs: i64,
    a_cs: i64,
    b: *const f32,
    b_rs: i64,
    c: *mut f32,
    c_rs: i64,
    m: i64,
    n: i64,
    accumulate: i64,
    epilogue: Option<&Epilogue>,
) {
    let m = m.clamp(0, MR as i64) as usize;
    let n = n.clamp(0, NR as i64) as usize;
    if m == 0 || n == 0 {
        return;
    }
    let (a_rs, a_cs, b_rs, c_rs) = (a_rs as isize, a_cs as isize, b_rs as isize, c_rs as isize);
    let mut acc = [[0f32; NR]; MR];
    // SAFETY (all accesses): the caller guarantees the m×n / kc region is
    // valid, and every index below stays inside it.
    unsafe {
        if accumulate != 0 {
            for (i, row) in acc.iter_mut().enumerate().take(m) {
                for (j, x) in row.iter_mut().enumerate().take(n) {
                    *x = *c.offset(i as isize * c_rs + j as isize);
                }
            }
        }
        let (mut ap, mut bp) = (a, b);
        for _ in 0..kc.max(0) {
            for (i, row) in acc.iter_mut().enumerate().take(m) {
                let x = *ap.offset(i as isize * a_rs);
                for (j, y) in row.iter_mut().enumerate().take(n) {
                    *y += x * *bp.add(j);
                }
            }
            ap = ap.wrapping_offset(a_cs);
            bp = bp.wrapping_offset(b_rs);
        }
        for (i, row) in acc.iter().enumerate().take(m) {
            for (j, x) in row.iter().enumerate().take(n) {
                let x = match epilogue {
                    Some(e) => e.apply(i, j, *x),
                    None => *x,
                };
                *c.offset(i as isize * c_rs + j as isize) = x;
            }
        }
    }
}
