//! Throughput of the f32 kernels (ns/element), against a C-library call per
//! element from the same kind of JIT loop. Meaningful in release builds:
//! `cargo test --release --lib codegen::math -- --nocapture`.

use std::time::Instant;

use cranelift_codegen::ir::{InstBuilder, types};

use super::harness::{Kernel, Opt, compile, compile_with};
use crate::te::Intrinsic;

/// `expf` from the C library (via std), called per element by the JIT loop.
extern "C" fn bench_expf(x: f32) -> f32 {
    x.exp()
}

/// Elements per run: 64 KiB per array, resident in L2.
const N: usize = 1 << 14;

/// Best-of-`runs` time per element in ns, running `kernel` over `xs`.
fn ns_per_element(kernel: &Kernel, xs: &[f32], out: &mut [f32]) -> f64 {
    let reps = 20;
    let mut best = f64::INFINITY;
    for _ in 0..7 {
        let start = Instant::now();
        for _ in 0..reps {
            kernel.run(xs, xs, out);
        }
        let ns = start.elapsed().as_nanos() as f64 / (reps * xs.len()) as f64;
        best = best.min(ns);
    }
    best
}

#[test]
fn f32_kernel_throughput() {
    // Inputs spread over the useful range of every function.
    let xs: Vec<f32> = (0..N)
        .map(|i| -20.0 + 40.0 * (i as f32) / (N as f32))
        .collect();
    let mut out = vec![0f32; N];

    let expf: (&'static str, *const u8) = (
        "bench_expf",
        bench_expf as extern "C" fn(f32) -> f32 as *const u8,
    );
    let libm_loop = compile_with(types::F32, Opt::Speed, &[expf], |b, imports, [x, _]| {
        let callee = imports.import(b, "bench_expf", &[types::F32], types::F32);
        let call = b.ins().call(callee, &[x]);
        b.inst_results(call)[0]
    });
    let libm_ns = ns_per_element(&libm_loop, &xs, &mut out);
    for (x, y) in xs.iter().zip(&out) {
        assert_eq!(y.to_bits(), x.exp().to_bits());
    }
    println!("exp      f32 libm expf call per element: {libm_ns:6.2} ns/element");

    // exp where the results are subnormal, and far below (exactly 0).
    let exp4 = compile(Intrinsic::Exp, types::F32X4, Opt::Speed);
    for (lo, hi) in [(-103.0f32, -88.0f32), (-1e9, -200.0)] {
        let tail: Vec<f32> = (0..N)
            .map(|i| lo + (hi - lo) * (i as f32) / (N as f32))
            .collect();
        let ns = ns_per_element(&exp4, &tail, &mut out);
        assert!(
            out.iter()
                .zip(&tail)
                .all(|(y, x)| (*y == 0.0) == (*x < -103.98))
        );
        println!("exp      f32x4 inline on [{lo:e}, {hi:e}]: {ns:6.2} ns/element");
    }

    for f in [
        Intrinsic::Exp,
        Intrinsic::Log,
        Intrinsic::Tanh,
        Intrinsic::Sigmoid,
        Intrinsic::Erf,
    ] {
        let scalar = compile(f, types::F32, Opt::Speed);
        let vector = compile(f, types::F32X4, Opt::Speed);
        let scalar_ns = ns_per_element(&scalar, &xs, &mut out);
        let scalar_out = out.clone();
        let vector_ns = ns_per_element(&vector, &xs, &mut out);
        let same = scalar_out
            .iter()
            .zip(&out)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{}: scalar and vector differ", f.name());
        println!(
            "{:8} f32x4 inline: {vector_ns:6.2} ns/element, f32 inline: {scalar_ns:6.2} ns/element",
            f.name()
        );
    }
}
