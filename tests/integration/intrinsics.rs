//! Math intrinsics through the whole pipeline (te → loop IR → Cranelift),
//! scalar and f32x4, against the f64 reference: error bounds in ulp of f32;
//! the f64 ones (host calls to the same functions the te interpreter calls)
//! against double-double math written in the tests, in ulp of f64.

use crate::common::double_double::DoubleDouble;
use tessera::codegen::{self, CodegenOptions};
use tessera::schedule::{State, Step};
use tessera::te::{self, ComputeDag, DType, Expr, HostData, HostTensor};
use tessera::tir;

const N: i64 = 4096;

/// The compiled kernel's outputs, the te interpreter's, and the inputs.
struct Outputs {
    got: Vec<f64>,
    want: Vec<f64>,
    xs: Vec<f64>,
    ys: Vec<f64>,
}

/// `out[i] = f(x[i], y[i])` over inputs spread across `lo..hi` (y in 0.5..3).
fn run(
    f: &dyn Fn(&Expr, &Expr) -> Expr,
    lo: f64,
    hi: f64,
    dtype: DType,
    vectorize: bool,
) -> Outputs {
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
    Outputs {
        got: got[0].to_f64_vec(),
        want: want[0].to_f64_vec(),
        xs: inputs[0].to_f64_vec(),
        ys: inputs[1].to_f64_vec(),
    }
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

/// One intrinsic: how te writes it, where its inputs lie, its error bounds,
/// and its exact value in double-double.
struct Case {
    name: &'static str,
    f: Unary,
    lo: f64,
    hi: f64,
    /// Bound of the inline f32 kernels, in f32 ulp.
    f32_ulp: f64,
    /// Bound of the f64 host functions (std, libm), in f64 ulp; tanh's 2 is
    /// glibc's documented bound, reached here (1.97 ulp at x ≈ −0.2132).
    f64_ulp: f64,
    exact: fn(DoubleDouble, f64) -> DoubleDouble,
}

/// The table of intrinsics (a table, so rustfmt leaves its rows alone).
#[rustfmt::skip]
fn cases() -> Vec<Case> {
    let case = |name, f, (lo, hi), (f32_ulp, f64_ulp), exact| Case {
        name, f, lo, hi, f32_ulp, f64_ulp, exact,
    };
    vec![
        //    name       te                          inputs        ulp f32, f64  exact
        case("exp",     |x, _| te::exp(x),         (-80.0, 80.0), (1.0, 1.0), |x, _| x.exp()),
        case("log",     |x, _| te::log(x),         (1e-6, 1e6),   (1.0, 1.0), |x, _| x.ln()),
        case("sqrt",    |x, _| te::sqrt(x),        (0.0, 1e4),    (0.5, 0.5), |x, _| x.sqrt()),
        case("tanh",    |x, _| te::tanh(x),        (-9.0, 9.0),   (1.5, 2.0), |x, _| x.tanh()),
        case("sigmoid", |x, _| te::sigmoid(x),     (-30.0, 30.0), (2.5, 2.5), |x, _| x.sigmoid()),
        case("abs",     |x, _| te::abs(x),         (-5.0, 5.0),   (0.0, 0.0), |x, _| x.abs()),
        case("erf",     |x, _| te::erf(x),         (-4.0, 4.0),   (1.0, 1.0), |x, _| x.erf()),
        case("pow",     |x, y| te::pow(x, y),      (0.01, 10.0),  (1.0, 1.0), |x, y| x.pow(y)),
    ]
}

#[test]
fn f32_intrinsics_scalar_and_vector_within_their_bounds() {
    for case in cases() {
        for vectorize in [false, true] {
            let out = run(&case.f, case.lo, case.hi, DType::F32, vectorize);
            let ulp = max_ulp_f32(&out.got, &out.want);
            let (name, bound) = (case.name, case.f32_ulp);
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
    for case in cases() {
        let scalar = run(&case.f, case.lo, case.hi, DType::F32, false).got;
        let vector = run(&case.f, case.lo, case.hi, DType::F32, true).got;
        let same = scalar
            .iter()
            .zip(&vector)
            .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
        assert!(same, "{}: scalar and f32x4 results differ", case.name);
    }
}

/// The spacing of f64 values at `x` (the smallest subnormal at 0).
fn ulp_f64(x: f64) -> f64 {
    let x = x.abs();
    f64::from_bits(x.to_bits() + 1) - x
}

/// The f64 path calls host functions (std's and libm's), the same ones the
/// te interpreter calls: agreeing with the interpreter shows the calls are
/// wired right, the double-double oracle that the functions are right.
#[test]
fn f64_intrinsics_match_the_interpreter_and_an_independent_oracle() {
    for case in cases() {
        let out = run(&case.f, case.lo, case.hi, DType::F64, true);
        let worst = out
            .got
            .iter()
            .zip(&out.want)
            .map(|(g, w)| (g - w).abs() / w.abs().max(f64::MIN_POSITIVE))
            .fold(0.0, f64::max);
        assert!(
            worst <= 1e-15,
            "{} f64: relative error {worst:e} against the interpreter",
            case.name
        );
        let mut worst_ulp = 0.0f64;
        for (i, &got) in out.got.iter().enumerate() {
            let (x, y) = (out.xs[i], out.ys[i]);
            let exact = (case.exact)(DoubleDouble::from_f64(x), y);
            let ulp =
                (DoubleDouble::from_f64(got) - exact).to_f64().abs() / ulp_f64(exact.to_f64());
            assert!(
                ulp <= case.f64_ulp,
                "{}({x:e}, {y:e}) f64: got {got:e}, exact {:e}: {ulp:.3} ulp > {}",
                case.name,
                exact.to_f64(),
                case.f64_ulp
            );
            worst_ulp = worst_ulp.max(ulp);
        }
        println!(
            "{:8} f64: max {worst_ulp:.3} ulp against double-double (bound {})",
            case.name, case.f64_ulp
        );
    }
}
