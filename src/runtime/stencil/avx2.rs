//! The AVX2 + FMA stencil primitive (8 f32 lanes): the vector operations the
//! shared row algorithm ([`stencil_algorithm!`]) is written in, on ymm
//! registers, with `vmaskmovps` lane masks (all ones in a lane's 32 bits).
//! A stride-2 vector keeps the even lanes of two loads through one in-lane
//! shuffle, which leaves them in an order the block undoes once, at its
//! store ([`evens_order`]).

use std::arch::x86_64::{
    __m256, __m256i, _mm256_add_ps, _mm256_castpd_ps, _mm256_castps_pd, _mm256_castsi256_ps,
    _mm256_cmpgt_epi32, _mm256_fmadd_ps, _mm256_i32gather_ps, _mm256_loadu_ps, _mm256_loadu_si256,
    _mm256_mask_i32gather_ps, _mm256_maskload_ps, _mm256_maskstore_ps, _mm256_max_ps,
    _mm256_min_ps, _mm256_permute4x64_pd, _mm256_set1_epi32, _mm256_set1_ps, _mm256_setr_epi32,
    _mm256_setzero_ps, _mm256_shuffle_ps, _mm256_storeu_ps,
};

use super::algorithm::stencil_algorithm;

type V = __m256;
type I = __m256i;
/// A lane mask: all ones in the lanes set, zero in the others.
type M = __m256i;

stencil_algorithm! {
    isa: Avx2Fma,
    features: "avx2,fma",
    lanes: 8,
    row_block: [[2, 2], [2, 2]],
    shared_in_x: [1],
    name: avx2_stencil,
    ops: {
        fn lane_mask(count: usize) -> M => _mm256_cmpgt_epi32(
            _mm256_set1_epi32(count.min(LANES) as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        );
        fn zero() -> V => _mm256_setzero_ps();
        fn splat(c: f32) -> V => _mm256_set1_ps(c);
        fn add(a: V, b: V) -> V => _mm256_add_ps(a, b);
        fn max(a: V, b: V) -> V => _mm256_max_ps(a, b);
        fn min(a: V, b: V) -> V => _mm256_min_ps(a, b);
        fn fma(a: V, b: V, c: V) -> V => _mm256_fmadd_ps(a, b, c);
        /// The even elements of `low` then `high`, shuffled within 128-bit
        /// halves: outputs 0, 1, 4, 5, 2, 3, 6, 7.
        fn evens(low: V, high: V) -> V => _mm256_shuffle_ps::<0b10_00_10_00>(low, high);
        /// Swaps the middle two 64-bit pairs: outputs 0, 1, 4, 5, 2, 3, 6, 7
        /// ↔ 0 to 7.
        fn evens_order(v: V) -> V =>
            _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(v)));
    },
    memory: {
        fn load(p: *const f32) -> V => _mm256_loadu_ps(p);
        fn load_masked(p: *const f32, m: M) -> V => _mm256_maskload_ps(p, m);
        fn store(p: *mut f32, v: V) => _mm256_storeu_ps(p, v);
        fn store_masked(p: *mut f32, m: M, v: V) => _mm256_maskstore_ps(p, m, v);
        /// Reads `p[0..16]`, two whole vectors (no `vmaskmovps`).
        fn load_evens(p: *const f32) -> V => evens(load(p), load(p.wrapping_add(LANES)));
        /// Element by element (AVX2 does not share stride-2 rows, so this
        /// only has to be right).
        fn load_evens_window(p: *const f32, count: usize) -> [V; 3] => {
            let mut taps = [[0.0f32; LANES]; 3];
            for (s, tap) in taps.iter_mut().enumerate() {
                for (l, lane) in tap.iter_mut().enumerate().take(count) {
                    *lane = *p.wrapping_add(2 * l + s);
                }
            }
            taps.map(|tap| evens_order(load(tap.as_ptr())))
        };
        fn load_index(p: *const i32) -> I => _mm256_loadu_si256(p.cast());
        fn gather(p: *const f32, offsets: I) -> V => _mm256_i32gather_ps::<4>(p, offsets);
        fn gather_masked(p: *const f32, offsets: I, m: M) -> V =>
            _mm256_mask_i32gather_ps::<4>(zero(), p, offsets, _mm256_castsi256_ps(m));
    },
}
