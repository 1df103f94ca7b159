//! Tensorize: the hand-written GEMM micro-kernels (`runtime::micro_kernels`) and
//! the schedule step that replaces a loop block by a call of one: random
//! tiles around every kernel against the reference, through the IR
//! interpreter and the JIT; blocks that do not match are typed errors.

use crate::common;

use tessera::runtime::Target;
use tessera::runtime::micro_kernels::{self, Isa, MicroKernel, UkernelError};

// --- shared helpers ---

/// The machine these tests run on, as `TESSERA_ISA` caps it. A test that
/// needs a narrower ISA builds its own capped target from it
/// ([`Target::with_isa_cap`]): nothing is process-wide, so the tests run
/// in parallel.
fn host() -> Target {
    Target::from_env()
}

/// Deterministic values in [-1, 1) (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
        (bits as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// `got` against `want` with a tolerance that grows with the reduction
/// length `k` (FMA and summation order change rounding).
fn assert_close(got: f32, want: f32, k: usize, what: &dyn Fn() -> String) {
    let tol = 1e-5 * (1.0 + k as f32) * (1.0 + want.abs());
    assert!(
        (got - want).abs() <= tol,
        "{}: got {got}, want {want} (tol {tol})",
        what()
    );
}

// --- micro-kernels ---

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
/// guarded C, runs the kernel through `micro_kernels::run` and compares with
/// `micro_kernels::reference`; checks that nothing outside the m×n region of C
/// changed.
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
            assert_close(got, exp, kc, &what(i, j));
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
    let kernels = host().kernels();
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
    for k in host().kernels() {
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
    let peak = micro_kernels::peak_gflops_per_core(Isa::Avx512, 2.5);
    assert!((peak - 2.5 * 2.0 * 16.0 * 2.0).abs() < 1e-9);
    #[cfg(target_arch = "x86_64")]
    {
        let uncapped = Target::host();
        assert!(uncapped.isa() >= Isa::Sse, "x86-64 always has SSE2");
        assert_eq!(uncapped.cap(), None);
        if std::arch::is_x86_feature_detected!("avx512f") {
            assert_eq!(uncapped.isa(), Isa::Avx512);
            assert!(
                micro_kernels::find("avx512_6x32").is_some_and(|k| uncapped.can_run(k)),
                "the fingerprint's ISA flags agree with the CPU's"
            );
        }
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
            UkernelError::NotAvailable {
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
            "tensorize::micro_kernel_env_override_child",
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
    for k in host().kernels() {
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
        matches!(err, UkernelError::SliceTooShort { operand: "A", .. }),
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
        matches!(err, UkernelError::SliceTooShort { operand: "B", .. }),
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
        matches!(err, UkernelError::SliceTooShort { operand: "C", .. }),
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
        matches!(err, UkernelError::SliceTooShort { operand: "A", .. }),
        "{err}"
    );

    let err = micro_kernels::run(&host(), k, kc, &a, kc, 1, &b, n, &mut c, n, m + 1, n, false)
        .expect_err("m > MR");
    assert!(matches!(err, UkernelError::TileTooLarge { .. }), "{err}");

    let err = micro_kernels::run(&host(), k, kc, &a, kc, 1, &b, n, &mut c, n - 1, m, n, false)
        .expect_err("overlapping C rows");
    assert!(matches!(err, UkernelError::OverlappingRows { .. }), "{err}");

    // Empty regions are fine with empty slices.
    micro_kernels::run(&host(), k, kc, &[], kc, 1, &[], n, &mut [], n, 0, n, false).expect("m = 0");
    micro_kernels::run(&host(), k, kc, &[], kc, 1, &[], n, &mut [], n, m, 0, false).expect("n = 0");
}

// --- the tensorize step ---

use common::{
    Scratch, assert_close as assert_tensors_close, build, random_inputs, reduction_length,
    reference,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tessera::codegen::{CodegenOptions, compile};
use tessera::schedule::{State, Step, StepErrorKind, steps_from_json};
use tessera::te::ComputeDag;
use tessera::tir::{self, LowerError, Stmt};

fn steps(json: &str) -> Vec<Step> {
    steps_from_json(json).unwrap_or_else(|e| panic!("{e}"))
}

/// Lowers `steps` on `dag`, checks the block became one micro-kernel call,
/// and compares the IR interpreter and the JIT (compiled for `target`) with
/// the reference.
fn check_tensorized(target: &Target, label: &str, dag: &ComputeDag, steps: &[Step]) {
    let state = State::replay(dag, steps).unwrap_or_else(|e| panic!("{label}: {e}"));
    let func = tir::lower(&state).unwrap_or_else(|e| panic!("{label}: lowering: {e}"));
    let mut calls = 0;
    func.body
        .visit(&mut |s| calls += usize::from(matches!(s, Stmt::MicroKernelCall(_))));
    assert_eq!(calls, 1, "{label}: one call in\n{func}");
    let inputs = random_inputs(dag, 11);
    let want = reference(dag, &inputs);
    let interpreted =
        tir::run(&func, &inputs).unwrap_or_else(|e| panic!("{label}: IR: {e}\n{func}"));
    assert_tensors_close(
        &format!("{label} (IR)"),
        &interpreted,
        &want,
        reduction_length(dag),
    );
    let kernel = compile(&func, &CodegenOptions::for_target(*target))
        .unwrap_or_else(|e| panic!("{label}: compile: {e}\n{func}"));
    let compiled = kernel
        .run_host(&inputs)
        .unwrap_or_else(|e| panic!("{label}: run: {e}"));
    assert_tensors_close(
        &format!("{label} (JIT)"),
        &compiled,
        &want,
        reduction_length(dag),
    );
}

/// The block of matmul C tensorized in place: C's own loops, A and B read
/// where they are.
fn direct(m_t: i64, n_t: i64, k_t: Option<i64>, kernel: &str) -> Vec<Step> {
    let (k_split, k_loops, k_block) = match k_t {
        Some(k) => (
            format!(r#"{{"kind":"split","stage":"C","iter":"k","factors":[{k}]}},"#),
            r#""k.0","#,
            "k.1",
        ),
        None => (String::new(), "", "k"),
    };
    steps(&format!(
        r#"[
        {{"kind":"split","stage":"C","iter":"i0","factors":[{m_t}]}},
        {{"kind":"split","stage":"C","iter":"i1","factors":[{n_t}]}},
        {k_split}
        {{"kind":"reorder","stage":"C","order":["i0.0","i1.0",{k_loops}"{k_block}","i0.1","i1.1"]}},
        {{"kind":"tensorize","stage":"C","iter":"{k_block}","intrinsic":"{kernel}"}}
    ]"#
    ))
}

/// GotoBLAS style: the accumulator tile in C.local, B packed into a panel
/// B.local per column block, the outer column loop parallel.
fn packed(m_t: i64, n_t: i64, kernel: &str) -> Vec<Step> {
    steps(&format!(
        r#"[
        {{"kind":"cache_write","stage":"C"}},
        {{"kind":"cache_read","stage":"B","readers":["C.local"]}},
        {{"kind":"split","stage":"C","iter":"i0","factors":[{m_t}]}},
        {{"kind":"split","stage":"C","iter":"i1","factors":[{n_t}]}},
        {{"kind":"reorder","stage":"C","order":["i1.0","i0.0","i0.1","i1.1"]}},
        {{"kind":"compute_at","stage":"C.local","target":"C","iter":"i0.0"}},
        {{"kind":"compute_at","stage":"B.local","target":"C","iter":"i1.0"}},
        {{"kind":"reorder","stage":"C.local","order":["k","i0","i1"]}},
        {{"kind":"tensorize","stage":"C.local","iter":"k","intrinsic":"{kernel}"}},
        {{"kind":"annotate","stage":"C","iter":"i1.0","annotation":"parallel"}}
    ]"#
    ))
}

fn available() -> Vec<&'static MicroKernel> {
    let kernels = host().kernels();
    assert!(!kernels.is_empty(), "at least the portable kernel");
    kernels
}

#[test]
fn tensorized_matmuls_with_random_tiles_around_each_kernel_match_the_reference() {
    let mut rng = StdRng::seed_from_u64(5);
    for kernel in available() {
        for case in 0..3 {
            let (mr, nr) = (kernel.mr as i64, kernel.nr as i64);
            // The block at most the kernel's tile (edge tiles included).
            let m_t = if case == 0 {
                mr
            } else {
                rng.random_range(1..=mr)
            };
            let n_t = if case == 0 {
                nr
            } else {
                rng.random_range(1..=nr)
            };
            let (m, n) = (m_t * rng.random_range(1..=3), n_t * rng.random_range(1..=2));
            let k_t = rng.random_range(1..=24);
            let k = k_t * rng.random_range(1..=3);
            let dag = build("matmul", &[("M", m), ("N", n), ("K", k)]);
            let label = format!("{} matmul {m}x{n}x{k} tile {m_t}x{n_t}", kernel.name);
            check_tensorized(
                &host(),
                &format!("{label} direct"),
                &dag,
                &direct(m_t, n_t, None, kernel.name),
            );
            check_tensorized(
                &host(),
                &format!("{label} direct kc={k_t}"),
                &dag,
                &direct(m_t, n_t, Some(k_t), kernel.name),
            );
            check_tensorized(
                &host(),
                &format!("{label} packed"),
                &dag,
                &packed(m_t, n_t, kernel.name),
            );
        }
    }
}

#[test]
fn splits_that_do_not_divide_become_edge_tiles_of_the_kernel() {
    let mut rng = StdRng::seed_from_u64(9);
    for kernel in available() {
        let (mr, nr) = (kernel.mr as i64, kernel.nr as i64);
        let m_t = rng.random_range(1..=mr);
        let n_t = rng.random_range(1..=nr);
        // Extents that leave a partial tile in every direction.
        let (m, n) = (
            m_t * 2 + rng.random_range(1..=m_t),
            n_t + rng.random_range(1..=n_t),
        );
        let k_t = rng.random_range(2..=9);
        let k = k_t * 2 + rng.random_range(1..k_t);
        let dag = build("matmul", &[("M", m), ("N", n), ("K", k)]);
        let label = format!(
            "{} matmul {m}x{n}x{k} tile {m_t}x{n_t} kc {k_t}",
            kernel.name
        );
        check_tensorized(
            &host(),
            &label,
            &dag,
            &direct(m_t, n_t, Some(k_t), kernel.name),
        );
        check_tensorized(
            &host(),
            &format!("{label} packed"),
            &dag,
            &packed(m_t, n_t, kernel.name),
        );
    }
}

#[test]
fn batch_matmul_tensorizes_inside_the_batch_loop() {
    let kernel = available()[0];
    let (mr, nr) = (kernel.mr as i64, kernel.nr as i64);
    let dag = build(
        "batch_matmul",
        &[("B", 3), ("M", mr * 2), ("N", nr), ("K", 9)],
    );
    check_tensorized(
        &host(),
        "batch_matmul",
        &dag,
        &steps(&format!(
            r#"[
            {{"kind":"split","stage":"C","iter":"i1","factors":[{mr}]}},
            {{"kind":"reorder","stage":"C","order":["i0","i1.0","k","i1.1","i2"]}},
            {{"kind":"tensorize","stage":"C","iter":"k","intrinsic":"{}"}}
        ]"#,
            kernel.name
        )),
    );
}

fn step_error(dag: &ComputeDag, json: &str) -> String {
    match State::replay(dag, &steps(json)) {
        Err(e) => {
            assert!(matches!(e.kind, StepErrorKind::Tensorize { .. }), "{e}");
            e.to_string()
        }
        Ok(_) => panic!("{json} applied"),
    }
}

fn lower_error(dag: &ComputeDag, json: &str) -> String {
    let state = State::replay(dag, &steps(json)).unwrap_or_else(|e| panic!("{e}"));
    match tir::lower(&state) {
        Err(e @ LowerError::Tensorize { .. }) => e.to_string(),
        Err(e) => panic!("another error: {e}"),
        Ok(f) => panic!("{json} lowered:\n{f}"),
    }
}

#[test]
fn blocks_that_do_not_match_are_typed_errors() {
    let kernel = available()[0];
    let name = kernel.name;
    let (mr, nr) = (kernel.mr as i64, kernel.nr as i64);
    let matmul = build("matmul", &[("M", mr * 2), ("N", nr * 2), ("K", 8)]);
    // Not the three innermost loops.
    let e = step_error(
        &matmul,
        &format!(
            r#"[{{"kind":"split","stage":"C","iter":"i0","factors":[2]}},
            {{"kind":"tensorize","stage":"C","iter":"i0.0","intrinsic":"{name}"}}]"#
        ),
    );
    assert!(e.contains("innermost loops"), "{e}");
    // An annotated loop inside the block.
    let e = step_error(
        &matmul,
        &format!(
            r#"[{{"kind":"reorder","stage":"C","order":["k","i0","i1"]}},
            {{"kind":"annotate","stage":"C","iter":"i1","annotation":"vectorize"}},
            {{"kind":"tensorize","stage":"C","iter":"k","intrinsic":"{name}"}}]"#
        ),
    );
    assert!(e.contains("annotated vectorize"), "{e}");
    // Not a reduction.
    let relu = build("relu", &[("M", 4), ("N", 4)]);
    let e = step_error(
        &relu,
        &format!(r#"[{{"kind":"tensorize","stage":"relu","iter":"i0","intrinsic":"{name}"}}]"#),
    );
    assert!(e.contains("not a sum reduction"), "{e}");

    // B stored transposed is strided along n: pack it first.
    let nt = build("matmul_nt", &[("M", mr), ("N", nr), ("K", 8)]);
    let e = lower_error(
        &nt,
        &format!(
            r#"[{{"kind":"reorder","stage":"C","order":["k","i0","i1"]}},
            {{"kind":"tensorize","stage":"C","iter":"k","intrinsic":"{name}"}}]"#
        ),
    );
    assert!(e.contains("contiguous along the n loop"), "{e}");
    // A block larger than the kernel's tile.
    let e = lower_error(
        &matmul,
        &format!(
            r#"[{{"kind":"reorder","stage":"C","order":["k","i0","i1"]}},
            {{"kind":"tensorize","stage":"C","iter":"k","intrinsic":"{name}"}}]"#
        ),
    );
    assert!(e.contains("computes at most"), "{e}");
    // An unknown micro-kernel.
    let e = lower_error(&matmul, &direct_json(mr, nr, "avx9000_1x1"));
    assert!(e.contains("no micro-kernel 'avx9000_1x1'"), "{e}");
}

fn direct_json(m_t: i64, n_t: i64, kernel: &str) -> String {
    serde_json::to_string(&direct(m_t, n_t, None, kernel)).expect("json")
}

/// A micro-kernel this CPU runs that the SSE cap forbids (`None`, with a
/// note, on CPUs without one).
fn wider_than_sse() -> Option<&'static MicroKernel> {
    let wide = host().kernels().into_iter().find(|k| k.isa > Isa::Sse);
    if wide.is_none() {
        eprintln!("skipped: this CPU has no micro-kernel wider than SSE");
    }
    wide
}

#[test]
fn a_kernel_the_isa_cap_forbids_is_a_compile_error_not_a_crash() {
    let Some(wide) = wider_than_sse() else {
        return;
    };
    let dag = build(
        "matmul",
        &[("M", wide.mr as i64), ("N", wide.nr as i64), ("K", 16)],
    );
    let state = State::replay(
        &dag,
        &direct(wide.mr as i64, wide.nr as i64, None, wide.name),
    )
    .expect("replays");
    let func = tir::lower(&state).expect("lowers");
    let capped = compile(
        &func,
        &CodegenOptions::for_target(host().with_isa_cap(Isa::Sse)),
    );
    let message = capped.err().expect("refused under the cap").to_string();
    assert!(
        message.contains(wide.name)
            && message.contains("needs")
            && message.contains("with_isa_cap(sse)"),
        "{message}"
    );
    assert!(compile(&func, &CodegenOptions::default()).is_ok());
}

/// The target travels to the measurement worker with the codegen options:
/// under a capped measurer the worker refuses the wide kernel, uncapped it
/// runs it.
#[test]
fn the_measurement_worker_compiles_for_the_measurers_target() {
    use std::path::PathBuf;
    use tessera::measure::{MeasureErrorKind, MeasureOptions, Measurer, Task, TimingOptions};

    let Some(wide) = wider_than_sse() else {
        return;
    };
    let (mr, nr) = (wide.mr as i64, wide.nr as i64);
    let task = Task::from_registry("matmul", &format!("M={mr},N={nr},K=16")).expect("task");
    let state = State::replay(task.dag(), &direct(mr, nr, None, wide.name)).expect("replays");
    let measure = |target: Target| {
        let mut measurer = Measurer::new(MeasureOptions {
            workers: 1,
            kernel_threads: 1,
            timing: TimingOptions {
                warmup: 0,
                number: 1,
                repeat: 1,
                min_repeat_ms: 0.0,
                flush_cache: false,
            },
            codegen: CodegenOptions::for_target(target),
            worker_program: Some(PathBuf::from(env!("CARGO_BIN_EXE_tessera"))),
            ..MeasureOptions::default()
        })
        .expect("workers start");
        assert_eq!(measurer.target(), &target);
        let results = measurer
            .measure(&task, std::slice::from_ref(&state))
            .expect("measures");
        results.into_iter().next().expect("one result")
    };
    let capped = measure(host().with_isa_cap(Isa::Sse));
    assert_eq!(
        capped.error_kind,
        MeasureErrorKind::CompileError,
        "{capped:?}"
    );
    assert!(
        capped.error_msg.contains(wide.name) && capped.error_msg.contains("with_isa_cap(sse)"),
        "{}",
        capped.error_msg
    );
    let uncapped = measure(host());
    assert!(uncapped.is_ok(), "{uncapped:?}");
}

#[test]
fn a_deployed_tensorized_artifact_names_its_kernel_and_falls_back_where_the_isa_is_missing() {
    use tessera::db::TuningDb;
    use tessera::deploy::{DeployOptions, FallbackReason, KernelSource, Library};
    use tessera::measure::{MeasureResult, Task};
    use tessera::runtime::host_device;

    let Some(wide) = wider_than_sse() else {
        return;
    };
    let (mr, nr) = (wide.mr as i64, wide.nr as i64);
    let shape = format!("M={},N={},K=16", mr * 2, nr);
    let dir = Scratch::new("tensorize-deploy");
    let task = Task::from_registry("matmul", &shape).expect("task");
    let steps = direct(mr, nr, None, wide.name);
    let mut db = TuningDb::open(&dir.join("tuning.db")).expect("db");
    let result: MeasureResult = common::ok_result(1e-5, 1.8e9);
    db.record_batch(&task, host_device(), &[(&steps, &result)])
        .expect("recorded");
    let options = DeployOptions {
        out: dir.join("schedules"),
        workloads: Vec::new(),
        force: false,
    };
    let report = tessera::deploy::deploy(&db, host_device(), &options).expect("deployed");
    let file = report.workloads[0].file.clone().expect("artifact");
    let artifact = tessera::deploy::Artifact::read(&file).expect("artifact");
    assert_eq!(artifact.micro_kernels, vec![wide.name.to_string()]);
    assert_eq!(artifact.isa.as_deref(), Some(wide.isa.name()));

    let inputs = random_inputs(task.dag(), 4);
    let want = reference(task.dag(), &inputs);
    let capped = Library::open_with_target(dir.join("schedules"), host().with_isa_cap(Isa::Sse))
        .and_then(|library| library.kernel(task.dag()));
    let capped_run = capped.as_ref().ok().map(|l| l.kernel.run_host(&inputs));
    let loaded = capped.expect("falls back rather than failing");
    match &loaded.source {
        KernelSource::Fallback(reason @ FallbackReason::MissingIsa { needs, .. }) => {
            assert_eq!(needs, wide.isa.name());
            assert!(reason.to_string().contains(wide.name), "{reason}");
        }
        other => panic!("expected a missing-ISA fallback, got {other:?}"),
    }
    let got = capped_run.expect("ran").expect("the default schedule runs");
    assert_tensors_close("fallback", &got, &want, 16);

    let library = Library::open(dir.join("schedules")).expect("library");
    let tuned = library.kernel(task.dag()).expect("loads");
    assert!(
        matches!(tuned.source, KernelSource::Tuned { .. }),
        "{:?}",
        tuned.source
    );
    let got = tuned.kernel.run_host(&inputs).expect("runs");
    assert_tensors_close("tuned", &got, &want, 16);
}

// --- tensorized sketches of the suite's ops ---

use tessera::search::{Suite, generate_sketches, materialize, random_decisions};

/// The quick suite's ops whose main stage is a GEMM-shaped contraction the
/// micro-kernels can compute (directly, through a transposing pack, or as
/// an implicit GEMM over a padded input). The others (grouped, depthwise
/// and transposed convolutions, pooling, normalisation, elementwise) have
/// no m axis A reads and B does not, or a strided B.
const ELIGIBLE: [&str; 13] = [
    "matmul",
    "matmul_nt",
    "batch_matmul",
    "dense",
    "dense_bias",
    "dense_bias_relu",
    "conv1d",
    "conv2d",
    "conv2d_nhwc",
    "conv3d",
    "conv2d_capsule",
    "conv2d_bn_relu",
    "transpose_batch_matmul",
];

/// Fills every tensorized sketch of `dag` at random `seeds` times and
/// checks each against the reference, all for `target`; returns how many
/// sketches there were.
fn check_tensorized_sketches(target: &Target, label: &str, dag: &ComputeDag, seeds: u64) -> usize {
    let sketches: Vec<_> = generate_sketches(dag, target)
        .into_iter()
        .filter(|s| s.name.contains(":tensorize("))
        .collect();
    for sketch in &sketches {
        for seed in 0..seeds {
            let mut rng = StdRng::seed_from_u64(seed);
            let decisions = random_decisions(sketch, &mut rng);
            let state = materialize(dag, sketch, &decisions)
                .unwrap_or_else(|e| panic!("{label} [{}]: {e}", sketch.name));
            check_tensorized(
                target,
                &format!("{label} [{}] {decisions:?}", sketch.name),
                dag,
                state.steps(),
            );
        }
    }
    sketches.len()
}

#[test]
fn tensorized_sketches_of_every_eligible_suite_op_match_the_reference_at_every_isa() {
    let suite = Suite::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/suites/quick.json"
    )))
    .expect("quick suite");
    let host = host();
    for isa in Isa::ALL.into_iter().filter(|&i| i <= host.isa()).rev() {
        let target = host.with_isa_cap(isa);
        for w in &suite.workloads {
            let spec = tessera::ops::find(&w.op).expect("op");
            let dag = spec
                .build(&spec.parse_shape(&w.shape).expect("shape"))
                .expect("dag");
            let label = format!("{} {} (ISA cap {})", w.op, w.shape, isa.name());
            let count = check_tensorized_sketches(&target, &label, &dag, 1);
            assert_eq!(
                count > 0,
                ELIGIBLE.contains(&w.op.as_str()),
                "{label}: {count} tensorized sketches"
            );
        }
    }
}

#[test]
fn tensorized_sketches_of_odd_shapes_match_the_reference() {
    let mut checked = 0;
    for (op, params) in common::small_cases() {
        let dag = build(op, &params);
        checked += check_tensorized_sketches(&host(), &format!("{op} {params:?}"), &dag, 3);
    }
    assert!(checked >= ELIGIBLE.len(), "{checked} sketches");
}

#[test]
fn a_transposing_pack_reads_the_weight_as_its_layout_says() {
    let dag = build("matmul_nt", &[("M", 5), ("N", 7), ("K", 3)]);
    let state = State::replay(
        &dag,
        &steps(r#"[{"kind":"cache_read","stage":"B","readers":["C"],"layout":[1,0]}]"#),
    )
    .expect("applies");
    let packed = state
        .stages()
        .iter()
        .find(|s| s.name == "B.local")
        .expect("B.local");
    assert_eq!(packed.tensor.shape(), &[3, 7], "B[7, 3] stored as [3, 7]");
    let func = tir::lower(&state).expect("lowers");
    let inputs = random_inputs(&dag, 3);
    let got = tir::run(&func, &inputs).expect("runs");
    assert_tensors_close(
        "matmul_nt packed transposed",
        &got,
        &reference(&dag, &inputs),
        3,
    );
    for (layout, what) in [("[0]", "[0]"), ("[0,0]", "[0, 0]"), ("[1,2]", "[1, 2]")] {
        let json =
            format!(r#"[{{"kind":"cache_read","stage":"B","readers":["C"],"layout":{layout}}}]"#);
        let e = match State::replay(&dag, &steps(&json)) {
            Err(e) => {
                assert!(matches!(e.kind, StepErrorKind::BadLayout { .. }), "{e}");
                e.to_string()
            }
            Ok(_) => panic!("{json} applied"),
        };
        assert!(
            e.contains(&format!(
                "layout {what} is not a permutation of the 2 dimensions of 'B'"
            )),
            "{e}"
        );
    }
}

#[test]
fn a_prime_reduction_is_tensorized_with_an_edge_block_of_k() {
    let dag = build("matmul", &[("M", 16), ("N", 32), ("K", 1031)]);
    let count = check_tensorized_sketches(&host(), "matmul 16x32x1031", &dag, 2);
    assert!(count > 0, "no tensorized sketch");
}
