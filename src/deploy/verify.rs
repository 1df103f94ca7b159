//! `tessera deploy --verify`: every deployed artifact replayed, compiled,
//! run in a measurement worker and checked against the reference, so that a
//! stale, corrupt or wrong artifact is found before it is shipped.
//!
//! Per device folder (a folder under the schedules root that holds
//! `index.json`), each index entry is checked in order: the artifact file
//! reads; its workload key is its index entry's; its registry operator
//! rebuilds a DAG with the same key (else it is stale); its steps replay on
//! that DAG; and the measurer builds, runs, verifies and times it; an
//! artifact with `layout_rewrites` is also compiled with those inputs laid
//! out ahead of time, run on the packed inputs and checked. A `*.json`
//! file the index does not list fails too, so nothing unverified hides in a
//! device folder.
//!
//! The reference is the registry's DAG for the artifact's op and shape (its
//! interpreter, or for large tasks the default schedule checked at sampled
//! points against it), never anything the artifact carries: the artifact's
//! canonical DAG text is not read, its key must be the rebuilt DAG's, and its
//! `layout_rewrites` must be what its steps plan. What is left to edit are
//! the steps, and a step list that replays computes the same function as the
//! DAG (invariant 2: steps are validated, annotations of reduction loops are
//! refused, splits that do not divide are guarded). So no edit of an
//! artifact reaches the numeric-mismatch branch; only a code generation bug
//! would. [`verify_with`] takes [`InjectedWrongAnswer`]s, the test hook that
//! makes a kernel answer wrong so that this branch is tested
//! ([`WRONG_ANSWER_ENV`] does the same for `tessera deploy --verify`).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use crate::db::RebuildError;
use crate::measure::{Fault, MeasureError, Measurer};
use crate::runtime::DeviceKey;
use crate::schedule::State;

use super::aot::AOT_DIR;
use super::artifact::{Artifact, INDEX_FILE, Index, IndexEntry, device_dir};
use super::error::DeployError;
use super::verify_prepacked::verify_prepacked;

/// The environment variable through which `tessera deploy --verify` (a
/// child process in tests) takes [`InjectedWrongAnswer`]s, read by
/// [`verify`]: `;`-separated `KIND:WORKLOAD`, where `KIND` is `plain` or
/// `prepacked=RELATIVE_ERROR` and `WORKLOAD` a readable form as the index
/// writes it, e.g. `plain:matmul[M=32,N=32,K=32,f32]`. A test hook: it can
/// only make artifacts fail, never pass.
pub const WRONG_ANSWER_ENV: &str = "TESSERA_VERIFY_WRONG_ANSWER";

/// Which kernel of an artifact answers wrong, and how.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WrongAnswer {
    /// The plain kernel, run in its measurement worker, returns its first
    /// output element with the top bit of its exponent flipped
    /// ([`Fault::WrongResult`]): a gross error.
    Plain,
    /// The kernel with the artifact's inputs laid out ahead of time returns
    /// its first output element `x` (an `f32`) as
    /// `x + relative_error · max(1, |x|)`: an error as small as the
    /// tolerance, to test the threshold.
    Prepacked {
        /// How far the element moves, relative to `max(1, |x|)`.
        relative_error: f64,
    },
}

/// A wrong answer injected on purpose into one artifact's kernel while it
/// is verified: the test hook of the numeric-mismatch branch, which no edit
/// of an artifact reaches (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct InjectedWrongAnswer {
    /// The workload whose kernel answers wrong (its readable form, as in the index).
    pub workload: String,
    /// Which kernel, and how.
    pub kind: WrongAnswer,
}

impl InjectedWrongAnswer {
    /// The wrong answers [`WRONG_ANSWER_ENV`] asks for (none when unset).
    pub fn from_env() -> Result<Vec<InjectedWrongAnswer>, DeployError> {
        let Some(value) = std::env::var_os(WRONG_ANSWER_ENV) else {
            return Ok(Vec::new());
        };
        let value = value.to_string_lossy();
        let bad = || DeployError::BadWrongAnswerHook(value.to_string());
        let mut out = Vec::new();
        for item in value.split(';').map(str::trim).filter(|i| !i.is_empty()) {
            let (kind, workload) = item.split_once(':').ok_or_else(bad)?;
            let kind = match kind.split_once('=') {
                None if kind == "plain" => WrongAnswer::Plain,
                Some(("prepacked", error)) => WrongAnswer::Prepacked {
                    relative_error: error.parse().map_err(|_| bad())?,
                },
                _ => return Err(bad()),
            };
            out.push(InjectedWrongAnswer {
                workload: workload.to_string(),
                kind,
            });
        }
        Ok(out)
    }
}

/// What verifying one artifact found.
#[derive(Clone, Debug, PartialEq)]
pub enum VerifyOutcome {
    /// Replayed, compiled, ran in a measurement worker and matched the reference.
    Passed {
        /// GFLOP/s measured now (median cost).
        gflops: f64,
        /// GFLOP/s the artifact records from when it was tuned.
        recorded_gflops: f64,
        /// The inputs (of its `layout_rewrites`) with which the kernel was
        /// also compiled, run and checked laid out ahead of time.
        prepacked: Vec<String>,
    },
    /// Why it failed (one line: what and how to fix).
    Failed(String),
}

impl VerifyOutcome {
    /// Whether the artifact verified.
    pub fn passed(&self) -> bool {
        matches!(self, VerifyOutcome::Passed { .. })
    }
}

/// One artifact (or stray file) of a schedules folder and what verifying it found.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifiedArtifact {
    /// The device folder.
    pub device_dir: PathBuf,
    /// The workload's readable form (from the index entry); for a file the
    /// index does not describe, its file name.
    pub readable: String,
    /// The artifact file.
    pub file: PathBuf,
    /// Passed with its speed, or failed with the reason.
    pub outcome: VerifyOutcome,
}

/// Everything `verify` checked, sorted by device folder, then readable form.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct VerifyReport {
    /// One entry per artifact (and per stray or unreadable file).
    pub artifacts: Vec<VerifiedArtifact>,
}

impl VerifyReport {
    /// The artifacts that failed.
    pub fn failures(&self) -> Vec<&VerifiedArtifact> {
        self.artifacts
            .iter()
            .filter(|a| !a.outcome.passed())
            .collect()
    }

    /// How many artifacts passed.
    pub fn passed(&self) -> usize {
        self.artifacts.len() - self.failures().len()
    }
}

/// Verifies every artifact of every device folder under `root` (or only the
/// folder of `device` when given). Errors only when `root` is not a schedules
/// folder ([`DeployError::NoLibrary`]) or unreadable, or when the measurer
/// itself fails; every per-artifact problem is a [`VerifyOutcome::Failed`].
///
/// `root` may also be one device folder (it holds `index.json` itself).
/// The kernels answer wrong where [`WRONG_ANSWER_ENV`] says (a test hook;
/// unset, never).
pub fn verify(
    root: &Path,
    device: Option<&DeviceKey>,
    measurer: &mut Measurer,
) -> Result<VerifyReport, DeployError> {
    verify_with(root, device, measurer, &InjectedWrongAnswer::from_env()?)
}

/// As [`verify`], with the kernels of the workloads `wrong_answers` name
/// answering wrong on purpose (a test hook; [`verify`] takes them from
/// [`WRONG_ANSWER_ENV`]).
pub fn verify_with(
    root: &Path,
    device: Option<&DeviceKey>,
    measurer: &mut Measurer,
    wrong_answers: &[InjectedWrongAnswer],
) -> Result<VerifyReport, DeployError> {
    if !root.is_dir() {
        return Err(DeployError::NoLibrary(root.to_path_buf()));
    }
    let folders: Vec<PathBuf> = match device {
        Some(device) => {
            let dir = device_dir(root, device);
            if dir.is_dir() { vec![dir] } else { Vec::new() }
        }
        None if root.join(INDEX_FILE).is_file() => vec![root.to_path_buf()],
        None => {
            let mut dirs = Vec::new();
            for entry in std::fs::read_dir(root).map_err(DeployError::io(root))? {
                let path = entry.map_err(DeployError::io(root))?.path();
                if path.is_dir() && path.file_name().is_some_and(|n| n != AOT_DIR) {
                    dirs.push(path);
                }
            }
            dirs.sort();
            dirs
        }
    };
    let mut artifacts = Vec::new();
    for dir in folders {
        verify_folder(&dir, measurer, wrong_answers, &mut artifacts)?;
    }
    artifacts.sort_by(|a, b| {
        (&a.device_dir, &a.readable, &a.file).cmp(&(&b.device_dir, &b.readable, &b.file))
    });
    Ok(VerifyReport { artifacts })
}

/// The `*.json` files directly in `dir` other than `index.json`, sorted.
fn json_files(dir: &Path) -> Result<Vec<PathBuf>, DeployError> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(DeployError::io(dir))? {
        let path = entry.map_err(DeployError::io(dir))?.path();
        let is_json = path.extension().is_some_and(|e| e == "json");
        let is_index = path.file_name().is_some_and(|n| n == INDEX_FILE);
        if is_json && !is_index && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn file_label(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

fn verify_folder(
    dir: &Path,
    measurer: &mut Measurer,
    wrong_answers: &[InjectedWrongAnswer],
    out: &mut Vec<VerifiedArtifact>,
) -> Result<(), DeployError> {
    let failed = |file: PathBuf, readable: String, reason: String| VerifiedArtifact {
        device_dir: dir.to_path_buf(),
        readable,
        file,
        outcome: VerifyOutcome::Failed(reason),
    };
    let strays = json_files(dir)?;
    let index_path = dir.join(INDEX_FILE);
    if !index_path.is_file() {
        // Not a device folder unless it holds artifacts without their index.
        if !strays.is_empty() {
            out.push(failed(
                index_path,
                INDEX_FILE.to_string(),
                format!(
                    "no index.json in a folder with {} artifact file(s); redeploy with `tessera deploy` (or remove the folder)",
                    strays.len()
                ),
            ));
        }
        return Ok(());
    }
    let index = match Index::read(&index_path) {
        Ok(index) => index,
        Err(e) => {
            let reason = match e {
                DeployError::BadFile { reason, .. } => reason,
                other => other.to_string(),
            };
            out.push(failed(
                index_path,
                INDEX_FILE.to_string(),
                format!(
                    "{reason}; none of this folder's artifacts can be verified — redeploy with `tessera deploy`"
                ),
            ));
            return Ok(());
        }
    };
    let listed: BTreeSet<&str> = index.artifacts.iter().map(|e| e.file.as_str()).collect();
    for entry in &index.artifacts {
        let injected = |wanted: fn(&WrongAnswer) -> bool| {
            wrong_answers
                .iter()
                .filter(|w| w.workload == entry.readable)
                .map(|w| w.kind)
                .find(wanted)
        };
        let outcome = verify_entry(
            dir,
            &index,
            entry,
            measurer,
            injected(|k| matches!(k, WrongAnswer::Plain)).is_some(),
            injected(|k| matches!(k, WrongAnswer::Prepacked { .. })),
        )?;
        out.push(VerifiedArtifact {
            device_dir: dir.to_path_buf(),
            readable: entry.readable.clone(),
            file: dir.join(&entry.file),
            outcome,
        });
    }
    for stray in strays {
        let name = file_label(&stray);
        if !listed.contains(name.as_str()) {
            out.push(failed(
                stray,
                name,
                "not in index.json, so never loaded or verified; redeploy with `tessera deploy` or remove it".into(),
            ));
        }
    }
    Ok(())
}

/// Whether `name` is a plain file name (no folders, no `..`).
fn is_plain_file_name(name: &str) -> bool {
    let mut components = Path::new(name).components();
    matches!(components.next(), Some(Component::Normal(_))) && components.next().is_none()
}

/// Verifies one index entry; `plain_wrong` and `prepacked_wrong` are the
/// wrong answers injected into its kernels (test hooks).
fn verify_entry(
    dir: &Path,
    index: &Index,
    entry: &IndexEntry,
    measurer: &mut Measurer,
    plain_wrong: bool,
    prepacked_wrong: Option<WrongAnswer>,
) -> Result<VerifyOutcome, DeployError> {
    let fail = |reason: String| Ok(VerifyOutcome::Failed(reason));
    if !is_plain_file_name(&entry.file) {
        return fail(format!(
            "the index names '{}', not a file in its folder; redeploy with `tessera deploy`",
            entry.file
        ));
    }
    let path = dir.join(&entry.file);
    let artifact = match Artifact::read(&path) {
        Ok(artifact) => artifact,
        Err(DeployError::BadFile { reason, .. }) => {
            return fail(format!("{reason}; redeploy it with `tessera deploy`"));
        }
        Err(DeployError::Io { source, .. }) => {
            return fail(format!(
                "cannot read the artifact: {source}; redeploy it with `tessera deploy`"
            ));
        }
        Err(e) => return fail(format!("{e}; redeploy it with `tessera deploy`")),
    };
    if artifact.workload.key != entry.workload_key {
        return fail(format!(
            "it is the artifact of {} (workload key {}), not of its index entry (key {}); redeploy with `tessera deploy`",
            artifact.workload.readable,
            short(&artifact.workload.key),
            short(&entry.workload_key)
        ));
    }
    if artifact.device.key != index.device_key {
        return fail(format!(
            "it was tuned on device {}, not on its folder's device {}; redeploy with `tessera deploy`",
            artifact.device.readable, index.device
        ));
    }
    let task = match artifact.workload.task() {
        Ok(task) => task,
        Err(why @ RebuildError::Changed { .. }) => {
            return fail(format!("stale: {why}; tune and deploy again"));
        }
        Err(why) => {
            return fail(format!(
                "{why} ({}); register the operator in this binary, or tune and deploy again",
                artifact.workload.readable
            ));
        }
    };
    let state = match State::replay(task.dag(), &artifact.steps) {
        Ok(state) => state,
        Err(e) => {
            return fail(format!(
                "its schedule does not replay: {e}; tune and deploy again"
            ));
        }
    };
    let fault = plain_wrong.then_some(Fault::WrongResult);
    let candidate = [(state.steps().to_vec(), fault)];
    let results = match measurer.measure_steps(&task, &candidate, &|_| {}) {
        Ok(results) => results,
        // Problems of this task's reference are this artifact's failure; a
        // measurer that cannot work at all fails the whole verification.
        Err(e @ (MeasureError::Reference { .. } | MeasureError::Interp(_))) => {
            return fail(format!("{e}; the artifact could not be checked"));
        }
        Err(e) => return Err(e.into()),
    };
    let Some(result) = results.into_iter().next() else {
        return fail("the measurer returned no result".into());
    };
    if !result.is_ok() {
        return fail(format!(
            "{}: {}; tune and deploy again",
            result.error_kind,
            result.error_msg.trim()
        ));
    }
    if !artifact.layout_rewrites.is_empty()
        && let Err(why) = verify_prepacked(
            &task,
            &artifact.steps,
            &artifact.layout_rewrites,
            measurer.target(),
            prepacked_wrong,
        )
    {
        let inputs: Vec<&str> = artifact
            .layout_rewrites
            .iter()
            .map(|r| r.input.as_str())
            .collect();
        return fail(format!(
            "the kernel with {} laid out ahead of time fails: {why}; tune and deploy again",
            inputs.join(", ")
        ));
    }
    match result.median() {
        Some(median) if median > 0.0 => Ok(VerifyOutcome::Passed {
            gflops: task.dag().flop_count() as f64 / median / 1e9,
            recorded_gflops: artifact.gflops,
            prepacked: artifact
                .layout_rewrites
                .iter()
                .map(|r| r.input.clone())
                .collect(),
        }),
        _ => fail("measured, but no positive time was recorded; run the verification again".into()),
    }
}

/// The first 12 hex digits of a key hash.
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_file_names_must_stay_in_their_folder() {
        assert!(is_plain_file_name("matmul_M32-0123456789ab.json"));
        assert!(!is_plain_file_name("../elsewhere.json"));
        assert!(!is_plain_file_name("sub/dir.json"));
        assert!(!is_plain_file_name("/abs.json"));
        assert!(!is_plain_file_name(""));
    }

    #[test]
    fn failures_are_the_failed_outcomes() {
        let entry = |readable: &str, outcome| VerifiedArtifact {
            device_dir: PathBuf::from("d"),
            readable: readable.into(),
            file: PathBuf::from(format!("d/{readable}.json")),
            outcome,
        };
        let report = VerifyReport {
            artifacts: vec![
                entry(
                    "a",
                    VerifyOutcome::Passed {
                        gflops: 1.0,
                        recorded_gflops: 2.0,
                        prepacked: Vec::new(),
                    },
                ),
                entry("b", VerifyOutcome::Failed("why".into())),
            ],
        };
        assert_eq!(report.passed(), 1);
        let failures = report.failures();
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].readable, "b");
    }
}
