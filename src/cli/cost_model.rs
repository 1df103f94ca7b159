//! `tessera cost-model`: train a learned cost model on the tuning cache, and
//! measure how well models rank held-out records.

use std::fmt::Write;
use std::path::PathBuf;

use clap::Subcommand;

use super::error::CliError;
use crate::cost::{self, eval};
use crate::db::{self, TuningDb};
use crate::runtime::host_device;

/// `tessera cost-model` and its database option.
#[derive(Debug, clap::Args)]
pub(crate) struct CostModelArgs {
    /// The tuning database (default: TESSERA_DB, else tuning_logs/tuning.db).
    #[arg(long, global = true)]
    db: Option<PathBuf>,
    /// Only records of this device (a key hash prefix or readable name;
    /// default: every device).
    #[arg(long, global = true)]
    device: Option<String>,
    #[command(subcommand)]
    command: CostModelCommand,
}

#[derive(Debug, Subcommand)]
enum CostModelCommand {
    /// Train a learner on every usable record and write a model file.
    Train {
        /// The model file to write (e.g. cost_model/x86_64-….model).
        #[arg(long)]
        out: PathBuf,
        /// The learner (see `tessera cost-model learners`).
        #[arg(long, default_value = cost::DEFAULT_LEARNER)]
        learner: String,
    },
    /// Hold out records and report each model's pairwise ranking accuracy
    /// and top-10-in-50 recall per workload.
    Eval {
        /// Models to compare (comma-separated; `random` is the baseline).
        #[arg(long, value_delimiter = ',')]
        models: Option<Vec<String>>,
        /// Fraction of each workload's records held out.
        #[arg(long, default_value_t = 0.3)]
        test_fraction: f64,
        /// Seed of the split.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// List the learners this build has.
    Learners,
}

/// `tessera cost-model …`.
pub(crate) fn cost_model(args: &CostModelArgs) -> Result<String, CliError> {
    if let CostModelCommand::Learners = args.command {
        return Ok(format!("{}\n", cost::learner_names().join("\n")));
    }
    let path = args.db.clone().unwrap_or_else(db::default_path);
    let db = TuningDb::open_existing(&path)?;
    let device = match &args.device {
        None => None,
        Some(selector) => match db.find_devices(selector)?.as_slice() {
            [one] => Some(one.clone()),
            found => {
                return Err(CliError::Usage(format!(
                    "--device '{selector}' matches {} devices in {}; `tessera cache list` shows them",
                    found.len(),
                    path.display()
                )));
            }
        },
    };
    let (data, skipped) = cost::workload_rows(&db, device.as_deref())?;
    let mut out = String::new();
    for s in &skipped {
        let _ = writeln!(out, "skipped {s}");
    }
    if data.is_empty() {
        return Err(CliError::Usage(format!(
            "no usable records in {} (measure or tune something first)",
            path.display()
        )));
    }
    match &args.command {
        CostModelCommand::Train { out: file, learner } => {
            let device_name = device
                .clone()
                .unwrap_or_else(|| host_device().key().to_string());
            let made_with = std::env::args().collect::<Vec<_>>().join(" ");
            let summary = cost::train_model_file(&data, &device_name, learner, &made_with, file)?;
            let _ = writeln!(
                out,
                "trained {learner} on {} records of {} workloads in {:.2} s; wrote {}",
                summary.rows,
                summary.workloads.len(),
                summary.fit_secs,
                file.display()
            );
        }
        CostModelCommand::Eval {
            models,
            test_fraction,
            seed,
        } => {
            let names: Vec<String> = models.clone().unwrap_or_else(|| {
                let mut all: Vec<String> = cost::learner_names()
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                all.push("random".into());
                all
            });
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let scores = eval::evaluate(&data, &names, *test_fraction, *seed)?;
            let _ = writeln!(
                out,
                "{:<14} {:>8}  {:<40} {:>6} {:>9} {:>11}",
                "model", "fit s", "workload", "test", "pairwise", "top10in50"
            );
            for m in &scores {
                for w in &m.workloads {
                    let _ = writeln!(
                        out,
                        "{:<14} {:>8.2}  {:<40} {:>6} {:>9.3} {:>11.2}",
                        m.model, m.fit_secs, w.workload, w.test_rows, w.pairwise, w.top10_in_50
                    );
                }
                let mean = |f: fn(&eval::WorkloadScore) -> f64| {
                    let v: Vec<f64> = m
                        .workloads
                        .iter()
                        .map(f)
                        .filter(|x| x.is_finite())
                        .collect();
                    v.iter().sum::<f64>() / v.len().max(1) as f64
                };
                let _ = writeln!(
                    out,
                    "{:<14} {:>8.2}  {:<40} {:>6} {:>9.3} {:>11.2}",
                    m.model,
                    m.fit_secs,
                    "(mean)",
                    "",
                    mean(|w| w.pairwise),
                    mean(|w| w.top10_in_50)
                );
            }
        }
        CostModelCommand::Learners => {}
    }
    Ok(out)
}
