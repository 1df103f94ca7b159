//! The model's kernel DAGs: one te [`ComputeDag`] per distinct workload the
//! executor compiles, with the nodes it covers and which of its inputs are
//! the model's constants: the kernels of the fused graph (see
//! [`fusion`](super::fusion)), as the executor compiles them.

use crate::te::{ComputeDag, WorkloadKey};

use super::error::GraphError;
use super::fusion::fuse;
use super::ir::Graph;
use super::lower::Lowered;

/// One distinct kernel of a model.
#[derive(Clone)]
pub struct KernelDag {
    /// The DAG (that of the first node it covers).
    pub dag: ComputeDag,
    /// Its workload key.
    pub key: WorkloadKey,
    /// The registry operator and shape when the DAG is one.
    pub registry_op: Option<(String, String)>,
    /// The nodes that run it, in graph order.
    pub nodes: Vec<String>,
    /// The DAG's inputs (by the DAG's names) that are graph constants in
    /// every node it covers: the weights a schedule may lay out ahead of time.
    pub constant_inputs: Vec<String>,
}

impl KernelDag {
    /// Its tuning task (see [`NodeKernel::task`](super::lower::NodeKernel::task)).
    pub fn task(&self) -> Result<crate::measure::Task, crate::measure::MeasureError> {
        super::lower::task_of(&self.dag, self.registry_op.as_ref())
    }
}

/// The distinct kernel DAGs of `graph` after fusion, in order of first
/// use (`nodes` are the fused graph's: one a group); nodes that only alias
/// their input have none.
pub fn kernel_dags(graph: &Graph) -> Result<Vec<KernelDag>, GraphError> {
    let fused = fuse(graph, &[])?;
    let mut out: Vec<KernelDag> = Vec::new();
    for (node, lowered) in fused.graph.nodes.iter().zip(fused.lowered) {
        let Lowered::Kernel(kernel) = lowered else {
            continue;
        };
        let constant: Vec<String> = kernel
            .dag
            .inputs()
            .iter()
            .zip(&kernel.inputs)
            .filter(|(_, tensor)| graph.constant(tensor).is_some())
            .map(|(input, _)| input.name().to_string())
            .collect();
        let key = kernel.dag.workload_key();
        match out.iter_mut().find(|k| k.key.hash == key.hash) {
            Some(existing) => {
                existing.nodes.push(node.name.clone());
                existing.constant_inputs.retain(|c| constant.contains(c));
            }
            None => out.push(KernelDag {
                dag: kernel.dag,
                key,
                registry_op: kernel.registry_op,
                nodes: vec![node.name.clone()],
                constant_inputs: constant,
            }),
        }
    }
    Ok(out)
}
