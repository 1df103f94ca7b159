//! Accuracy and special-value tests of the math intrinsics, run through the
//! JIT on many inputs against f64 references.
//!
//! The full-range numbers in the kernels' doc comments come from
//! `exhaustive_f32_accuracy` (ignored by default; run it in release:
//! `cargo test --release --lib codegen::math::tests::exhaustive -- --ignored --nocapture`).

mod harness;
mod row_primitives;
mod throughput;

use cranelift_codegen::ir::types;

use self::harness::{Kernel, Opt, compile};
use crate::te::Intrinsic;

/// An exact (f64) reference implementation.
type Reference = fn(f64) -> f64;

/// The f32 functions with inline kernels, with their f64 references and the
/// asserted bound in ulp.
const F32_FUNCTIONS: [(Intrinsic, Reference, f64); 5] = [
    (Intrinsic::Exp, f64::exp, 1.0),
    (Intrinsic::Log, f64::ln, 1.0),
    (Intrinsic::Tanh, f64::tanh, 1.5),
    (Intrinsic::Sigmoid, sigmoid_f64, 2.5),
    (Intrinsic::Erf, libm::erf, 1.0),
];

fn sigmoid_f64(x: f64) -> f64 {
    if x < 0.0 {
        let e = x.exp();
        e / (1.0 + e)
    } else {
        1.0 / (1.0 + (-x).exp())
    }
}

/// The spacing of f32 values at magnitude |v| (2^-149 in the subnormals).
fn f32_ulp_at(v: f64) -> f64 {
    let a = v.abs().min(f64::from(f32::MAX));
    // The binary exponent of a (a is normal in f64 here, or zero).
    let exponent = ((a.to_bits() >> 52) & 0x7ff) as i64 - 1023;
    let ulp_exponent = exponent.max(-126) - 23;
    f64::from_bits(((ulp_exponent + 1023) as u64) << 52)
}

/// The error of `got` against the exact `want`, in ulp of f32 at `want`.
/// NaN must match NaN; infinities must match the correctly rounded `want`.
fn ulp_error(got: f32, want: f64) -> f64 {
    if want.is_nan() || got.is_nan() {
        return if want.is_nan() && got.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if got.is_infinite() {
        return if want as f32 == got {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if want.is_infinite() {
        return f64::INFINITY;
    }
    (f64::from(got) - want).abs() / f32_ulp_at(want)
}

/// Largest error and the input where it occurs.
#[derive(Clone, Copy, Debug)]
struct MaxError {
    ulp: f64,
    at: f32,
}

impl MaxError {
    const NONE: MaxError = MaxError { ulp: 0.0, at: 0.0 };

    fn add(&mut self, ulp: f64, at: f32) {
        if ulp > self.ulp || ulp.is_nan() {
            *self = MaxError { ulp, at };
        }
    }
}

/// Runs scalar and vector kernels on `xs`, checks they agree bit for bit and
/// returns the maximal ulp error against `reference`.
fn measure(scalar: &Kernel, vector: &Kernel, reference: Reference, xs: &[f32]) -> MaxError {
    let s = scalar.map(xs);
    let v = vector.map(xs);
    let mut max = MaxError::NONE;
    for ((&x, &sv), &vv) in xs.iter().zip(&s).zip(&v) {
        assert_eq!(
            sv.to_bits(),
            vv.to_bits(),
            "scalar and vector differ at x = {x:e}: {sv:e} vs {vv:e}"
        );
        max.add(ulp_error(sv, reference(f64::from(x))), x);
    }
    max
}

/// Inputs every function is checked on: specials, boundaries of the kernels'
/// ranges, subnormals, and a strided sweep over all bit patterns.
fn sample_inputs() -> Vec<f32> {
    let mut xs = vec![
        0.0,
        -0.0,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::from_bits(1),
        -f32::from_bits(1),
        f32::from_bits(0x007f_ffff),
        1e-40,
        -1e-40,
        1e-30,
        -1e-30,
        1.0,
        -1.0,
        0.625,
        -0.625,
        0.624_999_94,
        3.832_506_6,
        -3.832_506_6,
        3.832_507,
        9.0,
        -9.0,
        44.0,
        -44.0,
        88.722_83,
        88.722_84,
        88.73,
        89.0,
        -87.33,
        -88.72,
        -103.27,
        -103.97,
        -104.0,
        -150.0,
        1000.0,
        -1000.0,
        f32::MAX,
        -f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
    ];
    // A strided sweep over all 2^32 bit patterns (both signs, all exponents).
    xs.extend((0..=u32::MAX).step_by(4093).map(f32::from_bits));
    // Dense where the functions are not flat.
    let dense =
        |lo: f32, hi: f32, n: usize| (0..n).map(move |i| lo + (hi - lo) * (i as f32) / (n as f32));
    xs.extend(dense(-110.0, 90.0, 400_000));
    xs.extend(dense(-10.0, 10.0, 400_000));
    xs.extend(dense(-0.7, 0.7, 100_000));
    xs.extend(dense(0.5, 2.0, 100_000));
    // Pad to a multiple of 4 lanes.
    while xs.len() % 4 != 0 {
        xs.push(0.5);
    }
    xs
}

#[test]
fn f32_kernels_are_accurate_and_scalar_matches_vector() {
    let xs = sample_inputs();
    for (f, reference, bound) in F32_FUNCTIONS {
        let scalar = compile(f, types::F32, Opt::Speed);
        let vector = compile(f, types::F32X4, Opt::Speed);
        let max = measure(&scalar, &vector, reference, &xs);
        println!(
            "{:8} f32/f32x4: max error {:.3} ulp at x = {:e} ({} inputs)",
            f.name(),
            max.ulp,
            max.at,
            xs.len()
        );
        assert!(
            max.ulp <= bound,
            "{}: {:.3} ulp at x = {:e} exceeds {bound} ulp",
            f.name(),
            max.ulp,
            max.at
        );
    }
}

/// The same bits at `opt_level=none`, and without native FMA (libcalls).
#[test]
fn f32_kernels_agree_across_opt_levels_and_without_fma() {
    let xs = sample_inputs();
    for (f, _, _) in F32_FUNCTIONS {
        for ty in [types::F32, types::F32X4] {
            let fast = compile(f, ty, Opt::Speed).map(&xs);
            for opt in [Opt::None, Opt::SpeedNoFma] {
                let other = compile(f, ty, opt).map(&xs);
                for ((x, a), b) in xs.iter().zip(&fast).zip(&other) {
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "{} {ty} {opt:?} at {x:e}",
                        f.name()
                    );
                }
            }
        }
    }
}

/// Exact results required at special inputs (compared bitwise, any NaN for NaN).
#[test]
fn f32_special_values() {
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    let cases: &[(Intrinsic, f32, f32)] = &[
        (Intrinsic::Exp, 0.0, 1.0),
        (Intrinsic::Exp, -0.0, 1.0),
        (Intrinsic::Exp, inf, inf),
        (Intrinsic::Exp, -inf, 0.0),
        (Intrinsic::Exp, nan, nan),
        (Intrinsic::Exp, 88.8, inf),
        (Intrinsic::Exp, 1000.0, inf),
        (Intrinsic::Exp, -104.0, 0.0),
        (Intrinsic::Exp, -1000.0, 0.0),
        (Intrinsic::Exp, -103.9, f32::from_bits(1)),
        (Intrinsic::Log, 1.0, 0.0),
        (Intrinsic::Log, 0.0, -inf),
        (Intrinsic::Log, -0.0, -inf),
        (Intrinsic::Log, -1.0, nan),
        (Intrinsic::Log, -inf, nan),
        (Intrinsic::Log, -f32::from_bits(1), nan),
        (Intrinsic::Log, inf, inf),
        (Intrinsic::Log, nan, nan),
        (Intrinsic::Tanh, 0.0, 0.0),
        (Intrinsic::Tanh, -0.0, -0.0),
        (Intrinsic::Tanh, inf, 1.0),
        (Intrinsic::Tanh, -inf, -1.0),
        (Intrinsic::Tanh, 20.0, 1.0),
        (Intrinsic::Tanh, -20.0, -1.0),
        (Intrinsic::Tanh, 1e-40, 1e-40),
        (Intrinsic::Tanh, nan, nan),
        (Intrinsic::Sigmoid, 0.0, 0.5),
        (Intrinsic::Sigmoid, -0.0, 0.5),
        (Intrinsic::Sigmoid, inf, 1.0),
        (Intrinsic::Sigmoid, -inf, 0.0),
        (Intrinsic::Sigmoid, 100.0, 1.0),
        (Intrinsic::Sigmoid, -200.0, 0.0),
        (Intrinsic::Sigmoid, nan, nan),
        (Intrinsic::Erf, 0.0, 0.0),
        (Intrinsic::Erf, -0.0, -0.0),
        (Intrinsic::Erf, inf, 1.0),
        (Intrinsic::Erf, -inf, -1.0),
        (Intrinsic::Erf, 5.0, 1.0),
        (Intrinsic::Erf, -5.0, -1.0),
        (Intrinsic::Erf, nan, nan),
    ];
    for &(f, x, want) in cases {
        for ty in [types::F32, types::F32X4] {
            let got = compile(f, ty, Opt::Speed).map(&[x; 4])[0];
            let ok = if want.is_nan() {
                got.is_nan()
            } else {
                got.to_bits() == want.to_bits()
            };
            assert!(ok, "{}({x:e}) on {ty} = {got:e}, want {want:e}", f.name());
        }
    }
}

/// The tails: sigmoid follows e^x into the subnormals, exp produces correct
/// subnormals, log handles subnormal inputs.
#[test]
fn f32_subnormal_ranges_are_accurate() {
    let cases: [(Intrinsic, Reference, f32, f32); 3] = [
        (Intrinsic::Exp, f64::exp, -104.0, -87.0),
        (Intrinsic::Sigmoid, sigmoid_f64, -104.0, -87.0),
        (Intrinsic::Log, f64::ln, 0.0, f32::MIN_POSITIVE),
    ];
    for (f, reference, lo, hi) in cases {
        let n = 100_000;
        let xs: Vec<f32> = (0..n)
            .map(|i| lo + (hi - lo) * (i as f32) / (n as f32))
            .collect();
        let scalar = compile(f, types::F32, Opt::Speed);
        let vector = compile(f, types::F32X4, Opt::Speed);
        let max = measure(&scalar, &vector, reference, &xs);
        assert!(
            max.ulp <= 1.0,
            "{} tail: {:.3} ulp at {:e}",
            f.name(),
            max.ulp,
            max.at
        );
    }
}

/// Full-range accuracy over all 2^32 inputs, scalar and vector. Slow; run in
/// release with `--ignored --nocapture` to print the table in the docs.
#[test]
#[ignore = "exhaustive: 2^32 inputs per function, run in release"]
fn exhaustive_f32_accuracy() {
    const CHUNK: u64 = 1 << 22;
    // Optionally only some functions, e.g. TESSERA_MATH_EXHAUSTIVE=exp,log.
    let only = std::env::var("TESSERA_MATH_EXHAUSTIVE").unwrap_or_default();
    for (f, reference, bound) in F32_FUNCTIONS {
        if !only.is_empty() && !only.split(',').any(|name| name == f.name()) {
            continue;
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        let chunks = (1u64 << 32) / CHUNK;
        let maxima: Vec<MaxError> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    scope.spawn(move || {
                        let scalar = compile(f, types::F32, Opt::Speed);
                        let vector = compile(f, types::F32X4, Opt::Speed);
                        let mut max = MaxError::NONE;
                        let mut xs = vec![0f32; CHUNK as usize];
                        for c in (t..chunks).step_by(threads as usize) {
                            for (i, x) in xs.iter_mut().enumerate() {
                                *x = f32::from_bits((c * CHUNK + i as u64) as u32);
                            }
                            let m = measure(&scalar, &vector, reference, &xs);
                            max.add(m.ulp, m.at);
                        }
                        max
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("worker"))
                .collect()
        });
        let mut max = MaxError::NONE;
        for m in maxima {
            max.add(m.ulp, m.at);
        }
        println!(
            "{:8} all 2^32 inputs: max error {:.3} ulp at x = {:e}",
            f.name(),
            max.ulp,
            max.at
        );
        assert!(
            max.ulp <= bound,
            "{}: {:.3} ulp at {:e}",
            f.name(),
            max.ulp,
            max.at
        );
    }
}

/// f64 and f32-pow intrinsics are host calls: the JIT result must equal the
/// host function bit for bit, for scalars and per lane for vectors.
#[test]
fn host_calls_match_the_host_functions() {
    let xs: Vec<f64> = (-400..400)
        .map(|i| f64::from(i) * 0.37)
        .chain([
            0.0,
            -0.0,
            1e-310,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            700.0,
            -700.0,
        ])
        .collect();
    let unary: [(Intrinsic, Reference); 6] = [
        (Intrinsic::Exp, f64::exp),
        (Intrinsic::Log, f64::ln),
        (Intrinsic::Tanh, f64::tanh),
        (Intrinsic::Sigmoid, sigmoid_f64),
        (Intrinsic::Erf, libm::erf),
        (Intrinsic::Sqrt, f64::sqrt),
    ];
    for (f, reference) in unary {
        for ty in [types::F64, types::F64X2] {
            let got = compile(f, ty, Opt::Speed).map(&xs);
            for (x, g) in xs.iter().zip(&got) {
                let want = reference(*x);
                assert!(
                    g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                    "{}({x:e}) on {ty} = {g:e}, want {want:e}",
                    f.name()
                );
            }
        }
    }

    let ys: Vec<f64> = xs.iter().map(|x| (x * 0.25).sin() * 3.0).collect();
    for ty in [types::F64, types::F64X2] {
        let mut out = vec![0.0; xs.len()];
        compile(Intrinsic::Pow, ty, Opt::Speed).run(&xs, &ys, &mut out);
        for ((x, y), g) in xs.iter().zip(&ys).zip(&out) {
            let want = x.powf(*y);
            assert!(
                g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                "pow({x}, {y}) on {ty}"
            );
        }
    }

    let xs32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
    let ys32: Vec<f32> = ys.iter().map(|&y| y as f32).collect();
    for ty in [types::F32, types::F32X4] {
        let mut out = vec![0.0; xs32.len()];
        compile(Intrinsic::Pow, ty, Opt::Speed).run(&xs32, &ys32, &mut out);
        for ((x, y), g) in xs32.iter().zip(&ys32).zip(&out) {
            let want = x.powf(*y);
            assert!(
                g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                "pow({x}, {y}) on {ty}"
            );
        }
    }
}

#[test]
fn native_sqrt_and_abs() {
    let xs = [
        -2.5f32,
        -0.0,
        0.0,
        2.0,
        1e-40,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    for ty in [types::F32, types::F32X4] {
        let sqrt = compile(Intrinsic::Sqrt, ty, Opt::Speed).map(&xs);
        let abs = compile(Intrinsic::Abs, ty, Opt::Speed).map(&xs);
        for ((x, s), a) in xs.iter().zip(&sqrt).zip(&abs) {
            let ok = s.to_bits() == x.sqrt().to_bits() || (s.is_nan() && x.sqrt().is_nan());
            assert!(ok, "sqrt({x}) on {ty} = {s}");
            assert_eq!(a.to_bits(), x.abs().to_bits(), "abs({x}) on {ty}");
        }
    }
    let ints32 = [i32::MIN, -7, -1, 0, 1, 7, i32::MAX, -3];
    for ty in [types::I32, types::I32X4] {
        let got = compile(Intrinsic::Abs, ty, Opt::Speed).map(&ints32);
        let want: Vec<i32> = ints32.iter().map(|v| v.wrapping_abs()).collect();
        assert_eq!(got, want, "abs on {ty}");
    }
    let ints64 = [i64::MIN, -7, -1, 0, 1, 7, i64::MAX, -3];
    for ty in [types::I64, types::I64X2] {
        let got = compile(Intrinsic::Abs, ty, Opt::Speed).map(&ints64);
        let want: Vec<i64> = ints64.iter().map(|v| v.wrapping_abs()).collect();
        assert_eq!(got, want, "abs on {ty}");
    }
}
