//! Every packing routine this CPU runs against the scalar reference: plain,
//! transposed, strided 2/3/4 and other strides, rows and columns 1..=37,
//! offsets into src and dst, with guard cells around and between dst's
//! rows poisoned and checked untouched.

use super::{PackError, all_routines, reference, run};
use crate::runtime::Target;
use crate::runtime::micro_kernels::Isa;

/// A poison no routine writes (a NaN with a payload), compared bitwise.
const GUARD: u32 = 0x7fc0_dead;

/// Source values distinct per element (never equal to the guard).
fn source(len: usize) -> Vec<f32> {
    (0..len).map(|i| i as f32 * 0.5 - 3.0).collect()
}

/// The (src_rs, src_cs) of one layout case for a `rows × cols` region.
fn strides(case: &str, rows: usize, cols: usize) -> (usize, usize) {
    match case {
        "plain" => (cols + 3, 1),
        "transposed" => (1, rows + 2),
        "strided2" => (2 * cols + 1, 2),
        "strided3" => (3 * cols, 3),
        "strided4" => (4 * cols + 5, 4),
        "stride7" => (7 * cols + 1, 7),
        // Both strides 1 (a row or a column): any path may take it.
        _ => (1, 1),
    }
}

const CASES: [&str; 6] = [
    "plain",
    "transposed",
    "strided2",
    "strided3",
    "strided4",
    "stride7",
];

/// Runs routine `name` on every case and size; the first mismatch or
/// touched guard, described.
fn check_routine(target: &Target, name: &str) -> Result<usize, String> {
    let routine = super::find(name).ok_or(format!("no routine {name}"))?;
    let mut checked = 0;
    for case in CASES {
        for rows in 1..=37 {
            for cols in 1..=37 {
                let (src_rs, src_cs) = strides(case, rows, cols);
                let (src_off, dst_off, dst_rs) = (rows % 3, 5, cols + cols % 4);
                // The src slice ends exactly at the region's last element.
                let src_len = src_off + (rows - 1) * src_rs + (cols - 1) * src_cs + 1;
                let src = source(src_len);
                let dst_len = dst_off + (rows - 1) * dst_rs + cols + 7;
                let mut got = vec![f32::from_bits(GUARD); dst_len];
                let mut want = got.clone();
                run(
                    target,
                    routine,
                    &src[src_off..],
                    (src_rs, src_cs),
                    &mut got[dst_off..],
                    dst_rs,
                    (rows, cols),
                )
                .map_err(|e| e.to_string())?;
                reference(
                    &src[src_off..],
                    (src_rs, src_cs),
                    &mut want[dst_off..],
                    dst_rs,
                    (rows, cols),
                );
                if let Some(i) = (0..dst_len).find(|&i| got[i].to_bits() != want[i].to_bits()) {
                    let inside = i >= dst_off
                        && (i - dst_off) / dst_rs < rows
                        && (i - dst_off) % dst_rs < cols;
                    return Err(format!(
                        "{name} {case} {rows}x{cols} (src strides {src_rs},{src_cs}, dst stride {dst_rs}): \
                         dst[{i}] ({}) is {} but should be {}",
                        if inside {
                            "in the region"
                        } else {
                            "a guard cell"
                        },
                        got[i],
                        want[i]
                    ));
                }
                checked += 1;
            }
        }
    }
    Ok(checked)
}

#[test]
fn every_routine_this_cpu_runs_matches_the_scalar_copy() {
    let target = Target::host();
    let mut ran = Vec::new();
    let mut skipped = Vec::new();
    for routine in all_routines() {
        if routine.isa > target.isa() {
            skipped.push(routine.name);
            continue;
        }
        match check_routine(&target, routine.name) {
            Ok(n) => ran.push((routine.name, n)),
            Err(e) => panic!("{e}"),
        }
    }
    eprintln!("checked {ran:?}; skipped (ISA not on this CPU): {skipped:?}");
    assert!(ran.iter().any(|(n, _)| *n == "generic_pack"));
    #[cfg(target_arch = "x86_64")]
    assert!(ran.iter().any(|(n, _)| *n == "sse_pack"));
}

#[test]
fn run_refuses_short_slices_overlapping_rows_and_forbidden_isas() {
    let target = Target::host();
    let generic = super::routine_for(Isa::Generic).expect("generic routine");
    let src = source(10);
    let mut dst = vec![0.0; 10];
    let short = run(&target, generic, &src, (4, 1), &mut dst, 4, (3, 4));
    assert!(
        matches!(short, Err(PackError::SliceTooShort { operand: "src", .. })),
        "{short:?}"
    );
    let overlap = run(&target, generic, &src, (1, 1), &mut dst, 2, (2, 3));
    assert_eq!(
        overlap,
        Err(PackError::OverlappingRows { dst_rs: 2, cols: 3 })
    );
    let capped = Target::host().with_isa_cap(Isa::Generic);
    if let Some(sse) = super::routine_for(Isa::Sse) {
        let refused = run(&capped, sse, &src, (1, 1), &mut dst, 1, (1, 1));
        assert!(
            matches!(refused, Err(PackError::NotAvailable { .. })),
            "{refused:?}"
        );
    }
}

#[test]
fn the_registry_names_one_routine_per_isa() {
    for isa in super::pack_isas() {
        let p = super::routine_for(isa).expect("listed");
        assert_eq!(p.name, format!("{}_pack", isa.name()));
        assert_eq!(super::find(p.name).map(|q| q.isa), Some(isa));
    }
    assert!(super::allowed_isas(&Target::host().with_isa_cap(Isa::Generic)) == [Isa::Generic]);
}
