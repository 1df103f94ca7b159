//! `tessera ci`: the job that produces tuned artifacts (see [`crate::ci`]).

use std::fmt::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use super::error::CliError;
use super::search_flags::SearchFlags;
use super::tune::{progress_bar, show_remeasure, stop_on_ctrl_c};
use crate::ci::{self, Budget, CiOptions, CiReport, Shard};
use crate::cost;
use crate::runtime::Target;
use crate::search::{SearchOptions, Suite, TuneEvent};

/// `tessera ci` options.
#[derive(Debug, clap::Args)]
pub(crate) struct CiArgs {
    /// The suite to tune (see suites/README.md).
    #[arg(long, value_name = "FILE", required_unless_present = "onnx")]
    suite: Option<PathBuf>,
    /// Tune an ONNX model's tasks instead of a suite, then deploy its
    /// model artifact into OUT/schedules/<device>/models/ and report its
    /// end-to-end latency before and after (OUT/model_report.json).
    /// (`--model` names the search's cost model.)
    #[arg(long, value_name = "FILE.onnx", conflicts_with_all = ["suite", "shard"])]
    onnx: Option<PathBuf>,
    /// The output folder: database, log, schedules, cost model, report.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Candidates per workload, counting earlier runs' (a second run with a
    /// larger number continues where the first stopped).
    #[arg(long, value_name = "N")]
    trials_per_task: Option<usize>,
    /// Wall time of tuning, e.g. `20m`, `1h30m` (stops after the batch in flight).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    time_budget: Option<std::time::Duration>,
    /// The database to resume from and record into (default: OUT/tuning.db;
    /// another path is copied to OUT/tuning.db at the end).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Seed of the scheduler and the searches.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Tune the i-th of n shares of the suite (round robin in suite order).
    #[arg(long, value_name = "i/n", default_value = "1/1")]
    shard: Shard,
    /// The schedules folder to compare with (default: OUT/schedules as found).
    #[arg(long, value_name = "DIR")]
    baseline: Option<PathBuf>,
    /// A workload regresses when its new schedule is slower than the
    /// baseline's by more than this fraction.
    #[arg(long, default_value_t = 0.10)]
    regression_tolerance: f64,
    /// Exit 0 even when workloads regressed (they are still reported).
    #[arg(long)]
    allow_regression: bool,
    /// Learner of the retrained model written to OUT/cost_model/.
    #[arg(long, default_value = cost::DEFAULT_LEARNER)]
    learner: String,
    /// Candidates per scheduler round.
    #[arg(long, default_value_t = 16)]
    batch_size: usize,
    /// Print report.json instead of the summary.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    flags: SearchFlags,
}

/// `tessera ci`.
pub(crate) fn ci(args: &CiArgs, target: &Target) -> Result<String, CliError> {
    let timeout = args.flags.timeout()?;
    if args.batch_size == 0 {
        return Err(CliError::Usage("--batch-size must be at least 1".into()));
    }
    let (suite, suite_file) = match (&args.suite, &args.onnx) {
        (_, Some(model)) => (ci::model_suite(model)?, model.clone()),
        (Some(file), None) => (ci::CiTasks::of_suite(&Suite::load(file)?)?, file.clone()),
        (None, None) => {
            return Err(CliError::Usage(
                "give --suite FILE or --onnx FILE.onnx".into(),
            ));
        }
    };
    let options = CiOptions {
        suite_file,
        out: args.out.clone(),
        db: args.db.clone(),
        budget: Budget {
            trials_per_task: args.trials_per_task,
            time: args.time_budget,
        },
        seed: args.seed,
        shard: args.shard,
        baseline: args.baseline.clone(),
        regression_tolerance: args.regression_tolerance,
        learner: args.learner.clone(),
        batch_size: args.batch_size,
        search: SearchOptions::default(),
        remeasure: args.flags.remeasure()?,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    // Unknown learners fail before anything is tuned.
    cost::new_learner(&options.learner)?;
    let schedules = args
        .baseline
        .clone()
        .unwrap_or(args.out.join(ci::SCHEDULES_DIR));
    let before = args
        .onnx
        .as_ref()
        .map(|m| ci::model_latency(m, &schedules))
        .transpose()?;
    let mut model = args.flags.model(args.seed)?;
    let mut measurer = args.flags.measurer(timeout, target)?;
    let stop = stop_on_ctrl_c();
    let bar = match args.trials_per_task {
        Some(n) => progress_bar(n * suite.tasks.len().div_ceil(args.shard.count), ""),
        None => progress_bar(0, ""),
    };
    let report = ci::run_ci(
        &suite,
        &options,
        &mut measurer,
        model.as_mut(),
        &|event| match event {
            TuneEvent::Batch {
                trials,
                budget,
                task,
                best_gflops,
            } => {
                if budget < usize::MAX / 4 {
                    bar.set_length(budget as u64);
                }
                bar.set_position(trials as u64);
                if !task.is_empty() {
                    bar.set_message(format!("{task} {best_gflops:.2} GFLOP/s"));
                }
            }
            TuneEvent::Remeasure { done, total, task } => show_remeasure(&bar, done, total, task),
        },
        &|stage| bar.println(format!("ci: {stage}")),
        &stop,
    );
    bar.finish_and_clear();
    let report = report?;
    let files = ci::write_report(&report)?;
    let model_report = match (&args.onnx, before) {
        (Some(path), Some(before)) => Some(ci::finish_model(
            path,
            &report.outputs.db,
            &crate::runtime::host_device().key(),
            &args.out.join(ci::SCHEDULES_DIR),
            &args.out,
            before,
        )?),
        _ => None,
    };
    let text = if args.json {
        std::fs::read_to_string(report.outputs.dir.join(ci::REPORT_JSON)).map_err(|source| {
            CliError::Read {
                path: report.outputs.dir.join(ci::REPORT_JSON),
                source,
            }
        })?
    } else {
        let mut text = summary(&report, &files);
        if let Some(m) = &model_report {
            let _ = writeln!(
                text,
                "latency   {:.3} ms ({}) -> {:.3} ms with the model artifact ({:.2}x; median of {} runs; {} kernels tuned, {} default)",
                m.before_ms,
                m.before_from,
                m.after_ms,
                m.speedup(),
                m.runs,
                m.tuned_kernels,
                m.default_kernels
            );
            let _ = writeln!(text, "artifact  {}", m.artifact.display());
            let _ = writeln!(
                text,
                "report    {}",
                args.out.join(ci::MODEL_REPORT_JSON).display()
            );
        }
        text
    };
    let regressed = report.regressions();
    if stop.load(Ordering::Relaxed) {
        eprintln!("ci: stopped by Ctrl-C; everything measured is kept and published");
    }
    if !regressed.is_empty() && !args.allow_regression {
        return Err(CliError::CheckFailed {
            report: text,
            summary: format!(
                "{} workload(s) regressed against the baseline ({}); see {} (--allow-regression publishes anyway)",
                regressed.len(),
                regressed
                    .iter()
                    .map(|w| w.label.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                report.outputs.dir.join(ci::REPORT_MD).display()
            ),
        });
    }
    Ok(text)
}

fn summary(report: &CiReport, files: &[PathBuf]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "suite     {} shard {} ({} of {} workloads)",
        report.suite,
        report.shard,
        report.workloads.len(),
        report.suite_workloads
    );
    let _ = writeln!(out, "device    {}", report.device);
    let _ = writeln!(out, "budget    {}", report.budget);
    let _ = writeln!(
        out,
        "tuned     {} trials this run in {:.1} s{}",
        report.trials_this_run,
        report.tuning_s,
        report
            .tuning_note
            .as_ref()
            .map_or(String::new(), |n| format!(" ({n})"))
    );
    let width = report
        .workloads
        .iter()
        .map(|w| w.label.len())
        .fold(8, usize::max);
    let _ = writeln!(
        out,
        "\n{:<width$}  {:>9}  {:>9}  {:>8}  {:>6}  {:>9}  vs baseline",
        "workload", "default", "tuned", "speed-up", "trials", "baseline"
    );
    let number = |g: Option<f64>| g.map_or("-".to_string(), |g| format!("{g:.2}"));
    for w in &report.workloads {
        let _ = writeln!(
            out,
            "{:<width$}  {:>9}  {:>9}  {:>8}  {:>6}  {:>9}  {}{}",
            w.label,
            number(w.default_gflops),
            number(w.tuned_gflops),
            w.speedup().map_or("-".to_string(), |s| format!("{s:.1}x")),
            w.trials,
            number(w.baseline_gflops()),
            w.comparison.describe(),
            if w.regressed {
                "  REGRESSED".to_string()
            } else {
                w.note
                    .as_ref()
                    .map_or(String::new(), |n| format!("  ({n})"))
            }
        );
    }
    let _ = writeln!(
        out,
        "\nGFLOP/s measured at the end of the run, default and tuned one after the other"
    );
    let o = &report.outputs;
    let _ = writeln!(out, "database  {}", o.db.display());
    let _ = writeln!(out, "log       {}", o.log.display());
    let _ = writeln!(out, "schedules {}", o.schedules.display());
    if let Some(m) = &o.model {
        let _ = writeln!(out, "model     {}", m.display());
    }
    for f in files {
        let _ = writeln!(out, "report    {}", f.display());
    }
    out
}
