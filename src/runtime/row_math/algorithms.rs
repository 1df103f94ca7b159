//! The f32 transcendental algorithms of `codegen::math`, written once over
//! an ISA's vector operations ([`row_math_algorithms!`]), op for op as the
//! f32x4 Cranelift kernels emit them: the same constants, the same fused
//! multiply-adds in the same order, the same special-value selects. That
//! is what makes the row primitives bit-identical to the inline kernels.

/// Writes, into the invoking ISA module, one vector function per
/// transcendental (`exp_v`, `log_v`, `tanh_v`, `sigmoid_v`, `erf_v`), the
/// row driver `row` and one `unsafe extern "C" fn <isa>_<f>(data, n)` per
/// function ([`super::RowMathFn`]), plus `pub(super) fn primitives()`.
///
/// The module must define, as `#[target_feature(enable = $features)]`
/// functions on its vector type `V`, integer vector type `I` and lane
/// mask type `M`: `splat`, `splat_i`, `add`, `sub`, `mul`, `div`,
/// `fma(a, b, c) = a·b + c` (one rounding), `min(a, b) = a < b ? a : b`,
/// `abs`, `neg`, `or`, `and`, the ordered comparisons `lt`, `eq` and the
/// unordered `nge` (not ≥) giving `M`, `select(m, t, f)`, `keep(m, x)`
/// (x where m, else 0), `clear(m, x)` (0 where m, else x), `to_bits`,
/// `from_bits`, `iadd`, `isub`, `sra1` (>> 1 arithmetic), `shl23`,
/// `shr23` (logical), `iand`, `i2f`, and the unsafe `load` / `store`.
macro_rules! row_math_algorithms {
    (
        isa: $isa:ident,
        features: $features:literal,
        lanes: $lanes:literal,
        primitives: { $($name:ident: $f:ident => $kernel:ident),* $(,)? } $(,)?
    ) => {
        use $crate::runtime::row_math::constants::*;

        /// f32 lanes of one vector.
        const L: usize = $lanes;

        /// Horner evaluation with fused multiply-adds, highest degree first
        /// (the f32x4 kernels' `horner`).
        #[target_feature(enable = $features)]
        #[inline]
        fn horner(x: V, coeffs: &[f32]) -> V {
            let mut acc = splat(coeffs[0]);
            for &c in &coeffs[1..] {
                acc = fma(acc, x, splat(c));
            }
            acc
        }

        /// `magnitude` (sign bit clear) with the sign of `sign`.
        #[target_feature(enable = $features)]
        #[inline]
        fn with_sign_of(magnitude: V, sign: V) -> V {
            or(magnitude, and(sign, from_bits(splat_i(SIGN_BIT as i32))))
        }

        /// 2^k for integer lanes k in the normal exponent range.
        #[target_feature(enable = $features)]
        #[inline]
        fn pow2(k: I) -> V {
            from_bits(shl23(iadd(k, splat_i(127))))
        }

        /// `e^x`: `codegen::math::exp_log::exp_f32x4`, op for op.
        #[target_feature(enable = $features)]
        #[inline]
        fn exp_v(x: V) -> V {
            let x = min(splat(EXP_HI), x);
            let lo = splat(EXP_LO);
            let below = lt(x, lo);
            let x = select(below, lo, x);
            let shifter = splat(ROUND_SHIFTER);
            let t = fma(x, splat(LOG2_E), shifter);
            let n_float = sub(t, shifter);
            let n = isub(to_bits(t), splat_i(ROUND_SHIFTER.to_bits() as i32));
            let r = fma(n_float, splat(-LN2_HI), x);
            let r = fma(n_float, splat(-LN2_LO), r);
            let p = horner(r, &EXP_POLY);
            let r2 = mul(r, r);
            let one = splat(1.0);
            let hi = add(one, r);
            let lost = sub(one, hi);
            let lo = add(lost, r);
            let tail = fma(p, r2, lo);
            let y = add(hi, tail);
            let n1 = sra1(n);
            let n2 = isub(n, n1);
            let s1 = pow2(n1);
            let s2 = clear(below, pow2(n2));
            mul(mul(y, s1), s2)
        }

        /// Natural logarithm: `codegen::math::exp_log::log_f32x4`, op for op.
        #[target_feature(enable = $features)]
        #[inline]
        fn log_v(x_in: V) -> V {
            let is_sub = lt(x_in, splat(MIN_NORMAL));
            let scaled = mul(x_in, splat(TWO_POW_23));
            let x = select(is_sub, scaled, x_in);
            let sub_adjust = to_bits(keep(is_sub, from_bits(splat_i(23))));
            let bits = to_bits(x);
            let exp_field = iand(shr23(bits), splat_i(0xff));
            let e = isub(exp_field, splat_i(126));
            let e = isub(e, sub_adjust);
            let mant = iand(bits, splat_i(0x007f_ffff));
            let m = from_bits(ior(mant, splat_i(0.5f32.to_bits() as i32)));
            let e = i2f(e);
            let small = lt(m, splat(SQRT_HALF));
            let one = splat(1.0);
            let e = sub(e, keep(small, one));
            let m_if_small = keep(small, m);
            let f = sub(m, one);
            let f = add(f, m_if_small);
            let z = mul(f, f);
            let p = horner(f, &LOG_POLY);
            let p = mul(p, f);
            let y = mul(p, z);
            let y = fma(e, splat(LOG_C1), y);
            let y = fma(z, splat(-0.5), y);
            let r = add(f, y);
            let r = fma(e, splat(LOG_C2), r);
            let inf = splat(f32::INFINITY);
            let r = select(eq(x_in, inf), inf, r);
            let zero = splat(0.0);
            let r = select(eq(x_in, zero), splat(f32::NEG_INFINITY), r);
            select(nge(x_in, zero), splat(f32::NAN), r)
        }

        /// Hyperbolic tangent: `codegen::math::tanh_sigmoid::tanh_f32x4`.
        #[target_feature(enable = $features)]
        #[inline]
        fn tanh_v(x: V) -> V {
            let a = abs(x);
            let z = mul(a, a);
            let p = horner(z, &TANH_POLY);
            let pz = mul(p, z);
            let small = fma(pz, a, a);
            let e = exp_v(add(a, a));
            let one = splat(1.0);
            let d = add(e, one);
            let q = div(splat(2.0), d);
            let large = sub(one, q);
            let magnitude = select(lt(a, splat(TANH_SMALL)), small, large);
            with_sign_of(magnitude, x)
        }

        /// Logistic sigmoid: `codegen::math::tanh_sigmoid::sigmoid_f32x4`.
        #[target_feature(enable = $features)]
        #[inline]
        fn sigmoid_v(x: V) -> V {
            let e = exp_v(neg(abs(x)));
            let one = splat(1.0);
            let d = add(one, e);
            let numerator = select(lt(x, splat(0.0)), e, one);
            div(numerator, d)
        }

        /// The error function: `codegen::math::erf::erf_f32x4`, op for op.
        #[target_feature(enable = $features)]
        #[inline]
        fn erf_v(x: V) -> V {
            let s = mul(x, x);
            let p = horner(s, &ERF_SMALL);
            let small = fma(p, x, x);
            let t = min(splat(ERF_CLAMP), abs(x));
            let ts = mul(t, t);
            let a = horner(t, &ERF_LARGE_A);
            let b = horner(t, &ERF_LARGE_B);
            let mut r = fma(a, ts, b);
            for c in ERF_LARGE_C {
                r = fma(r, t, splat(c));
            }
            let r = fma(r, t, neg(t));
            let e = exp_v(r);
            let large = with_sign_of(sub(splat(1.0), e), x);
            select(lt(splat(ERF_SPLIT), t), large, small)
        }

        /// `data[j] = f(data[j])` for `0 ≤ j < n`: four independent vectors
        /// per iteration (the polynomial's latency hidden behind the other
        /// three), then single vectors, then the tail through one vector in
        /// a stack copy (lanes past `n` are never read or written in `data`).
        ///
        /// # Safety
        /// `data` is valid for reading and writing `n` floats (when `n > 0`),
        /// and the CPU has the features.
        #[target_feature(enable = $features)]
        #[inline]
        unsafe fn row(data: *mut f32, n: i64, f: impl Fn(V) -> V) {
            let n = usize::try_from(n).unwrap_or(0);
            let mut j = 0;
            while j + 4 * L <= n {
                // SAFETY: j + 4L ≤ n elements are valid (the contract).
                unsafe {
                    let p = data.add(j);
                    let (a, b, c, d) = (load(p), load(p.add(L)), load(p.add(2 * L)), load(p.add(3 * L)));
                    let (a, b, c, d) = (f(a), f(b), f(c), f(d));
                    store(p, a);
                    store(p.add(L), b);
                    store(p.add(2 * L), c);
                    store(p.add(3 * L), d);
                }
                j += 4 * L;
            }
            while j + L <= n {
                // SAFETY: j + L ≤ n.
                unsafe {
                    let p = data.add(j);
                    store(p, f(load(p)));
                }
                j += L;
            }
            if j < n {
                let left = n - j;
                let mut lanes = [0.0f32; L];
                // SAFETY: `left` elements from j are valid; `lanes` holds L ≥ left.
                unsafe {
                    std::ptr::copy_nonoverlapping(data.add(j), lanes.as_mut_ptr(), left);
                    store(lanes.as_mut_ptr(), f(load(lanes.as_ptr())));
                    std::ptr::copy_nonoverlapping(lanes.as_ptr(), data.add(j), left);
                }
            }
        }

        $(
            #[doc = concat!("`data[j] = ", stringify!($f), "(data[j])` for `0 ≤ j < n`; see [`super::RowMathFn`].")]
            ///
            /// # Safety
            ///
            #[doc = concat!("As [`super::RowMathFn`]; the CPU must have ", $features, ".")]
            unsafe extern "C" fn $name(data: *mut f32, n: i64) {
                // SAFETY: forwarded contract (including the CPU features).
                unsafe { $name::run(data, n) }
            }

            /// The driver instantiated for one function, compiled with the
            /// ISA's features so that the vector function is inlined.
            mod $name {
                use super::*;

                /// # Safety
                /// As [`row`].
                #[target_feature(enable = $features)]
                pub(super) unsafe fn run(data: *mut f32, n: i64) {
                    // SAFETY: forwarded contract; the closure inherits the features.
                    unsafe { row(data, n, |v| $kernel(v)) }
                }
            }
        )*

        /// This ISA's row primitives.
        pub(super) fn primitives() -> Vec<$crate::runtime::row_math::RowPrimitive> {
            vec![$($crate::runtime::row_math::RowPrimitive {
                name: stringify!($name),
                isa: $crate::runtime::micro_kernels::Isa::$isa,
                function: $crate::te::Intrinsic::$f,
                func: $name,
            }),*]
        }
    };
}

/// Writes an ISA's vector operations: each `fn name(args) -> T => body;`
/// becomes an `#[inline]` function compiled with `features`.
macro_rules! vector_ops {
    (
        features: $features:literal,
        $($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $body:expr;)*
    ) => {
        $(
            $(#[$doc])*
            #[target_feature(enable = $features)]
            #[inline]
            fn $name($($arg: $ty),*) -> $ret {
                $body
            }
        )*
    };
}

pub(super) use {row_math_algorithms, vector_ops};
