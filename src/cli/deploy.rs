//! `tessera deploy`: tuned schedules out of the database into the
//! deployable `schedules/<device>/` folder.

use std::fmt::Write;
use std::path::PathBuf;

use serde_json::json;

use super::error::CliError;
use crate::codegen::CodegenOptions;
use crate::db::{self, TuningDb};
use crate::deploy::{self, DeployOptions, DeployOutcome};
use crate::runtime;

/// `tessera deploy`.
#[derive(Debug, clap::Args)]
pub(crate) struct DeployArgs {
    /// The tuning database (default: $TESSERA_DB or tuning_logs/tuning.db).
    #[arg(long)]
    db: Option<PathBuf>,
    /// The schedules folder; this device's artifacts go to OUT/<device>/.
    #[arg(long, default_value = "schedules")]
    out: PathBuf,
    /// Deploy only these workloads (readable name, `name#hash` or a key-hash
    /// prefix; repeatable). Default: every workload tuned on this device.
    #[arg(long = "workload")]
    workloads: Vec<String>,
    /// Replace an existing artifact even when it is faster than the database's best.
    #[arg(long)]
    force: bool,
    /// Also compile each deployed kernel ahead of time: OUT/<device>/aot/
    /// gets `<op>_<key>.o`, its C header and `tessera_runtime.c`.
    #[arg(long)]
    aot: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn deploy(args: &DeployArgs) -> Result<String, CliError> {
    let path = args.db.clone().unwrap_or_else(db::default_path);
    if !path.is_file() {
        return Err(CliError::Usage(format!(
            "no tuning database at {} (tune first with `tessera tune`, or pass --db)",
            path.display()
        )));
    }
    let database = TuningDb::open_existing(&path)?;
    let device = runtime::host_device();
    let options = DeployOptions {
        out: args.out.clone(),
        workloads: args.workloads.clone(),
        force: args.force,
    };
    let report =
        deploy::deploy(&database, device, &options).map_err(|e| CliError::Usage(e.to_string()))?;
    if report.workloads.is_empty() {
        return Err(CliError::NotFound(format!(
            "nothing to deploy: {} has no successful records on this device ({})",
            path.display(),
            device.key()
        )));
    }
    let objects = if args.aot {
        deploy::compile_deployed(&report, &CodegenOptions::default())
            .map_err(|e| CliError::Usage(e.to_string()))?
    } else {
        Vec::new()
    };
    let object_of = |readable: &str| objects.iter().find(|o| o.readable == readable);
    if args.json {
        let rows: Vec<_> = report
            .workloads
            .iter()
            .map(|w| {
                let (outcome, reason) = match &w.outcome {
                    DeployOutcome::Written => ("written", None),
                    DeployOutcome::Unchanged => ("unchanged", None),
                    DeployOutcome::KeptFaster { existing_gflops } => (
                        "kept",
                        Some(format!(
                            "existing artifact is faster ({existing_gflops:.2} GFLOP/s)"
                        )),
                    ),
                    DeployOutcome::Skipped(reason) => ("skipped", Some(reason.clone())),
                };
                json!({
                    "workload": w.readable,
                    "workload_key": w.key,
                    "file": w.file.as_ref().map(|f| f.display().to_string()),
                    "gflops": w.gflops,
                    "trials": w.trials,
                    "outcome": outcome,
                    "reason": reason,
                    "aot": object_of(&w.readable).map(|o| json!({
                        "symbol": o.symbol,
                        "object": o.files.object.display().to_string(),
                        "header": o.files.header.display().to_string(),
                        "runtime": o.files.runtime.display().to_string(),
                    })),
                })
            })
            .collect();
        return Ok(format!(
            "{}\n",
            json!({
                "device_key": device.key().hash,
                "device": device.key().readable,
                "dir": report.device_dir.display().to_string(),
                "workloads": rows,
            })
        ));
    }
    let mut out = String::new();
    let _ = writeln!(out, "deploying to {}", report.device_dir.display());
    for w in &report.workloads {
        let what = match &w.outcome {
            DeployOutcome::Written => "written".to_string(),
            DeployOutcome::Unchanged => "unchanged".to_string(),
            DeployOutcome::KeptFaster { existing_gflops } => {
                format!(
                    "kept the existing artifact ({existing_gflops:.2} GFLOP/s is faster; --force replaces it)"
                )
            }
            DeployOutcome::Skipped(reason) => format!("skipped: {reason}"),
        };
        let gflops = w.gflops.map_or("-".into(), |g| format!("{g:.2}"));
        let _ = writeln!(
            out,
            "  {:<52} {:>9} GFLOP/s {:>6} trials  {what}",
            w.readable, gflops, w.trials
        );
        if let Some(o) = object_of(&w.readable) {
            let _ = writeln!(
                out,
                "      object {} (symbol {}), header {}",
                o.files.object.display(),
                o.symbol,
                o.files.header.display()
            );
        }
    }
    Ok(out)
}
