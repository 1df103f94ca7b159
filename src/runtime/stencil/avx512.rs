//! The AVX-512F stencil primitive (16 f32 lanes): the vector operations the
//! shared row algorithm ([`stencil_algorithm!`]) is written in, on zmm
//! registers, with `__mmask16` lane masks. A stride-2 vector keeps the even
//! lanes of two loads through one two-source permutation, in their natural
//! order.

use std::arch::x86_64::{
    __m512, __m512i, __mmask16, _mm512_add_ps, _mm512_fmadd_ps, _mm512_i32gather_ps,
    _mm512_loadu_ps, _mm512_loadu_si512, _mm512_mask_i32gather_ps, _mm512_mask_mov_ps,
    _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps, _mm512_max_ps, _mm512_min_ps,
    _mm512_permutex2var_ps, _mm512_set1_ps, _mm512_setr_epi32, _mm512_setzero_ps, _mm512_storeu_ps,
};

use super::algorithm::stencil_algorithm;

type V = __m512;
type I = __m512i;
/// A lane mask: bit `l` set for lane `l`.
type M = __mmask16;

stencil_algorithm! {
    isa: Avx512,
    features: "avx512f",
    lanes: 16,
    row_block: [[4, 4], [3, 2]],
    shared_in_x: [1, 2],
    name: avx512_stencil,
    ops: {
        fn lane_mask(count: usize) -> M => ((1u32 << count.min(LANES)) - 1) as M;
        fn zero() -> V => _mm512_setzero_ps();
        fn splat(c: f32) -> V => _mm512_set1_ps(c);
        fn add(a: V, b: V) -> V => _mm512_add_ps(a, b);
        fn max(a: V, b: V) -> V => _mm512_max_ps(a, b);
        fn min(a: V, b: V) -> V => _mm512_min_ps(a, b);
        fn fma(a: V, b: V, c: V) -> V => _mm512_fmadd_ps(a, b, c);
        /// Lanes 0, 2, …, 30 of the pair (`low`, `high`), in order.
        fn evens(low: V, high: V) -> V => _mm512_permutex2var_ps(
            low,
            _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
            high,
        );
        /// [`evens`] keeps the natural order.
        fn evens_order(v: V) -> V => v;
    },
    memory: {
        fn load(p: *const f32) -> V => _mm512_loadu_ps(p);
        fn load_masked(p: *const f32, m: M) -> V => _mm512_maskz_loadu_ps(m, p);
        fn store(p: *mut f32, v: V) => _mm512_storeu_ps(p, v);
        fn store_masked(p: *mut f32, m: M, v: V) => _mm512_mask_storeu_ps(p, m, v);
        /// Reads `p[0..31]`, up to the 16th output's input `p[30]`.
        fn load_evens(p: *const f32) -> V =>
            evens(load(p), load_masked(p.wrapping_add(LANES), lane_mask(LANES - 1)));
        /// Two loads (and `p[32]` for 16 outputs) make all three taps:
        /// the evens, the odds, and the evens one element on.
        fn load_evens_window(p: *const f32, count: usize) -> [V; 3] => {
            let elements = 2 * count + 1;
            let low = load_masked(p, lane_mask(elements));
            let high = load_masked(p.wrapping_add(LANES), lane_mask(elements.saturating_sub(LANES)));
            let odds = _mm512_permutex2var_ps(
                low,
                _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31),
                high,
            );
            let after = _mm512_permutex2var_ps(
                low,
                _mm512_setr_epi32(2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 0),
                high,
            );
            let after = if count >= LANES {
                _mm512_mask_mov_ps(after, 1 << (LANES - 1), splat(*p.wrapping_add(2 * LANES)))
            } else {
                after
            };
            [evens(low, high), odds, after]
        };
        fn load_index(p: *const i32) -> I => _mm512_loadu_si512(p.cast());
        fn gather(p: *const f32, offsets: I) -> V => _mm512_i32gather_ps::<4>(offsets, p);
        fn gather_masked(p: *const f32, offsets: I, m: M) -> V =>
            _mm512_mask_i32gather_ps::<4>(zero(), m, offsets, p);
    },
}
