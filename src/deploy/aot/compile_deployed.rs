//! `tessera deploy --aot`: each deployed artifact also compiled ahead of
//! time into `<device>/aot/<symbol>.o` with its C header, beside one copy
//! of the C runtime, so a C program can link the tuned kernel without a JIT.

use crate::codegen::CodegenOptions;
use crate::deploy::{Artifact, DeployError, DeployOutcome, DeployReport};
use crate::schedule::State;

use super::{AotFiles, write_aot};

/// Folder of the object files inside a device folder.
pub const AOT_DIR: &str = "aot";

/// One workload's object file and header.
#[derive(Clone, Debug, PartialEq)]
pub struct AotWorkload {
    /// The workload's readable form.
    pub readable: String,
    /// The exported C symbol.
    pub symbol: String,
    /// The files written.
    pub files: AotFiles,
}

/// The C symbol of a deployed workload: its operator and 12 hex digits of
/// its key, e.g. `matmul_1aece7e786b4`.
pub fn aot_symbol(artifact: &Artifact) -> String {
    let op = artifact
        .workload
        .op
        .clone()
        .unwrap_or_else(|| artifact.workload.readable.clone());
    let mut symbol: String = op
        .chars()
        .take_while(|&c| c != '[')
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if symbol.is_empty() || symbol.starts_with(|c: char| c.is_ascii_digit()) {
        symbol.insert_str(0, "kernel_");
    }
    let short = artifact
        .workload
        .key
        .get(..12)
        .unwrap_or(&artifact.workload.key);
    format!("{symbol}_{short}")
}

/// Compiles every artifact `report` deployed (written, unchanged or kept)
/// into `<device>/aot/`.
pub fn compile_deployed(
    report: &DeployReport,
    options: &CodegenOptions,
) -> Result<Vec<AotWorkload>, DeployError> {
    let dir = report.device_dir.join(AOT_DIR);
    let mut out = Vec::new();
    for workload in &report.workloads {
        let (Some(path), false) = (
            &workload.file,
            matches!(workload.outcome, DeployOutcome::Skipped(_)),
        ) else {
            continue;
        };
        let artifact = Artifact::read(path)?;
        let w = &artifact.workload;
        if w.op.is_none() && w.dag.is_none() {
            continue;
        }
        let task = w.task().map_err(|e| DeployError::BadFile {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let state = State::replay(task.dag(), &artifact.steps)?;
        let func = crate::tir::lower(&state)?;
        let symbol = aot_symbol(&artifact);
        let description = format!("{} (tuned: {:.2} GFLOP/s)", task.key(), artifact.gflops);
        let files = write_aot(&func, &symbol, &description, &dir, options)?;
        out.push(AotWorkload {
            readable: artifact.workload.readable.clone(),
            symbol,
            files,
        });
    }
    Ok(out)
}
