//! `tessera tune`: search for a fast schedule of one operator at one shape,
//! measuring candidates in worker processes and recording every one in the
//! tuning cache.

use std::fmt::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use super::error::CliError;
use crate::cost::{self, CostModel, LearnedModel, RandomModel};
use crate::db::{self, TuningDb};
use crate::measure::{MeasureOptions, Measurer, Task, TimingOptions};
use crate::search::{SearchOptions, TuneOptions, TuneReport, tune};

/// `tessera tune` options.
#[derive(Debug, clap::Args)]
pub(crate) struct TuneArgs {
    /// The operator (see `tessera ops`).
    op: String,
    /// Shape parameters, e.g. `M=512,N=512,K=512`.
    #[arg(long, default_value = "")]
    shape: String,
    /// Candidates to measure.
    #[arg(long, default_value_t = 200)]
    trials: usize,
    /// The tuning database (default: TESSERA_DB, else tuning_logs/tuning.db).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Seed of the search.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Cost model: `random`, a learner (`tessera cost-model learners`).
    #[arg(long, default_value = cost::DEFAULT_LEARNER)]
    model: String,
    /// A pretrained model file used while this workload has few records
    /// (default: cost_model/pretrained.model when it exists).
    #[arg(long)]
    pretrained: Option<PathBuf>,
    /// Threads the kernel may use (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Worker processes for building and running candidates (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Seconds a candidate may run before it is stopped.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// Candidates measured per round.
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Population of the evolutionary search.
    #[arg(long, default_value_t = SearchOptions::default().population)]
    population: usize,
    /// Generations per round.
    #[arg(long, default_value_t = SearchOptions::default().generations)]
    generations: usize,
    /// Fraction of each batch chosen at random.
    #[arg(long, default_value_t = SearchOptions::default().eps_greedy)]
    eps_greedy: f64,
    /// Stop after this many trials without improvement.
    #[arg(long)]
    early_stopping: Option<usize>,
    /// Timed repeats per candidate.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Shortest duration of a timed repeat, in milliseconds.
    #[arg(long, default_value_t = 20.0)]
    min_repeat_ms: f64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

fn model_for(args: &TuneArgs) -> Result<Box<dyn CostModel>, CliError> {
    if args.model == "random" {
        return Ok(Box::new(RandomModel::new(args.seed)));
    }
    let mut model = LearnedModel::new(cost::new_learner(&args.model)?);
    let default = PathBuf::from("cost_model/pretrained.model");
    let pretrained = match &args.pretrained {
        Some(p) => Some(p.clone()),
        None => default.is_file().then_some(default),
    };
    if let Some(path) = pretrained {
        let (_, learner) = cost::load_model(&path)?;
        model = model.with_pretrained(learner);
    }
    Ok(Box::new(model))
}

/// `tessera tune`.
pub(crate) fn tune_command(args: &TuneArgs) -> Result<String, CliError> {
    let task = Task::from_registry(&args.op, &args.shape)?;
    let timeout = Duration::try_from_secs_f64(args.timeout)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--timeout must be a positive number of seconds, not {}",
                args.timeout
            ))
        })?;
    if args.trials == 0 || args.batch_size == 0 || args.population == 0 {
        return Err(CliError::Usage(
            "--trials, --batch-size and --population must be at least 1".into(),
        ));
    }
    if !(0.0..=1.0).contains(&args.eps_greedy) {
        return Err(CliError::Usage(
            "--eps-greedy must be between 0 and 1".into(),
        ));
    }
    let mut model = model_for(args)?;
    let mut db = TuningDb::open(&args.db.clone().unwrap_or_else(db::default_path))?;
    let defaults = MeasureOptions::default();
    let options = MeasureOptions {
        workers: args.workers.unwrap_or(defaults.workers),
        kernel_threads: args.threads.unwrap_or(defaults.kernel_threads),
        run_timeout: timeout,
        timing: TimingOptions {
            repeat: args.repeat,
            min_repeat_ms: args.min_repeat_ms,
            ..TimingOptions::default()
        },
        ..defaults
    };
    let mut measurer = Measurer::new(options)?;
    let stop = Arc::new(AtomicBool::new(false));
    let handler_stop = stop.clone();
    // A second handler cannot be installed in the same process (tests call
    // the CLI in-process); tuning then simply cannot be interrupted.
    let _ = ctrlc::set_handler(move || {
        handler_stop.store(true, Ordering::Relaxed);
        eprintln!("\nstopping after the batch being measured (everything measured is kept)");
    });
    let bar = ProgressBar::new(args.trials as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} tuning [{bar:30}] {pos}/{len} trials, best {msg} GFLOP/s, ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let tune_options = TuneOptions {
        trials: args.trials,
        batch_size: args.batch_size,
        seed: args.seed,
        early_stopping: args.early_stopping,
        search: SearchOptions {
            population: args.population,
            generations: args.generations,
            eps_greedy: args.eps_greedy,
            ..SearchOptions::default()
        },
    };
    let report = tune(
        &task,
        &mut measurer,
        Some(&mut db),
        model.as_mut(),
        &tune_options,
        &|done, _, best| {
            bar.set_position(done as u64);
            bar.set_message(format!("{best:.2}"));
        },
        &stop,
    )?;
    bar.finish_and_clear();
    Ok(render(&report, &model.name(), &db, args))
}

fn render(report: &TuneReport, model: &str, db: &TuningDb, args: &TuneArgs) -> String {
    if args.json {
        let mut value = serde_json::to_value(report).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            map.insert("speedup".into(), json!(report.speedup()));
            map.insert("model".into(), json!(model));
            map.insert("db".into(), json!(db.path().display().to_string()));
        }
        return format!("{value}\n");
    }
    let fmt = |g: Option<f64>| g.map_or("-".to_string(), |g| format!("{g:.2} GFLOP/s"));
    let mut out = String::new();
    let _ = writeln!(out, "workload  {}", report.workload_key);
    let _ = writeln!(out, "device    {}", report.device_key);
    let _ = writeln!(out, "model     {model}");
    let _ = writeln!(out, "default   {}", fmt(report.default_gflops));
    let _ = writeln!(
        out,
        "best      {}{}",
        fmt(report.best_gflops),
        report
            .speedup()
            .map_or(String::new(), |s| format!(" ({s:.1}x the default)"))
    );
    let _ = writeln!(
        out,
        "trials    {} in {:.1} s ({:.2} candidates/s){}{}",
        report.trials,
        report.wall_s,
        report.candidates_per_s,
        if report.prior_records > 0 {
            format!(", after {} earlier records", report.prior_records)
        } else {
            String::new()
        },
        if report.stopped_early {
            ", stopped early"
        } else {
            ""
        }
    );
    if let Some(t) = report.time_to_90_s {
        let _ = writeln!(out, "90% of the best after {t:.1} s");
    }
    if !report.errors.is_empty() {
        let errors: Vec<String> = report
            .errors
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        let _ = writeln!(out, "failed    {}", errors.join(", "));
    }
    let _ = writeln!(out, "recorded in {}", db.path().display());
    let _ = writeln!(
        out,
        "the best steps: tessera cache best {} --shape {} --db {} --steps-only",
        args.op,
        if args.shape.is_empty() { "''" } else { &args.shape },
        db.path().display()
    );
    out
}
