//! The machine's measured ceilings, once per process: the f32 FMA
//! throughput of register-only loops (f32x4 as Cranelift emits it, and the
//! widest vector ISA through `std::arch`) and the streaming bandwidth of
//! each memory level, per core and for all cores; and the roofline they
//! put over a workload ([`Ceilings::roofline`]).
//!
//! Each figure is the **fastest** of several short timed runs, not their
//! median: on a shared machine noise (preemption, other tenants, a lower
//! clock) only ever slows a run down, so the fastest run is the closest to
//! what the hardware does, and a ceiling must bound a kernel timed by its
//! median. The median is kept beside it, to show the spread. Runs are timed
//! by the thread's CPU time where the system has one ([`cpu_time`]): time
//! spent preempted by other processes is not the hardware's.
//!
//! Placement: the f32x4 loop is JIT-compiled with codegen's host ISA, so the
//! ceilings stand above codegen; measurement is their layer, below bench
//! and search, which may both use them.

mod cpu_time;
mod fma;
mod roofline;
mod stream;

pub use roofline::{Bound, ComputeKind, Roofline, Traffic};

use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

use cpu_time::ThreadStopwatch;

use serde::Serialize;

use crate::runtime::{Target, host_device};
use crate::te::ComputeDag;

use super::timing::median;
use fma::CraneliftFmaLoop;
use stream::{Pattern, Streams};

/// A working set up to this many times a cache level's capacity is held to
/// that level's bandwidth, not the next one's: caches keep much of a
/// working set slightly larger than they are (adaptive replacement, a
/// victim L3 beside the L2s), so a kernel streaming 8 MiB + 4 KiB through
/// an 8 MiB L3 ran at 1.19× the DRAM figure. The ceiling must bound what
/// a kernel can reach, so it errs high.
pub const CACHE_SPILL_FACTOR: f64 = 2.0;
/// Why the ceilings could not be measured.
#[derive(Clone, Debug, thiserror::Error)]
pub enum CeilingError {
    /// The f32x4 FMA loop did not compile.
    #[error("cannot JIT-compile the f32x4 FMA ceiling loop: {0}")]
    Jit(String),
}

/// A level of the memory hierarchy a bandwidth ceiling is measured in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryLevel {
    /// The level-1 data cache (one per core).
    L1,
    /// The level-2 cache (one per core).
    L2,
    /// The level-3 cache (shared).
    L3,
    /// Main memory.
    Dram,
}

impl MemoryLevel {
    /// `l1`, `l2`, `l3`, `dram`.
    pub fn name(self) -> &'static str {
        match self {
            MemoryLevel::L1 => "l1",
            MemoryLevel::L2 => "l2",
            MemoryLevel::L3 => "l3",
            MemoryLevel::Dram => "dram",
        }
    }

    /// Whether each core has its own (so threads add up their bandwidth).
    fn is_private(self) -> bool {
        matches!(self, MemoryLevel::L1 | MemoryLevel::L2)
    }
}

/// A throughput on one core and on all cores at once: the fastest run (the
/// ceiling) and the median run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rate {
    /// One core, fastest run.
    pub per_core: f64,
    /// One core, median run.
    pub per_core_median: f64,
    /// All cores at once, fastest run (their sum).
    pub all_cores: f64,
    /// All cores at once, median run.
    pub all_cores_median: f64,
}

/// An f32 FMA ceiling, in GFLOP/s.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ComputeCeiling {
    /// The vector ISA of the loop: `f32x4` (Cranelift's code), `avx2`, `avx512`.
    pub isa: String,
    /// f32 lanes of one vector.
    pub lanes: usize,
    /// Whether the loop is made of fused multiply-adds (else a multiply and
    /// an add each).
    pub fused: bool,
    /// GFLOP/s.
    pub gflops: Rate,
}

/// A streaming bandwidth ceiling of one memory level, in GB/s (bytes read
/// plus bytes written, per second).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BandwidthCeiling {
    /// The level.
    pub level: MemoryLevel,
    /// Bytes of the level (per core for L1 and L2); `None` for memory.
    pub capacity_bytes: Option<u64>,
    /// Bytes one thread streams over.
    pub buffer_bytes: u64,
    /// The vector ISA of the loops (`avx2`, `avx512`), or `portable` for
    /// plain Rust loops.
    pub isa: String,
    /// The fastest of the patterns (`read`, `read_write`, `triad`) on one core.
    pub pattern: String,
    /// GB/s of that fastest pattern on one core, and the fastest on all cores.
    pub gbps: Rate,
}

/// The machine's measured ceilings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ceilings {
    /// The CPU's model name.
    pub cpu_model: String,
    /// Cores the all-cores figures ran on.
    pub cores: usize,
    /// The f32x4 FMA loop Cranelift compiles.
    pub f32x4: ComputeCeiling,
    /// The widest ISA's FMA loop (the same as `f32x4` on a CPU without a
    /// wider one).
    pub widest: ComputeCeiling,
    /// Streaming bandwidth per memory level, innermost first.
    pub bandwidth: Vec<BandwidthCeiling>,
    /// Seconds the measurement took.
    pub measure_seconds: f64,
}

/// The ceilings that apply to one kernel on its threads, and the least time
/// they allow.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AppliedCeiling {
    /// Which compute ceiling: Cranelift's f32x4 or the widest ISA's.
    pub compute_kind: ComputeKind,
    /// Its ISA (`f32x4`, `avx2`, `avx512`).
    pub compute_isa: String,
    /// GFLOP/s on these threads.
    pub compute_gflops: f64,
    /// The memory level the workload's bytes fit in.
    pub memory_level: MemoryLevel,
    /// GB/s of that level on these threads.
    pub bandwidth_gbps: f64,
    /// Which of the two bounds the workload.
    pub bound: Bound,
    /// `min(compute, intensity × bandwidth)`, GFLOP/s.
    pub attainable_gflops: f64,
    /// The least time a run may take under these ceilings, in milliseconds.
    pub min_ms: f64,
}

/// Timed runs per figure (the fastest is the ceiling).
const SAMPLES: usize = 7;
/// The shortest a timed run lasts: long enough for the clock's resolution
/// and a frequency ramp, short enough that all figures take about a second.
const MIN_RUN: Duration = Duration::from_millis(2);
/// The smallest buffer of the memory-level ceiling: four times the last
/// level cache, so it streams from memory.
const DRAM_BUFFER_MIN: u64 = 64 << 20;
/// The largest buffer of the memory-level ceiling.
const DRAM_BUFFER_MAX: u64 = 512 << 20;

/// This host's ceilings, measured on first use (about a second) and kept
/// for the process.
pub fn host_ceilings() -> Result<&'static Ceilings, CeilingError> {
    static CEILINGS: OnceLock<Result<Ceilings, CeilingError>> = OnceLock::new();
    CEILINGS
        .get_or_init(|| Ceilings::measure(&Target::host()))
        .as_ref()
        .map_err(Clone::clone)
}

impl Ceilings {
    /// Measures every ceiling of `target`'s machine (its cores and caches).
    pub fn measure(target: &Target) -> Result<Ceilings, CeilingError> {
        let started = Instant::now();
        let cores = target.cores().max(1);
        let cranelift =
            CraneliftFmaLoop::compile().map_err(|e| CeilingError::Jit(e.to_string()))?;
        let f32x4 = ComputeCeiling {
            isa: "f32x4".to_string(),
            lanes: 4,
            fused: cranelift.fused_instructions() > 0,
            gflops: compute_rate(cranelift.runner(), cores),
        };
        drop(cranelift);
        let widest = match fma::widest_loop() {
            Some((isa, run)) => ComputeCeiling {
                isa: isa.name().to_string(),
                lanes: isa.lanes(),
                fused: true,
                gflops: compute_rate(run, cores),
            },
            None => f32x4.clone(),
        };
        let bandwidth = memory_levels(target)
            .into_iter()
            .map(|(level, capacity, buffer)| bandwidth_ceiling(level, capacity, buffer, cores))
            .collect();
        Ok(Ceilings {
            cpu_model: host_device().model.clone(),
            cores,
            f32x4,
            widest,
            bandwidth,
            measure_seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// The compute ceiling of `kind`.
    pub fn compute(&self, kind: ComputeKind) -> &ComputeCeiling {
        match kind {
            ComputeKind::F32x4 => &self.f32x4,
            ComputeKind::Widest => &self.widest,
        }
    }

    /// GFLOP/s of `kind` on `threads` threads: the most one core does
    /// times the threads (cores do not get faster side by side). The widest
    /// kind is the machine's best: never below the f32x4 figure (a core
    /// that splits wide FMAs into 128-bit halves, as Zen 1 does, runs both
    /// loops at one rate, and either may measure the faster).
    pub fn compute_gflops(&self, kind: ComputeKind, threads: usize) -> f64 {
        match kind {
            ComputeKind::F32x4 => self.scaled_gflops(&self.f32x4.gflops, threads),
            ComputeKind::Widest => self
                .scaled_gflops(&self.widest.gflops, threads)
                .max(self.scaled_gflops(&self.f32x4.gflops, threads)),
        }
    }

    fn scaled_gflops(&self, rate: &Rate, threads: usize) -> f64 {
        self.one_core(rate) * threads.clamp(1, self.cores) as f64
    }

    /// The most one core does: its own figure, or its share of the
    /// all-cores figure when that is more (a clock that moved between the
    /// two measurements; a core alone never runs slower than beside others).
    fn one_core(&self, rate: &Rate) -> f64 {
        rate.per_core.max(rate.all_cores / self.cores as f64)
    }

    /// The memory level a workload moving `bytes` on `threads` threads is
    /// held to, and its bandwidth there, GB/s: the innermost level whose
    /// capacity, times [`CACHE_SPILL_FACTOR`], holds a thread's share
    /// (private levels) or all of it (shared ones). A private level's
    /// threads add up; a shared one is capped by its all-cores figure.
    pub fn bandwidth(&self, bytes: f64, threads: usize) -> (&BandwidthCeiling, f64) {
        let threads = threads.clamp(1, self.cores);
        let fits = |c: &&BandwidthCeiling| match c.capacity_bytes {
            Some(capacity) if c.level.is_private() => {
                bytes / threads as f64 <= CACHE_SPILL_FACTOR * capacity as f64
            }
            Some(capacity) => bytes <= CACHE_SPILL_FACTOR * capacity as f64,
            None => true,
        };
        let Some(ceiling) = self.bandwidth.iter().find(fits).or(self.bandwidth.last()) else {
            unreachable!("the memory level is always measured");
        };
        let one_core = self.one_core(&ceiling.gbps);
        let scaled = one_core * threads as f64;
        let gbps = if threads == 1 || ceiling.level.is_private() {
            scaled
        } else {
            scaled.min(ceiling.gbps.all_cores.max(one_core))
        };
        (ceiling, gbps)
    }

    /// The roofline over `dag` for a kernel held to `kind` on `threads`
    /// threads.
    pub fn roofline(&self, dag: &ComputeDag, kind: ComputeKind, threads: usize) -> AppliedCeiling {
        let traffic = Traffic::of_dag(dag);
        let (level, bandwidth_gbps) = self.bandwidth(traffic.bytes, threads);
        let roofline = Roofline {
            compute_gflops: self.compute_gflops(kind, threads),
            bandwidth_gbps,
        };
        AppliedCeiling {
            compute_kind: kind,
            compute_isa: self.compute(kind).isa.clone(),
            compute_gflops: roofline.compute_gflops,
            memory_level: level.level,
            bandwidth_gbps,
            bound: roofline.bound(&traffic),
            attainable_gflops: roofline.attainable_gflops(traffic.intensity()),
            min_ms: roofline.min_seconds(&traffic) * 1e3,
        }
    }
}

impl AppliedCeiling {
    /// The fraction of these ceilings a run of `seconds` reaches (the least
    /// time over the time).
    pub fn fraction(&self, seconds: f64) -> f64 {
        self.min_ms * 1e-3 / seconds
    }
}

/// The levels to measure, innermost first: each with its capacity (per core
/// for private levels) and the bytes one thread streams over there (half
/// the level, so it stays resident; memory: four times the last level,
/// within bounds).
fn memory_levels(target: &Target) -> Vec<(MemoryLevel, Option<u64>, u64)> {
    let mut levels = Vec::new();
    for (level, number) in [
        (MemoryLevel::L1, 1),
        (MemoryLevel::L2, 2),
        (MemoryLevel::L3, 3),
    ] {
        if let Some(capacity) = target.data_cache_bytes(number) {
            levels.push((level, Some(capacity), capacity / 2));
        }
    }
    let last = target
        .data_cache_bytes(3)
        .or(target.data_cache_bytes(2))
        .unwrap_or(0);
    let memory = (4 * last).clamp(DRAM_BUFFER_MIN, DRAM_BUFFER_MAX);
    levels.push((MemoryLevel::Dram, None, memory));
    levels
}

/// The FMA rate of `run` (iterations → flops), one core and all cores.
fn compute_rate<F: Fn(u64) -> f64 + Sync>(run: F, cores: usize) -> Rate {
    let mut states = vec![(); cores];
    let per_core = sample_rates(&mut states[..1], |(), n| run(n));
    let all_cores = if cores > 1 {
        sample_rates(&mut states, |(), n| run(n))
    } else {
        per_core.clone()
    };
    rate_of(&per_core, &all_cores, 1e9)
}

/// The fastest streaming pattern of `level` on one core, and the fastest on
/// all cores.
fn bandwidth_ceiling(
    level: MemoryLevel,
    capacity_bytes: Option<u64>,
    buffer_bytes: u64,
    cores: usize,
) -> BandwidthCeiling {
    let shared_share = if level.is_private() {
        buffer_bytes
    } else {
        buffer_bytes / cores as u64
    };
    let mut single = vec![Streams::new(buffer_bytes)];
    let mut many: Vec<Streams> = (0..cores).map(|_| Streams::new(shared_share)).collect();
    let mut best: Option<(Pattern, Rate)> = None;
    for pattern in Pattern::ALL {
        let per_core = sample_rates(&mut single, |s, passes| s.run(pattern, passes));
        let all_cores = if cores > 1 {
            sample_rates(&mut many, |s, passes| s.run(pattern, passes))
        } else {
            per_core.clone()
        };
        let rate = rate_of(&per_core, &all_cores, 1e9);
        best = Some(match best {
            Some((p, b)) if b.per_core >= rate.per_core => (
                p,
                Rate {
                    all_cores: b.all_cores.max(rate.all_cores),
                    all_cores_median: b.all_cores_median.max(rate.all_cores_median),
                    ..b
                },
            ),
            Some((_, b)) => (
                pattern,
                Rate {
                    all_cores: b.all_cores.max(rate.all_cores),
                    all_cores_median: b.all_cores_median.max(rate.all_cores_median),
                    ..rate
                },
            ),
            None => (pattern, rate),
        });
    }
    let Some((pattern, gbps)) = best else {
        unreachable!("Pattern::ALL is not empty");
    };
    BandwidthCeiling {
        level,
        capacity_bytes,
        buffer_bytes,
        isa: single[0]
            .isa()
            .map_or("portable", |isa| isa.name())
            .to_string(),
        pattern: pattern.name().to_string(),
        gbps,
    }
}

/// The fastest and median of each list of rates, over `unit`.
fn rate_of(per_core: &[f64], all_cores: &[f64], unit: f64) -> Rate {
    let fastest = |rates: &[f64]| rates.iter().copied().fold(0.0, f64::max) / unit;
    Rate {
        per_core: fastest(per_core),
        per_core_median: median(per_core) / unit,
        all_cores: fastest(all_cores),
        all_cores_median: median(all_cores) / unit,
    }
}

/// [`SAMPLES`] rates of `run(state, units) → amount` on one thread per
/// state, all started together: the sum of the amounts over the slowest
/// thread's running time. `units` is first doubled until one run on the first state
/// lasts [`MIN_RUN`] (which also warms caches and clocks up).
fn sample_rates<S: Send>(states: &mut [S], run: impl Fn(&mut S, u64) -> f64 + Sync) -> Vec<f64> {
    let mut units = 1u64;
    loop {
        let watch = ThreadStopwatch::start();
        run(&mut states[0], units);
        if watch.seconds() >= MIN_RUN.as_secs_f64() || units >= 1 << 40 {
            break;
        }
        units *= 2;
    }
    (0..SAMPLES)
        .map(|_| {
            if let [state] = states {
                let watch = ThreadStopwatch::start();
                let amount = run(state, units);
                return amount / watch.seconds();
            }
            let barrier = Barrier::new(states.len());
            let results: Vec<(f64, f64)> = std::thread::scope(|scope| {
                let handles: Vec<_> = states
                    .iter_mut()
                    .map(|state| {
                        let (barrier, run) = (&barrier, &run);
                        scope.spawn(move || {
                            barrier.wait();
                            let watch = ThreadStopwatch::start();
                            let amount = run(state, units);
                            (amount, watch.seconds())
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or((0.0, f64::INFINITY)))
                    .collect()
            });
            let amount: f64 = results.iter().map(|r| r.0).sum();
            let slowest = results.iter().map(|r| r.1).fold(0.0, f64::max);
            amount / slowest
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(per_core: f64, all_cores: f64) -> Rate {
        Rate {
            per_core,
            per_core_median: per_core,
            all_cores,
            all_cores_median: all_cores,
        }
    }

    fn fake() -> Ceilings {
        let compute = |isa: &str, lanes, gflops| ComputeCeiling {
            isa: isa.to_string(),
            lanes,
            fused: true,
            gflops,
        };
        let level = |level, capacity_bytes, gbps| BandwidthCeiling {
            level,
            capacity_bytes,
            buffer_bytes: 0,
            isa: "avx2".to_string(),
            pattern: "triad".to_string(),
            gbps,
        };
        Ceilings {
            cpu_model: "test".to_string(),
            cores: 2,
            f32x4: compute("f32x4", 4, rate(50.0, 90.0)),
            widest: compute("avx2", 8, rate(100.0, 180.0)),
            bandwidth: vec![
                level(MemoryLevel::L1, Some(32 << 10), rate(200.0, 400.0)),
                level(MemoryLevel::L2, Some(512 << 10), rate(100.0, 200.0)),
                level(MemoryLevel::L3, Some(8 << 20), rate(60.0, 80.0)),
                level(MemoryLevel::Dram, None, rate(20.0, 25.0)),
            ],
            measure_seconds: 0.0,
        }
    }

    #[test]
    fn compute_ceilings_scale_with_threads_up_to_the_cores() {
        let c = fake();
        assert_eq!(c.compute_gflops(ComputeKind::F32x4, 1), 50.0);
        assert_eq!(c.compute_gflops(ComputeKind::F32x4, 2), 100.0);
        assert_eq!(c.compute_gflops(ComputeKind::Widest, 2), 200.0);
        assert_eq!(
            c.compute_gflops(ComputeKind::Widest, 8),
            200.0,
            "threads past the cores add nothing"
        );
    }

    #[test]
    fn a_workload_gets_the_bandwidth_of_the_level_that_holds_it() {
        let c = fake();
        let level_of = |bytes: f64, threads| {
            let (ceiling, gbps) = c.bandwidth(bytes, threads);
            (ceiling.level, gbps)
        };
        assert_eq!(level_of(16e3, 1), (MemoryLevel::L1, 200.0));
        assert_eq!(
            level_of(48e3, 1),
            (MemoryLevel::L1, 200.0),
            "within twice L1: held to L1"
        );
        assert_eq!(level_of(80e3, 1), (MemoryLevel::L2, 100.0));
        assert_eq!(
            level_of(48e3, 2),
            (MemoryLevel::L1, 400.0),
            "each thread's half fits L1"
        );
        assert_eq!(level_of(4e6, 1), (MemoryLevel::L3, 60.0));
        assert_eq!(
            level_of(4e6, 2),
            (MemoryLevel::L3, 80.0),
            "shared: capped by all cores"
        );
        assert_eq!(level_of(1e9, 2), (MemoryLevel::Dram, 25.0));
        assert_eq!(level_of(1e9, 1), (MemoryLevel::Dram, 20.0));
    }

    #[test]
    fn the_roofline_of_a_dag_takes_the_kind_and_the_level_that_apply() {
        let c = fake();
        let task =
            crate::measure::Task::from_registry("matmul", "M=256,N=256,K=256").expect("task");
        let gemm = c.roofline(task.dag(), ComputeKind::Widest, 1);
        assert_eq!(
            (gemm.bound, gemm.compute_isa.as_str()),
            (Bound::Compute, "avx2")
        );
        assert_eq!(
            gemm.memory_level,
            MemoryLevel::L2,
            "768 KiB: more than one L2, within twice it"
        );
        assert_eq!(gemm.attainable_gflops, 100.0);
        let flops = 2.0 * 256f64.powi(3);
        assert!((gemm.min_ms - flops / 100e9 * 1e3).abs() < 1e-9);
        assert!((gemm.fraction(2.0 * gemm.min_ms * 1e-3) - 0.5).abs() < 1e-12);
        let task = crate::measure::Task::from_registry("relu", "M=1024,N=1024").expect("task");
        let relu = c.roofline(task.dag(), ComputeKind::F32x4, 2);
        assert_eq!(
            (relu.bound, relu.memory_level),
            (Bound::Bandwidth, MemoryLevel::L3)
        );
        assert_eq!(relu.compute_isa, "f32x4");
        assert!((relu.min_ms - 8.0 * 1024.0 * 1024.0 / 80e9 * 1e3).abs() < 1e-9);
        let task = crate::measure::Task::from_registry("bias_add", "M=1024,N=1024").expect("task");
        let bias_add = c.roofline(task.dag(), ComputeKind::F32x4, 1);
        assert_eq!(
            bias_add.memory_level,
            MemoryLevel::L3,
            "8 MiB + 4 KiB: just over L3, most of it still hits there"
        );
        let task = crate::measure::Task::from_registry("relu", "M=4096,N=1024").expect("task");
        let big = c.roofline(task.dag(), ComputeKind::F32x4, 1);
        assert_eq!(big.memory_level, MemoryLevel::Dram, "32 MiB: four L3s");
    }
}
