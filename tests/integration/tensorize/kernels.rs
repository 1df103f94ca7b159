//! The micro-kernels on their own: every kernel against the scalar
//! reference over edge tiles, depths and strides, the registry, the ISA cap
//! (from a target and from `TESSERA_ISA`), and the checks of `run`.

use super::*;

const SENTINEL: f32 = -12345.5;
const C_GUARD: usize = 16;

/// The column counts to try for a kernel with `nr` columns and `lanes`-wide
/// vectors: 1, NR-1, NR and non-multiples of the lane count.
fn n_values(nr: usize, lanes: usize) -> Vec<usize> {
    let mut ns = vec![
        1,
        nr - 1,
        nr,
        lanes.saturating_sub(1).max(1),
        lanes + 1,
        nr / 2 + 1,
    ];
    ns.retain(|&n| n >= 1 && n <= nr);
    ns.sort_unstable();
    ns.dedup();
    ns
}

/// One micro-kernel case: builds A, B (padding poisoned with NaN) and a
/// guarded C, runs the kernel through `micro_kernels::run` and compares it,
/// and `micro_kernels::reference`, with the sum computed in f64 within the
/// f32 dot-product error bound; checks that nothing outside the m×n region
/// of C changed.
#[allow(clippy::too_many_arguments)]
fn check_case(
    k: &MicroKernel,
    m: usize,
    n: usize,
    kc: usize,
    packed_a: bool,
    b_rs: usize,
    accumulate: bool,
    rng: &mut Rng,
) {
    let (a_rs, a_cs) = if packed_a { (1, k.mr) } else { (kc + 3, 1) };
    let c_rs = n + 9;
    let a_len = if kc == 0 {
        0
    } else {
        (m - 1) * a_rs + (kc - 1) * a_cs + 1
    };
    let b_len = if kc == 0 { 0 } else { (kc - 1) * b_rs + n };
    let mut a = vec![f32::NAN; a_len];
    for i in 0..m {
        for p in 0..kc {
            a[i * a_rs + p * a_cs] = rng.next_f32();
        }
    }
    let mut b = vec![f32::NAN; b_len];
    for p in 0..kc {
        for j in 0..n {
            b[p * b_rs + j] = rng.next_f32();
        }
    }
    // C: a guard before, the region, and guard rows after; everything
    // outside the m×n region holds SENTINEL.
    let c_len = C_GUARD + (m + 2) * c_rs + C_GUARD;
    let mut c = vec![SENTINEL; c_len];
    for i in 0..m {
        for j in 0..n {
            c[C_GUARD + i * c_rs + j] = rng.next_f32();
        }
    }
    // The exact sums' stand-ins, in f64, with their error bounds.
    let exact = |i: usize, j: usize| {
        let initial = if accumulate {
            c[C_GUARD + i * c_rs + j]
        } else {
            0.0
        };
        let mut sum = common::DotReference::starting_at(initial);
        for p in 0..kc {
            sum.add_product(a[i * a_rs + p * a_cs], b[p * b_rs + j]);
        }
        sum
    };
    let exact: Vec<Vec<common::DotReference>> = (0..m)
        .map(|i| (0..n).map(|j| exact(i, j)).collect())
        .collect();
    let mut want = c.clone();
    micro_kernels::reference(
        kc,
        &a,
        a_rs,
        a_cs,
        &b,
        b_rs,
        &mut want[C_GUARD..],
        c_rs,
        m,
        n,
        accumulate,
    );
    let what = |i: usize, j: usize| {
        move || {
            format!(
                "{} m={m} n={n} kc={kc} packed_a={packed_a} b_rs={b_rs} \
                 accumulate={accumulate} at ({i},{j})",
                k.name
            )
        }
    };
    // The region's exact extent, so `run`'s length check is tight.
    let region_end = C_GUARD + (m - 1) * c_rs + n;
    micro_kernels::run(
        &host(),
        k,
        kc,
        &a,
        a_rs,
        a_cs,
        &b,
        b_rs,
        &mut c[C_GUARD..region_end],
        c_rs,
        m,
        n,
        accumulate,
    )
    .unwrap_or_else(|e| panic!("{}: {e}", what(0, 0)()));
    for (idx, (&got, &exp)) in c.iter().zip(&want).enumerate() {
        let inside = idx >= C_GUARD && {
            let off = idx - C_GUARD;
            off / c_rs < m && off % c_rs < n
        };
        let (i, j) = (
            (idx.wrapping_sub(C_GUARD)) / c_rs,
            (idx.wrapping_sub(C_GUARD)) % c_rs,
        );
        if inside {
            exact[i][j].assert_within_bound(got, &what(i, j));
            let reference = || format!("micro_kernels::reference, {}", what(i, j)());
            exact[i][j].assert_within_bound(exp, &reference);
        } else {
            assert!(
                got.to_bits() == SENTINEL.to_bits(),
                "{}: wrote {got} outside the region (C index {idx})",
                what(i, j)()
            );
        }
    }
}

#[test]
fn micro_kernels_match_reference() {
    let kernels = coverage().kernels();
    assert!(!kernels.is_empty());
    let mut rng = Rng::new(7);
    let mut cases = 0usize;
    for k in &kernels {
        let lanes = k.isa.lanes();
        for kc in [0usize, 1, 7, 64, 257] {
            for m in 1..=k.mr {
                for n in n_values(k.nr, lanes) {
                    for packed_a in [false, true] {
                        for b_rs in [k.nr, k.nr + 5] {
                            for accumulate in [false, true] {
                                check_case(k, m, n, kc, packed_a, b_rs, accumulate, &mut rng);
                                cases += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "checked {cases} cases on {} kernels ({})",
        kernels.len(),
        kernels
            .iter()
            .map(|k| k.name)
            .collect::<Vec<_>>()
            .join(", ")
    );
}

#[test]
fn micro_kernel_kc0_overwrite_writes_zeros() {
    for k in coverage().kernels() {
        let (m, n) = (k.mr, k.nr);
        let mut c = vec![7.0f32; m * n];
        micro_kernels::run(&host(), k, 0, &[], 1, k.mr, &[], n, &mut c, n, m, n, false)
            .expect("runs");
        assert!(
            c.iter().all(|&x| x == 0.0),
            "{}: kc=0 must write zeros",
            k.name
        );
        let mut c = vec![7.0f32; m * n];
        micro_kernels::run(&host(), k, 0, &[], 1, k.mr, &[], n, &mut c, n, m, n, true)
            .expect("runs");
        assert!(
            c.iter().all(|&x| x == 7.0),
            "{}: kc=0 accumulate keeps C",
            k.name
        );
    }
}

#[test]
fn micro_kernel_registry_is_consistent() {
    let all = micro_kernels::all_kernels();
    let mut names: Vec<_> = all.iter().map(|k| k.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all.len(), "kernel names are unique");
    for k in all {
        assert_eq!(k.name, format!("{}_{}x{}", k.isa.name(), k.mr, k.nr));
        assert_eq!(k.nr % k.isa.lanes(), 0, "{}: NR is whole vectors", k.name);
        let found = micro_kernels::find(k.name).expect("find by name");
        assert_eq!(found.name, k.name);
        assert_eq!(host().can_run(k), k.isa <= host().isa());
    }
    assert!(micro_kernels::find("generic_4x4").is_some());
    assert!(micro_kernels::find("no_such_kernel").is_none());
    for isa in Isa::ALL {
        assert_eq!(Isa::from_name(isa.name()), Some(isa));
    }
    assert_eq!(Isa::from_name("AVX512"), Some(Isa::Avx512));
    assert_eq!(Isa::from_name("neon"), None);
    assert!(Isa::Generic < Isa::Sse && Isa::Sse < Isa::Avx2Fma && Isa::Avx2Fma < Isa::Avx512);
    #[cfg(target_arch = "x86_64")]
    {
        let uncapped = Target::host();
        assert!(uncapped.isa() >= Isa::Sse, "x86-64 always has SSE2");
        assert_eq!(uncapped.cap(), None);
        // The fingerprint's ISA flags agree with the CPU's, whichever it has.
        let avx512 = std::arch::is_x86_feature_detected!("avx512f");
        let avx2_fma = std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma");
        assert_eq!(uncapped.isa() == Isa::Avx512, avx512, "{uncapped:?}");
        assert_eq!(
            uncapped.isa() >= Isa::Avx2Fma,
            avx512 || avx2_fma,
            "{uncapped:?}"
        );
        assert_eq!(
            micro_kernels::find("avx512_6x32").is_some_and(|k| uncapped.can_run(k)),
            avx512
        );
        if std::env::var("TESSERA_ISA").is_err() {
            assert_eq!(host(), uncapped);
        }
        for name in [
            "sse_4x8",
            "sse_6x8",
            "sse_4x4",
            "avx2_6x16",
            "avx2_4x24",
            "avx2_8x8",
        ] {
            assert!(micro_kernels::find(name).is_some(), "{name} compiled in");
        }
        for name in ["avx512_6x32", "avx512_8x32", "avx512_12x16", "avx512_4x64"] {
            assert!(micro_kernels::find(name).is_some(), "{name} compiled in");
        }
    }
}

#[test]
fn micro_kernel_isa_cap_forces_fallback() {
    let sse_target = host().with_isa_cap(Isa::Sse);
    assert!(sse_target.isa() <= Isa::Sse);
    assert!(sse_target.isa() <= host().isa(), "a cap only narrows");
    #[cfg(target_arch = "x86_64")]
    if std::env::var("TESSERA_ISA").is_err() {
        assert_eq!(sse_target.isa(), Isa::Sse);
        assert_eq!(sse_target.cap_description(), "with_isa_cap(sse)");
    }
    let avail = sse_target.kernels();
    assert!(avail.iter().all(|k| k.isa <= Isa::Sse), "no AVX kernels");
    assert!(avail.iter().any(|k| k.name == "generic_4x4"));
    #[cfg(target_arch = "x86_64")]
    {
        let k = micro_kernels::find("avx512_6x32").expect("compiled in");
        assert!(!sse_target.can_run(k));
        let (a, b) = (vec![1.0f32; 6], vec![1.0f32; 32]);
        let mut c = vec![0.0f32; 6 * 32];
        let err = micro_kernels::run(
            &sse_target,
            k,
            1,
            &a,
            1,
            6,
            &b,
            32,
            &mut c,
            32,
            6,
            32,
            false,
        )
        .expect_err("AVX-512 kernel must be refused under the SSE cap");
        assert!(matches!(
            err,
            MicroKernelError::NotAvailable {
                needs: Isa::Avx512,
                ..
            }
        ));
        let text = err.to_string();
        assert!(
            text.contains("avx512") && text.contains("with_isa_cap(sse)"),
            "{text}"
        );
        assert!(c.iter().all(|&x| x == 0.0), "refused call writes nothing");
        // The SSE kernel still runs.
        let sse = micro_kernels::find("sse_4x8").expect("compiled in");
        micro_kernels::run(&sse_target, sse, 1, &a, 1, 4, &b, 8, &mut c, 8, 4, 8, false)
            .expect("runs");
        assert_eq!(c[0], 1.0);
    }
    let generic = sse_target.with_isa_cap(Isa::Generic);
    assert_eq!(generic.isa(), Isa::Generic);
    assert!(generic.kernels().iter().all(|k| k.isa == Isa::Generic));
    assert_eq!(
        host().isa(),
        Target::from_env().isa(),
        "the host is not capped"
    );
}

/// Run by `micro_kernel_env_override_caps_isa` in a child process with
/// `TESSERA_ISA=sse`; does nothing when run directly.
#[test]
#[ignore = "run in a child process with TESSERA_ISA set"]
fn micro_kernel_env_override_child() {
    if std::env::var("TESSERA_ISA").as_deref() != Ok("sse") {
        eprintln!("skipped: needs TESSERA_ISA=sse, as micro_kernel_env_override_caps_isa runs it");
        return;
    }
    let target = Target::from_env();
    assert!(target.isa() <= Isa::Sse);
    assert_eq!(target.cap(), Some(Isa::Sse));
    assert!(target.kernels().iter().all(|k| k.isa <= Isa::Sse));
    #[cfg(target_arch = "x86_64")]
    {
        let k = micro_kernels::find("avx2_6x16").expect("compiled in");
        let err = micro_kernels::run(
            &target,
            k,
            0,
            &[],
            1,
            6,
            &[],
            16,
            &mut [0.0; 96],
            16,
            6,
            16,
            false,
        )
        .expect_err("refused");
        assert!(err.to_string().contains("TESSERA_ISA=sse"), "{err}");
    }
    println!("ENV-OVERRIDE-CHILD-OK");
}

#[test]
fn micro_kernel_env_override_caps_isa() {
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "tensorize::kernels::micro_kernel_env_override_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TESSERA_ISA", "sse")
        .output()
        .expect("child runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("ENV-OVERRIDE-CHILD-OK"),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Strides the region never steps along (a_cs and b_rs when kc = 1, a_rs
/// and c_rs when m = 1) may be anything: the kernels must not overflow or
/// touch memory with them.
#[test]
fn micro_kernel_unused_strides_may_be_huge() {
    let huge = usize::MAX / 2;
    let mut rng = Rng::new(3);
    for k in coverage().kernels() {
        let (mr, nr) = (k.mr, k.nr);
        let a: Vec<f32> = (0..mr).map(|_| rng.next_f32()).collect();
        let b: Vec<f32> = (0..nr).map(|_| rng.next_f32()).collect();
        // kc = 1, full tile, packed A (a_rs = 1): a_cs and b_rs unused.
        let mut c = vec![0.0f32; mr * nr];
        micro_kernels::run(
            &host(),
            k,
            1,
            &a,
            1,
            huge,
            &b,
            huge,
            &mut c,
            nr,
            mr,
            nr,
            false,
        )
        .expect("runs");
        for i in 0..mr {
            for j in 0..nr {
                assert_eq!(c[i * nr + j], a[i] * b[j], "{} ({i},{j})", k.name);
            }
        }
        // m = 1: a_rs and c_rs unused.
        let mut c = vec![0.0f32; nr];
        micro_kernels::run(
            &host(),
            k,
            1,
            &a[..1],
            huge,
            1,
            &b,
            nr,
            &mut c,
            huge,
            1,
            nr,
            false,
        )
        .expect("runs");
        for j in 0..nr {
            assert_eq!(c[j], a[0] * b[j], "{} m=1 ({j})", k.name);
        }
    }
}

#[test]
fn micro_kernel_run_rejects_bad_regions() {
    let k = micro_kernels::find("generic_4x4").expect("compiled in");
    let (m, n, kc) = (4usize, 4usize, 5usize);
    let a = vec![1.0f32; m * kc];
    let b = vec![1.0f32; kc * n];
    let mut c = vec![0.0f32; m * n];
    // Row-major A (a_rs = kc), B with b_rs = n, C with c_rs = n: exact fits.
    micro_kernels::run(&host(), k, kc, &a, kc, 1, &b, n, &mut c, n, m, n, false)
        .expect("exact fit runs");
    assert!(c.iter().all(|&x| x == kc as f32));

    let err = micro_kernels::run(
        &host(),
        k,
        kc,
        &a[1..],
        kc,
        1,
        &b,
        n,
        &mut c,
        n,
        m,
        n,
        false,
    )
    .expect_err("A too short");
    assert!(
        matches!(err, MicroKernelError::SliceTooShort { operand: "A", .. }),
        "{err}"
    );
    assert!(err.to_string().contains("operand A"));

    let err = micro_kernels::run(
        &host(),
        k,
        kc,
        &a,
        kc,
        1,
        &b[..b.len() - 1],
        n,
        &mut c,
        n,
        m,
        n,
        false,
    )
    .expect_err("B too short");
    assert!(
        matches!(err, MicroKernelError::SliceTooShort { operand: "B", .. }),
        "{err}"
    );

    let len = c.len() - 1;
    let err = micro_kernels::run(
        &host(),
        k,
        kc,
        &a,
        kc,
        1,
        &b,
        n,
        &mut c[..len],
        n,
        m,
        n,
        false,
    )
    .expect_err("C too short");
    assert!(
        matches!(err, MicroKernelError::SliceTooShort { operand: "C", .. }),
        "{err}"
    );

    // Strides that overflow the address computation are rejected, not wrapped.
    let err = micro_kernels::run(
        &host(),
        k,
        kc,
        &a,
        usize::MAX / 2,
        1,
        &b,
        n,
        &mut c,
        n,
        m,
        n,
        false,
    )
    .expect_err("overflowing stride");
    assert!(
        matches!(err, MicroKernelError::SliceTooShort { operand: "A", .. }),
        "{err}"
    );

    let err = micro_kernels::run(&host(), k, kc, &a, kc, 1, &b, n, &mut c, n, m + 1, n, false)
        .expect_err("m > MR");
    assert!(
        matches!(err, MicroKernelError::TileTooLarge { .. }),
        "{err}"
    );

    let err = micro_kernels::run(&host(), k, kc, &a, kc, 1, &b, n, &mut c, n - 1, m, n, false)
        .expect_err("overlapping C rows");
    assert!(
        matches!(err, MicroKernelError::OverlappingRows { .. }),
        "{err}"
    );

    // Empty regions are fine with empty slices.
    micro_kernels::run(&host(), k, kc, &[], kc, 1, &[], n, &mut [], n, 0, n, false).expect("m = 0");
    micro_kernels::run(&host(), k, kc, &[], kc, 1, &[], n, &mut [], n, m, 0, false).expect("n = 0");
}
