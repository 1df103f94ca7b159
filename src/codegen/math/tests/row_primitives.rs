//! The `std::arch` row primitives (`runtime::row_math`) against the inline
//! f32x4 kernels they port: bit-identical on every sample input, for every
//! row-math ISA this host runs, at every row length (tails included), and
//! nothing outside the row touched.

use cranelift_codegen::ir::types;

use super::harness::{Opt, compile};
use super::{F32_FUNCTIONS, sample_inputs};
use crate::runtime::Target;
use crate::runtime::micro_kernels::Isa;
use crate::runtime::row_math::{self, RowPrimitive};

/// The primitives this host may run, after saying which ISAs are covered.
fn covered_primitives() -> Vec<&'static RowPrimitive> {
    let target = Target::from_env();
    let allowed = row_math::allowed_isas(&target);
    let skipped: Vec<String> = row_math::row_math_isas()
        .into_iter()
        .filter(|isa| !allowed.contains(isa))
        .map(|isa| {
            let why = if isa <= target.cpu_isa() {
                format!("capped by {}", target.cap_description())
            } else {
                "host lacks it".to_string()
            };
            format!("{isa} ({why})")
        })
        .collect();
    let names: Vec<&str> = allowed.iter().map(|isa| isa.name()).collect();
    println!(
        "row primitives covered: [{}]; skipped: [{}]",
        names.join(", "),
        skipped.join(", ")
    );
    row_math::all_primitives()
        .iter()
        .filter(|p| allowed.contains(&p.isa))
        .collect()
}

fn run(p: &RowPrimitive, data: &mut [f32]) {
    row_math::run(&Target::from_env(), p, data).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn row_primitives_are_bit_identical_to_the_f32x4_kernels() {
    let primitives = covered_primitives();
    if primitives.is_empty() {
        println!("skipped: no row-math ISA runs here");
        return;
    }
    let xs = sample_inputs();
    for (f, _, _) in F32_FUNCTIONS {
        let want = compile(f, types::F32X4, Opt::Speed).map(&xs);
        for p in primitives.iter().filter(|p| p.function == f) {
            let mut got = xs.clone();
            run(p, &mut got);
            let mismatches = xs
                .iter()
                .zip(&got)
                .zip(&want)
                .filter(|((_, g), w)| g.to_bits() != w.to_bits())
                .count();
            let first = xs
                .iter()
                .zip(&got)
                .zip(&want)
                .find(|((_, g), w)| g.to_bits() != w.to_bits());
            assert_eq!(
                mismatches,
                0,
                "{}: {mismatches} of {} results differ from the f32x4 kernel, first {first:?}",
                p.name,
                xs.len()
            );
        }
    }
}

#[test]
fn row_primitives_handle_every_tail_and_touch_nothing_else() {
    let primitives = covered_primitives();
    let xs: Vec<f32> = (0..80).map(|i| (i as f32 - 40.0) * 0.37).collect();
    for p in primitives {
        let f = p.function;
        let want = compile(f, types::F32X4, Opt::Speed).map(&xs);
        for n in 0..xs.len() {
            for offset in [0, 1, 3] {
                if offset + n > xs.len() {
                    continue;
                }
                let sentinel = f32::from_bits(0x7fc0_dead);
                let mut buffer = vec![sentinel; xs.len() + 8];
                buffer[offset..offset + n].copy_from_slice(&xs[..n]);
                run(p, &mut buffer[offset..offset + n]);
                for (j, v) in buffer.iter().enumerate() {
                    let inside = j >= offset && j < offset + n;
                    let expected = if inside { want[j - offset] } else { sentinel };
                    assert_eq!(
                        v.to_bits(),
                        expected.to_bits(),
                        "{} n={n} offset={offset}: element {j}",
                        p.name
                    );
                }
            }
        }
    }
}

#[test]
fn every_function_has_a_primitive_per_row_math_isa() {
    if !cfg!(target_arch = "x86_64") {
        println!("skipped: no row primitives off x86-64");
        return;
    }
    assert_eq!(row_math::row_math_isas(), [Isa::Avx2Fma, Isa::Avx512]);
    for f in row_math::ROW_MATH_FUNCTIONS {
        for isa in row_math::row_math_isas() {
            let p = row_math::primitive_for(f, isa).expect("a primitive");
            assert_eq!(p.name, format!("{}_{}", isa.name(), f.name()));
            assert_eq!(row_math::find(p.name).map(|q| q.name), Some(p.name));
        }
    }
    let capped = Target::host().with_isa_cap(Isa::Sse);
    assert!(row_math::allowed_isas(&capped).is_empty());
    let primitive = row_math::primitive_for(crate::te::Intrinsic::Exp, Isa::Avx2Fma);
    if let Some(p) = primitive {
        let err = row_math::run(&capped, p, &mut [1.0]).expect_err("capped at sse");
        assert!(err.to_string().contains("with_isa_cap(sse)"), "{err}");
    }
}

/// All 2^32 inputs, every covered primitive against the f32x4 kernel. Slow;
/// run in release with `--ignored --nocapture`.
#[test]
#[ignore]
fn exhaustive_row_primitive_bit_identity() {
    let primitives = covered_primitives();
    for (f, _, _) in F32_FUNCTIONS {
        let kernel = compile(f, types::F32X4, Opt::Speed);
        for chunk in 0..(1u64 << 32) / (1 << 24) {
            let xs: Vec<f32> = (0..1u64 << 24)
                .map(|i| f32::from_bits((chunk * (1 << 24) + i) as u32))
                .collect();
            let want = kernel.map(&xs);
            for p in primitives.iter().filter(|p| p.function == f) {
                let mut got = xs.clone();
                run(p, &mut got);
                let same = got
                    .iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_bits() == w.to_bits());
                assert!(same, "{} differs in chunk {chunk}", p.name);
            }
        }
        println!("{}: all 2^32 inputs bit-identical", f.name());
    }
}
