//! Which schedule a benchmark times: the steps it was given, the best
//! record of a tuning database, or a deployed artifact; the default
//! schedule (with the reason) when there is none; and the best record
//! without micro-kernels, timed beside a tensorized best.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::db::{Lookup, TuningDb};
use crate::deploy::{Library, Resolution};
use crate::measure::Task;
use crate::runtime::{self, Target};
use crate::schedule::{State, Step, calls_micro_kernel};

use super::error::BenchError;

/// Where the schedule to time comes from.
#[derive(Clone, Debug)]
pub enum ScheduleSource {
    /// Steps read from a JSON file (`path` names them in the report).
    Steps {
        /// The file the steps were read from.
        path: PathBuf,
        /// The steps.
        steps: Vec<Step>,
    },
    /// The best record of this host in the tuning database at this path.
    Database(PathBuf),
    /// The artifacts of a schedules folder written by `tessera deploy`.
    Deployed(PathBuf),
}

/// What the timed schedule is, as the report's `source` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// Steps given by the caller.
    File,
    /// The best cached or deployed schedule.
    Tuned,
    /// The default schedule: nothing tuned was found.
    Fallback,
}

impl SourceKind {
    /// `file`, `tuned` or `fallback`.
    pub fn label(self) -> &'static str {
        match self {
            SourceKind::File => "file",
            SourceKind::Tuned => "tuned",
            SourceKind::Fallback => "fallback",
        }
    }
}

impl Serialize for SourceKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.label())
    }
}

/// The schedule resolved for one workload.
pub(super) struct Resolved {
    pub state: State,
    pub kind: SourceKind,
    /// The file, the record's origin, or why the default schedule is used.
    pub reason: String,
    /// The GFLOP/s the tuned schedule's record measured (NaN when unknown).
    pub record_gflops: Option<f64>,
}

impl Resolved {
    fn fallback(task: &Task, reason: String) -> Resolved {
        Resolved {
            state: State::new(task.dag()),
            kind: SourceKind::Fallback,
            reason,
            record_gflops: None,
        }
    }
}

/// The schedule to time for `task`, and where it came from.
pub(super) fn resolve(
    source: &ScheduleSource,
    task: &Task,
    target: &Target,
) -> Result<Resolved, BenchError> {
    let dag = task.dag();
    match source {
        ScheduleSource::Steps { path, steps } => Ok(Resolved {
            state: State::replay(dag, steps).map_err(|source| BenchError::ScheduleApply {
                path: path.clone(),
                source,
            })?,
            kind: SourceKind::File,
            reason: format!("--schedule {}", path.display()),
            record_gflops: None,
        }),
        ScheduleSource::Deployed(dir) => Ok(
            match Library::open_with_target(dir, *target)?.resolve(dag) {
                Resolution::Tuned {
                    artifact,
                    path,
                    state,
                } => Resolved {
                    state: *state,
                    kind: SourceKind::Tuned,
                    reason: path.display().to_string(),
                    record_gflops: Some(artifact.gflops),
                },
                Resolution::Fallback(reason) => Resolved::fallback(task, reason.to_string()),
            },
        ),
        ScheduleSource::Database(path) => resolve_in_database(path, task),
    }
}

fn resolve_in_database(path: &Path, task: &Task) -> Result<Resolved, BenchError> {
    if !path.is_file() {
        return Ok(Resolved::fallback(
            task,
            format!(
                "no tuning database at {} (run `tessera tune` first)",
                path.display()
            ),
        ));
    }
    let database = TuningDb::open_existing(path)?;
    let device = runtime::host_device().key();
    let (found, _) = database.lookup(task, &device)?;
    Ok(match found {
        Lookup::Exact(record) => Resolved {
            state: State::replay(task.dag(), &record.steps).map_err(|source| {
                BenchError::ScheduleApply {
                    path: path.to_path_buf(),
                    source,
                }
            })?,
            kind: SourceKind::Tuned,
            reason: format!("best of {}", path.display()),
            record_gflops: Some(record.gflops().unwrap_or(f64::NAN)),
        },
        Lookup::OtherDevices(devices) => Resolved::fallback(
            task,
            format!(
                "tuned only on other devices ({}), not on {device}",
                devices
                    .iter()
                    .map(|(name, _, n)| format!("{name}: {n} records"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        Lookup::Nothing(shapes) => Resolved::fallback(
            task,
            if shapes.is_empty() {
                format!("{} is not tuned in {}", task.key().readable, path.display())
            } else {
                format!(
                    "{} is not tuned in {} (tuned shapes: {})",
                    task.key().readable,
                    path.display(),
                    shapes.join(", ")
                )
            },
        ),
    })
}

/// The best measured schedule of `task` in the database that calls no
/// micro-kernel (what `tune --no-tensorize` finds), when the source is a
/// database that has one.
pub(super) fn best_plain(source: &ScheduleSource, task: &Task) -> Option<State> {
    let ScheduleSource::Database(path) = source else {
        return None;
    };
    let database = TuningDb::open_existing(path).ok()?;
    let device = runtime::host_device().key();
    let records = database.records(&task.key().hash, &device.hash).ok()?;
    records
        .into_iter()
        .filter(|r| !calls_micro_kernel(&r.steps))
        .filter_map(|r| Some((r.result.median()?, r.steps)))
        .filter(|(cost, _)| cost.is_finite())
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .and_then(|(_, steps)| State::replay(task.dag(), &steps).ok())
}
