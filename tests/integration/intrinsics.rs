//! Math intrinsics through the whole pipeline (te → loop IR → Cranelift),
//! scalar and f32x4, against the f64 reference: error bounds in ulp of f32.

use tessera::codegen::{self, CodegenOptions};
use tessera::schedule::{State, Step};
use tessera::te::{self, ComputeDag, DType, Expr, HostData, HostTensor};
use tessera::tir;

const N: i64 = 4096;

/// `out[i] = f(x[i], y[i])` over inputs spread across `lo..hi` (y in 0.5..3).
fn run(
    f: &dyn Fn(&Expr, &Expr) -> Expr,
    lo: f64,
    hi: f64,
    dtype: DType,
    vectorize: bool,
) -> (Vec<f64>, Vec<f64>) {
    let x = te::placeholder("x", &[N], dtype);
    let y = te::placeholder("y", &[N], dtype);
    let out = te::compute("out", &[N], |ix| f(&x.at([&ix[0]]), &y.at([&ix[0]])));
    let dag = ComputeDag::new(&[x, y], &[out]).unwrap_or_else(|e| panic!("{e}"));
    let mut state = State::new(&dag);
    if vectorize {
        for step in [
            Step::Split {
                stage: "out".into(),
                iter: "i0".into(),
                factors: vec![8],
            },
            Step::Annotate {
                stage: "out".into(),
                iter: "i0.1".into(),
                annotation: tessera::schedule::Annotation::Vectorize,
            },
        ] {
            state.apply(step).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let xs: Vec<f64> = (0..N)
        .map(|i| lo + (hi - lo) * i as f64 / (N - 1) as f64)
        .collect();
    let ys: Vec<f64> = (0..N)
        .map(|i| 0.5 + 2.5 * ((i * 7919) % N) as f64 / N as f64)
        .collect();
    let host = |v: &[f64]| {
        let data = match dtype {
            DType::F32 => HostData::F32(v.iter().map(|&a| a as f32).collect()),
            _ => HostData::F64(v.to_vec()),
        };
        HostTensor::new(&[N as usize], data).unwrap_or_else(|e| panic!("{e}"))
    };
    let inputs = [host(&xs), host(&ys)];
    let want = te::evaluate(&dag, &inputs).unwrap_or_else(|e| panic!("{e}"));
    let func = tir::lower(&state).unwrap_or_else(|e| panic!("{e}"));
    let kernel =
        codegen::compile(&func, &CodegenOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let got = kernel.run_host(&inputs).unwrap_or_else(|e| panic!("{e}"));
    (got[0].to_f64_vec(), want[0].to_f64_vec())
}

/// Largest error in units of the f32 spacing at the reference value.
fn max_ulp_f32(got: &[f64], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            if g == w || (g.is_nan() && w.is_nan()) {
                return 0.0;
            }
            let w32 = w as f32;
            let ulp = (f32::from_bits(w32.abs().to_bits() + 1) - w32.abs()) as f64;
            (g - w).abs() / ulp.max(f64::from(f32::MIN_POSITIVE))
        })
        .fold(0.0, f64::max)
}

type Unary = fn(&Expr, &Expr) -> Expr;

/// (name, function, input range, bound in f32 ulp).
fn cases() -> Vec<(&'static str, Unary, f64, f64, f64)> {
    vec![
        ("exp", |x, _| te::exp(x), -80.0, 80.0, 1.0),
        ("log", |x, _| te::log(x), 1e-6, 1e6, 1.0),
        ("sqrt", |x, _| te::sqrt(x), 0.0, 1e4, 0.5),
        ("tanh", |x, _| te::tanh(x), -9.0, 9.0, 1.5),
        ("sigmoid", |x, _| te::sigmoid(x), -30.0, 30.0, 2.5),
        ("abs", |x, _| te::abs(x), -5.0, 5.0, 0.0),
        ("erf", |x, _| te::erf(x), -4.0, 4.0, 1.0),
        ("pow", |x, y| te::pow(x, y), 0.01, 10.0, 1.0),
    ]
}

#[test]
fn f32_intrinsics_scalar_and_vector_within_their_bounds() {
    for (name, f, lo, hi, bound) in cases() {
        for vectorize in [false, true] {
            let (got, want) = run(&f, lo, hi, DType::F32, vectorize);
            let ulp = max_ulp_f32(&got, &want);
            println!("{name:8} vectorized={vectorize:5}: max {ulp:.3} ulp (bound {bound})");
            assert!(
                ulp <= bound,
                "{name} (vectorized={vectorize}): {ulp} ulp > {bound}"
            );
        }
    }
}

#[test]
fn scalar_and_vector_agree_bit_for_bit() {
    for (name, f, lo, hi, _) in cases() {
        let (scalar, _) = run(&f, lo, hi, DType::F32, false);
        let (vector, _) = run(&f, lo, hi, DType::F32, true);
        let same = scalar
            .iter()
            .zip(&vector)
            .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
        assert!(same, "{name}: scalar and f32x4 results differ");
    }
}

#[test]
fn f64_intrinsics_match_the_reference() {
    for (name, f, lo, hi, _) in cases() {
        let (got, want) = run(&f, lo, hi, DType::F64, true);
        let worst = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs() / w.abs().max(f64::MIN_POSITIVE))
            .fold(0.0, f64::max);
        assert!(worst <= 1e-15, "{name} f64: relative error {worst:e}");
    }
}
