//! The f32 GEMM micro-kernels (`runtime::micro_kernels`) on one core: every
//! kernel this CPU can run, full `MR×NR` tiles, packed A (`a_rs = 1,
//! a_cs = MR`) and B (`b_rs = NR`) panels, kc = 256, C in L1, accumulating,
//! many calls a timing. `cargo bench --bench micro_kernels` prints a table of
//! GFLOP/s (median of several timed repeats) and the fraction of the measured
//! FMA ceiling of one core (`measure::ceilings`) for the kernel's ISA; then
//! runs the same calls as one criterion group.

use std::hint::black_box;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput};
use tessera::measure::ceilings::{ComputeKind, host_ceilings};
use tessera::runtime::Target;
use tessera::runtime::micro_kernels::{self, Isa, MicroKernel};

const KC: usize = 256;
const REPEATS: usize = 11;
/// Flops per timed repeat (~10-20 ms at tens of GFLOP/s).
const FLOPS_PER_REPEAT: f64 = 4e8;

/// Packed panels and a C tile for `k`, with deterministic values.
struct Panels {
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
}

impl Panels {
    fn new(k: &MicroKernel) -> Self {
        let fill = |len: usize, seed: usize| {
            (0..len)
                .map(|i| ((i * 7 + seed) % 13) as f32 / 13.0 - 0.5)
                .collect::<Vec<_>>()
        };
        Panels {
            a: fill(k.mr * KC, 1),
            b: fill(KC * k.nr, 2),
            c: vec![0.0; k.mr * k.nr],
        }
    }

    /// `calls` accumulating full-tile calls, straight through the C ABI
    /// (as JIT code calls it).
    fn call(&mut self, k: &MicroKernel, calls: usize) {
        let (mr, nr) = (k.mr as i64, k.nr as i64);
        for _ in 0..calls {
            // SAFETY: `k` is available on this host (checked by the caller
            // through `micro_kernels::run`), the panels hold exactly the full
            // MR×KC / KC×NR / MR×NR regions with these strides.
            unsafe {
                (k.func)(
                    KC as i64,
                    black_box(self.a.as_ptr()),
                    1,
                    mr,
                    black_box(self.b.as_ptr()),
                    nr,
                    black_box(self.c.as_mut_ptr()),
                    nr,
                    mr,
                    nr,
                    1,
                    std::ptr::null(),
                )
            }
        }
        black_box(&mut self.c);
    }
}

fn flops_per_call(k: &MicroKernel) -> f64 {
    2.0 * (k.mr * k.nr * KC) as f64
}

/// The median and the best GFLOP/s of `REPEATS` timed repeats (on a shared
/// machine the best is the less disturbed one).
fn gflops(target: &Target, k: &MicroKernel) -> (f64, f64) {
    let mut panels = Panels::new(k);
    // One checked call: the kernel is available and the panels fit.
    micro_kernels::run(
        target,
        k,
        KC,
        &panels.a,
        1,
        k.mr,
        &panels.b,
        k.nr,
        &mut panels.c,
        k.nr,
        k.mr,
        k.nr,
        true,
    )
    .unwrap_or_else(|e| panic!("{}: {e}", k.name));
    let calls = (FLOPS_PER_REPEAT / flops_per_call(k)).ceil() as usize;
    panels.call(k, calls / 4); // warm-up
    let mut samples: Vec<f64> = (0..REPEATS)
        .map(|_| {
            let start = Instant::now();
            panels.call(k, calls);
            calls as f64 * flops_per_call(k) / start.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    (samples[REPEATS / 2], samples[REPEATS - 1])
}

fn print_table() {
    let target = Target::from_env();
    if cfg!(debug_assertions) {
        eprintln!(
            "warning: micro_kernels bench built without optimisations; times are meaningless"
        );
    }
    let ceilings = match host_ceilings() {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("warning: ceiling measurement failed ({e}); fractions omitted");
            None
        }
    };
    println!(
        "\nf32 GEMM micro-kernels, one core, full tiles, packed A/B panels, kc = {KC}, \
         C in L1; host ISA {}",
        target.isa()
    );
    println!(
        "{:<14} {:<8} {:>7} {:>9} {:>11} {:>8} {:>9} {:>8}",
        "kernel", "ISA", "MR×NR", "GFLOP/s", "ceiling", "of ceil", "best", "of ceil"
    );
    for k in target.kernels() {
        let (median, best) = gflops(&target, k);
        // A kernel wider than 128 bits is held to the widest ISA's measured
        // FMA ceiling, the others to Cranelift's f32x4 one.
        let kind = if k.isa > Isa::Sse {
            ComputeKind::Widest
        } else {
            ComputeKind::F32x4
        };
        let peak = ceilings.map_or(f64::NAN, |c| c.compute_gflops(kind, 1));
        println!(
            "{:<14} {:<8} {:>7} {:>9.2} {:>11.2} {:>7.1}% {:>9.2} {:>7.1}%",
            k.name,
            k.isa.name(),
            format!("{}x{}", k.mr, k.nr),
            median,
            peak,
            100.0 * median / peak,
            best,
            100.0 * best / peak
        );
    }
    println!(
        "GFLOP/s: median of {REPEATS} repeats; best: the fastest. ceiling: the measured \
         one-core FMA throughput (`tessera bench --ceilings`) of the kernel's ISA \
         (f32x4 for SSE and generic)\n"
    );
}

fn ukernels_group(c: &mut Criterion) {
    let mut group = c.benchmark_group("micro_kernels");
    group.sample_size(10);
    group.warm_up_time(std::time::Duration::from_millis(300));
    group.measurement_time(std::time::Duration::from_secs(1));
    for k in Target::from_env().kernels() {
        let calls = 64;
        group.throughput(Throughput::Elements(
            (flops_per_call(k) * calls as f64) as u64,
        ));
        let mut panels = Panels::new(k);
        group.bench_function(BenchmarkId::new(k.name, KC), |bench| {
            bench.iter(|| panels.call(k, calls))
        });
    }
    group.finish();
}

fn main() {
    // The table only under `cargo bench` (criterion's `--bench`), not when
    // `cargo test --benches` runs this in test mode.
    if std::env::args().any(|a| a == "--bench") {
        print_table();
    }
    let mut criterion = Criterion::default().configure_from_args();
    ukernels_group(&mut criterion);
    criterion.final_summary();
}
