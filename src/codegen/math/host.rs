//! Host functions called from generated code (f64 math, and `pow` for f32),
//! and the emission of such calls, lane by lane for vectors.
//!
//! The functions are `#[no_mangle]`, so object files compiled by tessera
//! also link against them by name; the JIT gets them from [`symbols`].

use cranelift_codegen::ir::{InstBuilder, Type, Value, types};
use cranelift_frontend::FunctionBuilder;

use super::Imports;
use crate::te::Intrinsic;

/// `e^x` for f64.
#[unsafe(no_mangle)]
extern "C" fn tessera_exp_f64(x: f64) -> f64 {
    x.exp()
}

/// Natural logarithm for f64.
#[unsafe(no_mangle)]
extern "C" fn tessera_log_f64(x: f64) -> f64 {
    x.ln()
}

/// Hyperbolic tangent for f64.
#[unsafe(no_mangle)]
extern "C" fn tessera_tanh_f64(x: f64) -> f64 {
    x.tanh()
}

/// Logistic sigmoid for f64, accurate in both tails (e^x/(1+e^x) for x < 0).
#[unsafe(no_mangle)]
extern "C" fn tessera_sigmoid_f64(x: f64) -> f64 {
    if x < 0.0 {
        let e = x.exp();
        e / (1.0 + e)
    } else {
        1.0 / (1.0 + (-x).exp())
    }
}

/// The error function for f64.
#[unsafe(no_mangle)]
extern "C" fn tessera_erf_f64(x: f64) -> f64 {
    libm::erf(x)
}

/// `x^y` for f64.
#[unsafe(no_mangle)]
extern "C" fn tessera_pow_f64(x: f64, y: f64) -> f64 {
    x.powf(y)
}

/// `x^y` for f32 (the C library's `powf`, < 1 ulp).
#[unsafe(no_mangle)]
extern "C" fn tessera_pow_f32(x: f32, y: f32) -> f32 {
    x.powf(y)
}

type Unary64 = extern "C" fn(f64) -> f64;
type Binary64 = extern "C" fn(f64, f64) -> f64;
type Binary32 = extern "C" fn(f32, f32) -> f32;

/// Every host function generated code may call: (symbol, address).
pub(super) fn symbols() -> Vec<(&'static str, *const u8)> {
    vec![
        ("tessera_exp_f64", tessera_exp_f64 as Unary64 as *const u8),
        ("tessera_log_f64", tessera_log_f64 as Unary64 as *const u8),
        ("tessera_tanh_f64", tessera_tanh_f64 as Unary64 as *const u8),
        (
            "tessera_sigmoid_f64",
            tessera_sigmoid_f64 as Unary64 as *const u8,
        ),
        ("tessera_erf_f64", tessera_erf_f64 as Unary64 as *const u8),
        ("tessera_pow_f64", tessera_pow_f64 as Binary64 as *const u8),
        ("tessera_pow_f32", tessera_pow_f32 as Binary32 as *const u8),
    ]
}

/// The host symbol computing `f` on one `lane` value (`F32` or `F64`), if
/// `f` is implemented by a call for that type.
pub(super) fn symbol_for(f: Intrinsic, lane: Type) -> Option<&'static str> {
    match (f, lane) {
        (Intrinsic::Exp, types::F64) => Some("tessera_exp_f64"),
        (Intrinsic::Log, types::F64) => Some("tessera_log_f64"),
        (Intrinsic::Tanh, types::F64) => Some("tessera_tanh_f64"),
        (Intrinsic::Sigmoid, types::F64) => Some("tessera_sigmoid_f64"),
        (Intrinsic::Erf, types::F64) => Some("tessera_erf_f64"),
        (Intrinsic::Pow, types::F64) => Some("tessera_pow_f64"),
        (Intrinsic::Pow, types::F32) => Some("tessera_pow_f32"),
        _ => None,
    }
}

/// Calls the host function `symbol` on scalar `args` of type `ty`.
pub(super) fn emit_call(
    builder: &mut FunctionBuilder<'_>,
    imports: &mut dyn Imports,
    symbol: &'static str,
    ty: Type,
    args: &[Value],
) -> Value {
    let params = vec![ty; args.len()];
    let callee = imports.import(builder, symbol, &params, ty);
    let call = builder.ins().call(callee, args);
    builder.inst_results(call)[0]
}

/// Applies `scalar` to each lane of the vector arguments (all of one vector
/// type) and reassembles the vector.
pub(super) fn per_lane(
    builder: &mut FunctionBuilder<'_>,
    args: &[Value],
    mut scalar: impl FnMut(&mut FunctionBuilder<'_>, &[Value]) -> Value,
) -> Value {
    let vector = args[0];
    let lanes = builder.func.dfg.value_type(vector).lane_count();
    let mut result = vector;
    for lane in 0..lanes {
        let lane = lane as u8;
        let lane_args: Vec<Value> = args
            .iter()
            .map(|&a| builder.ins().extractlane(a, lane))
            .collect();
        let r = scalar(builder, &lane_args);
        result = builder.ins().insertlane(result, r, lane);
    }
    result
}
