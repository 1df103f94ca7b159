//! The `tessera` command line. [`run`] is public so that a user crate can
//! ship its own binary with the same commands.

mod bench;
mod cache;
mod ci;
mod commands;
mod cost_model;
mod deploy;
mod deploy_model;
mod device;
mod error;
mod measure;
mod model;
mod search_flags;
mod tune;

pub use error::CliError;

use std::ffi::OsString;

use clap::{Parser, Subcommand};

use crate::runtime::Target;

/// tessera: a tensor compiler and auto-scheduler for CPUs.
#[derive(Debug, Parser)]
#[command(name = "tessera", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the registered operators: name, shape parameters with defaults, description.
    Ops,
    /// Print an operator's DAG (readable and canonical form) and its workload key.
    Show {
        /// The operator (see `tessera ops`).
        op: String,
        /// Shape parameters, e.g. `M=512,N=512,K=512`; unnamed ones take their defaults.
        #[arg(long, default_value = "")]
        shape: String,
        /// A JSON step list; prints the loop IR it lowers to (without: the
        /// default, naive lowering).
        #[arg(long)]
        schedule: Option<std::path::PathBuf>,
        /// Print the loop IR after each lowering pass, then what code
        /// generation decides (vector widths, buffers kept in registers).
        #[arg(long)]
        passes: bool,
    },
    /// Time the best cached (or deployed, or given) schedule, verified, against
    /// the default schedule and (for matrix products) the matrixmultiply and gemm crates.
    Bench(bench::BenchArgs),
    /// Write the best schedule of each workload tuned on this device (or
    /// --device) into schedules/<device>/ (artifacts and index), optionally
    /// as object files; or --verify a schedules folder against the reference.
    Deploy(deploy::DeployArgs),
    /// Print this machine's device fingerprint (the key tuning records are stored under).
    Device {
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Measure candidates in worker processes: build, verify against the
    /// reference, time; report each result and candidates per second.
    Measure(measure::MeasureArgs),
    /// Search for a fast schedule: sketches, evolutionary search guided by a
    /// cost model, candidates measured in worker processes and recorded.
    Tune(tune::TuneArgs),
    /// Inspect and move tuning records: list, best, export, import, merge, prune.
    Cache(cache::CacheArgs),
    /// Train a learned cost model on the tuning cache, or evaluate models on held-out records.
    CostModel(cost_model::CostModelArgs),
    /// The CI job: tune a suite (or a shard of it) under a budget, resuming
    /// from the database, and write the database, the log, the deployed
    /// artifacts, a retrained cost model and a report into one folder; exit 3
    /// when a workload regressed against the artifacts it started from.
    Ci(ci::CiArgs),
    /// ONNX models: `model show` (nodes, shapes, FLOPs, what each becomes)
    /// and `model bench` (end-to-end latency next to ONNX Runtime's).
    Model(model::ModelArgs),
    /// Run an ONNX model on `.npy` inputs and write its outputs as `.npy`.
    Run(model::RunArgs),
    /// Serve measurement requests on stdin/stdout (started by the measurer).
    #[command(hide = true)]
    MeasureWorker,
}

/// Runs the command line on the process arguments; returns the exit code.
pub fn run() -> i32 {
    run_with(std::env::args_os())
}

/// Runs the command line on `args` (the first is the program name); returns
/// the exit code: 0 on success, 1 when a lookup finds no exact match, 2 on
/// bad input, 3 when a check failed (`deploy --verify`, a regression in `ci`).
pub fn run_with<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with code 0; usage errors exit 2.
            let _ = e.print();
            return e.exit_code();
        }
    };
    let result = match cli.command {
        Command::MeasureWorker => return crate::measure::worker_main(),
        Command::Device { json } => device::device(json),
        Command::Cache(args) => cache::cache(&args),
        Command::Tune(args) => tune::tune_command(&args, &Target::from_env()),
        Command::CostModel(args) => cost_model::cost_model(&args),
        Command::Measure(args) => measure::measure(&args, &Target::from_env()),
        Command::Ops => commands::ops(),
        Command::Show {
            op,
            shape,
            schedule,
            passes,
        } => commands::show(&op, &shape, schedule.as_deref(), passes),
        Command::Bench(args) => bench::bench(&args, &Target::from_env()),
        Command::Deploy(args) => deploy::deploy(&args, &Target::from_env()),
        Command::Ci(args) => ci::ci(&args, &Target::from_env()),
        Command::Model(args) => model::model(&args),
        Command::Run(args) => model::run(&args),
    };
    match result {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(CliError::CheckFailed { report, summary }) => {
            print!("{report}");
            eprintln!("error: {summary}");
            3
        }
        Err(CliError::NotFound(what)) => {
            eprintln!("{what}");
            1
        }
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}
