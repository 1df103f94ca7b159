//! `tessera model bench`: a compiled model's end-to-end latency (median
//! over repeated runs after warm-up) with a per-node breakdown, and ONNX
//! Runtime's latency for the same file in the same run when it is installed.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::exec::{CompiledModel, NodeTiming};

/// The Python script that times ONNX Runtime (run with the script on stdin).
const ORT_LATENCY_PY: &str = include_str!("ort_latency.py");

/// The environment variable naming the Python that has onnxruntime.
pub const PYTHON_ENV: &str = "TESSERA_PYTHON";

/// End-to-end latency of a compiled model.
pub struct ModelTimings {
    /// Median over the runs.
    pub latency: Duration,
    /// Runs timed.
    pub runs: usize,
    /// Each node's median share.
    pub nodes: Vec<NodeTiming>,
}

/// Times `model` (inputs already set): `warmup` untimed runs, then `runs`
/// timed ones end to end, then `runs` node by node for the breakdown.
pub fn time_model(model: &mut CompiledModel, runs: usize, warmup: usize) -> ModelTimings {
    for _ in 0..warmup {
        model.execute();
    }
    let mut samples: Vec<Duration> = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            model.execute();
            start.elapsed()
        })
        .collect();
    samples.sort();
    let latency = samples[samples.len() / 2];
    let nodes = model.time_nodes(runs.max(1));
    ModelTimings {
        latency,
        runs: samples.len(),
        nodes,
    }
}

/// ONNX Runtime's figure for a model.
#[derive(Clone, Debug, Serialize)]
pub struct OrtLatency {
    /// Median latency, milliseconds.
    pub ort_latency_ms: f64,
    /// The onnxruntime version.
    pub ort_version: String,
}

/// ONNX Runtime's median latency for the model at `path` with `threads`
/// intra-op threads (all graph optimisations on), through the Python of
/// `TESSERA_PYTHON` (default `python3`); `Err` says why it could not run.
pub fn ort_latency(
    path: &Path,
    threads: usize,
    runs: usize,
    warmup: usize,
    input_shapes: &BTreeMap<String, Vec<usize>>,
) -> Result<OrtLatency, String> {
    let python = std::env::var(PYTHON_ENV).unwrap_or_else(|_| "python3".to_string());
    let shapes = serde_json::to_string(input_shapes).map_err(|e| e.to_string())?;
    let mut child = Command::new(&python)
        .arg("-")
        .arg(path)
        .arg(threads.to_string())
        .arg(runs.to_string())
        .arg(warmup.to_string())
        .arg(shapes)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!("cannot start {python} ({e}); set {PYTHON_ENV} to a Python with onnxruntime")
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(ORT_LATENCY_PY.as_bytes())
            .map_err(|e| format!("cannot talk to {python}: {e}"))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| format!("{python} failed: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last_line = stderr.lines().last().unwrap_or("").to_string();
    match output.status.code() {
        Some(0) => serde_json::from_slice::<serde_json::Value>(&output.stdout)
            .ok()
            .and_then(|v| {
                Some(OrtLatency {
                    ort_latency_ms: v.get("ort_latency_ms")?.as_f64()?,
                    ort_version: v.get("ort_version")?.as_str()?.to_string(),
                })
            })
            .ok_or_else(|| "onnxruntime printed no latency".to_string()),
        Some(3) => Err(format!(
            "ONNX Runtime is not installed for {python} ({last_line}); `pip install onnxruntime numpy` or set {PYTHON_ENV}"
        )),
        _ => Err(format!("ONNX Runtime failed on the model: {last_line}")),
    }
}
