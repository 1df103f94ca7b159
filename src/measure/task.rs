//! A measurement task: the workload every candidate of a batch computes,
//! and the inputs it is measured on.

use crate::ops;
use crate::te::{ComputeDag, HostTensor, WorkloadKey};

use super::error::MeasureError;

/// A workload to measure: a registered operator at a concrete shape.
///
/// Worker processes rebuild the DAG from the operator's name and shape and
/// check that it has the same [`WorkloadKey`], so a candidate can never be
/// measured on a different workload than the one it was made for.
#[derive(Clone)]
pub struct Task {
    op: String,
    shape: String,
    dag: ComputeDag,
    key: WorkloadKey,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("op", &self.op)
            .field("shape", &self.shape)
            .field("key", &self.key.to_string())
            .finish()
    }
}

impl Task {
    /// The task of operator `op` (see `tessera ops`) at `shape` (`K=V,…`;
    /// parameters left out take their defaults).
    pub fn from_registry(op: &str, shape: &str) -> Result<Task, MeasureError> {
        let spec = ops::find(op)?;
        let params = spec.parse_shape(shape)?;
        let dag = spec.build(&params)?;
        let key = dag.workload_key();
        Ok(Task {
            op: spec.name.to_string(),
            shape: params.to_text(),
            dag,
            key,
        })
    }

    /// The operator's registry name.
    pub fn op(&self) -> &str {
        &self.op
    }

    /// The full shape, every parameter named (`M=64,N=64,K=64`).
    pub fn shape(&self) -> &str {
        &self.shape
    }

    /// The workload's DAG.
    pub fn dag(&self) -> &ComputeDag {
        &self.dag
    }

    /// The workload key.
    pub fn key(&self) -> &WorkloadKey {
        &self.key
    }

    /// The inputs candidates are measured and verified on: deterministic
    /// pseudo-random values, the same in every process.
    pub fn inputs(&self) -> Vec<HostTensor> {
        self.dag
            .inputs()
            .iter()
            .enumerate()
            .map(|(n, t)| {
                let dims: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
                HostTensor::random(&dims, t.dtype(), n as u64 + 1)
            })
            .collect()
    }

    /// Output shapes and dtypes, in argument order.
    pub(crate) fn output_layouts(&self) -> Vec<(Vec<usize>, crate::te::DType)> {
        self.dag
            .outputs()
            .iter()
            .map(|t| {
                let dims = t.shape().iter().map(|&d| d as usize).collect();
                (dims, t.dtype())
            })
            .collect()
    }

    /// The mean reduction length of an output element (FLOPs per output
    /// element), which scales the rounding tolerance of verification.
    pub(crate) fn reduction_length(&self) -> f64 {
        let elements: i64 = self.dag.outputs().iter().map(|t| t.num_elements()).sum();
        self.dag.flop_count() as f64 / elements.max(1) as f64
    }
}
