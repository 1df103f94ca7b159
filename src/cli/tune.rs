//! `tessera tune`: search for a fast schedule of one operator at one shape,
//! measuring candidates in worker processes and recording every one in the
//! tuning cache; with `--suite FILE`, the workloads of a suite share one
//! budget through the task scheduler. `--plot FILE.svg` draws the tuning
//! curve (a suite: one line per workload, as a fraction of its final best;
//! a model: its estimated end-to-end latency after each round).
//! At the end the best candidates are re-measured in fresh workers
//! (`--remeasure N`); the summary gives both figures.

use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use super::error::CliError;
use super::search_flags::SearchFlags;
use crate::cost::CostModel;
use crate::db::{self, TuningDb};
use crate::measure::{Measurer, Task};
use crate::runtime::Target;
use crate::search::{
    CurvePoint, RemeasureReport, SearchOptions, Suite, SuiteOptions, SuiteReport, SuiteTask,
    TuneEvent, TuneOptions, TuneReport, plot_curves, plot_latency_curve, plot_normalised_curves,
    tune, tune_suite,
};

/// `tessera tune` options.
#[derive(Debug, clap::Args)]
pub(crate) struct TuneArgs {
    /// The operator (see `tessera ops`), or an ONNX model (`m.onnx`: its
    /// fused tasks, tuned with the task scheduler); not with --suite.
    #[arg(required_unless_present = "suite")]
    op: Option<String>,
    /// With a model: the shape of an input with dynamic dimensions
    /// (`NAME=1,3,224,224`; repeat for several).
    #[arg(long = "input-shape", value_name = "NAME=D0,D1,…")]
    input_shapes: Vec<String>,
    /// Shape parameters, e.g. `M=512,N=512,K=512`.
    #[arg(long, default_value = "")]
    shape: String,
    /// Tune every workload of a suite file (see suites/README.md) with the
    /// task scheduler; --trials is then the budget of the whole suite.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["op", "shape"])]
    suite: Option<PathBuf>,
    /// Draw the tuning curve as SVG: best GFLOP/s against trials (with
    /// --suite: one line per workload, as a fraction of its final best;
    /// with a model: its estimated end-to-end latency in ms, Σ weight ·
    /// best latency of its tasks).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Candidates to measure (with --suite: over all workloads).
    #[arg(long, default_value_t = 200)]
    trials: usize,
    /// The tuning database (default: TESSERA_DB, else tuning_logs/tuning.db).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Seed of the search.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Candidates measured per round (with --suite: at most trials / workloads).
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
    /// Most of each batch given to the best predicted candidate of each
    /// sketch the cost model's top picks left out.
    #[arg(long, default_value_t = SearchOptions::default().sketch_share)]
    sketch_share: f64,
    /// Leave out sketches that call micro-kernels: tune the code Cranelift
    /// generates alone (the "plain" column of `tessera bench`).
    #[arg(long)]
    no_tensorize: bool,
    /// Stop after this many trials without improvement (with --suite: per workload).
    #[arg(long)]
    early_stopping: Option<usize>,
    /// Inputs of the operator that are constant weights (comma-separated,
    /// e.g. `weight`): each candidate is measured with the copies it makes
    /// of them laid out once before timing, as a deployed kernel with
    /// constant weights runs (`tessera bench --constants`). Not with a model:
    /// its tasks take the model's constants by themselves.
    #[arg(long, value_delimiter = ',', conflicts_with = "suite")]
    constants: Vec<String>,
    /// With a model: measure its tasks with every weight as an input, the
    /// copies schedules make of them timed on every run, instead of laid out
    /// ahead of time (packed once per candidate, outside the timed runs) as
    /// the deployed model runs them, the default.
    #[arg(long, conflicts_with_all = ["suite", "prepack"])]
    no_prepack: bool,
    /// With a model: the default, weights laid out ahead of time (kept for
    /// the scripts that name it).
    #[arg(long, conflicts_with = "suite")]
    prepack: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    flags: SearchFlags,
}

/// `tessera tune`.
pub(crate) fn tune_command(args: &TuneArgs, target: &Target) -> Result<String, CliError> {
    let timeout = check_options(args)?;
    match (&args.suite, &args.op) {
        (Some(path), _) => {
            let suite = Suite::load(path)?;
            let source = path.display().to_string();
            let run = SuiteRun {
                name: &suite.name,
                description: &suite.description,
                source: &source,
                tasks: suite.tasks()?,
                plot: SuitePlot::PerWorkload,
            };
            tune_suite_command(args, target, &run, timeout)
        }
        (None, Some(op)) if op.ends_with(".onnx") => {
            if !args.constants.is_empty() {
                return Err(CliError::Usage(format!(
                    "--constants is for an operator; the tasks of {op} take the model's constants \
                     by themselves (laid out ahead of time unless --no-prepack)"
                )));
            }
            tune_model(args, target, op, timeout)
        }
        (None, _) => {
            if args.prepack || args.no_prepack {
                return Err(CliError::Usage(format!(
                    "--{}prepack is for a model; an operator's inputs are all measured as inputs \
                     unless --constants names some",
                    if args.no_prepack { "no-" } else { "" }
                )));
            }
            tune_one(args, target, timeout)
        }
    }
}

/// `tessera tune m.onnx`: the model's fused tasks, tuned with the task scheduler.
fn tune_model(
    args: &TuneArgs,
    target: &Target,
    path: &str,
    timeout: Duration,
) -> Result<String, CliError> {
    let options = super::model::import_options(&args.input_shapes)?;
    let model = crate::graph::Model::load_with(path, &options)?;
    let name = Path::new(path)
        .file_stem()
        .map_or_else(|| path.to_string(), |s| s.to_string_lossy().into_owned());
    // The tasks of the graph that compiles: after the graph passes.
    let (graph, _) = model.optimized()?;
    let mut tasks = crate::graph::tasks::model_tasks(&graph, &name)?;
    if args.no_prepack {
        tasks = tasks.without_constants();
    }
    args.flags.check_flush(
        tasks.tasks.iter().any(|t| !t.task.constants().is_empty()),
        "drop --no-prepack to measure the model's weights as constants",
    )?;
    if tasks.tasks.is_empty() {
        return Err(CliError::Usage(format!(
            "model {path} has no kernel to tune (every node is an alias)"
        )));
    }
    let mut out = format!(
        "model     {path}: {} tasks for its {} kernels after fusion\n{}\n",
        tasks.tasks.len(),
        tasks.kernels(),
        if args.no_prepack {
            "weights   measured as inputs: the copies schedules make of them are timed (--no-prepack)"
        } else {
            "weights   laid out ahead of time where a schedule copies them, as the deployed model runs (--no-prepack: timed as inputs)"
        }
    );
    let description = format!("the fused tasks of model {name} (weight: occurrences)");
    let run = SuiteRun {
        name: &tasks.name,
        description: &description,
        source: path,
        tasks: tasks.suite_tasks(),
        plot: SuitePlot::EndToEnd,
    };
    out.push_str(&tune_suite_command(args, target, &run, timeout)?);
    Ok(out)
}

fn check_options(args: &TuneArgs) -> Result<Duration, CliError> {
    let timeout = args.flags.timeout()?;
    args.flags.remeasure()?;
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
    if !(0.0..=1.0).contains(&args.sketch_share) || args.eps_greedy + args.sketch_share > 1.0 {
        return Err(CliError::Usage(
            "--sketch-share must be between 0 and 1, and with --eps-greedy at most 1".into(),
        ));
    }
    if let Some(plot) = &args.plot {
        let parent = plot.parent().filter(|p| !p.as_os_str().is_empty());
        if parent.is_some_and(|p| !p.is_dir()) || plot.is_dir() {
            return Err(CliError::Usage(format!(
                "--plot {}: not a file in an existing directory",
                plot.display()
            )));
        }
    }
    Ok(timeout)
}

/// What both modes share: the model, the database, the workers, Ctrl-C.
struct Session {
    model: Box<dyn CostModel>,
    db: TuningDb,
    measurer: Measurer,
    stop: Arc<AtomicBool>,
}

fn session(args: &TuneArgs, target: &Target, timeout: Duration) -> Result<Session, CliError> {
    let model = args.flags.model(args.seed)?;
    let db = TuningDb::open(&args.db.clone().unwrap_or_else(db::default_path))?;
    let measurer = args.flags.measurer(timeout, target)?;
    Ok(Session {
        model,
        db,
        measurer,
        stop: stop_on_ctrl_c(),
    })
}

/// A flag Ctrl-C sets: tuning stops after the batch being measured.
pub(crate) fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let handler_stop = stop.clone();
    // A second handler cannot be installed in the same process (tests call
    // the CLI in-process); tuning then simply cannot be interrupted.
    let _ = ctrlc::set_handler(move || {
        handler_stop.store(true, Ordering::Relaxed);
        eprintln!("\nstopping after the batch being measured (everything measured is kept)");
    });
    stop
}

pub(crate) fn progress_bar(trials: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(trials as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} tuning [{{bar:30}}] {{pos}}/{{len}} trials, {what} {{msg}}, ETA {{eta}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar
}

/// Shows a [`TuneEvent::Remeasure`] on `bar` (switching it to counting runs).
pub(crate) fn show_remeasure(bar: &ProgressBar, done: usize, total: usize, task: &str) {
    if bar.length() != Some(total as u64) {
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} re-measuring the best in fresh workers [{bar:30}] {pos}/{len} runs (not trials), {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_length(total as u64);
    }
    bar.set_position(done as u64);
    bar.set_message(task.to_string());
}

fn search_options(args: &TuneArgs) -> SearchOptions {
    SearchOptions {
        population: args.population,
        generations: args.generations,
        eps_greedy: args.eps_greedy,
        sketch_share: args.sketch_share,
        tensorize: !args.no_tensorize,
        ..SearchOptions::default()
    }
}

fn tune_one(args: &TuneArgs, target: &Target, timeout: Duration) -> Result<String, CliError> {
    let op = args.op.as_deref().unwrap_or_default();
    let task = Task::from_registry(op, &args.shape)?.with_constants(&args.constants)?;
    args.flags.check_flush(
        !task.constants().is_empty(),
        "name them with --constants (e.g. --constants weight)",
    )?;
    let mut s = session(args, target, timeout)?;
    let bar = progress_bar(args.trials, "best");
    let tune_options = TuneOptions {
        trials: args.trials,
        batch_size: args.batch_size,
        seed: args.seed,
        early_stopping: args.early_stopping,
        search: search_options(args),
        remeasure: args.flags.remeasure()?,
    };
    let start: Mutex<Option<f64>> = Mutex::new(None);
    let report = tune(
        &task,
        &mut s.measurer,
        Some(&mut s.db),
        s.model.as_mut(),
        &tune_options,
        &|event| match event {
            TuneEvent::Batch {
                trials,
                best_gflops,
                ..
            } => {
                if trials == 0
                    && let Ok(mut start) = start.lock()
                {
                    *start = Some(best_gflops);
                }
                bar.set_position(trials as u64);
                bar.set_message(format!("{best_gflops:.2} GFLOP/s"));
            }
            TuneEvent::Remeasure { done, total, task } => show_remeasure(&bar, done, total, task),
        },
        &s.stop,
    )?;
    bar.finish_and_clear();
    if let Some(path) = &args.plot {
        let start = start.lock().ok().and_then(|s| *s);
        let series = vec![(
            task.key().readable.clone(),
            CurvePoint::with_start(start, &report.curve),
        )];
        plot_curves(
            path,
            &format!("tessera tune {}", task.key().readable),
            &series,
        )?;
    }
    Ok(render(&report, &task, &s.model.name(), &s.db, args))
}

/// The fields every `--json` report shares: speed-up, model, database, plot.
fn add_run_fields(
    map: &mut serde_json::Map<String, serde_json::Value>,
    speedup: Option<f64>,
    model: &str,
    db: &TuningDb,
    args: &TuneArgs,
) {
    map.insert("speedup".into(), json!(speedup));
    map.insert("model".into(), json!(model));
    map.insert("db".into(), json!(db.path().display().to_string()));
    if let Some(plot) = &args.plot {
        map.insert("plot".into(), json!(plot.display().to_string()));
    }
}

fn render(report: &TuneReport, task: &Task, model: &str, db: &TuningDb, args: &TuneArgs) -> String {
    if args.json {
        let mut value = serde_json::to_value(report).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            add_run_fields(map, report.speedup(), model, db, args);
            map.insert("constants".into(), json!(task.constants()));
        }
        return format!("{value}\n");
    }
    let mut out = String::new();
    let _ = writeln!(out, "workload  {}", report.workload_key);
    let _ = writeln!(out, "device    {}", report.device_key);
    let _ = writeln!(out, "model     {model}");
    let _ = writeln!(out, "weights   {}", weights_text(task.constants()));
    let _ = writeln!(out, "default   {}", gflops_text(report.default_gflops));
    let _ = writeln!(
        out,
        "best      {} tuned (best of many){}",
        gflops_text(report.best_gflops),
        report
            .speedup()
            .map_or(String::new(), |s| format!(" ({s:.1}x the default)"))
    );
    if let Some(again) = &report.remeasure {
        let best_again = report
            .best_remeasured()
            .map_or("-".to_string(), remeasured_text);
        let _ = writeln!(out, "          {best_again} re-measured");
        let _ = writeln!(out, "{}", remeasure_text(again));
    }
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
        let _ = writeln!(out, "failed    {}", errors_text(&report.errors));
    }
    if let Some(plot) = &args.plot {
        let _ = writeln!(out, "plot      {}", plot.display());
    }
    let _ = writeln!(out, "recorded in {}", db.path().display());
    let _ = writeln!(
        out,
        "the best steps: tessera cache best {} --shape {} --db {} --steps-only",
        task.family(),
        if args.shape.is_empty() {
            "''"
        } else {
            &args.shape
        },
        db.path().display()
    );
    out
}

/// How a task's weights were measured.
fn weights_text(constants: &[String]) -> String {
    if constants.is_empty() {
        "every input measured as an input (--constants NAME to lay weights out ahead of time)"
            .into()
    } else {
        format!(
            "{} laid out ahead of time where a candidate copies them, as deployed (packing not timed)",
            constants.join(", ")
        )
    }
}

/// A candidate's re-measured figure, or why it has none.
fn remeasured_text(c: &crate::search::RemeasuredCandidate) -> String {
    match (c.remeasured_gflops, &c.error) {
        (Some(g), _) => format!("{g:.2} GFLOP/s"),
        (None, Some(why)) => format!("- (failed: {why})"),
        (None, None) => "-".to_string(),
    }
}

/// The re-measurement lines of one task's summary.
fn remeasure_text(again: &RemeasureReport) -> String {
    let runs = again.candidates.len() * again.passes;
    let mut out = format!(
        "re-measured the best {} in fresh workers, {} interleaved passes ({runs} runs, not trials) in {:.1} s",
        again.candidates.len(),
        again.passes,
        again.secs
    );
    if let Some(pick) = again.pick() {
        let _ = write!(
            out,
            "\ndeploy picks {} re-measured ({:.2} GFLOP/s tuned)",
            remeasured_text(pick),
            pick.tuned_gflops
        );
    }
    out
}

fn gflops_text(g: Option<f64>) -> String {
    g.map_or("-".to_string(), |g| format!("{g:.2} GFLOP/s"))
}

fn errors_text(errors: &[(String, usize)]) -> String {
    let parts: Vec<String> = errors.iter().map(|(k, n)| format!("{n} {k}")).collect();
    parts.join(", ")
}

/// What `--plot` draws for a suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SuitePlot {
    /// One line per workload, as a fraction of its final best (`--suite`).
    PerWorkload,
    /// The estimated end-to-end latency `Σ weight · best latency` (a model).
    EndToEnd,
}

/// Tasks tuned together under one budget, and how their report is titled.
struct SuiteRun<'a> {
    /// The suite's (or model's) name, shown in the report.
    name: &'a str,
    /// What it is for (may be empty).
    description: &'a str,
    /// Where the tasks come from (a suite file or a model path), for messages.
    source: &'a str,
    /// The tasks: registry operators or any te DAGs ([`Task::from_dag`]).
    tasks: Vec<SuiteTask>,
    /// What `--plot` draws.
    plot: SuitePlot,
}

fn tune_suite_command(
    args: &TuneArgs,
    target: &Target,
    run: &SuiteRun,
    timeout: Duration,
) -> Result<String, CliError> {
    let (tasks, source) = (&run.tasks, run.source);
    if args.trials < tasks.len() {
        return Err(CliError::Usage(format!(
            "--trials {} is less than the {} workloads of {source}: each needs at least one trial",
            args.trials,
            tasks.len(),
        )));
    }
    let mut s = session(args, target, timeout)?;
    let bar = progress_bar(args.trials, "");
    let options = SuiteOptions {
        total_trials: args.trials,
        batch_size: args.batch_size,
        seed: args.seed,
        early_stopping: args.early_stopping,
        search: search_options(args),
        remeasure: args.flags.remeasure()?,
        ..SuiteOptions::default()
    };
    let report = tune_suite(
        tasks,
        &mut s.measurer,
        Some(&mut s.db),
        s.model.as_mut(),
        &options,
        &|event| match event {
            TuneEvent::Batch {
                trials,
                task,
                best_gflops,
                ..
            } => {
                bar.set_position(trials as u64);
                if !task.is_empty() {
                    bar.set_message(format!("{task} {best_gflops:.2} GFLOP/s"));
                }
            }
            TuneEvent::Remeasure { done, total, task } => show_remeasure(&bar, done, total, task),
        },
        &s.stop,
    )?;
    bar.finish_and_clear();
    if let (Some(plot), SuitePlot::EndToEnd) = (&args.plot, run.plot) {
        let title = format!(
            "{source}: estimated end-to-end latency of its {} tasks (Σ weight · best latency)",
            report.tasks.len()
        );
        let label = format!("{} ({} tasks)", run.name, report.tasks.len());
        plot_latency_curve(
            plot,
            &title,
            &label,
            report.start_latency_s,
            &report.latency_curve,
        )?;
    } else if let Some(plot) = &args.plot {
        let series: Vec<(String, Vec<CurvePoint>)> = report
            .tasks
            .iter()
            .map(|t| {
                (
                    t.label.clone(),
                    CurvePoint::with_start(t.start_gflops, &t.report.curve),
                )
            })
            .collect();
        let title = format!(
            "suite {}: best GFLOP/s per workload, as a fraction of its final best",
            run.name
        );
        plot_normalised_curves(plot, &title, &series)?;
    }
    Ok(render_suite(run, &report, &s.model.name(), &s.db, args))
}

fn render_suite(
    suite: &SuiteRun,
    report: &SuiteReport,
    model: &str,
    db: &TuningDb,
    args: &TuneArgs,
) -> String {
    if args.json {
        let mut value = serde_json::to_value(report).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            if let Some(tasks) = map.get_mut("tasks").and_then(|t| t.as_array_mut()) {
                for (entry, task) in tasks.iter_mut().zip(&report.tasks) {
                    if let Some(entry) = entry.as_object_mut() {
                        entry.insert("speedup".into(), json!(task.report.speedup()));
                    }
                }
            }
            map.insert("suite".into(), json!(suite.name));
            add_run_fields(map, report.speedup(), model, db, args);
        }
        return format!("{value}\n");
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "suite     {} ({} workloads){}",
        suite.name,
        report.tasks.len(),
        if suite.description.is_empty() {
            String::new()
        } else {
            format!(": {}", suite.description)
        }
    );
    if let Some(first) = report.tasks.first() {
        let _ = writeln!(out, "device    {}", first.report.device_key);
    }
    let _ = writeln!(out, "model     {model}");
    let width = report
        .tasks
        .iter()
        .map(|t| t.label.len())
        .fold(5, usize::max);
    let weighted = report.tasks.iter().any(|t| t.weight != 1.0);
    let remeasured = report.tasks.iter().any(|t| t.report.remeasure.is_some());
    let _ = writeln!(
        out,
        "\n{:<width$}  {}{:>15}  {:>13}  {}{:>8}  {:>6}  {:>6}",
        "label",
        if weighted { "weight  " } else { "" },
        "default GFLOP/s",
        "best GFLOP/s",
        if remeasured { "re-measured  " } else { "" },
        "speed-up",
        "trials",
        "rounds"
    );
    let number = |g: Option<f64>| g.map_or("-".to_string(), |g| format!("{g:.2}"));
    for t in &report.tasks {
        let _ = writeln!(
            out,
            "{:<width$}  {}{:>15}  {:>13}  {}{:>8}  {:>6}  {:>6}{}",
            t.label,
            if weighted {
                format!("{:>6}  ", t.weight)
            } else {
                String::new()
            },
            number(t.report.default_gflops),
            number(t.report.best_gflops),
            if remeasured {
                format!(
                    "{:>11}  ",
                    number(t.report.best_remeasured().and_then(|c| c.remeasured_gflops))
                )
            } else {
                String::new()
            },
            // From latencies: a task without FLOPs (a transpose) has no
            // GFLOP/s to compare.
            t.default_latency_s
                .zip(t.best_latency_s)
                .map(|(d, b)| d / b)
                .or_else(|| t.report.speedup())
                .filter(|s| s.is_finite())
                .map_or("-".to_string(), |s| format!("{s:.2}x")),
            t.report.trials,
            t.rounds,
            t.retired
                .as_ref()
                .map_or(String::new(), |why| format!("  ({why})"))
        );
    }
    let _ = writeln!(
        out,
        "\ntrials    {} of {} in {:.1} s ({:.2} candidates/s), {} per round, {} rounds{}",
        report.trials,
        report.total_trials,
        report.wall_s,
        report.trials as f64 / report.wall_s.max(1e-9),
        report.per_round,
        report.allocation.len(),
        if report.stopped_early {
            ", stopped early"
        } else {
            ""
        }
    );
    if remeasured {
        let runs: usize = report
            .tasks
            .iter()
            .filter_map(|t| t.report.remeasure.as_ref())
            .map(|r| r.candidates.len() * r.passes)
            .sum();
        let _ = writeln!(
            out,
            "re-measured the best of each workload in fresh workers: {runs} runs (not trials) in {:.1} s; \
             best GFLOP/s is the tuning figure (best of many), re-measured the median of the best's runs",
            report.remeasure_s
        );
    }
    if let (Some(default), Some(best)) = (report.default_latency_s, report.best_latency_s) {
        let _ = writeln!(
            out,
            "latency   {} -> {} weighted over the suite ({:.2}x)",
            seconds_text(default),
            seconds_text(best),
            default / best
        );
    }
    let failed: Vec<String> = report
        .tasks
        .iter()
        .filter(|t| !t.report.errors.is_empty())
        .map(|t| format!("{}: {}", t.label, errors_text(&t.report.errors)))
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "failed    {}", failed.join("; "));
    }
    if let Some(plot) = &args.plot {
        let _ = writeln!(out, "plot      {}", plot.display());
    }
    let _ = writeln!(out, "recorded in {}", db.path().display());
    out
}

fn seconds_text(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else if s >= 1e-6 {
        format!("{:.3} µs", s * 1e6)
    } else {
        format!("{:.1} ns", s * 1e9)
    }
}
