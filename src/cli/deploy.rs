//! `tessera deploy`: tuned schedules out of the database into the
//! deployable `schedules/<device>/` folder; `tessera deploy --verify DIR`
//! checks every artifact of a schedules folder against the reference;
//! `tessera deploy m.onnx` deploys a model (see `deploy_model`).

use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::error::CliError;
use crate::codegen::CodegenOptions;
use crate::db::{self, TuningDb};
use crate::deploy::{self, DeployError, DeployOptions, DeployOutcome, VerifyOutcome};
use crate::measure::{MeasureOptions, Measurer, TimingOptions};
use crate::runtime::{self, DeviceKey, Target};

/// `tessera deploy`: write the best schedule of each workload tuned on this
/// device into OUT/<device>/ (artifacts and index), optionally as object
/// files; or, with `--verify DIR`, deploy nothing and check every artifact
/// under DIR: replayed, compiled, run in a measurement worker and compared
/// with the reference (exit code 3 when any fails).
#[derive(Debug, clap::Args)]
pub(crate) struct DeployArgs {
    /// An ONNX model: deploy its kernels' best schedules of this device
    /// and its model artifact (OUT/<device>/models/<stem>/: model.json and
    /// graph.onnx, the graph after the passes), for `tessera run m.onnx
    /// --from OUT` to load without passes, search or database.
    #[arg(
        value_name = "MODEL.onnx",
        conflicts_with_all = ["verify", "workloads", "aot", "device"]
    )]
    model: Option<PathBuf>,
    /// With a model: the shape of an input with dynamic dimensions
    /// (`NAME=1,3,224,224`; repeat for several).
    #[arg(long = "input-shape", value_name = "NAME=D0,D1,…", requires = "model")]
    input_shapes: Vec<String>,
    /// Deploy nothing: verify every artifact of every device folder in DIR
    /// (replay, compile, run against the reference, time) and report each;
    /// exit code 3 when any fails.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with_all = ["workloads", "force", "aot", "db", "out", "device"]
    )]
    verify: Option<PathBuf>,
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
    /// gets `<op>_<key>.o`, its C header, `tessera_runtime.c` and
    /// `tessera_kernels.c` (the micro-kernels tensorized kernels call).
    #[arg(long, conflicts_with = "device")]
    aot: bool,
    /// Deploy another device's records instead of this machine's: a
    /// readable name, `name#hash`, a key-hash prefix, or `all` (every device
    /// in the database, e.g. after merging the shards of a CI run).
    #[arg(long, value_name = "DEVICE")]
    device: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn deploy(args: &DeployArgs, target: &Target) -> Result<String, CliError> {
    if let Some(dir) = &args.verify {
        return verify(dir, args.json, target);
    }
    let path = args.db.clone().unwrap_or_else(db::default_path);
    if let Some(model) = &args.model {
        let request = super::deploy_model::Request {
            model,
            db: &path,
            out: &args.out,
            input_shapes: &args.input_shapes,
            force: args.force,
            json: args.json,
        };
        return super::deploy_model::deploy_model(&request);
    }
    if !path.is_file() {
        return Err(CliError::Usage(format!(
            "no tuning database at {} (tune first with `tessera tune`, or pass --db)",
            path.display()
        )));
    }
    let database = TuningDb::open_existing(&path)?;
    let devices = match &args.device {
        None => vec![runtime::host_device().key()],
        Some(selector) => devices_named(&database, selector, &path)?,
    };
    let mut out = String::new();
    for device in &devices {
        match deploy_for(args, target, &database, &path, device) {
            Ok(text) => out.push_str(&text),
            // With several devices, one without successes is a line, not the end.
            Err(CliError::NotFound(why)) if devices.len() > 1 => {
                out.push_str(&format!("{why}\n"));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// The devices of `database` that `selector` names (`all`: every one).
fn devices_named(
    database: &TuningDb,
    selector: &str,
    path: &Path,
) -> Result<Vec<DeviceKey>, CliError> {
    let mut all: Vec<DeviceKey> = database
        .list()?
        .into_iter()
        .map(|s| DeviceKey {
            readable: s.device.0,
            hash: s.device.1,
        })
        .collect();
    all.dedup();
    let named: Vec<DeviceKey> = if selector == "all" {
        all
    } else {
        let hashes = database.find_devices(selector)?;
        all.into_iter()
            .filter(|d| hashes.contains(&d.hash))
            .collect()
    };
    if named.is_empty() {
        return Err(CliError::NotFound(format!(
            "--device {selector}: no such device with records in {} (`tessera cache list --db {}` shows them)",
            path.display(),
            path.display()
        )));
    }
    Ok(named)
}

/// Deploys `device`'s records; the text or JSON to print.
fn deploy_for(
    args: &DeployArgs,
    target: &Target,
    database: &TuningDb,
    path: &Path,
    device: &DeviceKey,
) -> Result<String, CliError> {
    let options = DeployOptions {
        out: args.out.clone(),
        workloads: args.workloads.clone(),
        force: args.force,
    };
    let report = deploy::deploy_device(database, device, &options)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    if report.workloads.is_empty() {
        return Err(CliError::NotFound(format!(
            "nothing to deploy: {} has no successful records on device {device}",
            path.display(),
        )));
    }
    let objects = if args.aot {
        deploy::compile_deployed(&report, &CodegenOptions::for_target(*target))
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
                    "remeasured_gflops": w.remeasured_gflops,
                    "trials": w.trials,
                    "outcome": outcome,
                    "reason": reason,
                    "aot": object_of(&w.readable).map(|o| json!({
                        "symbol": o.symbol,
                        "object": o.files.object.display().to_string(),
                        "header": o.files.header.display().to_string(),
                        "runtime": o.files.runtime.display().to_string(),
                        "kernels": o.files.kernels.display().to_string(),
                    })),
                })
            })
            .collect();
        return Ok(format!(
            "{}\n",
            json!({
                "device_key": device.hash,
                "device": device.readable,
                "dir": report.device_dir.display().to_string(),
                "workloads": rows,
            })
        ));
    }
    let mut out = String::new();
    let _ = writeln!(out, "deploying to {}", report.device_dir.display());
    let _ = writeln!(
        out,
        "  {:<52} {:>9} {:>11}  (GFLOP/s: tuned = best of many, re-measured = median in fresh workers)",
        "workload", "tuned", "re-measured"
    );
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
        let number = |g: Option<f64>| g.map_or("-".into(), |g| format!("{g:.2}"));
        let _ = writeln!(
            out,
            "  {:<52} {:>9} {:>11} {:>6} trials  {what}",
            w.readable,
            number(w.gflops),
            number(w.remeasured_gflops),
            w.trials
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

/// `tessera deploy --verify DIR [--json]`.
fn verify(dir: &Path, json: bool, target: &Target) -> Result<String, CliError> {
    if !dir.is_dir() {
        // Before starting any worker.
        return Err(CliError::NotFound(
            DeployError::NoLibrary(dir.to_path_buf()).to_string(),
        ));
    }
    let options = MeasureOptions {
        timing: TimingOptions {
            repeat: 3,
            min_repeat_ms: 10.0,
            ..TimingOptions::default()
        },
        codegen: CodegenOptions::for_target(*target),
        ..MeasureOptions::default()
    };
    let mut measurer = Measurer::new(options)?;
    let report = deploy::verify(dir, None, &mut measurer).map_err(|e| match e {
        DeployError::NoLibrary(_) => CliError::NotFound(e.to_string()),
        DeployError::Measure(e) => CliError::Measure(e),
        e => CliError::Usage(e.to_string()),
    })?;
    if report.artifacts.is_empty() {
        return Err(CliError::NotFound(format!(
            "no artifacts in {} (it holds no <device>/ folder with an index.json; deploy with `tessera deploy --out {}`)",
            dir.display(),
            dir.display()
        )));
    }
    let total = report.artifacts.len();
    let failed = report.failures().len();
    let passed = total - failed;
    let output = if json {
        let rows: Vec<_> = report
            .artifacts
            .iter()
            .map(|a| {
                let (passed, gflops, recorded, prepacked, reason) = match &a.outcome {
                    VerifyOutcome::Passed {
                        gflops,
                        recorded_gflops,
                        prepacked,
                    } => (
                        true,
                        Some(*gflops),
                        Some(*recorded_gflops),
                        prepacked.clone(),
                        None,
                    ),
                    VerifyOutcome::Failed(reason) => {
                        (false, None, None, Vec::new(), Some(reason.clone()))
                    }
                };
                json!({
                    "device_dir": a.device_dir.display().to_string(),
                    "workload": a.readable,
                    "file": a.file.display().to_string(),
                    "passed": passed,
                    "gflops": gflops,
                    "recorded_gflops": recorded,
                    "prepacked": prepacked,
                    "reason": reason,
                })
            })
            .collect();
        format!(
            "{}\n",
            json!({
                "dir": dir.display().to_string(),
                "artifacts": rows,
                "passed": passed,
                "failed": failed,
            })
        )
    } else {
        let mut out = String::new();
        for a in &report.artifacts {
            let _ = match &a.outcome {
                VerifyOutcome::Passed {
                    gflops,
                    recorded_gflops,
                    prepacked,
                } => {
                    let packed = if prepacked.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; also with {} laid out ahead of time",
                            prepacked.join(", ")
                        )
                    };
                    writeln!(
                        out,
                        "ok    {}  {gflops:.2} GFLOP/s (recorded {recorded_gflops:.2}){packed}",
                        a.readable
                    )
                }
                VerifyOutcome::Failed(reason) => {
                    writeln!(out, "FAIL  {}  {reason}", a.readable)
                }
            };
        }
        let _ = writeln!(
            out,
            "verified {total} artifacts in {}: {passed} passed, {failed} failed",
            dir.display()
        );
        out
    };
    if failed > 0 {
        return Err(CliError::CheckFailed {
            report: output,
            summary: format!("{failed} of {total} artifacts failed verification"),
        });
    }
    Ok(output)
}
