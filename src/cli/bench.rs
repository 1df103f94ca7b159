//! `tessera bench`: the command line of [`crate::bench`] (compile the best
//! cached, deployed or given schedule, verify it, time it against the
//! default schedule and the Rust GEMM peers in the same run; one workload
//! or a whole suite), printed as text or JSON.

use std::fmt::Write;
use std::path::PathBuf;

use super::error::CliError;
use crate::bench::{Bench, BenchOptions, BenchReport, ScheduleSource, SourceKind};
use crate::codegen::{OptLevel, peak};
use crate::db;
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
    /// The operator (see `tessera ops`); leave out with --suite.
    #[arg(required_unless_present = "suite")]
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
    let peak_gflops = report.peak_gflops;
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
        "  peak f32x4 FMA   {peak_gflops:8.2} GFLOP/s = {:.2} GHz (measured) x {} FMA/cycle x 4 lanes x 2 flops x {} core(s); fraction {:.1}%",
        report.clock_ghz,
        peak::FMA_PIPES,
        report.threads,
        100.0 * gflops / peak_gflops
    );
    let native_peak = report.native_peak_gflops;
    let _ = writeln!(
        out,
        "  peak {:<6} FMA  {native_peak:8.2} GFLOP/s (the widest vector ISA here, nominal: 2 FMA/cycle x lanes x 2 flops x cores); fraction {:.1}%",
        report.native_isa,
        100.0 * gflops / native_peak
    );
    let _ = writeln!(
        out,
        "  default          {:8.2} GFLOP/s (tuned is {:.1}x)",
        report.default_gflops,
        report.speedup()
    );
    if let Some(prepacked) = report.prepacked_gflops {
        let _ = writeln!(
            out,
            "  prepacked        {prepacked:8.2} GFLOP/s ({} laid out ahead of time; prepacked / tuned = {:.2})",
            report.constants.join(", "),
            prepacked / gflops
        );
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
        "{:<14} {:<48} {:>8} {:>9} {:>9} {:>8} {:>9} {:>8}",
        "label", "workload", "source", "GFLOP/s", "default", "speedup", "recorded", "gemm"
    );
    let fmt = |v: Option<f64>| match v {
        Some(v) if v.is_finite() => format!("{v:.2}"),
        _ => "-".into(),
    };
    for r in reports {
        let _ = writeln!(
            out,
            "{:<14} {:<48} {:>8} {:>9} {:>9} {:>7.1}x {:>9} {:>8}",
            r.label.as_deref().unwrap_or_default(),
            r.workload,
            r.source.label(),
            fmt(Some(r.gflops)),
            fmt(Some(r.default_gflops)),
            r.speedup(),
            fmt(r.record_gflops),
            fmt(r.peers.gemm),
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
