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

/// Writes, into the invoking ISA module, the stencil primitive
/// `unsafe extern "C" fn $name` ([`super::StencilFn`]), the row algorithm
/// behind it, the ISA's vector operations and `pub(super) fn primitives()`.
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
///   `load_index(p)` (`LANES` i32), `gather(p, offsets)` (lane `l` from
///   `p[offsets[l]]`) and `gather_masked(p, offsets, m)` (zero in the
///   masked-out lanes, which are never touched).
macro_rules! stencil_algorithm {
    (
        isa: $isa:ident,
        features: $features:literal,
        lanes: $lanes:literal,
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

        /// Each row in turn, with the input loads for `in_x`.
        ///
        /// # Safety
        ///
        /// The [`StencilFn`](super::StencilFn) contract for `row`.
        #[target_feature(enable = $features)]
        unsafe fn stencil(rows: &Row) {
            let mut row = *rows;
            for y in 0..rows.rows {
                row.y = y;
                // SAFETY (all arms): the caller's contract, for this row.
                match row.in_x {
                    1 => unsafe { taps(&row, Contiguous) },
                    2 => unsafe { taps(&row, Stride2) },
                    in_x => match Gather::new(in_x) {
                        Some(gather) => unsafe { blocks::<Gather, 0, 0>(&row, gather) },
                        None => unsafe { row.scalar(0..row.n) },
                    },
                }
                row.out = row.out.wrapping_offset(rows.out_y);
                row.input = row.input.wrapping_offset(rows.in_y);
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
                        let x = unsafe {
                            if is_tail(v) {
                                inputs.load_tail(p, tail)
                            } else {
                                inputs.load(p)
                            }
                        };
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
                }
            }
        }

        impl Inputs for Stride2 {
            type Tail = Stride2Masks;

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
    };
}

pub(super) use stencil_algorithm;
