//! The vector micro-kernels written once, as a macro over the instruction
//! set: [`vector_micro_kernels!`] takes an ISA's vector type, lane count,
//! `#[target_feature]` list and its load, store, broadcast, multiply-add and
//! lane-mask operations, and writes that ISA's kernels, its tile dispatcher
//! and its kernel table. `avx512.rs`, `avx2.rs` and `sse.rs` each invoke it
//! once.
//!
//! Full tiles keep the `MR × NR/L` accumulators in vector registers across
//! the whole kc loop. Edge tiles load and store B and C under lane masks for
//! `n` (masked-out lanes are never accessed, so nothing outside the region is
//! touched); rows past `m` recompute row `m-1` of A (valid memory) and are
//! never stored.

/// Writes one ISA's micro-kernels into the invoking module: an
/// `unsafe extern "C" fn` per `name: MR x NR edge_rows [R, …]` entry (a
/// [`super::GemmFn`]; a tile of `m < MR` rows runs the body of the first
/// listed `R ≥ m`, each `R < MR`),
/// `const L` (the lanes), the tile dispatcher `tile`, the kernel proper
/// `body`, and `pub(super) fn kernels() -> Vec<MicroKernel>`.
///
/// The operations are expressions over the names given in their
/// parentheses; they run inside `#[target_feature(enable = features)]`
/// functions, pointer operations inside `unsafe` blocks:
///
/// - `splat(x)`: every lane `x`; `load(p)` / `store(p, v)`: `L` lanes at `p`;
/// - `mul_add(a, b, c)`: `a·b + c` per lane;
/// - `lane_mask(left)`: the mask of the first `left` lanes (`left ≤ L`);
///   `load_masked(p, mask)` (zeros in masked-out lanes) and
///   `store_masked(p, mask, v)` access only the lanes in the mask.
///
/// - `add(a, b)`, `max(a, b)`, `min(a, b)`: per lane (`max`/`min` return
///   `b` where `a` is NaN, as `f32::max`/`f32::min` do), for the epilogue.
///
/// `full_tile_kloop: f` (optional) names a function
/// `f::<MR, NV>(kc, a, a_rs, a_cs, b, b_rs, &mut accs) -> bool` that may run
/// the k loop of a full tile itself (returning `true`), e.g. in assembly.
macro_rules! vector_micro_kernels {
    (
        isa: $isa:ident,
        isa_name: $isa_name:literal,
        safety: $safety:literal,
        features: $features:literal,
        vector: $vector:ty,
        lanes: $lanes:literal,
        mask: $mask:ty,
        zero: $zero:expr,
        splat($sx:ident) => $splat:expr,
        load($lp:ident) => $load:expr,
        store($sp:ident, $sv:ident) => $store:expr,
        mul_add($fa:ident, $fb:ident, $fc:ident) => $mul_add:expr,
        lane_mask($left:ident) => $lane_mask:expr,
        load_masked($mlp:ident, $mlm:ident) => $load_masked:expr,
        store_masked($msp:ident, $msm:ident, $msv:ident) => $store_masked:expr,
        add($aa:ident, $ab:ident) => $add:expr,
        max($xa:ident, $xb:ident) => $max:expr,
        min($na:ident, $nb:ident) => $min:expr,
        $(full_tile_kloop: $kloop:ident,)?
        kernels: {
            $($name:ident: $mr:literal x $nr:literal edge_rows [$($er:literal),*]),* $(,)?
        } $(,)?
    ) => {
        #[doc = concat!("f32 lanes of one ", $isa_name, " vector.")]
        const L: usize = $lanes;

        /// How many rows of B ahead of the one in use the k loop prefetches.
        const PREFETCH_ROWS: isize = 16;
        /// How far ahead along k the k loop prefetches A's rows where each
        /// row streams along k (weights read in place: four lines).
        const PREFETCH_A_ALONG_K: isize = 64;
        /// Shortest k loop before which a tile prefetches what its stores
        /// and epilogue touch (shorter loops end before the lines arrive).
        const PREFETCH_TILE_MIN_KC: usize = 16;

        $(
            #[doc = concat!("The ", stringify!($mr), "×", stringify!($nr), " ", $isa_name,
                " micro-kernel; see [`super::GemmFn`].")]
            ///
            /// # Safety
            ///
            #[doc = concat!("As [`super::GemmFn`]; ", $safety)]
            #[allow(clippy::too_many_arguments)]
            unsafe extern "C" fn $name(
                kc: i64, a: *const f32, a_rs: i64, a_cs: i64, b: *const f32, b_rs: i64,
                c: *mut f32, c_rs: i64, m: i64, n: i64, accumulate: i64,
                epilogue: *const $crate::runtime::micro_kernels::Epilogue,
            ) {
                const NV: usize = $nr / L;
                // A tile of fewer rows runs as the next listed edge height:
                // 4 rows of a 12-row kernel cost 4 rows of FMAs, not 12.
                let rows = [$($er),*].into_iter().find(|&r: &i64| r >= m).unwrap_or($mr);
                // SAFETY: forwarded contract (including the ISA's features);
                // m ≤ rows, so each tile computes the same m×n region.
                unsafe {
                    let epilogue = epilogue.as_ref();
                    match rows {
                        $($er => tile::<$er, NV>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, accumulate, epilogue),)*
                        _ => tile::<$mr, NV>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, accumulate, epilogue),
                    }
                }
            }
        )*

        #[doc = concat!("The ", $isa_name, " kernels.")]
        pub(super) fn kernels() -> Vec<$crate::runtime::micro_kernels::MicroKernel> {
            vec![$($crate::runtime::micro_kernels::MicroKernel {
                name: stringify!($name),
                isa: $crate::runtime::micro_kernels::Isa::$isa,
                mr: $mr,
                nr: $nr,
                func: $name,
            }),*]
        }

        /// Clamps the tile, then picks the full-tile body (packed A or
        /// strided A) or the masked edge body with as many vectors as the
        /// edge has columns.
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $features)]
        unsafe fn tile<const MR: usize, const NV: usize>(
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
            epilogue: Option<&$crate::runtime::micro_kernels::Epilogue>,
        ) {
            let m = m.clamp(0, MR as i64) as usize;
            let n = n.clamp(0, (NV * L) as i64) as usize;
            if m == 0 || n == 0 {
                return;
            }
            let kc = kc.max(0) as usize;
            let (a_rs, a_cs, b_rs, c_rs) =
                (a_rs as isize, a_cs as isize, b_rs as isize, c_rs as isize);
            let acc = accumulate != 0;
            // SAFETY: forwarded contract; m ≤ MR, n ≤ NR.
            unsafe {
                if m == MR && n == NV * L {
                    if a_rs == 1 {
                        body::<MR, NV, true, false, false>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, acc, epilogue)
                    } else if kc as isize > PREFETCH_A_ALONG_K {
                        body::<MR, NV, false, false, true>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, acc, epilogue)
                    } else {
                        body::<MR, NV, false, false, false>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, acc, epilogue)
                    }
                } else {
                    // An edge tile as narrow as its columns: a 4-column
                    // edge of a 32-wide kernel costs one vector per row, not two.
                    match n.div_ceil(L) {
                        1 if NV > 1 => body::<MR, 1, false, true, false>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, acc, epilogue),
                        2 if NV > 2 => body::<MR, 2, false, true, false>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, acc, epilogue),
                        3 if NV > 3 => body::<MR, 3, false, true, false>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, acc, epilogue),
                        _ => body::<MR, NV, false, true, false>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, acc, epilogue),
                    }
                }
            }
        }

        /// The kernel proper. `PACKED`: A's row stride is 1 (rows at
        /// constant offsets from the column pointer). `MASKED`: an edge tile
        /// — B and C are loaded and stored under lane masks for `n`, rows
        /// past `m` recompute row `m-1` of A (valid memory) and are never
        /// stored. `PREFETCH_A`: A's rows are prefetched along k (rows that
        /// stream along k for longer than the prefetch distance: weights
        /// read in place, from memory); a body of its own, so that the
        /// others' loops stay as they were.
        #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
        #[target_feature(enable = $features)]
        unsafe fn body<
            const MR: usize,
            const NV: usize,
            const PACKED: bool,
            const MASKED: bool,
            const PREFETCH_A: bool,
        >(
            kc: usize,
            a: *const f32,
            a_rs: isize,
            a_cs: isize,
            b: *const f32,
            b_rs: isize,
            c: *mut f32,
            c_rs: isize,
            m: usize,
            n: usize,
            accumulate: bool,
            epilogue: Option<&$crate::runtime::micro_kernels::Epilogue>,
        ) {
            let mut masks: [$mask; NV] = [{ let $left = L; $lane_mask }; NV];
            if MASKED {
                for (v, mask) in masks.iter_mut().enumerate() {
                    let $left = n.saturating_sub(v * L).min(L);
                    *mask = $lane_mask;
                }
            }
            let mut arow = [0isize; MR];
            for (i, off) in arow.iter_mut().enumerate() {
                *off = i.min(m - 1) as isize * a_rs;
            }
            let mut accs: [[$vector; NV]; MR] = [[$zero; NV]; MR];
            // SAFETY (all accesses): the caller guarantees the m×n / kc
            // region is valid; unmasked accesses happen only on full tiles,
            // masked-out lanes are not accessed, and A rows are clamped to
            // m-1.
            unsafe {
                if accumulate {
                    for i in 0..MR {
                        if MASKED && i >= m {
                            continue;
                        }
                        let row = c.offset(i as isize * c_rs);
                        for v in 0..NV {
                            accs[i][v] = if MASKED {
                                let ($mlp, $mlm) = (row.wrapping_add(v * L), masks[v]);
                                $load_masked
                            } else {
                                let $lp = row.add(v * L);
                                $load
                            };
                        }
                    }
                }
                $(
                    let kc = if !MASKED && $kloop::<MR, NV>(kc, a, a_rs, a_cs, b, b_rs, &mut accs) {
                        0
                    } else {
                        kc
                    };
                )?
                if kc >= PREFETCH_TILE_MIN_KC {
                    prefetch_tile::<MR, NV>(c, c_rs, m, accumulate, epilogue);
                }
                let (mut ap, mut bp) = (a, b);
                // B's row PREFETCH_ROWS ahead, one hint per cache line: a
                // panel read for the first time (weights laid out ahead of
                // time, an activation read in place with a long row stride)
                // streams from memory instead of stalling each row.
                let lines = (NV * L * 4).div_ceil(64);
                let ahead = PREFETCH_ROWS.wrapping_mul(b_rs);
                // A's rows too, with PREFETCH_A (weights read in place come
                // from memory, MR rows at once): one row per k step in turn,
                // PREFETCH_A_ALONG_K ahead. Not where A's column is one line
                // (a convolution's input read in place, from cache) or its
                // rows are short: hints there cost more than they save.
                let a_ahead = PREFETCH_A_ALONG_K.wrapping_mul(a_cs);
                let mut a_turn = 0;
                for _ in 0..kc {
                    for line in 0..lines {
                        let p = bp.wrapping_offset(ahead).wrapping_add(line * 16);
                        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                            p.cast::<i8>(),
                        );
                    }
                    if PREFETCH_A {
                        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                            ap.wrapping_offset(arow[a_turn].wrapping_add(a_ahead)).cast::<i8>(),
                        );
                        a_turn = if a_turn + 1 == MR { 0 } else { a_turn + 1 };
                    }
                    let mut bv: [$vector; NV] = [$zero; NV];
                    for v in 0..NV {
                        bv[v] = if MASKED {
                            let ($mlp, $mlm) = (bp.wrapping_add(v * L), masks[v]);
                            $load_masked
                        } else {
                            let $lp = bp.add(v * L);
                            $load
                        };
                    }
                    for i in 0..MR {
                        let off = if PACKED { i as isize } else { arow[i] };
                        let av = {
                            let $sx = *ap.offset(off);
                            $splat
                        };
                        for v in 0..NV {
                            let ($fa, $fb, $fc) = (av, bv[v], accs[i][v]);
                            accs[i][v] = $mul_add;
                        }
                    }
                    ap = ap.wrapping_offset(a_cs);
                    bp = bp.wrapping_offset(b_rs);
                }
                if let Some(epilogue) = epilogue {
                    apply_epilogue::<MR, NV, MASKED>(epilogue, &mut accs, m, &masks);
                }
                for i in 0..MR {
                    if MASKED && i >= m {
                        continue;
                    }
                    let row = c.offset(i as isize * c_rs);
                    for v in 0..NV {
                        if MASKED {
                            let ($msp, $msm, $msv) = (row.wrapping_add(v * L), masks[v], accs[i][v]);
                            $store_masked;
                        } else {
                            let ($sp, $sv) = (row.add(v * L), accs[i][v]);
                            $store;
                        }
                    }
                }
            }
        }

        /// Hints the lines the tile touches after its k loop: the rows of
        /// every addend read along the row (a residual, streamed from
        /// memory in a model) and, unless they were just loaded to
        /// accumulate, the rows of C it stores. Issued before
        /// the k loop, they arrive while it runs instead of stalling the
        /// stores. Hints never fault, so the lines past an edge tile's
        /// columns may be named.
        #[inline]
        #[target_feature(enable = $features)]
        fn prefetch_tile<const MR: usize, const NV: usize>(
            c: *mut f32,
            c_rs: isize,
            m: usize,
            accumulate: bool,
            epilogue: Option<&$crate::runtime::micro_kernels::Epilogue>,
        ) {
            let rows = m.min(MR);
            if let Some(epilogue) = epilogue {
                for addend in epilogue.used_addends().filter(|a| a.col_stride != 0) {
                    prefetch_rows::<NV>(addend.data, addend.row_stride as isize, rows);
                }
            }
            if !accumulate {
                prefetch_rows::<NV>(c, c_rs, rows);
            }
        }

        /// Hints every cache line of `rows` tile rows of `NV` vectors, the
        /// first at `base`, each `row_stride` elements after the last.
        #[inline]
        #[target_feature(enable = $features)]
        fn prefetch_rows<const NV: usize>(base: *const f32, row_stride: isize, rows: usize) {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let lines = (NV * L * 4).div_ceil(64);
            for i in 0..rows {
                let row = base.wrapping_offset(i as isize * row_stride);
                for line in 0..lines {
                    _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(line * 16).cast::<i8>());
                }
            }
        }

        /// The epilogue on the accumulators of rows `..m` (see
        /// [`super::Epilogue`]); an edge tile reads its addends under the
        /// column masks.
        ///
        /// # Safety
        ///
        /// Every used addend's elements of the `m`-row tile region are
        /// valid to read.
        #[allow(clippy::needless_range_loop)]
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn apply_epilogue<const MR: usize, const NV: usize, const MASKED: bool>(
            epilogue: &$crate::runtime::micro_kernels::Epilogue,
            accs: &mut [[$vector; NV]; MR],
            m: usize,
            masks: &[$mask; NV],
        ) {
            let rows = if MASKED { m.min(MR) } else { MR };
            // SAFETY (all accesses): the caller's contract; masked-out
            // lanes are not accessed.
            unsafe {
                for addend in epilogue.used_addends() {
                    let rs = addend.row_stride as isize;
                    for i in 0..rows {
                        let row = addend.data.offset(i as isize * rs);
                        if addend.col_stride == 0 {
                            let term = {
                                let $sx = *row;
                                $splat
                            };
                            for v in 0..NV {
                                let ($aa, $ab) = (accs[i][v], term);
                                accs[i][v] = $add;
                            }
                        } else {
                            for v in 0..NV {
                                let term = if MASKED {
                                    let ($mlp, $mlm) = (row.wrapping_add(v * L), masks[v]);
                                    $load_masked
                                } else {
                                    let $lp = row.add(v * L);
                                    $load
                                };
                                let ($aa, $ab) = (accs[i][v], term);
                                accs[i][v] = $add;
                            }
                        }
                    }
                }
                if epilogue.clamp & $crate::runtime::micro_kernels::CLAMP_LOWER != 0 {
                    let bound = {
                        let $sx = epilogue.lower;
                        $splat
                    };
                    for i in 0..rows {
                        for v in 0..NV {
                            let ($xa, $xb) = (accs[i][v], bound);
                            accs[i][v] = $max;
                        }
                    }
                }
                if epilogue.clamp & $crate::runtime::micro_kernels::CLAMP_UPPER != 0 {
                    let bound = {
                        let $sx = epilogue.upper;
                        $splat
                    };
                    for i in 0..rows {
                        for v in 0..NV {
                            let ($na, $nb) = (accs[i][v], bound);
                            accs[i][v] = $min;
                        }
                    }
                }
            }
        }
    };
}

pub(super) use vector_micro_kernels;
