//! `tessera cache`: inspect and move tuning records — list, best, export,
//! import, merge, prune.

use std::fmt::Write;
use std::path::PathBuf;

use clap::Subcommand;

use super::error::CliError;
use crate::db::{self, Lookup, SkippedRecord, TuningDb};
use crate::measure::Task;
use crate::runtime::{DeviceKey, host_device};

/// `tessera cache` and its database option.
#[derive(Debug, clap::Args)]
pub(crate) struct CacheArgs {
    /// The tuning database (default: TESSERA_DB, else tuning_logs/tuning.db).
    #[arg(long, global = true)]
    db: Option<PathBuf>,
    #[command(subcommand)]
    command: CacheCommand,
}

#[derive(Debug, Subcommand)]
enum CacheCommand {
    /// Workloads per device: record count and best GFLOP/s.
    List,
    /// The best record of an operator at a shape on this device (or
    /// --device), or what exists instead. Exit code 1 when there is no exact match.
    Best {
        /// The operator (see `tessera ops`).
        op: String,
        /// Shape parameters, e.g. `M=512,N=512,K=512`.
        #[arg(long, default_value = "")]
        shape: String,
        /// Another device: readable name, name#hash, or a hash prefix.
        #[arg(long)]
        device: Option<String>,
        /// Print only the steps (a schedule file for --schedule).
        #[arg(long)]
        steps_only: bool,
    },
    /// Write records as JSON lines.
    Export {
        /// The log file to write (a name ending in .gz is gzip-compressed).
        #[arg(long)]
        out: PathBuf,
        /// Only this device (readable name, name#hash, or a hash prefix).
        #[arg(long)]
        device: Option<String>,
        /// Only this workload (readable form, form#hash, or a hash prefix).
        #[arg(long)]
        workload: Option<String>,
    },
    /// Read records from a JSON-lines log (records already stored are not added again).
    Import {
        /// The log file (.gz: gzip-compressed).
        file: PathBuf,
        /// Import the valid lines even if some are malformed.
        #[arg(long)]
        skip_bad: bool,
    },
    /// Copy every record of another database into this one.
    Merge {
        /// The other database (only read).
        other: PathBuf,
    },
    /// Keep the N fastest successful records per workload and device; delete the rest.
    Prune {
        /// Records to keep per workload and device.
        #[arg(long)]
        keep: usize,
    },
}

/// `tessera cache …`.
pub(crate) fn cache(args: &CacheArgs) -> Result<String, CliError> {
    let path = args.db.clone().unwrap_or_else(db::default_path);
    let creates = matches!(
        args.command,
        CacheCommand::Import { .. } | CacheCommand::Merge { .. }
    );
    let mut db = if creates {
        TuningDb::open(&path)?
    } else {
        TuningDb::open_existing(&path)?
    };
    let mut out = String::new();
    match &args.command {
        CacheCommand::List => list(&db, &mut out)?,
        CacheCommand::Best {
            op,
            shape,
            device,
            steps_only,
        } => return best(&db, op, shape, device.as_deref(), *steps_only),
        CacheCommand::Export {
            out: file,
            device,
            workload,
        } => {
            let n = db.export_jsonl(file, device.as_deref(), workload.as_deref())?;
            let _ = writeln!(out, "wrote {n} records to {}", file.display());
        }
        CacheCommand::Import { file, skip_bad } => {
            let stats = db.import_jsonl(file, *skip_bad)?;
            let _ = writeln!(
                out,
                "read {} records from {}: {} new, {} already stored",
                stats.read,
                file.display(),
                stats.added,
                stats.read - stats.added
            );
            for (line, why) in &stats.skipped {
                let _ = writeln!(out, "skipped line {line}: {why}");
            }
        }
        CacheCommand::Merge { other } => {
            let stats = db.merge(other)?;
            let _ = writeln!(
                out,
                "merged {}: {} records read, {} new",
                other.display(),
                stats.read,
                stats.added
            );
        }
        CacheCommand::Prune { keep } => {
            let deleted = db.prune(*keep)?;
            let _ = writeln!(
                out,
                "deleted {deleted} records; kept the {keep} fastest successful record(s) of each workload on each device"
            );
        }
    }
    Ok(out)
}

fn list(db: &TuningDb, out: &mut String) -> Result<(), CliError> {
    let rows = db.list()?;
    if rows.is_empty() {
        let _ = writeln!(out, "{}: no records", db.path().display());
        return Ok(());
    }
    let width = rows
        .iter()
        .map(|r| r.workload.0.len() + 13)
        .max()
        .unwrap_or(0);
    let mut device = None;
    for row in rows {
        if device.as_ref() != Some(&row.device) {
            let _ = writeln!(
                out,
                "device {}#{}",
                row.device.0,
                &row.device.1[..12.min(row.device.1.len())]
            );
            device = Some(row.device.clone());
        }
        let name = format!(
            "{}#{}",
            row.workload.0,
            &row.workload.1[..12.min(row.workload.1.len())]
        );
        let best = row
            .best_gflops()
            .map_or("-".to_string(), |g| format!("{g:.2} GFLOP/s"));
        let _ = writeln!(
            out,
            "  {name:<width$}  {:>6} records  {:>6} ok  best {best}",
            row.records, row.successes
        );
    }
    Ok(())
}

fn skipped_lines(skipped: &[SkippedRecord], out: &mut String) {
    for s in skipped {
        let _ = writeln!(out, "skipped record {}: {}", s.record, s.reason);
    }
}

fn best(
    db: &TuningDb,
    op: &str,
    shape: &str,
    device: Option<&str>,
    steps_only: bool,
) -> Result<String, CliError> {
    let task = Task::from_registry(op, shape)?;
    let device = match device {
        None => host_device().key(),
        Some(selector) => {
            let keys = db.find_devices(selector)?;
            match keys.as_slice() {
                [hash] => DeviceKey {
                    hash: hash.clone(),
                    readable: selector.to_string(),
                },
                [] => {
                    return Err(CliError::Usage(format!(
                        "no device in {} matches '{selector}' (`tessera cache list` shows the stored ones)",
                        db.path().display()
                    )));
                }
                _ => {
                    return Err(CliError::Usage(format!(
                        "'{selector}' matches {} devices; give more of the hash",
                        keys.len()
                    )));
                }
            }
        }
    };
    let (found, skipped) = db.lookup(&task, &device)?;
    let mut out = String::new();
    let workload = task.key().to_string();
    match found {
        Lookup::Exact(record) => {
            let steps = serde_json::to_string_pretty(&record.steps).unwrap_or_default();
            if steps_only {
                return Ok(format!("{steps}\n"));
            }
            skipped_lines(&skipped, &mut out);
            let _ = writeln!(out, "exact match: {workload} on {device}");
            let _ = writeln!(
                out,
                "  {:.2} GFLOP/s (median {:.4} ms), tessera {}, measured at {:.0} (Unix time)",
                record.gflops().unwrap_or(f64::NAN),
                record.result.median().unwrap_or(f64::NAN) * 1e3,
                record.tessera_version,
                record.result.timestamp
            );
            let _ = writeln!(out, "steps:\n{steps}");
            Ok(out)
        }
        Lookup::OtherDevices(devices) => {
            skipped_lines(&skipped, &mut out);
            let list: Vec<String> = devices
                .iter()
                .map(|(name, hash, n)| {
                    format!("{name}#{} ({n} records)", &hash[..12.min(hash.len())])
                })
                .collect();
            let _ = write!(
                out,
                "no record of {workload} for device {device}; records exist for other device(s): {} \
                 — not used here (their timings do not transfer); tune on this device",
                list.join(", ")
            );
            Err(CliError::NotFound(out))
        }
        Lookup::Nothing(shapes) => {
            skipped_lines(&skipped, &mut out);
            let _ = write!(out, "no record of {workload} on any device");
            if !shapes.is_empty() {
                let _ = write!(
                    out,
                    "; {op} has records at other shapes: {} — not used for this shape",
                    shapes.join(", ")
                );
            }
            Err(CliError::NotFound(out))
        }
    }
}
