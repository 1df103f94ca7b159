//! The AVX-512F stencil primitive (16 f32 lanes): a row in blocks of up to
//! four vectors (64 outputs) held in registers, one broadcast weight and
//! one fused multiply-add per vector and tap, the row's last vector loaded
//! and stored through lane masks (masked-out lanes never fault). Inputs of
//! consecutive outputs are loaded directly (`in_x` = 1), as two vectors
//! whose even lanes are kept (`in_x` = 2), or gathered (other strides).

use std::arch::x86_64::{
    __m512, __m512i, __mmask16, _mm512_fmadd_ps, _mm512_i32gather_ps, _mm512_loadu_ps,
    _mm512_loadu_si512, _mm512_mask_i32gather_ps, _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps,
    _mm512_permutex2var_ps, _mm512_set1_ps, _mm512_setzero_ps, _mm512_storeu_ps,
};

use super::{Row, StencilPrimitive, offset};
use crate::runtime::micro_kernels::Isa;

/// f32 lanes of one vector.
const LANES: usize = 16;
/// Vectors of one block: accumulators held in registers across the taps.
const BLOCK: usize = 4;

/// The AVX-512F primitive.
pub(super) fn primitives() -> Vec<StencilPrimitive> {
    vec![StencilPrimitive {
        name: "avx512_stencil",
        isa: Isa::Avx512,
        func: avx512_stencil,
    }]
}

/// [`StencilFn`](super::StencilFn) on AVX-512F.
///
/// # Safety
///
/// The [`StencilFn`](super::StencilFn) contract, on a CPU with AVX-512F.
#[allow(clippy::too_many_arguments)] // the C ABI
unsafe extern "C" fn avx512_stencil(
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
    // needing AVX-512F.
    unsafe { stencil(&row) }
}

/// Picks the input loads for the row's `in_x`.
///
/// # Safety
///
/// The [`StencilFn`](super::StencilFn) contract for `row`.
#[target_feature(enable = "avx512f")]
unsafe fn stencil(row: &Row) {
    // SAFETY (all arms): the caller's contract.
    match row.in_x {
        1 => unsafe { taps(row, Contiguous) },
        2 => unsafe { taps(row, Stride2::new()) },
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
#[target_feature(enable = "avx512f")]
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
#[target_feature(enable = "avx512f")]
unsafe fn blocks<L: Inputs, const R: usize, const S: usize>(row: &Row, inputs: L) {
    let n = row.n;
    let mut j = 0;
    // Every vector of these blocks has outputs after it.
    while n - j > BLOCK * LANES {
        // SAFETY: outputs `j..j + 64` of the row, more after them.
        unsafe { block::<L, BLOCK, false, R, S>(row, inputs, j, LANES) };
        j += BLOCK * LANES;
    }
    let rest = n - j; // 1..=64: `n ≥ 1`
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

/// Outputs `j..` of `V` vectors: accumulators in registers, for each tap
/// one broadcast weight and one fused multiply-add per vector. With
/// `TAIL`, the last vector has `last` outputs (1 to 16) and is the row's
/// last: it is loaded and stored through lane masks.
///
/// # Safety
///
/// The [`StencilFn`](super::StencilFn) contract for `row`; the block's
/// outputs lie in `0..n`, and without `TAIL` the row has outputs after
/// them.
#[target_feature(enable = "avx512f")]
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
    let tail = inputs.tail(last);
    let out = row.out.wrapping_add(j);
    let is_tail = |v: usize| TAIL && v == V - 1;

    let mut acc = [_mm512_setzero_ps(); V];
    if row.accumulate {
        for (v, a) in acc.iter_mut().enumerate() {
            let p = out.wrapping_add(v * LANES);
            // SAFETY: outputs of this block, in `0..n` (the masked lanes
            // are never touched).
            *a = unsafe {
                if is_tail(v) {
                    _mm512_maskz_loadu_ps(out_mask, p)
                } else {
                    _mm512_loadu_ps(p)
                }
            };
        }
    }
    let input = row.input.wrapping_offset(offset(j, row.in_x));
    let vector_step = offset(LANES, row.in_x);
    for r in 0..taps_r {
        for s in 0..taps_s {
            let tap_w = offset(r, row.w_r).wrapping_add(offset(s, row.w_s));
            // SAFETY: a weight the formula names.
            let w = _mm512_set1_ps(unsafe { *row.weight.wrapping_offset(tap_w) });
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
                *a = _mm512_fmadd_ps(w, x, *a);
            }
        }
    }
    for (v, a) in acc.into_iter().enumerate() {
        let p = out.wrapping_add(v * LANES);
        // SAFETY: outputs of this block, in `0..n`.
        unsafe {
            if is_tail(v) {
                _mm512_mask_storeu_ps(p, out_mask, a)
            } else {
                _mm512_storeu_ps(p, a)
            }
        }
    }
}

/// The mask of lanes `0..count` (`count ≤ 16`).
#[inline]
fn lane_mask(count: usize) -> __mmask16 {
    ((1u32 << count.min(LANES)) - 1) as __mmask16
}

/// How a vector of 16 consecutive outputs loads its input at one tap from
/// `p`, the input of its first output.
trait Inputs: Copy {
    /// What loading the first lanes only needs.
    type Tail: Copy;

    /// What loading lanes `0..count` only needs (`1 ≤ count ≤ 16`).
    fn tail(self, count: usize) -> Self::Tail;

    /// The inputs of 16 outputs.
    ///
    /// # Safety
    ///
    /// Every element from `p` to the input of the 16th output's successor
    /// is readable.
    unsafe fn load(self, p: *const f32) -> __m512;

    /// The inputs of the outputs of `tail`'s lanes, zero in the others;
    /// reads nothing past the last of those inputs.
    ///
    /// # Safety
    ///
    /// Every element from `p` to the last of those inputs is readable.
    unsafe fn load_tail(self, p: *const f32, tail: Self::Tail) -> __m512;
}

/// `in_x` = 1: consecutive inputs.
#[derive(Clone, Copy)]
struct Contiguous;

impl Inputs for Contiguous {
    type Tail = __mmask16;

    #[inline]
    fn tail(self, count: usize) -> __mmask16 {
        lane_mask(count)
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn load(self, p: *const f32) -> __m512 {
        // SAFETY: `p[0..16]`: the caller's contract.
        unsafe { _mm512_loadu_ps(p) }
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn load_tail(self, p: *const f32, mask: __mmask16) -> __m512 {
        // SAFETY: the unmasked elements: the caller's contract.
        unsafe { _mm512_maskz_loadu_ps(mask, p) }
    }
}

/// `in_x` = 2: the even elements of 32 consecutive ones, moved together.
#[derive(Clone, Copy)]
struct Stride2 {
    /// Lanes 0, 2, …, 30 of the pair (low vector, high vector).
    even: __m512i,
}

impl Stride2 {
    #[target_feature(enable = "avx512f")]
    fn new() -> Stride2 {
        let even: [i32; LANES] = std::array::from_fn(|l| 2 * l as i32);
        Stride2 {
            // SAFETY: reads the 16 elements of `even`.
            even: unsafe { _mm512_loadu_si512(even.as_ptr().cast()) },
        }
    }

    /// `p[0..32]` through the lane masks `low` and `high`, even lanes kept.
    ///
    /// # Safety
    ///
    /// The unmasked elements are readable.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn gather(self, p: *const f32, low: __mmask16, high: __mmask16) -> __m512 {
        // SAFETY: the unmasked elements: the caller's contract.
        let (lo, hi) = unsafe {
            (
                _mm512_maskz_loadu_ps(low, p),
                _mm512_maskz_loadu_ps(high, p.wrapping_add(LANES)),
            )
        };
        _mm512_permutex2var_ps(lo, self.even, hi)
    }
}

impl Inputs for Stride2 {
    /// The masks of the low and the high vector.
    type Tail = (__mmask16, __mmask16);

    #[inline]
    fn tail(self, count: usize) -> (__mmask16, __mmask16) {
        // Elements `p[0..2·count − 1]`: up to the last even one needed.
        let elements = 2 * count - 1;
        (
            lane_mask(elements),
            lane_mask(elements.saturating_sub(LANES)),
        )
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn load(self, p: *const f32) -> __m512 {
        // SAFETY: `p[0..31]`, up to the 16th output's input `p[30]`.
        unsafe { self.gather(p, 0xFFFF, 0x7FFF) }
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn load_tail(self, p: *const f32, (low, high): (__mmask16, __mmask16)) -> __m512 {
        // SAFETY: up to the last output's input: the caller's contract.
        unsafe { self.gather(p, low, high) }
    }
}

/// Any other `in_x`: a gather at offsets `l·in_x`.
#[derive(Clone, Copy)]
struct Gather {
    offsets: __m512i,
}

impl Gather {
    /// The gather for stride `in_x`, or `None` when `15·in_x` is out of
    /// the range of its 32-bit offsets.
    #[target_feature(enable = "avx512f")]
    fn new(in_x: isize) -> Option<Gather> {
        let step = i32::try_from(in_x).ok()?;
        step.checked_mul(LANES as i32 - 1)?;
        let offsets: [i32; LANES] = std::array::from_fn(|l| l as i32 * step);
        Some(Gather {
            // SAFETY: reads the 16 elements of `offsets`.
            offsets: unsafe { _mm512_loadu_si512(offsets.as_ptr().cast()) },
        })
    }
}

impl Inputs for Gather {
    type Tail = __mmask16;

    #[inline]
    fn tail(self, count: usize) -> __mmask16 {
        lane_mask(count)
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn load(self, p: *const f32) -> __m512 {
        // SAFETY: the 16 outputs' inputs: the caller's contract.
        unsafe { _mm512_i32gather_ps::<4>(self.offsets, p) }
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn load_tail(self, p: *const f32, mask: __mmask16) -> __m512 {
        // SAFETY: the unmasked outputs' inputs: the caller's contract.
        unsafe { _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), mask, self.offsets, p) }
    }
}
