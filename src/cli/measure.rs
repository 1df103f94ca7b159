//! `tessera measure`: measure candidates of an operator in worker processes
//! (schedule files and/or random valid schedules) and report each result
//! and the throughput of measurement.

use std::fmt::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::json;

use super::error::CliError;
use crate::codegen::CodegenOptions;
use crate::db::{self, TuningDb};
use crate::measure::{
    CacheFlush, MeasureErrorKind, MeasureOptions, MeasureResult, Measurer, Task, TimingOptions,
};
use crate::runtime::{Target, host_device};
use crate::schedule::{State, Step, random::random_schedule};

/// What to measure and how (`tessera measure --help`).
#[derive(Debug, clap::Args)]
pub(crate) struct MeasureArgs {
    /// The operator (see `tessera ops`).
    op: String,
    /// Shape parameters, e.g. `M=256,N=256,K=256`.
    #[arg(long, default_value = "")]
    shape: String,
    /// JSON step lists to measure (repeatable).
    #[arg(long = "schedule")]
    schedules: Vec<PathBuf>,
    /// Also measure this many random valid schedules.
    #[arg(long, default_value_t = 0)]
    random: usize,
    /// Steps per random schedule.
    #[arg(long, default_value_t = 8)]
    steps: usize,
    /// Seed of the random schedules.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Worker processes (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Threads per kernel (default: all cores; with --concurrent-runs, cores / workers).
    #[arg(long)]
    threads: Option<usize>,
    /// Time candidates on all workers at once (faster, noisier).
    #[arg(long)]
    concurrent_runs: bool,
    /// Seconds a candidate may take to build.
    #[arg(long, default_value_t = 15.0)]
    build_timeout: f64,
    /// Seconds a candidate may take to run (verification, warm-up, repeats).
    #[arg(long, default_value_t = 10.0)]
    run_timeout: f64,
    /// Untimed runs before timing.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Runs per timed repeat (raised to reach --min-repeat-ms).
    #[arg(long, default_value_t = 1)]
    number: usize,
    /// Timed repeats.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Shortest duration of a repeat, in milliseconds.
    #[arg(long, default_value_t = 50.0)]
    min_repeat_ms: f64,
    /// Evict the inputs from the CPU caches before each timed run (the
    /// eviction is not timed): every run reads its inputs from memory.
    #[arg(long)]
    flush_cache: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// The tuning database the results are recorded in (default:
    /// TESSERA_DB, else tuning_logs/tuning.db).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Do not record the results.
    #[arg(long)]
    no_record: bool,
    /// Candidates per measured batch; each batch is recorded in one transaction.
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
}

/// `value` seconds, which must be positive (`--name` in the message).
pub(crate) fn seconds(name: &str, value: f64) -> Result<Duration, CliError> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--{name} must be a positive number of seconds, not {value}"
            ))
        })
}

/// `tessera measure`.
pub(crate) fn measure(args: &MeasureArgs, target: &Target) -> Result<String, CliError> {
    let task = Task::from_registry(&args.op, &args.shape)?;
    let mut states = Vec::new();
    for path in &args.schedules {
        states.push(super::commands::load_state(task.dag(), Some(path))?);
    }
    let mut rng = StdRng::seed_from_u64(args.seed);
    states.extend((0..args.random).map(|_| random_schedule(task.dag(), &mut rng, args.steps)));
    if states.is_empty() {
        return Err(CliError::Usage(
            "nothing to measure: give --schedule FILE and/or --random N".into(),
        ));
    }
    let defaults = MeasureOptions::default();
    let workers = args.workers.unwrap_or(defaults.workers);
    let options = MeasureOptions {
        workers,
        kernel_threads: args.threads.unwrap_or(if args.concurrent_runs {
            (defaults.kernel_threads / workers).max(1)
        } else {
            defaults.kernel_threads
        }),
        concurrent_runs: args.concurrent_runs,
        build_timeout: seconds("build-timeout", args.build_timeout)?,
        run_timeout: seconds("run-timeout", args.run_timeout)?,
        timing: TimingOptions {
            warmup: args.warmup,
            number: args.number,
            repeat: args.repeat,
            min_repeat_ms: args.min_repeat_ms,
            flush: if args.flush_cache {
                CacheFlush::Inputs
            } else {
                CacheFlush::Off
            },
        },
        codegen: CodegenOptions::for_target(*target),
        ..defaults
    };
    if args.batch_size == 0 {
        return Err(CliError::Usage("--batch-size must be at least 1".into()));
    }
    let mut db = match args.no_record {
        true => None,
        false => Some(TuningDb::open(
            &args.db.clone().unwrap_or_else(db::default_path),
        )?),
    };
    let start = Instant::now();
    let mut measurer = Measurer::new(options.clone())?;
    let bar = ProgressBar::new(states.len() as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} measuring [{bar:30}] {pos}/{len} {msg} ({elapsed})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let mut results = Vec::with_capacity(states.len());
    let mut recorded = 0;
    for batch in states.chunks(args.batch_size) {
        let measured = measurer.measure_with_progress(&task, batch, &|r: &MeasureResult| {
            bar.inc(1);
            bar.set_message(r.error_kind.name());
        })?;
        if let Some(db) = db.as_mut() {
            let rows: Vec<(&[Step], &MeasureResult)> =
                batch.iter().map(State::steps).zip(&measured).collect();
            recorded += db.record_batch(&task, host_device(), &rows)?;
        }
        results.extend(measured);
    }
    bar.finish_and_clear();
    let elapsed = start.elapsed().as_secs_f64();
    drop(measurer);
    let mut text = report(&task, &states, &results, &options, elapsed, args.json);
    if let (Some(db), false) = (&db, args.json) {
        let _ = writeln!(
            text,
            "recorded {recorded} new record(s) in {}",
            db.path().display()
        );
    }
    Ok(text)
}

fn gflops(task: &Task, r: &MeasureResult) -> Option<f64> {
    r.median().map(|m| task.dag().flop_count() as f64 / m / 1e9)
}

fn report(
    task: &Task,
    states: &[State],
    results: &[MeasureResult],
    options: &MeasureOptions,
    elapsed: f64,
    json: bool,
) -> String {
    let device = host_device().key();
    let rate = results.len() as f64 / elapsed;
    let counts: Vec<(MeasureErrorKind, usize)> = MeasureErrorKind::ALL
        .into_iter()
        .map(|k| (k, results.iter().filter(|r| r.error_kind == k).count()))
        .filter(|(_, n)| *n > 0)
        .collect();
    let best = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| gflops(task, r).map(|g| (i, g)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if json {
        let rows: Vec<_> = results
            .iter()
            .zip(states)
            .map(|(r, s)| {
                json!({
                    "result": r,
                    "median_s": r.median(),
                    "gflops": gflops(task, r),
                    "steps": s.steps(),
                })
            })
            .collect();
        let summary = json!({
            "workload": task.key().to_string(),
            "device": device.to_string(),
            "candidates": results.len(),
            "workers": options.workers,
            "kernel_threads": options.kernel_threads,
            "concurrent_runs": options.concurrent_runs,
            "elapsed_s": elapsed,
            "candidates_per_s": rate,
            "errors": counts.iter().map(|(k, n)| (k.name().to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
            "best": best.map(|(i, g)| json!({"candidate": i, "gflops": g})),
        });
        return format!("{}\n", json!({"summary": summary, "results": rows}));
    }
    let mut out = String::new();
    let _ = writeln!(out, "workload {}", task.key());
    let _ = writeln!(out, "device   {device}");
    let _ = writeln!(
        out,
        "{:>4}  {:<19} {:>11} {:>9} {:>9} {:>6}  detail",
        "#", "result", "median ms", "GFLOP/s", "build ms", "steps"
    );
    for (i, (r, s)) in results.iter().zip(states).enumerate() {
        let median = r.median().map_or("-".into(), |m| format!("{:.4}", m * 1e3));
        let g = gflops(task, r).map_or("-".into(), |g| format!("{g:.2}"));
        let mut detail = r.error_msg.replace('\n', " ");
        if detail.len() > 100 {
            let cut = (0..=100)
                .rev()
                .find(|&c| detail.is_char_boundary(c))
                .unwrap_or(0);
            detail.truncate(cut);
            detail.push('…');
        }
        let _ = writeln!(
            out,
            "{i:>4}  {:<19} {median:>11} {g:>9} {:>9.2} {:>6}  {detail}",
            r.error_kind.name(),
            r.build_secs * 1e3,
            s.steps().len(),
        );
    }
    let kinds: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let _ = writeln!(
        out,
        "measured {} candidates in {elapsed:.2} s on {} worker(s) ({} kernel thread(s), {} runs): {rate:.2} candidates/s; {}",
        results.len(),
        options.workers,
        options.kernel_threads,
        if options.concurrent_runs {
            "concurrent"
        } else {
            "serial"
        },
        kinds.join(", ")
    );
    if let Some((i, g)) = best {
        let _ = writeln!(out, "best: candidate {i}, {g:.2} GFLOP/s");
    }
    out
}
