//! `tessera bench`: the command line of [`crate::bench`] (compile the best
//! cached, deployed or given schedule, verify it, time it against the
//! default schedule and the Rust GEMM peers in the same run; one workload
//! or a whole suite), printed as text or JSON; with `--ceilings`, the
//! machine's measured compute and bandwidth ceilings alone.

use std::fmt::Write;
use std::path::PathBuf;

use super::error::CliError;
use crate::bench::{Bench, BenchOptions, BenchReport, ScheduleSource, SourceKind};
use crate::codegen::OptLevel;
use crate::db;
use crate::measure::ceilings::{AppliedCeiling, Ceilings, host_ceilings};
use crate::runtime::{self, Target};
use crate::search::Suite;

/// `--opt-level` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum OptArg {
    None,
    Speed,
}

/// `tessera bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// The operator (see `tessera ops`); leave out with --suite or --ceilings.
    #[arg(required_unless_present_any = ["suite", "ceilings"])]
    op: Option<String>,
    /// Shape parameters, e.g. `M=1024,N=1024,K=1024`.
    #[arg(long, default_value = "")]
    shape: String,
    /// A JSON step list to time instead of the best cached schedule.
    #[arg(long, conflicts_with_all = ["from", "suite"])]
    schedule: Option<PathBuf>,
    /// The tuning database the best schedule comes from (default: $TESSERA_DB
    /// or tuning_logs/tuning.db).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Load the kernel from a schedules folder written by `tessera deploy`
    /// instead of the database.
    #[arg(long, conflicts_with = "db")]
    from: Option<PathBuf>,
    /// Bench every workload of a suite file (see suites/) into one table.
    #[arg(long, conflicts_with = "op")]
    suite: Option<PathBuf>,
    /// Measure and print only the machine's ceilings: the f32 FMA
    /// throughput of register-only loops (Cranelift's f32x4, the widest ISA)
    /// and the streaming bandwidth of each memory level, per core and for
    /// all cores.
    #[arg(long, conflicts_with_all = ["op", "suite"])]
    ceilings: bool,
    /// Threads for parallel loops (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Cranelift optimisation level.
    #[arg(long, value_enum, default_value_t = OptArg::Speed)]
    opt_level: OptArg,
    /// Timing repeats.
    #[arg(long, default_value_t = 7)]
    repeat: usize,
    /// Bit-stable floating point: no FMA contraction.
    #[arg(long)]
    strict_fp: bool,
    /// Inputs that are constant weights (comma-separated, e.g. `weight`):
    /// also time the schedule with them laid out ahead of time (its packing
    /// copies of them removed), as `Library::kernel_with_constants` loads it.
    /// A constant the schedule reads where it is has nothing to lay out.
    #[arg(long, value_delimiter = ',', conflicts_with = "suite")]
    constants: Vec<String>,
    /// Write the inputs and the timed kernel's outputs into this folder
    /// (`NAME.npy` per tensor and `io.json` listing them in argument
    /// order), to run another engine on the same inputs and compare.
    #[arg(long, conflicts_with = "suite")]
    save_io: Option<PathBuf>,
}

impl BenchArgs {
    fn options(&self, target: &Target) -> Result<BenchOptions, CliError> {
        let schedule = match (&self.schedule, &self.from) {
            (Some(path), _) => ScheduleSource::Steps {
                path: path.clone(),
                steps: super::commands::read_steps(path)?,
            },
            (None, Some(dir)) => ScheduleSource::Deployed(dir.clone()),
            (None, None) => {
                ScheduleSource::Database(self.db.clone().unwrap_or_else(db::default_path))
            }
        };
        Ok(BenchOptions {
            schedule,
            threads: self.threads.unwrap_or_else(runtime::num_threads),
            opt_level: match self.opt_level {
                OptArg::None => OptLevel::None,
                OptArg::Speed => OptLevel::Speed,
            },
            strict_fp: self.strict_fp,
            repeat: self.repeat,
            constants: self.constants.clone(),
            target: *target,
            save_io: self.save_io.clone(),
        })
    }
}

/// `tessera bench`.
pub(crate) fn bench(args: &BenchArgs, target: &Target) -> Result<String, CliError> {
    if args.ceilings {
        let ceilings = host_ceilings().map_err(crate::bench::BenchError::from)?;
        if args.json {
            return Ok(format!("{}\n", serde_json::json!(ceilings)));
        }
        return Ok(render_ceilings(ceilings));
    }
    let bench = Bench::new(args.options(target)?)?;
    if let Some(path) = &args.suite {
        let suite = Suite::load(path)?;
        let report = bench.suite(&suite)?;
        if args.json {
            return Ok(format!("{}\n", report.to_json()));
        }
        return Ok(render_suite(
            &report.suite,
            report.threads,
            &report.workloads,
        ));
    }
    let op = args.op.as_deref().unwrap_or_default();
    let report = bench.workload(op, &args.shape)?;
    if args.json {
        return Ok(format!("{}\n", report.to_json()));
    }
    Ok(render(&report))
}

/// The text report of one workload.
fn render(report: &BenchReport) -> String {
    let gflops = report.gflops;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} [{}], {} thread(s), opt_level {}",
        report.op,
        report.shape,
        report.threads,
        format!("{:?}", report.opt_level).to_lowercase(),
    );
    let _ = writeln!(
        out,
        "  schedule         {}: {}",
        report.source.label(),
        report.source_reason
    );
    let _ = writeln!(
        out,
        "  verified against the default schedule: max rel. error {:.2e} (tolerance {:.1e})",
        report.max_rel_error, report.tolerance
    );
    let _ = writeln!(out, "  compile          {:8.2} ms", report.compile_ms);
    let _ = writeln!(
        out,
        "  time             {:8.3} ms median, {:.3} ms min",
        report.median_ms, report.min_ms
    );
    let _ = writeln!(out, "  tuned            {gflops:8.2} GFLOP/s");
    if let Some(recorded) = report.record_gflops.filter(|g| !g.is_nan()) {
        let _ = writeln!(
            out,
            "  when tuned       {recorded:8.2} GFLOP/s (now / then = {:.2})",
            gflops / recorded
        );
    }
    let _ = writeln!(
        out,
        "  intensity        {:8.2} flops/byte ({:.0} bytes in and out at the least)",
        report.arithmetic_intensity, report.min_bytes
    );
    let _ = writeln!(
        out,
        "  ceiling          {} (the one that applies to this code)",
        describe_applied(&report.ceiling, report.fraction_of_ceiling)
    );
    let _ = writeln!(
        out,
        "  roofline         {} (the machine's best)",
        describe_applied(&report.roofline, report.fraction_of_roofline)
    );
    let _ = writeln!(
        out,
        "  default          {:8.2} GFLOP/s (tuned is {:.1}x)",
        report.default_gflops,
        report.speedup()
    );
    match report.prepacked_gflops {
        Some(prepacked) => {
            let _ = writeln!(
                out,
                "  prepacked        {prepacked:8.2} GFLOP/s ({} laid out ahead of time; prepacked / tuned = {:.2})",
                report.constants.join(", "),
                prepacked / gflops
            );
        }
        None if !report.constants.is_empty() => {
            let _ = writeln!(
                out,
                "  prepacked        –  ({}: the schedule reads them where they are, nothing to lay out)",
                report.constants.join(", ")
            );
        }
        None => {}
    }
    if let Some(plain) = report.plain_gflops {
        let _ = writeln!(
            out,
            "  tuned plain      {plain:8.2} GFLOP/s (best schedule without micro-kernels; tuned / plain = {:.2})",
            gflops / plain
        );
    }
    for (name, peer) in report.peers.measured() {
        let _ = writeln!(
            out,
            "  {name:<16} {peer:8.2} GFLOP/s (tuned / {name} = {:.2})",
            gflops / peer
        );
    }
    out
}

/// One applied ceiling in words: which bound, its figure, the fraction.
fn describe_applied(ceiling: &AppliedCeiling, fraction: f64) -> String {
    let (what, bound) = match ceiling.bound {
        crate::measure::ceilings::Bound::Compute => (
            format!(
                "{} FMA {:.1} GFLOP/s",
                ceiling.compute_isa, ceiling.compute_gflops
            ),
            "compute",
        ),
        crate::measure::ceilings::Bound::Bandwidth => (
            format!(
                "{} bandwidth {:.1} GB/s",
                ceiling.memory_level.name(),
                ceiling.bandwidth_gbps
            ),
            "bandwidth",
        ),
    };
    format!(
        "{:5.1}% of {:.2} GFLOP/s attainable: {bound}-bound, {what}",
        100.0 * fraction,
        ceiling.attainable_gflops
    )
}

/// The ceiling in a table cell: `f32x4` or `avx2` when compute-bound, the
/// memory level when bandwidth-bound.
fn ceiling_label(ceiling: &AppliedCeiling) -> &str {
    match ceiling.bound {
        crate::measure::ceilings::Bound::Compute => &ceiling.compute_isa,
        crate::measure::ceilings::Bound::Bandwidth => ceiling.memory_level.name(),
    }
}

/// The text report of `--ceilings`.
fn render_ceilings(c: &Ceilings) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ceilings of {} ({} cores), measured in {:.2} s: the fastest of several runs (median in brackets)",
        c.cpu_model, c.cores, c.measure_seconds
    );
    let _ = writeln!(
        out,
        "{:<22} {:>20} {:>22}",
        "f32 FMA", "GFLOP/s one core", "GFLOP/s all cores"
    );
    for (label, ceiling) in [("Cranelift", &c.f32x4), ("widest", &c.widest)] {
        let r = &ceiling.gflops;
        let _ = writeln!(
            out,
            "{:<22} {:>9.1} ({:>8.1}) {:>10.1} ({:>8.1})",
            format!(
                "{label} {}{}",
                ceiling.isa,
                if ceiling.fused { "" } else { " (mul+add)" }
            ),
            r.per_core,
            r.per_core_median,
            r.all_cores,
            r.all_cores_median
        );
    }
    let _ = writeln!(
        out,
        "{:<22} {:>20} {:>22}",
        "bandwidth (read+write)", "GB/s one core", "GB/s all cores"
    );
    for b in &c.bandwidth {
        let r = &b.gbps;
        let capacity = b
            .capacity_bytes
            .map_or(String::new(), |bytes| format!(" of {} KiB", bytes >> 10));
        let _ = writeln!(
            out,
            "{:<22} {:>9.1} ({:>8.1}) {:>10.1} ({:>8.1})  {} {}, {} KiB{capacity} per thread",
            b.level.name(),
            r.per_core,
            r.per_core_median,
            r.all_cores,
            r.all_cores_median,
            b.isa,
            b.pattern,
            b.buffer_bytes >> 10,
        );
    }
    let _ = writeln!(
        out,
        "machine balance (widest, one core, dram): {:.1} flops/byte",
        c.widest.gflops.per_core / c.bandwidth.last().map_or(f64::NAN, |b| b.gbps.per_core)
    );
    out
}

/// The text table of a suite: one line per workload, then why any fell back.
fn render_suite(name: &str, threads: usize, reports: &[BenchReport]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "suite {} ({} workloads), {} thread(s)",
        name,
        reports.len(),
        threads
    );
    let _ = writeln!(
        out,
        "{:<14} {:<48} {:>8} {:>9} {:>9} {:>8} {:>9} {:>8} {:>18} {:>9}",
        "label",
        "workload",
        "source",
        "GFLOP/s",
        "default",
        "speedup",
        "recorded",
        "gemm",
        "of ceiling",
        "roofline"
    );
    let fmt = |v: Option<f64>| match v {
        Some(v) if v.is_finite() => format!("{v:.2}"),
        _ => "-".into(),
    };
    for r in reports {
        let _ = writeln!(
            out,
            "{:<14} {:<48} {:>8} {:>9} {:>9} {:>7.1}x {:>9} {:>8} {:>18} {:>8.1}%",
            r.label.as_deref().unwrap_or_default(),
            r.workload,
            r.source.label(),
            fmt(Some(r.gflops)),
            fmt(Some(r.default_gflops)),
            r.speedup(),
            fmt(r.record_gflops),
            fmt(r.peers.gemm),
            format!(
                "{:.1}% {}",
                100.0 * r.fraction_of_ceiling,
                ceiling_label(&r.ceiling)
            ),
            100.0 * r.fraction_of_roofline,
        );
    }
    for r in reports.iter().filter(|r| r.source == SourceKind::Fallback) {
        let _ = writeln!(
            out,
            "  {}: {}",
            r.label.as_deref().unwrap_or_default(),
            r.source_reason
        );
    }
    out
}
