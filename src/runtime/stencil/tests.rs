//! The stencil primitives against a scalar loop with the same fused
//! multiply-adds in the same order: bit-identical, for every primitive this
//! host runs, over row lengths around every vector and block boundary,
//! filter sizes, strides and both accumulation modes; nothing outside the
//! output row written; and the checked wrapper's refusals.

use super::*;

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [-1, 1), with varied exponents and signs.
    fn value(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// A NaN no kernel computes: marks cells that must stay untouched.
fn guard_value() -> f32 {
    f32::from_bits(0x7FC0_DEAD)
}

/// The formula, one output at a time, with `f32::mul_add` in tap order.
fn reference(
    out: &mut [f32],
    input: &[f32],
    weight: &[f32],
    shape: StencilShape,
    accumulate: bool,
) {
    let at = |i: i64, stride: i64| usize::try_from(i * stride).expect("non-negative offset");
    for y in 0..shape.rows {
        for j in 0..shape.n {
            let o = &mut out[at(y, shape.out_y) + at(j, 1)];
            let mut acc = if accumulate { *o } else { 0.0 };
            for r in 0..shape.taps_r {
                for s in 0..shape.taps_s {
                    let w = weight[at(r, shape.w_r) + at(s, shape.w_s)];
                    let x = input[at(y, shape.in_y)
                        + at(j, shape.in_x)
                        + at(r, shape.in_r)
                        + at(s, shape.in_s)];
                    acc = w.mul_add(x, acc);
                }
            }
            *o = acc;
        }
    }
}

/// The primitives this host may run, after saying which ISAs are covered.
fn covered_primitives() -> Vec<&'static StencilPrimitive> {
    let target = Target::from_env();
    let allowed = allowed_isas(&target);
    for isa in stencil_isas() {
        if !allowed.contains(&isa) {
            let why = if isa <= target.cpu_isa() {
                format!("capped by {}", target.cap_description())
            } else {
                "host lacks it".to_string()
            };
            println!("skipped: stencil primitive for {isa} ({why})");
        }
    }
    all_primitives()
        .iter()
        .filter(|p| allowed.contains(&p.isa))
        .collect()
}

/// Input for `shape`: exactly [`StencilShape::input_len`] elements (the
/// last is the last one the formula names), random where the formula
/// names an element and NaN elsewhere, so a lane that used a wrong element
/// shows.
fn named_input(shape: StencilShape, rng: &mut Rng) -> Vec<f32> {
    let len = usize::try_from(shape.input_len()).expect("small shape");
    let mut input = vec![f32::NAN; len];
    for y in 0..shape.rows {
        for j in 0..shape.n {
            for r in 0..shape.taps_r {
                for s in 0..shape.taps_s {
                    let i = y * shape.in_y + j * shape.in_x + r * shape.in_r + s * shape.in_s;
                    input[i as usize] = rng.value();
                }
            }
        }
    }
    input
}

/// Weights for `shape`, random where named and NaN elsewhere.
fn named_weight(shape: StencilShape, rng: &mut Rng) -> Vec<f32> {
    let len = usize::try_from(shape.weight_len()).expect("small shape");
    let mut weight = vec![f32::NAN; len];
    if len == 0 {
        return weight; // no outputs: nothing is named
    }
    for r in 0..shape.taps_r {
        for s in 0..shape.taps_s {
            weight[(r * shape.w_r + s * shape.w_s) as usize] = rng.value();
        }
    }
    weight
}

/// Cells on each side of the output rows that must stay untouched.
const GUARD: usize = 40;

/// Runs `p` on `shape` (output in the middle of a guarded buffer, poisoned
/// with NaN unless accumulating) and checks bit-equality with
/// [`reference`] and that the guards are intact.
fn check(p: &StencilPrimitive, shape: StencilShape, accumulate: bool, rng: &mut Rng) {
    // Every output row and the cells between them (untouched: the
    // reference leaves them as they were).
    let n = usize::try_from(shape.out_len()).expect("small shape");
    let input = named_input(shape, rng);
    let weight = named_weight(shape, rng);
    let mut buffer = vec![guard_value(); GUARD + n + GUARD];
    for o in &mut buffer[GUARD..GUARD + n] {
        *o = if accumulate { rng.value() } else { f32::NAN };
    }
    let mut want = buffer[GUARD..GUARD + n].to_vec();
    reference(&mut want, &input, &weight, shape, accumulate);
    run(
        &Target::from_env(),
        p,
        &mut buffer[GUARD..GUARD + n],
        &input,
        &weight,
        shape,
        accumulate,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let got = &buffer[GUARD..GUARD + n];
    let first = (0..n).find(|&j| got[j].to_bits() != want[j].to_bits());
    assert!(
        first.is_none(),
        "{}: {shape:?} accumulate={accumulate}: output {} is {} but the scalar loop gives {}",
        p.name,
        first.unwrap_or(0),
        first.map_or(0.0, |j| got[j]),
        first.map_or(0.0, |j| want[j]),
    );
    let touched = buffer[..GUARD]
        .iter()
        .chain(&buffer[GUARD + n..])
        .filter(|g| g.to_bits() != guard_value().to_bits())
        .count();
    assert_eq!(
        touched, 0,
        "{}: {shape:?} accumulate={accumulate}: wrote {touched} cells outside the row",
        p.name
    );
}

const LENGTHS: [i64; 15] = [0, 1, 7, 15, 16, 17, 31, 33, 56, 63, 64, 65, 100, 112, 200];
const FILTERS: [(i64, i64); 6] = [(1, 1), (3, 3), (5, 5), (7, 7), (1, 3), (3, 1)];

/// A padded row: taps r step over a whole row of `n` outputs plus padding.
fn padded(n: i64, (taps_r, taps_s): (i64, i64), in_x: i64, in_s: i64) -> StencilShape {
    StencilShape {
        n,
        taps_r,
        taps_s,
        in_x,
        in_r: in_x * n + taps_s + 2,
        in_s,
        w_r: taps_s,
        w_s: 1,
        rows: 1,
        out_y: 0,
        in_y: 0,
    }
}

#[test]
fn primitives_are_bit_identical_to_the_scalar_loop() {
    let primitives = covered_primitives();
    if primitives.is_empty() {
        println!("skipped: no stencil ISA runs here");
        return;
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut cases = 0;
    for p in &primitives {
        for n in LENGTHS {
            for filter in FILTERS {
                for in_x in [1, 2, 3] {
                    for in_s in [1, 2] {
                        for accumulate in [false, true] {
                            check(p, padded(n, filter, in_x, in_s), accumulate, &mut rng);
                            cases += 1;
                        }
                    }
                }
            }
        }
    }
    println!("stencil: {cases} cases bit-identical");
}

#[test]
fn other_strides_and_degenerate_taps_match() {
    let primitives = covered_primitives();
    if primitives.is_empty() {
        println!("skipped: no stencil ISA runs here");
        return;
    }
    let mut rng = Rng(42);
    for p in &primitives {
        for n in [1, 9, 17, 40, 71] {
            // Gathered strides, taps that share inputs (in_r = 0 or
            // in_s = 0), and weights shared across r (w_r = 0).
            for (in_x, in_r, in_s, w_r, w_s) in [
                (4, 4 * 71 + 5, 1, 3, 1),
                (7, 1, 7 * 71, 3, 1),
                (1, 0, 1, 3, 1),
                (2, 1, 0, 0, 1),
                (2, 2 * 71 + 3, 1, 9, 3),
            ] {
                for accumulate in [false, true] {
                    let shape = StencilShape {
                        n,
                        taps_r: 3,
                        taps_s: 3,
                        in_x,
                        in_r,
                        in_s,
                        w_r,
                        w_s,
                        rows: 1,
                        out_y: 0,
                        in_y: 0,
                    };
                    check(p, shape, accumulate, &mut rng);
                }
            }
        }
        // A stride too large for 32-bit gather offsets: one output, so the
        // input stays small (the scalar fallback).
        for accumulate in [false, true] {
            let shape = StencilShape {
                in_x: i64::from(i32::MAX),
                ..padded(1, (3, 3), 1, 1)
            };
            check(p, shape, accumulate, &mut rng);
        }
    }
}

#[test]
fn rows_of_one_call_match_the_row_by_row_loop() {
    let primitives = covered_primitives();
    if primitives.is_empty() {
        println!("skipped: no stencil ISA runs here");
        return;
    }
    let mut rng = Rng(11);
    for p in &primitives {
        for (n, in_x) in [
            (1, 1),
            (16, 1),
            (28, 1),
            (56, 1),
            (65, 1),
            (112, 1),
            (14, 2),
            (17, 2),
            (64, 2),
            (9, 3),
        ] {
            let row = padded(n, (3, 3), in_x, 1);
            // Input rows one or two filter rows apart (stride-1 and
            // stride-2 planes: rows that share input loads, in blocks and
            // one by one), or apart from any filter row.
            for step in [1, 2, 3] {
                for (rows, gap) in [(2, 0), (5, 3), (7, 1), (9, 0), (12, 2)] {
                    for accumulate in [false, true] {
                        // Output rows `gap` cells apart (the cells between
                        // untouched).
                        let shape = StencilShape {
                            rows,
                            out_y: n + gap,
                            in_y: step * row.in_r + i64::from(step == 3),
                            ..row
                        };
                        check(p, shape, accumulate, &mut rng);
                    }
                }
            }
        }
    }
}

#[test]
fn no_outputs_touch_nothing() {
    let primitives = covered_primitives();
    if primitives.is_empty() {
        println!("skipped: no stencil ISA runs here");
        return;
    }
    for p in primitives {
        let mut out = [guard_value(); 4];
        for n in [0, -1, i64::MIN] {
            // SAFETY: `n ≤ 0`: nothing is read or written (null inputs).
            unsafe {
                (p.func)(
                    out.as_mut_ptr(),
                    std::ptr::null(),
                    std::ptr::null(),
                    n,
                    3,
                    3,
                    1,
                    10,
                    1,
                    3,
                    1,
                    1,
                    1,
                    0,
                    0,
                    std::ptr::null(),
                )
            };
        }
        assert!(out.iter().all(|o| o.to_bits() == guard_value().to_bits()));
    }
}

#[test]
fn run_refuses_short_slices_and_bad_shapes() {
    let Some(p) = covered_primitives().into_iter().next() else {
        println!("skipped: no stencil ISA runs here");
        return;
    };
    let target = Target::from_env();
    let shape = padded(20, (3, 3), 2, 1);
    let mut rng = Rng(7);
    let input = named_input(shape, &mut rng);
    let weight = named_weight(shape, &mut rng);
    let mut out = vec![f32::NAN; 20];
    assert_eq!(shape.input_len(), input.len() as u128);
    assert_eq!(shape.input_len(), 19 * 2 + 2 * (2 * 20 + 3 + 2) + 2 + 1);
    assert_eq!(shape.weight_len(), 9);

    let err = run(&target, p, &mut out[..19], &input, &weight, shape, false);
    assert_eq!(
        err,
        Err(StencilError::TooShort {
            slice: "out",
            needs: 20,
            has: 19
        })
    );
    let err = run(
        &target,
        p,
        &mut out,
        &input[..input.len() - 1],
        &weight,
        shape,
        true,
    );
    assert_eq!(
        err,
        Err(StencilError::TooShort {
            slice: "input",
            needs: input.len() as u128,
            has: input.len() - 1
        })
    );
    let err = run(&target, p, &mut out, &input, &weight[..8], shape, false)
        .expect_err("8 weights for 9 taps");
    assert_eq!(
        err.to_string(),
        "stencil slice `weight` needs 9 elements for this shape, but has 8"
    );
    // Nothing was written by the refused calls.
    assert!(out.iter().all(|o| o.is_nan()));

    for (bad, field, value, min) in [
        (StencilShape { n: -1, ..shape }, "n", -1, 0),
        (StencilShape { taps_r: 0, ..shape }, "taps_r", 0, 1),
        (
            StencilShape {
                taps_s: -2,
                ..shape
            },
            "taps_s",
            -2,
            1,
        ),
        (StencilShape { in_x: 0, ..shape }, "in_x", 0, 1),
        (StencilShape { in_r: -1, ..shape }, "in_r", -1, 0),
        (StencilShape { in_s: -1, ..shape }, "in_s", -1, 0),
        (StencilShape { w_r: -1, ..shape }, "w_r", -1, 0),
        (StencilShape { w_s: -1, ..shape }, "w_s", -1, 0),
    ] {
        let err = run(&target, p, &mut out, &input, &weight, bad, false);
        assert_eq!(err, Err(StencilError::InvalidShape { field, value, min }));
    }

    // A shape whose input would overflow `usize` is too short, not a panic.
    let huge = StencilShape {
        in_x: i64::MAX,
        ..shape
    };
    let err = run(&target, p, &mut out, &input, &weight, huge, false);
    assert!(
        matches!(err, Err(StencilError::TooShort { slice: "input", needs, .. }) if needs > u64::MAX as u128),
        "{err:?}"
    );

    // Empty rows need nothing.
    let empty = StencilShape { n: 0, ..shape };
    assert_eq!(run(&target, p, &mut [], &[], &[], empty, true), Ok(()));
}

#[test]
fn run_refuses_an_isa_the_target_caps() {
    let host = Target::host();
    let capped = host.with_isa_cap(Isa::Sse);
    assert!(allowed_isas(&capped).is_empty());
    let shape = padded(3, (1, 1), 1, 1);
    for p in all_primitives() {
        let mut out = [f32::NAN; 3];
        let err =
            run(&capped, p, &mut out, &[1.0; 3], &[1.0], shape, false).expect_err("capped at sse");
        assert_eq!(
            err,
            StencilError::NotAvailable {
                name: p.name,
                needs: p.isa,
                host: capped.isa(),
                cpu: host.cpu_isa(),
                cap: "with_isa_cap(sse)".to_string(),
            }
        );
        assert!(err.to_string().contains("with_isa_cap(sse)"), "{err}");
        assert!(out.iter().all(|o| o.is_nan()));
    }
}

#[test]
fn registry_is_consistent() {
    let names: Vec<&str> = all_primitives().iter().map(|p| p.name).collect();
    if cfg!(target_arch = "x86_64") {
        assert_eq!(names, ["avx2_stencil", "avx512_stencil"]);
        assert_eq!(stencil_isas(), [Isa::Avx2Fma, Isa::Avx512]);
    } else {
        assert!(names.is_empty());
    }
    for p in all_primitives() {
        assert_eq!(p.name, format!("{}_stencil", p.isa.name()));
        assert_eq!(find(p.name).map(|f| f.isa), Some(p.isa));
        assert_eq!(primitive_for(p.isa).map(|f| f.name), Some(p.name));
    }
    assert!(find("avx2").is_none());
    assert!(primitive_for(Isa::Sse).is_none());
    let host = Target::host();
    assert!(allowed_isas(&host).iter().all(|&isa| isa <= host.isa()));
}

/// Runs `p` on `shape` into `out` (no accumulation) with `epilogue` (null:
/// none), straight through the C ABI.
fn call_with(
    p: &StencilPrimitive,
    shape: StencilShape,
    input: &[f32],
    weight: &[f32],
    out: &mut [f32],
    epilogue: *const Epilogue,
) {
    assert!(shape.out_len() <= out.len() as u128 && shape.input_len() <= input.len() as u128);
    // SAFETY: the covered primitives run here; the slices hold every
    // element the shape names (checked above and by construction of the
    // weights); the epilogue's addends cover every (y, j) of the shape.
    unsafe {
        call(
            p,
            out.as_mut_ptr(),
            input.as_ptr(),
            weight.as_ptr(),
            shape,
            false,
            epilogue,
        )
    }
}

#[test]
fn outputs_go_through_the_epilogue_bit_for_bit() {
    use crate::runtime::micro_kernels::{Addend, CLAMP_LOWER, CLAMP_UPPER};
    let mut rng = Rng(23);
    for p in covered_primitives() {
        for (n, in_x) in [(1, 1), (17, 1), (56, 1), (70, 1), (14, 2), (33, 2), (9, 3)] {
            let shape = StencilShape {
                rows: 9,
                out_y: n + 2,
                in_y: in_x * padded(n, (3, 3), in_x, 1).in_r,
                ..padded(n, (3, 3), in_x, 1)
            };
            let input = named_input(shape, &mut rng);
            let weight = named_weight(shape, &mut rng);
            let bias = [rng.value()];
            let rs = (n + 5) as usize;
            let residual: Vec<f32> = (0..9 * rs).map(|_| rng.value()).collect();
            // A channel's bias (one value for the whole plane) and a ReLU6
            // (MobileNet), then a residual along the rows and a lower clamp.
            let epilogues = [
                Epilogue {
                    addends: [
                        Addend {
                            data: bias.as_ptr(),
                            row_stride: 0,
                            col_stride: 0,
                        },
                        Addend::NONE,
                    ],
                    lower: 0.0,
                    upper: 0.25,
                    clamp: CLAMP_LOWER | CLAMP_UPPER,
                },
                Epilogue {
                    addends: [
                        Addend {
                            data: bias.as_ptr(),
                            row_stride: 0,
                            col_stride: 0,
                        },
                        Addend {
                            data: residual.as_ptr(),
                            row_stride: rs as i64,
                            col_stride: 1,
                        },
                    ],
                    lower: -0.5,
                    upper: 0.0,
                    clamp: CLAMP_LOWER,
                },
            ];
            let len = shape.out_len() as usize;
            let mut plain = vec![guard_value(); len];
            call_with(p, shape, &input, &weight, &mut plain, std::ptr::null());
            for (e, epilogue) in epilogues.iter().enumerate() {
                let mut fused = vec![guard_value(); len];
                call_with(p, shape, &input, &weight, &mut fused, epilogue);
                for y in 0..shape.rows as usize {
                    for j in 0..n as usize {
                        let at = y * shape.out_y as usize + j;
                        // SAFETY: the addends cover 9 rows of n + 5.
                        let want = unsafe { epilogue.apply(y, j, plain[at]) };
                        assert_eq!(
                            fused[at].to_bits(),
                            want.to_bits(),
                            "{} n={n} in_x={in_x} epilogue {e} at ({y}, {j})",
                            p.name
                        );
                    }
                }
                let gaps = (0..len).filter(|&i| i % shape.out_y as usize >= n as usize);
                assert!(
                    gaps.into_iter()
                        .all(|i| fused[i].to_bits() == guard_value().to_bits()),
                    "{}: wrote between rows",
                    p.name
                );
            }
        }
    }
}
