//! The AVX2 + FMA stencil primitive (8 f32 lanes): a row in blocks of up
//! to four vectors (32 outputs) held in registers, one broadcast weight and
//! one fused multiply-add per vector and tap, the row's last vector loaded
//! and stored through `vmaskmovps` lane masks (masked-out lanes never
//! fault). Inputs of consecutive outputs are loaded directly (`in_x` = 1),
//! as two vectors shuffled to their even lanes (`in_x` = 2; the shuffle
//! leaves the lanes in an order the block undoes once, at its store), or
//! gathered (other strides).

use std::arch::x86_64::{
    __m256, __m256i, _mm256_castpd_ps, _mm256_castps_pd, _mm256_castsi256_ps, _mm256_cmpgt_epi32,
    _mm256_fmadd_ps, _mm256_i32gather_ps, _mm256_loadu_ps, _mm256_loadu_si256,
    _mm256_mask_i32gather_ps, _mm256_maskload_ps, _mm256_maskstore_ps, _mm256_permute4x64_pd,
    _mm256_set1_epi32, _mm256_set1_ps, _mm256_setr_epi32, _mm256_setzero_ps, _mm256_shuffle_ps,
    _mm256_storeu_ps,
};

use super::{Row, StencilPrimitive, offset};
use crate::runtime::micro_kernels::Isa;

/// f32 lanes of one vector.
const LANES: usize = 8;
/// Vectors of one block: accumulators held in registers across the taps.
const BLOCK: usize = 4;

/// The AVX2 + FMA primitive.
pub(super) fn primitives() -> Vec<StencilPrimitive> {
    vec![StencilPrimitive {
        name: "avx2_stencil",
        isa: Isa::Avx2Fma,
        func: avx2_stencil,
    }]
}

/// [`StencilFn`](super::StencilFn) on AVX2 + FMA.
///
/// # Safety
///
/// The [`StencilFn`](super::StencilFn) contract, on a CPU with AVX2 and FMA.
#[allow(clippy::too_many_arguments)] // the C ABI
unsafe extern "C" fn avx2_stencil(
    out: *mut f32,
    input: *const f32,
    weight: *const f32,
    n: i64,
    taps_r: i64,
    taps_s: i64,
    in_x: i64,
    in_r: i64,
    in_s: i64,
    w_r: i64,
    w_s: i64,
    accumulate: i64,
) {
    let Some(row) = Row::new(
        out, input, weight, n, taps_r, taps_s, in_x, in_r, in_s, w_r, w_s, accumulate,
    ) else {
        return;
    };
    // SAFETY: the caller's contract; the registry lists this primitive as
    // needing AVX2 and FMA.
    unsafe { stencil(&row) }
}

/// Picks the input loads for the row's `in_x`.
///
/// # Safety
///
/// The [`StencilFn`](super::StencilFn) contract for `row`.
#[target_feature(enable = "avx2,fma")]
unsafe fn stencil(row: &Row) {
    // SAFETY (all arms): the caller's contract.
    match row.in_x {
        1 => unsafe { taps(row, Contiguous) },
        2 => unsafe { taps(row, Stride2) },
        in_x => match Gather::new(in_x) {
            Some(gather) => unsafe { blocks::<Gather, 0, 0>(row, gather) },
            None => unsafe { row.scalar(0..row.n) },
        },
    }
}

/// Runs the row with the filter size compiled in for the common
/// depthwise filters (3×3, 5×5), any size otherwise.
///
/// # Safety
///
/// The [`StencilFn`](super::StencilFn) contract for `row`.
#[target_feature(enable = "avx2,fma")]
unsafe fn taps<L: Inputs>(row: &Row, inputs: L) {
    // SAFETY (all arms): the caller's contract.
    match (row.taps_r, row.taps_s) {
        (3, 3) => unsafe { blocks::<L, 3, 3>(row, inputs) },
        (5, 5) => unsafe { blocks::<L, 5, 5>(row, inputs) },
        _ => unsafe { blocks::<L, 0, 0>(row, inputs) },
    }
}

/// The row in blocks of [`BLOCK`] vectors, then one last block of 1 to
/// [`BLOCK`] vectors whose last vector has 1 to [`LANES`] outputs and
/// goes through lane masks. `R`, `S`: the filter size, or 0 to read it
/// from `row`.
///
/// # Safety
///
/// The [`StencilFn`](super::StencilFn) contract for `row`.
#[target_feature(enable = "avx2,fma")]
unsafe fn blocks<L: Inputs, const R: usize, const S: usize>(row: &Row, inputs: L) {
    let n = row.n;
    let mut j = 0;
    // Every vector of these blocks has outputs after it.
    while n - j > BLOCK * LANES {
        // SAFETY: outputs `j..j + 32` of the row, more after them.
        unsafe { block::<L, BLOCK, false, R, S>(row, inputs, j, LANES) };
        j += BLOCK * LANES;
    }
    let rest = n - j; // 1..=32: `n ≥ 1`
    let vectors = rest.div_ceil(LANES);
    let last = rest - (vectors - 1) * LANES;
    // SAFETY (all arms): the row's last outputs, `j..n`.
    match vectors {
        1 => unsafe { block::<L, 1, true, R, S>(row, inputs, j, last) },
        2 => unsafe { block::<L, 2, true, R, S>(row, inputs, j, last) },
        3 => unsafe { block::<L, 3, true, R, S>(row, inputs, j, last) },
        _ => unsafe { block::<L, 4, true, R, S>(row, inputs, j, last) },
    }
}

/// Outputs `j..` of `V` vectors: accumulators in registers (in the lane
/// order the loads deliver), for each tap one broadcast weight and one
/// fused multiply-add per vector. With `TAIL`, the last vector has `last`
/// outputs (1 to 8) and is the row's last: it is loaded and stored through
/// lane masks.
///
/// # Safety
///
/// The [`StencilFn`](super::StencilFn) contract for `row`; the block's
/// outputs lie in `0..n`, and without `TAIL` the row has outputs after
/// them.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn block<L: Inputs, const V: usize, const TAIL: bool, const R: usize, const S: usize>(
    row: &Row,
    inputs: L,
    j: usize,
    last: usize,
) {
    let taps_r = if R == 0 { row.taps_r } else { R };
    let taps_s = if S == 0 { row.taps_s } else { S };
    let out_mask = lane_mask(last);
    // SAFETY: `1 ≤ last ≤ 8`.
    let tail = unsafe { inputs.tail(last) };
    let out = row.out.wrapping_add(j);
    let is_tail = |v: usize| TAIL && v == V - 1;

    let mut acc = [_mm256_setzero_ps(); V];
    if row.accumulate {
        for (v, a) in acc.iter_mut().enumerate() {
            let p = out.wrapping_add(v * LANES);
            // SAFETY: outputs of this block, in `0..n` (the masked lanes
            // are never touched).
            let natural = unsafe {
                if is_tail(v) {
                    _mm256_maskload_ps(p, out_mask)
                } else {
                    _mm256_loadu_ps(p)
                }
            };
            // SAFETY: AVX2 is enabled.
            *a = unsafe { inputs.order(natural) };
        }
    }
    let input = row.input.wrapping_offset(offset(j, row.in_x));
    let vector_step = offset(LANES, row.in_x);
    for r in 0..taps_r {
        for s in 0..taps_s {
            let tap_w = offset(r, row.w_r).wrapping_add(offset(s, row.w_s));
            // SAFETY: a weight the formula names.
            let w = _mm256_set1_ps(unsafe { *row.weight.wrapping_offset(tap_w) });
            let tap = input.wrapping_offset(offset(r, row.in_r).wrapping_add(offset(s, row.in_s)));
            for (v, a) in acc.iter_mut().enumerate() {
                let p = tap.wrapping_offset(offset(v, vector_step));
                // SAFETY: the inputs of this block's outputs at this tap;
                // a vector that is not the tail has outputs after it.
                let x = unsafe {
                    if is_tail(v) {
                        inputs.load_tail(p, tail)
                    } else {
                        inputs.load(p)
                    }
                };
                *a = _mm256_fmadd_ps(w, x, *a);
            }
        }
    }
    for (v, a) in acc.into_iter().enumerate() {
        let p = out.wrapping_add(v * LANES);
        // SAFETY: AVX2 is enabled; outputs of this block, in `0..n`.
        unsafe {
            let natural = inputs.order(a);
            if is_tail(v) {
                _mm256_maskstore_ps(p, out_mask, natural)
            } else {
                _mm256_storeu_ps(p, natural)
            }
        }
    }
}

/// All ones in lanes `0..count` (`count ≤ 8`), zero in the others.
#[target_feature(enable = "avx2")]
#[inline]
fn lane_mask(count: usize) -> __m256i {
    _mm256_cmpgt_epi32(
        _mm256_set1_epi32(count.min(LANES) as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    )
}

/// How a vector of 8 consecutive outputs loads its input at one tap from
/// `p`, the input of its first output.
trait Inputs: Copy {
    /// What loading the first lanes only needs.
    type Tail: Copy;

    /// What loading lanes `0..count` only needs (`1 ≤ count ≤ 8`).
    ///
    /// # Safety
    ///
    /// The CPU has AVX2.
    unsafe fn tail(self, count: usize) -> Self::Tail;

    /// The inputs of 8 outputs, in the lane order of [`Inputs::order`].
    ///
    /// # Safety
    ///
    /// The CPU has AVX2; every element from `p` to the input of the 8th
    /// output's successor is readable.
    unsafe fn load(self, p: *const f32) -> __m256;

    /// The inputs of the outputs of `tail`'s lanes, zero in the others, in
    /// the lane order of [`Inputs::order`]; reads nothing past the last of
    /// those inputs.
    ///
    /// # Safety
    ///
    /// The CPU has AVX2; every element from `p` to the last of those
    /// inputs is readable.
    unsafe fn load_tail(self, p: *const f32, tail: Self::Tail) -> __m256;

    /// Maps outputs between their natural lane order and the order the
    /// loads deliver (either way: it is its own inverse).
    ///
    /// # Safety
    ///
    /// The CPU has AVX2.
    unsafe fn order(self, v: __m256) -> __m256;
}

/// `in_x` = 1: consecutive inputs.
#[derive(Clone, Copy)]
struct Contiguous;

impl Inputs for Contiguous {
    type Tail = __m256i;

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn tail(self, count: usize) -> __m256i {
        lane_mask(count)
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn load(self, p: *const f32) -> __m256 {
        // SAFETY: `p[0..8]`: the caller's contract.
        unsafe { _mm256_loadu_ps(p) }
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn load_tail(self, p: *const f32, mask: __m256i) -> __m256 {
        // SAFETY: the unmasked elements: the caller's contract.
        unsafe { _mm256_maskload_ps(p, mask) }
    }

    #[inline]
    unsafe fn order(self, v: __m256) -> __m256 {
        v
    }
}

/// `in_x` = 2: the even elements of 16 consecutive ones, shuffled together
/// within 128-bit halves: outputs 0, 1, 4, 5, 2, 3, 6, 7.
#[derive(Clone, Copy)]
struct Stride2;

impl Stride2 {
    /// The even elements of `low` then `high`, in the order of
    /// [`Inputs::order`].
    #[target_feature(enable = "avx2")]
    #[inline]
    fn evens(low: __m256, high: __m256) -> __m256 {
        _mm256_shuffle_ps::<0b10_00_10_00>(low, high)
    }
}

impl Inputs for Stride2 {
    /// The masks of the low and the high vector.
    type Tail = (__m256i, __m256i);

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn tail(self, count: usize) -> (__m256i, __m256i) {
        // Elements `p[0..2·count − 1]`: up to the last even one needed.
        let elements = 2 * count - 1;
        (
            lane_mask(elements),
            lane_mask(elements.saturating_sub(LANES)),
        )
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn load(self, p: *const f32) -> __m256 {
        // SAFETY: `p[0..16]`, which ends before the input `p[16]` of the
        // 8th output's successor: the caller's contract.
        let (low, high) = unsafe { (_mm256_loadu_ps(p), _mm256_loadu_ps(p.wrapping_add(LANES))) };
        Stride2::evens(low, high)
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn load_tail(self, p: *const f32, (low, high): (__m256i, __m256i)) -> __m256 {
        // SAFETY: the unmasked elements, up to the last output's input: the
        // caller's contract.
        let (low, high) = unsafe {
            (
                _mm256_maskload_ps(p, low),
                _mm256_maskload_ps(p.wrapping_add(LANES), high),
            )
        };
        Stride2::evens(low, high)
    }

    /// Swaps the middle two 64-bit pairs: outputs 0, 1, 4, 5, 2, 3, 6, 7
    /// ↔ 0 to 7.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn order(self, v: __m256) -> __m256 {
        _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(v)))
    }
}

/// Any other `in_x`: a gather at offsets `l·in_x`.
#[derive(Clone, Copy)]
struct Gather {
    offsets: __m256i,
}

impl Gather {
    /// The gather for stride `in_x`, or `None` when `7·in_x` is out of the
    /// range of its 32-bit offsets.
    #[target_feature(enable = "avx2")]
    fn new(in_x: isize) -> Option<Gather> {
        let step = i32::try_from(in_x).ok()?;
        step.checked_mul(LANES as i32 - 1)?;
        let offsets: [i32; LANES] = std::array::from_fn(|l| l as i32 * step);
        Some(Gather {
            // SAFETY: reads the 8 elements of `offsets`.
            offsets: unsafe { _mm256_loadu_si256(offsets.as_ptr().cast()) },
        })
    }
}

impl Inputs for Gather {
    type Tail = __m256i;

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn tail(self, count: usize) -> __m256i {
        lane_mask(count)
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn load(self, p: *const f32) -> __m256 {
        // SAFETY: the 8 outputs' inputs: the caller's contract.
        unsafe { _mm256_i32gather_ps::<4>(p, self.offsets) }
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn load_tail(self, p: *const f32, mask: __m256i) -> __m256 {
        // SAFETY: the unmasked outputs' inputs: the caller's contract.
        unsafe {
            _mm256_mask_i32gather_ps::<4>(
                _mm256_setzero_ps(),
                p,
                self.offsets,
                _mm256_castsi256_ps(mask),
            )
        }
    }

    #[inline]
    unsafe fn order(self, v: __m256) -> __m256 {
        v
    }
}
