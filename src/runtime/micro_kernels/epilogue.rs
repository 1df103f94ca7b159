//! A fused epilogue: what a micro-kernel does to each result of its tile
//! before storing it, so the elementwise consumer of a matrix product (a
//! bias, a residual, a ReLU or a clip) runs on the accumulators at the
//! kernel's full vector width instead of as a second pass over the tile.
//!
//! The result `x` at `(i, j)` becomes, in this order,
//! `x + addend₀(i, j) + addend₁(i, j)` (each present addend, left to
//! right), then `max(·, lower)`, then `min(·, upper)` (each where its
//! [`Epilogue::clamp`] bit is set): the order of the elementwise expression
//! it replaces, so results are bit-identical to it.

/// At most this many addends per epilogue.
pub const MAX_ADDENDS: usize = 2;

/// [`Epilogue::clamp`] bit: `max(x, lower)`.
pub const CLAMP_LOWER: i64 = 1;
/// [`Epilogue::clamp`] bit: `min(x, upper)` (after the lower clamp).
pub const CLAMP_UPPER: i64 = 2;

/// One term added to every result: element `(i, j)` at
/// `data[i·row_stride + j·col_stride]`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Addend {
    /// Element (0, 0); null where the slot is unused.
    pub data: *const f32,
    /// Elements between rows (0: the same value for every row).
    pub row_stride: i64,
    /// 0 (one value per row, broadcast along it) or 1 (contiguous along the row).
    pub col_stride: i64,
}

impl Addend {
    /// An unused slot.
    pub const NONE: Addend = Addend {
        data: std::ptr::null(),
        row_stride: 0,
        col_stride: 0,
    };
}

/// The epilogue a micro-kernel applies before it stores (see the
/// [module docs](self)); the last argument of
/// [`GemmFn`](super::GemmFn), null for none. Laid out as C lays out the
/// same fields, so JIT-compiled code and `tessera_kernels.c` build it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Epilogue {
    /// The addends, applied in order; unused slots have a null `data`.
    pub addends: [Addend; MAX_ADDENDS],
    /// The lower clamp (with [`CLAMP_LOWER`]).
    pub lower: f32,
    /// The upper clamp (with [`CLAMP_UPPER`]).
    pub upper: f32,
    /// [`CLAMP_LOWER`] | [`CLAMP_UPPER`], or 0.
    pub clamp: i64,
}

impl Epilogue {
    /// The addends in use, in order.
    pub fn used_addends(&self) -> impl Iterator<Item = &Addend> {
        self.addends.iter().filter(|a| !a.data.is_null())
    }

    /// `x` after the epilogue, as the result at `(i, j)`: the scalar
    /// meaning every kernel matches.
    ///
    /// # Safety
    ///
    /// Every used addend's element `(i, j)` must be valid to read.
    pub unsafe fn apply(&self, i: usize, j: usize, x: f32) -> f32 {
        let mut x = x;
        for addend in self.used_addends() {
            let at =
                i as isize * addend.row_stride as isize + j as isize * addend.col_stride as isize;
            // SAFETY: the caller's contract.
            x += unsafe { *addend.data.offset(at) };
        }
        if self.clamp & CLAMP_LOWER != 0 {
            x = x.max(self.lower);
        }
        if self.clamp & CLAMP_UPPER != 0 {
            x = x.min(self.upper);
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Target;
    use crate::runtime::micro_kernels::MicroKernel;

    /// Deterministic values in [-2, 2) (bit patterns of a 32-bit LCG).
    fn values(len: usize, seed: u32) -> Vec<f32> {
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..len)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
            })
            .collect()
    }

    /// C of an `m×n` call of `k` (row stride `c_rs`, guard cells at -7),
    /// with `epilogue` (or none).
    fn call(k: &MicroKernel, m: usize, n: usize, epilogue: Option<&Epilogue>) -> Vec<f32> {
        let kc = 13;
        let a = values(k.mr * kc, 1);
        let b = values(kc * k.nr, 2);
        let c_rs = k.nr + 5;
        let mut c = vec![-7.0f32; k.mr * c_rs];
        let epilogue = epilogue.map_or(std::ptr::null(), |e| e as *const Epilogue);
        // SAFETY: the host runs k (from Target::kernels); A is packed
        // (a_rs 1, a_cs MR), B has NR columns per row, C has MR rows of
        // c_rs ≥ n, every addend covers MR rows of NR columns.
        unsafe {
            (k.func)(
                kc as i64,
                a.as_ptr(),
                1,
                k.mr as i64,
                b.as_ptr(),
                k.nr as i64,
                c.as_mut_ptr(),
                c_rs as i64,
                m as i64,
                n as i64,
                0,
                epilogue,
            )
        };
        c
    }

    #[test]
    fn every_kernel_stores_its_results_through_the_epilogue_bit_for_bit() {
        for k in Target::from_env().kernels() {
            let per_row = values(k.mr, 3);
            let along_rows = values(k.nr, 4);
            let rs = k.nr + 2;
            let matrix = values(k.mr * rs, 5);
            let addend = |data: &[f32], row_stride: usize, col_stride: i64| Addend {
                data: data.as_ptr(),
                row_stride: row_stride as i64,
                col_stride,
            };
            let epilogues = [
                // A bias per row and a ReLU6 (MobileNet's 1×1 convolutions).
                Epilogue {
                    addends: [addend(&per_row, 1, 0), Addend::NONE],
                    lower: 0.0,
                    upper: 6.0,
                    clamp: CLAMP_LOWER | CLAMP_UPPER,
                },
                // A bias per row, a residual and a ReLU (ResNet's blocks).
                Epilogue {
                    addends: [addend(&per_row, 1, 0), addend(&matrix, rs, 1)],
                    lower: 0.0,
                    upper: 0.0,
                    clamp: CLAMP_LOWER,
                },
                // A bias per column (a dense layer) and an upper clamp.
                Epilogue {
                    addends: [addend(&along_rows, 0, 1), Addend::NONE],
                    lower: 0.0,
                    upper: 0.5,
                    clamp: CLAMP_UPPER,
                },
                // Nothing: a plain store.
                Epilogue {
                    addends: [Addend::NONE; MAX_ADDENDS],
                    lower: 0.0,
                    upper: 0.0,
                    clamp: 0,
                },
            ];
            let lanes = k.isa.lanes();
            let mut ms = vec![1, k.mr.saturating_sub(1).max(1), k.mr];
            ms.dedup();
            let mut ns = vec![
                1,
                (lanes + 1).min(k.nr),
                k.nr.saturating_sub(1).max(1),
                k.nr,
            ];
            ns.sort_unstable();
            ns.dedup();
            for (e, epilogue) in epilogues.iter().enumerate() {
                for &m in &ms {
                    for &n in &ns {
                        let plain = call(k, m, n, None);
                        let fused = call(k, m, n, Some(epilogue));
                        let c_rs = k.nr + 5;
                        for i in 0..k.mr {
                            for j in 0..c_rs {
                                let at = i * c_rs + j;
                                let want = if i < m && j < n {
                                    // SAFETY: every addend covers MR×NR.
                                    unsafe { epilogue.apply(i, j, plain[at]) }
                                } else {
                                    -7.0
                                };
                                assert_eq!(
                                    fused[at].to_bits(),
                                    want.to_bits(),
                                    "{} m={m} n={n} epilogue {e} at ({i}, {j}): {} != {want}",
                                    k.name,
                                    fused[at]
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
