//! What a benchmark found, as typed values: one workload's
//! [`BenchReport`] and a suite's [`SuiteBenchReport`]. Serialised, they
//! are `tessera bench --json`'s objects (keys in alphabetical order, as
//! the `serde_json::Value` of [`BenchReport::to_json`] prints them).

use serde::{Serialize, Serializer};

use crate::codegen::OptLevel;
use crate::measure::ceilings::{AppliedCeiling, Ceilings};

use super::schedule::SourceKind;

/// One workload benched: the chosen schedule, verified against the default
/// schedule, timed in the same run as its contenders.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// The suite's label of the workload (suites only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The operator's registry name.
    pub op: String,
    /// The full shape, every parameter named.
    pub shape: String,
    /// The workload key (readable#hash).
    pub workload: String,
    /// Threads of parallel loops.
    pub threads: usize,
    /// Cranelift's optimisation level.
    #[serde(serialize_with = "lowercase_opt_level")]
    pub opt_level: OptLevel,
    /// Whether FMA contraction was off.
    pub strict_fp: bool,
    /// What the timed schedule is.
    pub source: SourceKind,
    /// Where it came from (a file, a database, an artifact) or why the
    /// default schedule stands in.
    pub source_reason: String,
    /// GFLOP/s of the timed schedule (median).
    pub gflops: f64,
    /// GFLOP/s its record measured when tuned (tuned schedules only; null
    /// when the record has none).
    pub record_gflops: Option<f64>,
    /// Median time of a run, in milliseconds.
    pub median_ms: f64,
    /// Fastest run, in milliseconds.
    pub min_ms: f64,
    /// GFLOP/s the ceiling that applies allows this workload: the roofline
    /// `min(compute, intensity × bandwidth)` of [`ceiling`](Self::ceiling).
    pub peak_gflops: f64,
    /// The same as `fraction_of_ceiling` (the key's older name).
    pub peak_fraction: f64,
    /// The widest vector ISA of this host (`f32x4` where nothing is wider
    /// than Cranelift's vectors).
    pub native_isa: String,
    /// GFLOP/s the widest ISA's roofline allows this workload.
    pub native_peak_gflops: f64,
    /// The same as `fraction_of_roofline`.
    pub native_peak_fraction: f64,
    /// Flops per byte of the workload's inputs and outputs.
    pub arithmetic_intensity: f64,
    /// Bytes of the workload's inputs and outputs: the least a run moves.
    pub min_bytes: f64,
    /// The least time the ceiling that applies allows over the median time:
    /// the compute ceiling of the kernel's code (f32x4, or the widest ISA
    /// when it calls full-width micro-kernels) or the bandwidth of the
    /// memory level its bytes fit in, whichever bounds it.
    pub fraction_of_ceiling: f64,
    /// The same over the machine's best roofline (the widest ISA's compute
    /// ceiling): how far the workload is from what this machine can do.
    pub fraction_of_roofline: f64,
    /// The ceiling that applies to this kernel, and which kind it is.
    pub ceiling: AppliedCeiling,
    /// The widest ISA's roofline over this workload.
    pub roofline: AppliedCeiling,
    /// The machine's measured ceilings.
    pub machine_ceilings: Ceilings,
    /// Compile time of the timed schedule, in milliseconds.
    pub compile_ms: f64,
    /// GFLOP/s of the default schedule.
    pub default_gflops: f64,
    /// The same as `default_gflops` (the key's older name).
    pub untuned_gflops: f64,
    /// The tolerance on the relative error of verification.
    pub tolerance: f64,
    /// The largest relative error of any timed kernel against the default schedule.
    pub max_rel_error: f64,
    /// GFLOP/s of the best record without micro-kernels, timed when the
    /// timed schedule is tensorized and the database has one.
    pub plain_gflops: Option<f64>,
    /// The inputs taken as constants.
    pub constants: Vec<String>,
    /// GFLOP/s of the schedule with the constants laid out ahead of time.
    pub prepacked_gflops: Option<f64>,
    /// The Rust GEMM crates on the same inputs (matrix products only).
    pub peers: PeerGflops,
}

/// GFLOP/s of the Rust GEMM crates in the same run; both absent for an op
/// that is no matrix product, or in a build without the `cli` feature.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PeerGflops {
    /// The `gemm` crate on the same threads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gemm: Option<f64>,
    /// The `matrixmultiply` crate (one thread).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matrixmultiply: Option<f64>,
}

impl PeerGflops {
    /// The peers that ran, by name, in alphabetical order.
    pub fn measured(&self) -> Vec<(&'static str, f64)> {
        [("gemm", self.gemm), ("matrixmultiply", self.matrixmultiply)]
            .into_iter()
            .filter_map(|(name, g)| Some((name, g?)))
            .collect()
    }
}

/// Every workload of a suite benched in one run.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteBenchReport {
    /// The suite's name.
    pub suite: String,
    /// Threads of parallel loops.
    pub threads: usize,
    /// The workloads, in suite order (each with its label).
    pub workloads: Vec<BenchReport>,
}

impl BenchReport {
    /// Tuned over default GFLOP/s.
    pub fn speedup(&self) -> f64 {
        self.gflops / self.default_gflops
    }

    /// The JSON object (its maps print their keys in alphabetical order).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!(self)
    }
}

impl SuiteBenchReport {
    /// The JSON object (its maps print their keys in alphabetical order).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!(self)
    }
}

fn lowercase_opt_level<S: Serializer>(level: &OptLevel, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format!("{level:?}").to_lowercase())
}
