//! Benchmarks as a library: compile a workload's chosen schedule (given,
//! cached or deployed), verify it against the default schedule, and time
//! it interleaved with its contenders (the best schedule without
//! micro-kernels, the schedule with constant inputs laid out ahead of time,
//! and the Rust GEMM crates) in the same run; the result is a typed
//! [`BenchReport`], which `tessera bench` prints as a table or as JSON.
//!
//! Placement: benching compiles (codegen), times and verifies (measure),
//! reads the tuning cache (db) and deployed artifacts (deploy), and reads
//! suite files (search); it is used by the command line only. So it stands
//! where graph/ does in the design's layering, between deploy and cli: it
//! is no part of measurement (which runs candidates in workers during the
//! search and must not import db or deploy), and no part of deploy (which
//! loads kernels and must not time peers).
//!
//! The GEMM crates are dependencies of the `cli` feature; without it the
//! peers are not timed and [`PeerGflops`] stays empty.

mod constants;
mod contender;
mod error;
#[cfg(feature = "cli")]
mod peers;
mod report;
mod schedule;
mod tensor_files;

pub use error::BenchError;
pub use report::{BenchReport, PeerGflops, SuiteBenchReport};
pub use schedule::{ScheduleSource, SourceKind};

use crate::codegen::{self, CodegenOptions, Kernel, OptLevel};
use crate::measure::ceilings::{Ceilings, ComputeKind, Traffic, host_ceilings};
use crate::measure::{Task, tolerance};
use crate::ops;
use crate::runtime::{self, Target};
use crate::schedule::{State, calls_micro_kernel};
use crate::search::Suite;
use crate::tir;

use contender::{Contender, time_interleaved};

/// How to bench.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Where the schedule to time comes from.
    pub schedule: ScheduleSource,
    /// Threads for parallel loops (and the `gemm` crate).
    pub threads: usize,
    /// Cranelift's optimisation level.
    pub opt_level: OptLevel,
    /// Bit-stable floating point: no FMA contraction.
    pub strict_fp: bool,
    /// Timing repeats (interleaved; the default schedule gets at most 3).
    pub repeat: usize,
    /// Inputs that are constant weights: the schedule is also timed with
    /// them laid out ahead of time, as `Library::kernel_with_constants`
    /// loads it.
    pub constants: Vec<String>,
    /// The machine the kernels are compiled for (its micro-kernel ISA).
    pub target: Target,
    /// A folder to write the inputs and the timed kernel's outputs into
    /// (`.npy` files and `io.json`), to compare another engine on them.
    pub save_io: Option<std::path::PathBuf>,
}

/// A benchmark session: the options, the runtime's threads set to them, and
/// the machine's ceilings (measured once per process) that every workload's
/// fractions are taken of.
#[derive(Debug)]
pub struct Bench {
    options: BenchOptions,
    ceilings: &'static Ceilings,
}

impl Bench {
    /// Sets the runtime's threads to `options.threads` and measures the
    /// machine's ceilings (once per process).
    pub fn new(options: BenchOptions) -> Result<Bench, BenchError> {
        runtime::set_num_threads(options.threads);
        let ceilings = host_ceilings()?;
        Ok(Bench { options, ceilings })
    }

    /// The machine's ceilings.
    pub fn ceilings(&self) -> &'static Ceilings {
        self.ceilings
    }

    /// The options.
    pub fn options(&self) -> &BenchOptions {
        &self.options
    }

    /// Every workload of `suite`, each labelled.
    pub fn suite(&self, suite: &Suite) -> Result<SuiteBenchReport, BenchError> {
        let mut workloads = Vec::new();
        for w in &suite.workloads {
            let mut report = self.workload(&w.op, &w.shape)?;
            report.label = Some(w.label.clone());
            workloads.push(report);
        }
        Ok(SuiteBenchReport {
            suite: suite.name.clone(),
            threads: self.options.threads,
            workloads,
        })
    }

    /// Benches operator `op_name` at `shape_text` (`K=V,…`): the chosen
    /// schedule, verified against the default one, both timed, and its
    /// contenders timed interleaved with it.
    pub fn workload(&self, op_name: &str, shape_text: &str) -> Result<BenchReport, BenchError> {
        let op = ops::find(op_name)?;
        let shape = op.parse_shape(shape_text)?;
        let task = Task::from_registry(op.name, &shape.to_text())?;
        let options = &self.options;
        let resolved = schedule::resolve(&options.schedule, &task, &options.target)?;
        let tuned_func = tir::lower(&resolved.state)?;
        let compute_kind = ComputeKind::of_kernel(&tuned_func);
        let tuned_kernel = self.compile_func(&tuned_func)?;
        let plain_kernel = match schedule::best_plain(&options.schedule, &task) {
            Some(plain) if calls_micro_kernel(resolved.state.steps()) => {
                Some(self.compile(&plain)?)
            }
            _ => None,
        };
        let default_kernel = self.compile(&State::new(task.dag()))?;
        let inputs = task.inputs();
        let mut tuned = Contender::run_once(tuned_kernel, &inputs)?;
        let mut default = Contender::run_once(default_kernel, &inputs)?;
        let mut error = tuned.error_against(&default);
        let mut prepacked = match constants::prepacked(
            task.dag(),
            &resolved.state,
            &options.constants,
            &inputs,
            &self.codegen_options(),
        )? {
            Some((kernel, packed)) => {
                let contender = Contender::run_once(kernel, &packed)?;
                error = error.max(contender.error_against(&default));
                Some(contender)
            }
            None => None,
        };
        let mut plain = match plain_kernel {
            Some(kernel) => {
                let contender = Contender::run_once(kernel, &inputs)?;
                error = error.max(contender.error_against(&default));
                Some(contender)
            }
            None => None,
        };
        let tolerance = tolerance(&task);
        if error > tolerance {
            return Err(BenchError::Verification { error, tolerance });
        }
        if let Some(dir) = &options.save_io {
            tensor_files::save(dir, task.dag(), &inputs, &tuned.outputs())?;
        }
        warn_if_debug_build();
        let flops = task.dag().flop_count() as f64;
        let default_gflops = flops / default.time_alone(options.repeat.min(3))?.median() / 1e9;

        #[cfg(feature = "cli")]
        let mut peer_runs = {
            let get = |name: &str| {
                shape
                    .values()
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or(1, |(_, v)| *v as usize)
            };
            let output_shape = &tuned.kernel.params()[tuned.kernel.num_inputs()].shape;
            peers::PeerRuns::new(op.name, &get, &inputs, output_shape, options.threads)?
        };

        // The tuned kernel, the tuned plain one, the prepacked one and the peers, interleaved.
        let mut names = vec!["tuned"];
        let mut runs: Vec<Box<dyn FnMut() + '_>> = vec![tuned.timed_run()];
        for (name, contender) in [("plain", plain.as_mut()), ("prepacked", prepacked.as_mut())] {
            if let Some(contender) = contender {
                names.push(name);
                runs.push(contender.timed_run());
            }
        }
        #[cfg(feature = "cli")]
        for (name, run) in peer_runs.iter_mut().flat_map(peers::PeerRuns::runs) {
            names.push(name);
            runs.push(run);
        }
        let timings = time_interleaved(options.repeat, &mut runs);
        drop(runs);
        let gflops_of = |name: &str| {
            names
                .iter()
                .position(|n| *n == name)
                .map(|i| flops / timings[i].median() / 1e9)
        };
        let timed = &timings[0];
        let gflops = flops / timed.median() / 1e9;
        let threads = options.threads;
        let traffic = Traffic::of_dag(task.dag());
        let ceiling = self.ceilings.roofline(task.dag(), compute_kind, threads);
        let roofline = self
            .ceilings
            .roofline(task.dag(), ComputeKind::Widest, threads);
        let fraction_of_ceiling = ceiling.fraction(timed.median());
        let fraction_of_roofline = roofline.fraction(timed.median());
        warn_if_above_a_ceiling(op.name, fraction_of_ceiling.max(fraction_of_roofline));
        Ok(BenchReport {
            label: None,
            op: op.name.to_string(),
            shape: shape.to_text(),
            workload: task.key().to_string(),
            threads,
            opt_level: options.opt_level,
            strict_fp: options.strict_fp,
            source: resolved.kind,
            source_reason: resolved.reason,
            gflops,
            record_gflops: resolved.record_gflops,
            median_ms: timed.median() * 1e3,
            min_ms: timed.min() * 1e3,
            peak_gflops: ceiling.attainable_gflops,
            peak_fraction: fraction_of_ceiling,
            native_isa: roofline.compute_isa.clone(),
            native_peak_gflops: roofline.attainable_gflops,
            native_peak_fraction: fraction_of_roofline,
            arithmetic_intensity: traffic.intensity(),
            min_bytes: traffic.bytes,
            fraction_of_ceiling,
            fraction_of_roofline,
            ceiling,
            roofline,
            machine_ceilings: self.ceilings.clone(),
            compile_ms: tuned.kernel.compile_time().as_secs_f64() * 1e3,
            default_gflops,
            untuned_gflops: default_gflops,
            tolerance,
            max_rel_error: error,
            plain_gflops: gflops_of("plain"),
            constants: options.constants.clone(),
            prepacked_gflops: gflops_of("prepacked"),
            peers: PeerGflops {
                gemm: gflops_of("gemm"),
                matrixmultiply: gflops_of("matrixmultiply"),
            },
        })
    }

    fn compile(&self, state: &State) -> Result<Kernel, BenchError> {
        self.compile_func(&tir::lower(state)?)
    }

    fn compile_func(&self, func: &tir::PrimFunc) -> Result<Kernel, BenchError> {
        Ok(codegen::compile(func, &self.codegen_options())?)
    }

    fn codegen_options(&self) -> CodegenOptions {
        CodegenOptions {
            opt_level: self.options.opt_level,
            strict_fp: self.options.strict_fp,
            ..CodegenOptions::for_target(self.options.target)
        }
    }
}

/// A fraction above 1 means a ceiling is not the upper bound it must be:
/// said on stderr, never clamped.
fn warn_if_above_a_ceiling(op: &str, fraction: f64) {
    if fraction > 1.0 {
        eprintln!(
            "warning: {op} ran at {:.0}% of a measured ceiling; the ceiling is no upper bound here \
             (see docs/benchmarks.md, \"Ceilings\"): please report it",
            fraction * 100.0
        );
    }
}

fn warn_if_debug_build() {
    if cfg!(debug_assertions) {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            eprintln!(
                "warning: this is a debug build of tessera; timings are not representative (build with --release)"
            )
        });
    }
}
