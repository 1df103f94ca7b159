//! `tessera deploy m.onnx`: a model's kernels and its model artifact into
//! the schedules folder, with a table of each task's schedule.

use std::fmt::Write;
use std::path::Path;

use serde_json::json;

use super::error::CliError;
use crate::db::TuningDb;
use crate::graph::deployed::{self, ModelDeployOptions, TaskOutcome};
use crate::graph::printer::table;
use crate::runtime;

/// What `tessera deploy m.onnx` was asked.
pub(crate) struct Request<'a> {
    pub model: &'a Path,
    pub db: &'a Path,
    pub out: &'a Path,
    pub input_shapes: &'a [String],
    pub force: bool,
    pub json: bool,
}

/// Deploys `request.model` for this machine; the text or JSON to print.
pub(crate) fn deploy_model(request: &Request) -> Result<String, CliError> {
    if request.out.exists() && !request.out.is_dir() {
        return Err(deployed::ModelArtifactError::OutNotADir(request.out.to_path_buf()).into());
    }
    if !request.db.is_file() {
        return Err(CliError::Usage(format!(
            "no tuning database at {} (tune the model first with `tessera tune {} --db …`, or pass --db)",
            request.db.display(),
            request.model.display()
        )));
    }
    let database = TuningDb::open_existing(request.db)?;
    let device = runtime::host_device().key();
    let options = ModelDeployOptions {
        out: request.out.to_path_buf(),
        import: super::model::import_options(request.input_shapes)?,
        force: request.force,
    };
    let report = deployed::deploy_model(&database, &device, request.model, &options)?;
    let tuned = report
        .outcomes
        .iter()
        .filter(|o| !matches!(o, TaskOutcome::Default(_)))
        .count();
    let rows: Vec<(String, &str, String)> = report
        .outcomes
        .iter()
        .map(|o| match o {
            TaskOutcome::Written(f) => ("tuned".to_string(), "written", f.clone()),
            TaskOutcome::Unchanged(f) => ("tuned".to_string(), "unchanged", f.clone()),
            TaskOutcome::KeptFaster(f) => (
                "tuned".to_string(),
                "kept",
                format!("{f} (the existing artifact is faster; --force replaces it)"),
            ),
            TaskOutcome::Default(why) => ("default".to_string(), "-", why.clone()),
        })
        .collect();
    if request.json {
        let tasks: Vec<_> = report
            .artifact
            .tasks
            .iter()
            .zip(&rows)
            .map(|(t, (schedule, outcome, detail))| {
                json!({
                    "workload": t.readable,
                    "workload_key": t.workload_key,
                    "nodes": t.nodes,
                    "schedule": schedule,
                    "outcome": outcome,
                    "detail": detail,
                    "prepacked": t.prepacked,
                })
            })
            .collect();
        return Ok(format!(
            "{}\n",
            json!({
                "model": request.model.display().to_string(),
                "dir": report.dir.display().to_string(),
                "device": device.readable,
                "device_key": device.hash,
                "tuned": tuned,
                "tasks": tasks,
                "memory": report.artifact.memory,
            })
        ));
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "deployed {} to {} ({} tasks: {tuned} tuned, {} default)",
        request.model.display(),
        report.dir.display(),
        rows.len(),
        rows.len() - tuned
    );
    let table_rows: Vec<Vec<String>> = report
        .artifact
        .tasks
        .iter()
        .zip(&rows)
        .enumerate()
        .map(|(i, (t, (schedule, outcome, detail)))| {
            let packed = if t.prepacked.is_empty() {
                String::new()
            } else {
                format!(" [prepacked: {}]", t.prepacked.join(", "))
            };
            vec![
                format!("T{i}"),
                t.readable.clone(),
                t.nodes.len().to_string(),
                schedule.clone(),
                outcome.to_string(),
                format!("{detail}{packed}"),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "task",
            "workload",
            "nodes",
            "schedule",
            "artifact",
            "file / why",
        ],
        &table_rows,
    ));
    let m = &report.artifact.memory;
    let _ = writeln!(
        out,
        "memory plan: arena {} bytes (lower bound {}, {} without reuse)",
        m.arena_bytes, m.lower_bound_bytes, m.all_intermediate_bytes
    );
    Ok(out)
}
