//! Lowering: each graph node becomes a te [`ComputeDag`] (a registry
//! operator's where one fits, so that its tuning records apply; otherwise
//! built with the te API), or an alias when it only renames elements.

use crate::te::ComputeDag;

use super::error::GraphError;
use super::ir::{Graph, Node, Op};

/// A node's kernel: its DAG and which graph tensors its buffers are.
#[derive(Clone)]
pub struct NodeKernel {
    /// The DAG.
    pub dag: ComputeDag,
    /// The graph tensor of each DAG input, in `dag.inputs()` order
    /// (constants the DAG carries as literals are not among them).
    pub inputs: Vec<String>,
    /// The graph tensor of each DAG output, in `dag.outputs()` order.
    pub outputs: Vec<String>,
    /// The registry operator and its shape (`conv2d`, `N=1,C=64,…`) when
    /// the DAG is one, so records tuned for that op apply.
    pub registry_op: Option<(String, String)>,
}

/// How a node runs.
#[derive(Clone)]
pub enum Lowered {
    /// A compiled kernel.
    Kernel(NodeKernel),
    /// No kernel: the output holds the input's elements in the same order.
    Alias,
}

/// Lowers `node` of `graph`.
pub fn lower_node(graph: &Graph, node: &Node) -> Result<Lowered, GraphError> {
    if node.op.is_alias() {
        return Ok(Lowered::Alias);
    }
    let _ = graph;
    Err(GraphError::unsupported(node, "lowering is not written yet"))
}

/// The op types a node may have, as the error for an unsupported one lists them.
pub fn supported_op_types() -> &'static [&'static str] {
    super::onnx::SUPPORTED_OP_TYPES
}

#[allow(dead_code)]
fn op_of(node: &Node) -> &Op {
    &node.op
}
