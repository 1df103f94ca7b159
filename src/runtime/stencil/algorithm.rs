//! The stencil row algorithm, written once over an ISA's vector operations
//! ([`stencil_algorithm!`]): a row in blocks of up to four vectors held in
//! registers, one broadcast weight and one fused multiply-add per vector
//! and tap (taps in the [`StencilFn`](super::StencilFn) order, so every
//! ISA's result is bit-identical to the scalar loop), the row's last vector
//! loaded and stored through lane masks (masked-out lanes never fault).
//! Inputs of consecutive outputs are loaded directly (`in_x` = 1), as two
//! vectors whose even lanes are kept (`in_x` = 2), gathered (other
//! strides), or computed one output at a time (strides whose lane offsets
//! exceed 32 bits).
//!
//! Where consecutive output rows' 3×3 windows overlap (a depthwise plane
//! of stride 1 or 2), rows go in blocks (`row_block`: a count per step
//! between windows, for rows of up to two vectors and for longer ones):
//! each input vector is loaded once for every row of the block whose window
//! holds it, and the nine weights stay in registers.

/// Writes, into the invoking ISA module, the stencil primitive
/// `unsafe extern "C" fn $name` ([`super::StencilFn`]), the row algorithm
/// behind it, the ISA's vector operations and `pub(super) fn primitives()`.
///
/// `row_block: [[narrow, wide], [narrow, wide]]` output rows (for windows
/// one filter row apart, then two; for rows of at most two vectors, then
/// longer ones) share their input loads where their windows overlap, for
/// the input strides `shared_in_x` (where that paid on the ISA: 1 and 2
/// with AVX-512; AVX2's stride-2 rows ran slower).
///
/// The module defines its vector type `V` (`lanes` f32 lanes), index
/// vector `I` (as many i32 lanes) and lane mask `M`; the invocation gives
/// the operations, each `fn name(args) -> T => body;`, compiled with
/// `features` (a body may name `LANES` and the other operations):
///
/// - `ops`, safe: `lane_mask(count)` (lanes `0..min(count, LANES)`),
///   `zero()`, `splat(c)`, `fma(a, b, c)` = a·b + c (one rounding),
///   `add(a, b)`, `max(a, b)` and `min(a, b)` (`b` where `a` is NaN, as
///   `f32::max`/`f32::min`: the epilogue's operations),
///   `evens(low, high)` (the even lanes of `low` then `high`, in the ISA's
///   stride-2 order) and `evens_order(v)` (maps a vector between the
///   natural lane order and the stride-2 order, either way: its own
///   inverse; the identity where `evens` keeps the natural order);
/// - `memory`, unsafe (they read or write through pointers): `load(p)`,
///   `load_masked(p, m)` (zero in the masked-out lanes, which are never
///   touched), `store(p, v)`, `store_masked(p, m, v)`, `load_evens(p)`
///   (`evens` of `p[0..2·LANES]`, which it may read whole),
///   `load_evens_window(p, count)` (the stride-2 inputs of `count`
///   outputs, `1 ≤ count ≤ LANES`, at taps 0, 1 and 2 of a window whose
///   taps are consecutive: `evens` of `p[0..]`, `p[1..]` and `p[2..]`,
///   in the stride-2 order, the lanes of outputs past `count` unspecified;
///   reads only `p[0..=2·count]`),
///   `load_index(p)` (`LANES` i32), `gather(p, offsets)` (lane `l` from
///   `p[offsets[l]]`) and `gather_masked(p, offsets, m)` (zero in the
///   masked-out lanes, which are never touched).
macro_rules! stencil_algorithm {
    (
        isa: $isa:ident,
        features: $features:literal,
        lanes: $lanes:literal,
        row_block: [[$s1_narrow:literal, $s1_wide:literal], [$s2_narrow:literal, $s2_wide:literal]],
        shared_in_x: [$($shared_in_x:literal),+],
        name: $name:ident,
        ops: {
            $($(#[$op_doc:meta])* fn $op:ident($($op_arg:ident: $op_ty:ty),*) -> $op_ret:ty
                => $op_body:expr;)*
        },
        memory: {
            $($(#[$mem_doc:meta])* fn $mem:ident($($mem_arg:ident: $mem_ty:ty),*) $(-> $mem_ret:ty)?
                => $mem_body:expr;)*
        } $(,)?
    ) => {
        use super::{Row, StencilPrimitive, StencilShape, offset};

        /// f32 lanes of one vector.
        const LANES: usize = $lanes;
        /// Vectors of one block: accumulators held in registers across the
        /// taps.
        const BLOCK: usize = 4;
        /// Output rows computed together where their windows overlap (each
        /// input vector is loaded once for all of them), per step between
        /// consecutive rows' windows (1, 2 filter rows): for rows of at most
        /// [`NARROW_VECTORS`] vectors, and for longer ones.
        const BLOCK_ROWS: [[usize; 2]; 2] = [[$s1_narrow, $s1_wide], [$s2_narrow, $s2_wide]];
        /// The most vectors a row of a "narrow" block has.
        const NARROW_VECTORS: usize = 2;

        /// Whether rows of `n` outputs take the "narrow" block count.
        fn narrow(n: usize) -> bool {
            n.div_ceil(LANES) <= NARROW_VECTORS
        }

        /// The output rows of one shared block for rows of `n` outputs whose
        /// windows move `step` filter rows (1 or 2) from one to the next.
        fn row_block(step: usize, n: usize) -> usize {
            BLOCK_ROWS[step.clamp(1, 2) - 1][usize::from(!narrow(n))]
        }

        $(
            $(#[$op_doc])*
            #[target_feature(enable = $features)]
            #[inline]
            fn $op($($op_arg: $op_ty),*) -> $op_ret {
                $op_body
            }
        )*

        $(
            $(#[$mem_doc])*
            ///
            /// # Safety
            ///
            /// The CPU has the features; every element it reads or writes
            /// (of the unmasked lanes only) is valid for that.
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn $mem($($mem_arg: $mem_ty),*) $(-> $mem_ret)? {
                // SAFETY: the caller's contract.
                unsafe { $mem_body }
            }
        )*

        #[doc = concat!("This ISA's primitive, `", stringify!($name), "`.")]
        pub(super) fn primitives() -> Vec<StencilPrimitive> {
            vec![StencilPrimitive {
                name: stringify!($name),
                isa: $crate::runtime::micro_kernels::Isa::$isa,
                func: $name,
            }]
        }

        #[doc = concat!("[`StencilFn`](super::StencilFn), compiled with `", $features, "`.")]
        ///
        /// # Safety
        ///
        #[doc = concat!(
            "The [`StencilFn`](super::StencilFn) contract, on a CPU with `", $features, "`."
        )]
        #[allow(clippy::too_many_arguments)] // the C ABI
        unsafe extern "C" fn $name(
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
            rows: i64,
            out_y: i64,
            in_y: i64,
            epilogue: *const $crate::runtime::micro_kernels::Epilogue,
        ) {
            let shape = StencilShape {
                n, taps_r, taps_s, in_x, in_r, in_s, w_r, w_s, rows, out_y, in_y,
            };
            let Some(row) = Row::new(out, input, weight, shape, accumulate != 0, epilogue) else {
                return;
            };
            // SAFETY: the caller's contract; the registry lists this
            // primitive as needing the features.
            unsafe { stencil(&row) }
        }

        /// Each row in turn, with the input loads for `in_x`; where
        /// consecutive rows' windows overlap ([`shared_rows_step`]), blocks
        /// of [`row_block`] rows at once.
        ///
        /// # Safety
        ///
        /// The [`StencilFn`](super::StencilFn) contract for `row`.
        #[target_feature(enable = $features)]
        unsafe fn stencil(rows: &Row) {
            let shared = shared_rows_step(rows);
            let block_rows = shared.map_or(1, |step| row_block(step, rows.n));
            let mut row = *rows;
            let mut y = 0;
            while y < rows.rows {
                row.y = y;
                row.out = rows.out.wrapping_offset(offset(y, rows.out_y));
                row.input = rows.input.wrapping_offset(offset(y, rows.in_y));
                if let Some(step) = shared.filter(|_| rows.rows - y >= block_rows) {
                    // SAFETY: the caller's contract, for rows `y..y + block_rows`.
                    unsafe { shared_taps(&row, step) };
                    y += block_rows;
                    continue;
                }
                // SAFETY (all arms): the caller's contract, for this row.
                match row.in_x {
                    1 => unsafe { taps(&row, Contiguous) },
                    2 => unsafe { taps(&row, Stride2) },
                    in_x => match Gather::new(in_x) {
                        Some(gather) => unsafe { blocks::<Gather, 0, 0>(&row, gather) },
                        None => unsafe { row.scalar(0..row.n) },
                    },
                }
                y += 1;
            }
        }

        /// Runs the row with the filter size compiled in for the common
        /// depthwise filters (3×3, 5×5), any size otherwise.
        ///
        /// # Safety
        ///
        /// The [`StencilFn`](super::StencilFn) contract for `row`.
        // Not inlined into the row loop: inlined, the taps' addresses of
        // every specialisation are hoisted out of it and spilled (measured:
        // a 28-wide 3×3 plane ran at half the speed of one call per row).
        #[inline(never)]
        #[target_feature(enable = $features)]
        unsafe fn taps<L: Inputs>(row: &Row, inputs: L) {
            // SAFETY (all arms): the caller's contract.
            match (row.taps_r, row.taps_s) {
                (3, 3) => unsafe { blocks::<L, 3, 3>(row, inputs) },
                (5, 5) => unsafe { blocks::<L, 5, 5>(row, inputs) },
                _ => unsafe { blocks::<L, 0, 0>(row, inputs) },
            }
        }

        /// The row in blocks of [`BLOCK`] vectors, then one last block of 1
        /// to [`BLOCK`] vectors whose last vector has 1 to [`LANES`] outputs
        /// and goes through lane masks. `R`, `S`: the filter size, or 0 to
        /// read it from `row`.
        ///
        /// # Safety
        ///
        /// The [`StencilFn`](super::StencilFn) contract for `row`.
        #[target_feature(enable = $features)]
        unsafe fn blocks<L: Inputs, const R: usize, const S: usize>(row: &Row, inputs: L) {
            let n = row.n;
            let mut j = 0;
            // Every vector of these blocks has outputs after it.
            while n - j > BLOCK * LANES {
                // SAFETY: outputs `j..j + BLOCK·LANES` of the row, more
                // after them.
                unsafe { block::<L, BLOCK, false, R, S>(row, inputs, j, LANES) };
                j += BLOCK * LANES;
            }
            let rest = n - j; // 1..=BLOCK·LANES: `n ≥ 1`
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

        /// Outputs `j..` of `VECTORS` vectors: accumulators in registers (in the
        /// lane order the loads deliver), for each tap one broadcast weight
        /// and one fused multiply-add per vector. With `TAIL`, the last
        /// vector has `last` outputs (1 to [`LANES`]) and is the row's
        /// last: it is loaded and stored through lane masks.
        ///
        /// # Safety
        ///
        /// The [`StencilFn`](super::StencilFn) contract for `row`; the
        /// block's outputs lie in `0..n`, and without `TAIL` the row has
        /// outputs after them.
        #[target_feature(enable = $features)]
        #[inline]
        unsafe fn block<
            L: Inputs,
            const VECTORS: usize,
            const TAIL: bool,
            const R: usize,
            const S: usize,
        >(
            row: &Row,
            inputs: L,
            j: usize,
            last: usize,
        ) {
            let taps_r = if R == 0 { row.taps_r } else { R };
            let taps_s = if S == 0 { row.taps_s } else { S };
            let out_mask = lane_mask(last);
            // SAFETY: `1 ≤ last ≤ LANES`; the features are enabled.
            let tail = unsafe { L::Tail::new(last) };
            let out = row.out.wrapping_add(j);
            let is_tail = |v: usize| TAIL && v == VECTORS - 1;

            let mut acc = [zero(); VECTORS];
            if row.accumulate {
                for (v, a) in acc.iter_mut().enumerate() {
                    let p = out.wrapping_add(v * LANES);
                    // SAFETY: outputs of this block, in `0..n` (the masked
                    // lanes are never touched).
                    let natural = unsafe {
                        if is_tail(v) {
                            load_masked(p, out_mask)
                        } else {
                            load(p)
                        }
                    };
                    // SAFETY: the features are enabled.
                    *a = unsafe { inputs.order(natural) };
                }
            }
            let input = row.input.wrapping_offset(offset(j, row.in_x));
            let vector_step = offset(LANES, row.in_x);
            for r in 0..taps_r {
                for s in 0..taps_s {
                    let tap_w = offset(r, row.w_r).wrapping_add(offset(s, row.w_s));
                    // SAFETY: a weight the formula names.
                    let w = splat(unsafe { *row.weight.wrapping_offset(tap_w) });
                    let tap_x = offset(r, row.in_r).wrapping_add(offset(s, row.in_s));
                    let tap = input.wrapping_offset(tap_x);
                    for (v, a) in acc.iter_mut().enumerate() {
                        let p = tap.wrapping_offset(offset(v, vector_step));
                        // SAFETY: the inputs of this block's outputs at this
                        // tap; a vector that is not the tail has outputs
                        // after it.
                        let x = unsafe { load_inputs(inputs, p, is_tail(v), tail) };
                        *a = fma(w, x, *a);
                    }
                }
            }
            // SAFETY: the caller's contract: the epilogue is null or valid.
            let epilogue = unsafe { row.epilogue.as_ref() };
            for (v, a) in acc.into_iter().enumerate() {
                let p = out.wrapping_add(v * LANES);
                // SAFETY: the features are enabled; outputs of this block,
                // in `0..n`, and their addends.
                unsafe {
                    let mut natural = inputs.order(a);
                    if let Some(epilogue) = epilogue {
                        let mask = if is_tail(v) { out_mask } else { lane_mask(LANES) };
                        natural = epilogue_on(epilogue, natural, row.y, j + v * LANES, mask);
                    }
                    if is_tail(v) {
                        store_masked(p, out_mask, natural)
                    } else {
                        store(p, natural)
                    }
                }
            }
        }

        /// The inputs at `p` of one vector of outputs (the row's last,
        /// through `tail`'s masks, where `is_tail`).
        ///
        /// # Safety
        ///
        /// The CPU has the features; those inputs are readable, and a
        /// vector that is not the tail has outputs after it.
        #[target_feature(enable = $features)]
        #[inline]
        unsafe fn load_inputs<L: Inputs>(inputs: L, p: *const f32, is_tail: bool, tail: L::Tail) -> V {
            // SAFETY: the caller's contract.
            unsafe {
                if is_tail {
                    inputs.load_tail(p, tail)
                } else {
                    inputs.load(p)
                }
            }
        }

        /// [`Inputs::window3`] as three loads, one per tap.
        ///
        /// # Safety
        ///
        /// As [`Inputs::window3`].
        #[target_feature(enable = $features)]
        #[inline]
        unsafe fn window3_by_taps<L: Inputs>(
            inputs: L,
            p: *const f32,
            is_tail: bool,
            tail: L::Tail,
        ) -> [V; 3] {
            // SAFETY: the caller's contract.
            std::array::from_fn(|s| unsafe { load_inputs(inputs, p.wrapping_add(s), is_tail, tail) })
        }

        /// How far down the input the window moves from one output row to
        /// the next, in filter rows (1 or 2: stride-1 and stride-2
        /// convolutions), where the rows of `rows` can share input loads:
        /// a 3×3 filter, an `in_x` the ISA shares rows at (1 or 2: where
        /// it pays), and `in_y` that many `in_r`.
        fn shared_rows_step(rows: &Row) -> Option<usize> {
            if (rows.taps_r, rows.taps_s) != (3, 3)
                || ![$($shared_in_x),+].contains(&rows.in_x)
                || rows.in_r <= 0
            {
                return None;
            }
            [1, 2]
                .into_iter()
                .find(|&step| rows.in_y == offset(step, rows.in_r))
                .filter(|&step| rows.rows >= row_block(step, rows.n))
        }

        /// [`row_block`] rows from `row` (its `y` the first) whose windows
        /// move `step` filter rows from one to the next.
        ///
        /// # Safety
        ///
        /// The [`StencilFn`](super::StencilFn) contract for those rows;
        /// `row` passed [`shared_rows_step`] with `step`.
        #[inline(never)]
        #[target_feature(enable = $features)]
        unsafe fn shared_taps(row: &Row, step: usize) {
            const S1_NARROW: usize = BLOCK_ROWS[0][0];
            const S1_WIDE: usize = BLOCK_ROWS[0][1];
            const S2_NARROW: usize = BLOCK_ROWS[1][0];
            const S2_WIDE: usize = BLOCK_ROWS[1][1];
            // SAFETY (all arms): the caller's contract.
            unsafe {
                match (step, narrow(row.n)) {
                    (1, true) => shared_taps_in::<S1_NARROW>(row, step),
                    (1, false) => shared_taps_in::<S1_WIDE>(row, step),
                    (_, true) => shared_taps_in::<S2_NARROW>(row, step),
                    _ => shared_taps_in::<S2_WIDE>(row, step),
                }
            }
        }

        /// [`shared_taps`] in blocks of `RB` rows.
        ///
        /// # Safety
        ///
        /// As [`shared_taps`], with `RB` rows.
        #[target_feature(enable = $features)]
        #[inline]
        unsafe fn shared_taps_in<const RB: usize>(row: &Row, step: usize) {
            // SAFETY (all arms): the caller's contract.
            match (row.in_x, step) {
                (1, 1) => unsafe { shared_blocks::<Contiguous, 3, 3, 1, RB>(row, Contiguous) },
                (1, _) => unsafe { shared_blocks::<Contiguous, 3, 3, 2, RB>(row, Contiguous) },
                (_, 1) => unsafe { shared_blocks::<Stride2, 3, 3, 1, RB>(row, Stride2) },
                _ => unsafe { shared_blocks::<Stride2, 3, 3, 2, RB>(row, Stride2) },
            }
        }

        /// [`blocks`] for `RB` rows at once, the weights held in
        /// registers.
        ///
        /// # Safety
        ///
        /// As [`shared_taps`].
        #[target_feature(enable = $features)]
        unsafe fn shared_blocks<
            L: Inputs,
            const R: usize,
            const S: usize,
            const STEP: usize,
            const RB: usize,
        >(
            row: &Row,
            inputs: L,
        ) {
            // SAFETY: the weights the formula names.
            let weights: [[V; S]; R] = std::array::from_fn(|r| {
                std::array::from_fn(|s| {
                    let tap_w = offset(r, row.w_r).wrapping_add(offset(s, row.w_s));
                    splat(unsafe { *row.weight.wrapping_offset(tap_w) })
                })
            });
            let n = row.n;
            let mut j = 0;
            while n - j > BLOCK * LANES {
                // SAFETY: outputs `j..j + BLOCK·LANES` of the rows, more
                // after them.
                unsafe {
                    shared_block::<L, BLOCK, false, R, S, STEP, RB>(row, inputs, &weights, j, LANES)
                };
                j += BLOCK * LANES;
            }
            let rest = n - j;
            let vectors = rest.div_ceil(LANES);
            let last = rest - (vectors - 1) * LANES;
            // SAFETY (all arms): the rows' last outputs, `j..n`.
            unsafe {
                match vectors {
                    1 => shared_block::<L, 1, true, R, S, STEP, RB>(row, inputs, &weights, j, last),
                    2 => shared_block::<L, 2, true, R, S, STEP, RB>(row, inputs, &weights, j, last),
                    3 => shared_block::<L, 3, true, R, S, STEP, RB>(row, inputs, &weights, j, last),
                    _ => shared_block::<L, 4, true, R, S, STEP, RB>(row, inputs, &weights, j, last),
                }
            }
        }

        /// [`block`] for `RB` rows: input row `i` (from the first
        /// row's window) is loaded once, vector by vector, and feeds every
        /// output row `b` whose window holds it, as its filter row
        /// `i − STEP·b`. Each output still takes its taps r-major, then s.
        ///
        /// # Safety
        ///
        /// As [`shared_taps`]; the block's outputs lie in `0..n`, and
        /// without `TAIL` the rows have outputs after them.
        #[target_feature(enable = $features)]
        #[inline]
        unsafe fn shared_block<
            L: Inputs,
            const VECTORS: usize,
            const TAIL: bool,
            const R: usize,
            const S: usize,
            const STEP: usize,
            const RB: usize,
        >(
            row: &Row,
            inputs: L,
            weights: &[[V; S]; R],
            j: usize,
            last: usize,
        ) {
            let out_mask = lane_mask(last);
            // SAFETY: `1 ≤ last ≤ LANES`; the features are enabled.
            let tail = unsafe { L::Tail::new(last) };
            let is_tail = |v: usize| TAIL && v == VECTORS - 1;
            let out_of = |b: usize| row.out.wrapping_offset(offset(b, row.out_y)).wrapping_add(j);

            let mut acc = [[zero(); VECTORS]; RB];
            if row.accumulate {
                for (b, acc_b) in acc.iter_mut().enumerate() {
                    for (v, a) in acc_b.iter_mut().enumerate() {
                        let p = out_of(b).wrapping_add(v * LANES);
                        // SAFETY: outputs of this block, in `0..n` (the
                        // masked lanes are never touched); the features.
                        *a = unsafe {
                            inputs.order(if is_tail(v) { load_masked(p, out_mask) } else { load(p) })
                        };
                    }
                }
            }
            let input = row.input.wrapping_offset(offset(j, row.in_x));
            let vector_step = offset(LANES, row.in_x);
            let input_row = |i: usize| input.wrapping_offset(offset(i, row.in_r));
            if L::WINDOW3 && S == 3 && row.in_s == 1 {
                // Vector by vector, its three taps from one set of loads.
                for i in 0..STEP * (RB - 1) + R {
                    for v in 0..VECTORS {
                        let p = input_row(i).wrapping_offset(offset(v, vector_step));
                        // SAFETY: inputs of this block's outputs in the rows
                        // whose window holds input row `i` (every `i` here
                        // is in one), at every tap s; a vector that is not
                        // the tail has outputs after it.
                        let xs = unsafe { inputs.window3(p, is_tail(v), tail) };
                        for (s, &x) in xs.iter().enumerate() {
                            for (b, acc_b) in acc.iter_mut().enumerate() {
                                if let Some(r) = i.checked_sub(STEP * b).filter(|&r| r < R) {
                                    acc_b[v] = fma(weights[r][s], x, acc_b[v]);
                                }
                            }
                        }
                    }
                }
            } else {
                for i in 0..STEP * (RB - 1) + R {
                    for s in 0..S {
                        let tap = input_row(i).wrapping_offset(offset(s, row.in_s));
                        for v in 0..VECTORS {
                            let p = tap.wrapping_offset(offset(v, vector_step));
                            // SAFETY: as above, at tap s.
                            let x = unsafe { load_inputs(inputs, p, is_tail(v), tail) };
                            for (b, acc_b) in acc.iter_mut().enumerate() {
                                if let Some(r) = i.checked_sub(STEP * b).filter(|&r| r < R) {
                                    acc_b[v] = fma(weights[r][s], x, acc_b[v]);
                                }
                            }
                        }
                    }
                }
            }
            // The stores stay written out here, as in `block`: behind a shared
            // helper LLVM moved the accumulators through the stack (measured
            // 2-3x slower).
            // SAFETY: the caller's contract: the epilogue is null or valid.
            let epilogue = unsafe { row.epilogue.as_ref() };
            for (b, acc_b) in acc.into_iter().enumerate() {
                for (v, a) in acc_b.into_iter().enumerate() {
                    let p = out_of(b).wrapping_add(v * LANES);
                    // SAFETY: the features are enabled; outputs of this
                    // block, in `0..n`, and their addends.
                    unsafe {
                        let mut natural = inputs.order(a);
                        if let Some(epilogue) = epilogue {
                            let mask = if is_tail(v) { out_mask } else { lane_mask(LANES) };
                            natural = epilogue_on(epilogue, natural, row.y + b, j + v * LANES, mask);
                        }
                        if is_tail(v) {
                            store_masked(p, out_mask, natural)
                        } else {
                            store(p, natural)
                        }
                    }
                }
            }
        }

        /// `v`, the outputs `j..` of row `y` (lanes in `mask`), through the
        /// epilogue: each addend, then the clamps.
        ///
        /// # Safety
        ///
        /// The CPU has the features; the addends at `(y, j..)` of the
        /// lanes in `mask` are readable.
        #[target_feature(enable = $features)]
        #[inline]
        unsafe fn epilogue_on(
            epilogue: &$crate::runtime::micro_kernels::Epilogue,
            mut v: V,
            y: usize,
            j: usize,
            mask: M,
        ) -> V {
            for addend in epilogue.used_addends() {
                let at = offset(y, addend.row_stride as isize)
                    .wrapping_add(offset(j, addend.col_stride as isize));
                let p = addend.data.wrapping_offset(at);
                // SAFETY: the caller's contract.
                let term = unsafe {
                    if addend.col_stride == 0 {
                        splat(*p)
                    } else {
                        load_masked(p, mask)
                    }
                };
                v = add(v, term);
            }
            if epilogue.clamp & $crate::runtime::micro_kernels::CLAMP_LOWER != 0 {
                v = max(v, splat(epilogue.lower));
            }
            if epilogue.clamp & $crate::runtime::micro_kernels::CLAMP_UPPER != 0 {
                v = min(v, splat(epilogue.upper));
            }
            v
        }

        /// How a vector of [`LANES`] consecutive outputs loads its input at
        /// one tap from `p`, the input of its first output. The methods
        /// are compiled with the features, so a caller must have them.
        trait Inputs: Copy {
            /// The lane masks of a load of the first outputs only.
            type Tail: TailMasks;

            /// Whether [`Inputs::window3`] loads less than three taps do.
            const WINDOW3: bool = false;

            /// The inputs of [`LANES`] outputs, in the lane order of
            /// [`Inputs::order`].
            ///
            /// # Safety
            ///
            /// The CPU has the features; every element from `p` to the
            /// input of the last output's successor is readable.
            unsafe fn load(self, p: *const f32) -> V;

            /// The inputs of the outputs of `tail`'s lanes, zero in the
            /// others, in the lane order of [`Inputs::order`]; reads nothing
            /// past the last of those inputs.
            ///
            /// # Safety
            ///
            /// The CPU has the features; every element from `p` to the last
            /// of those inputs is readable.
            unsafe fn load_tail(self, p: *const f32, tail: Self::Tail) -> V;

            /// The inputs of one vector of outputs at taps s = 0, 1, 2 of a
            /// window whose taps are consecutive elements (`in_s` = 1), `p`
            /// the first one's (the row's last vector, through `tail`'s
            /// masks, where `is_tail`).
            ///
            /// # Safety
            ///
            /// As [`Inputs::load`] (or [`Inputs::load_tail`]) at `p`, `p + 1`
            /// and `p + 2`.
            #[inline]
            unsafe fn window3(self, p: *const f32, is_tail: bool, tail: Self::Tail) -> [V; 3] {
                // SAFETY: the caller's contract.
                unsafe { window3_by_taps(self, p, is_tail, tail) }
            }

            /// Maps outputs between their natural lane order and the order
            /// the loads deliver (either way: it is its own inverse); the
            /// identity unless the loads reorder.
            ///
            /// # Safety
            ///
            /// The CPU has the features.
            #[inline]
            unsafe fn order(self, v: V) -> V {
                v
            }
        }

        /// The lane masks of a tail load, made once per block (out of its
        /// loop over the taps) from its count of outputs.
        trait TailMasks: Copy {
            /// The masks of a load of outputs `0..count`
            /// (`1 ≤ count ≤ LANES`).
            ///
            /// # Safety
            ///
            /// The CPU has the features.
            unsafe fn new(count: usize) -> Self;
        }

        /// One vector's lanes `0..count`: an output's input in each lane.
        impl TailMasks for M {
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn new(count: usize) -> M {
                lane_mask(count)
            }
        }

        /// `in_x` = 1: consecutive inputs.
        #[derive(Clone, Copy)]
        struct Contiguous;

        impl Inputs for Contiguous {
            type Tail = M;

            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn load(self, p: *const f32) -> V {
                // SAFETY: `p[0..LANES]`: the caller's contract.
                unsafe { load(p) }
            }

            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn load_tail(self, p: *const f32, mask: M) -> V {
                // SAFETY: the unmasked elements: the caller's contract.
                unsafe { load_masked(p, mask) }
            }
        }

        /// `in_x` = 2: the even elements of `2·LANES` consecutive ones, in
        /// the ISA's stride-2 order ([`evens`]).
        #[derive(Clone, Copy)]
        struct Stride2;

        /// The masks of a stride-2 tail's low and high vector.
        #[derive(Clone, Copy)]
        struct Stride2Masks {
            low: M,
            high: M,
            /// Outputs of the tail.
            count: usize,
        }

        impl TailMasks for Stride2Masks {
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn new(count: usize) -> Stride2Masks {
                // Elements `p[0..2·count − 1]`: up to the last even one
                // needed.
                let elements = 2 * count - 1;
                Stride2Masks {
                    low: lane_mask(elements),
                    high: lane_mask(elements.saturating_sub(LANES)),
                    count,
                }
            }
        }

        impl Inputs for Stride2 {
            type Tail = Stride2Masks;
            const WINDOW3: bool = true;

            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn load(self, p: *const f32) -> V {
                // SAFETY: at most `p[0..2·LANES]`, which ends before the
                // input `p[2·LANES]` of the last output's successor: the
                // caller's contract.
                unsafe { load_evens(p) }
            }

            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn load_tail(self, p: *const f32, tail: Stride2Masks) -> V {
                // SAFETY: the unmasked elements, up to the last output's
                // input: the caller's contract.
                let (low, high) = unsafe {
                    (
                        load_masked(p, tail.low),
                        load_masked(p.wrapping_add(LANES), tail.high),
                    )
                };
                evens(low, high)
            }

            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn window3(self, p: *const f32, is_tail: bool, tail: Stride2Masks) -> [V; 3] {
                let count = if is_tail { tail.count } else { LANES };
                // SAFETY: `p[0..=2·count]`, up to the input of the last
                // output at tap 2 (`p[2·LANES]` without the tail: the input
                // of the next output): the caller's contract.
                unsafe { load_evens_window(p, count) }
            }

            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn order(self, v: V) -> V {
                evens_order(v)
            }
        }

        /// Any other `in_x`: a gather at offsets `l·in_x`.
        #[derive(Clone, Copy)]
        struct Gather {
            offsets: I,
        }

        impl Gather {
            /// The gather for stride `in_x`, or `None` when
            /// `(LANES − 1)·in_x` is out of the range of its 32-bit offsets.
            #[target_feature(enable = $features)]
            fn new(in_x: isize) -> Option<Gather> {
                let step = i32::try_from(in_x).ok()?;
                step.checked_mul(LANES as i32 - 1)?;
                let offsets: [i32; LANES] = std::array::from_fn(|l| l as i32 * step);
                Some(Gather {
                    // SAFETY: reads the `LANES` elements of `offsets`.
                    offsets: unsafe { load_index(offsets.as_ptr()) },
                })
            }
        }

        impl Inputs for Gather {
            type Tail = M;

            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn load(self, p: *const f32) -> V {
                // SAFETY: the `LANES` outputs' inputs: the caller's contract.
                unsafe { gather(p, self.offsets) }
            }

            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn load_tail(self, p: *const f32, mask: M) -> V {
                // SAFETY: the unmasked outputs' inputs: the caller's
                // contract.
                unsafe { gather_masked(p, self.offsets, mask) }
            }
        }

        #[cfg(test)]
        mod window_tests {
            use super::*;

            #[test]
            fn the_evens_window_is_three_stride_2_taps() {
                let isa = $crate::runtime::micro_kernels::Isa::$isa;
                if $crate::runtime::Target::host().cpu_isa() < isa {
                    println!("skipped: this CPU does not run {}", isa.name());
                    return;
                }
                let data: Vec<f32> = (0..=2 * LANES).map(|i| i as f32 + 0.5).collect();
                for count in 1..=LANES {
                    // Only the elements the window may read: p[0..=2·count].
                    let input = &data[..=2 * count];
                    // SAFETY: the CPU has the features; `input` holds
                    // p[0..=2·count].
                    let taps = unsafe { load_evens_window(input.as_ptr(), count) };
                    for (s, tap) in taps.into_iter().enumerate() {
                        let mut lanes = [0.0f32; LANES];
                        // SAFETY: the features; `lanes` holds one vector.
                        unsafe { store(lanes.as_mut_ptr(), evens_order(tap)) };
                        for (l, &lane) in lanes.iter().enumerate().take(count) {
                            assert_eq!(lane, input[2 * l + s], "count {count}, tap {s}, lane {l}");
                        }
                    }
                }
            }
        }
    };
}

pub(super) use stencil_algorithm;
