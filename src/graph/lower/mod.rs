//! Lowering: each graph node becomes a te [`ComputeDag`] (a registry
//! operator's where one fits, so that its tuning records apply; otherwise
//! built with the te API), or an alias when it only renames elements.
//!
//! The DAG's inputs are the node's data inputs, in order, except constants
//! with one element, which are inlined as literals. An input placeholder may
//! have another shape than its graph tensor when it holds as many elements
//! (the executor reinterprets row-major); the output has exactly the graph
//! output's shape.

mod builder;
mod conv;
mod elementwise;
mod layout;
mod linalg;
mod normalization;
mod pool;
mod reduce;
mod window;

#[cfg(test)]
mod test_support;

use crate::te::ComputeDag;

use super::error::GraphError;
use super::ir::{Graph, Node, Op};
use builder::KernelBuilder;

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

impl NodeKernel {
    /// The tuning task of this kernel: its registry operator's when it is
    /// one (the records of tuning that operator alone apply), else its DAG's.
    pub fn task(&self) -> Result<crate::measure::Task, crate::measure::MeasureError> {
        task_of(&self.dag, self.registry_op.as_ref())
    }
}

/// The tuning task of `dag`, the registry operator `registry_op` (name,
/// shape) when it is one.
pub fn task_of(
    dag: &ComputeDag,
    registry_op: Option<&(String, String)>,
) -> Result<crate::measure::Task, crate::measure::MeasureError> {
    match registry_op {
        Some((op, shape)) => crate::measure::Task::from_registry(op, shape),
        None => crate::measure::Task::from_dag(dag.clone()),
    }
}

/// How a node runs.
// A node lowers once and the kernel is moved, not copied around: boxing it
// would only add a dereference for every user.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub enum Lowered {
    /// A compiled kernel.
    Kernel(NodeKernel),
    /// No kernel: the output holds the input's elements in the same order.
    Alias,
}

/// Lowers `node` of `graph`.
///
/// Errors: [`GraphError::Unsupported`] for attribute values no lowering
/// handles (naming what is supported), [`GraphError::BadNode`] for shapes
/// that contradict the operator, [`GraphError::Lower`] when the tensor
/// expression cannot be built.
pub fn lower_node(graph: &Graph, node: &Node) -> Result<Lowered, GraphError> {
    lower_with(KernelBuilder::new(graph, node))
}

/// Lowers `node` like [`lower_node`], except that elementwise nodes are
/// computed over the graph's shape of their output, never as a 2-D registry
/// operator: what a fused group needs to read them at the producer's index.
pub fn lower_node_at_graph_shape(graph: &Graph, node: &Node) -> Result<Lowered, GraphError> {
    let mut b = KernelBuilder::new(graph, node);
    b.registry_elementwise = false;
    lower_with(b)
}

fn lower_with(b: KernelBuilder<'_>) -> Result<Lowered, GraphError> {
    let node = b.node;
    match &node.op {
        Op::Reshape => Ok(Lowered::Alias),
        Op::Conv(attrs) => conv::conv(b, attrs),
        Op::BatchNormalization { epsilon } => normalization::batch_norm(b, *epsilon),
        Op::Unary(op) => elementwise::unary(b, *op),
        Op::Clip { min, max } => elementwise::clip(b, *min, *max),
        Op::LeakyRelu { alpha } => elementwise::leaky_relu(b, *alpha),
        Op::Binary(op) => elementwise::binary(b, *op),
        Op::Sum => elementwise::sum(b),
        Op::MatMul => linalg::matmul(b),
        Op::Gemm {
            alpha,
            beta,
            trans_a,
            trans_b,
        } => linalg::gemm(b, *alpha, *beta, *trans_a, *trans_b),
        Op::MaxPool(attrs) => pool::pool(b, attrs, pool::PoolKind::Max),
        Op::AveragePool(attrs) => pool::pool(b, attrs, pool::PoolKind::Avg),
        Op::GlobalAveragePool => pool::global_average_pool(b),
        Op::Lrn {
            size,
            alpha,
            beta,
            bias,
        } => normalization::lrn(b, *size, *alpha, *beta, *bias),
        Op::Transpose { perm } => layout::transpose(b, perm),
        Op::Concat { axis } => layout::concat(b, *axis),
        Op::Softmax { axis, last_axis } => normalization::softmax(b, *axis, *last_axis),
        Op::LayerNormalization { axis, epsilon } => normalization::layer_norm(b, *axis, *epsilon),
        Op::ReduceMean { axes, keepdims } => reduce::reduce_mean(b, axes, *keepdims),
        Op::Gelu { tanh } => elementwise::gelu(b, *tanh),
        Op::Gather {
            axis,
            indices,
            indices_shape,
        } => layout::gather(b, *axis, indices, indices_shape),
        Op::Slice { starts, steps } => layout::slice(b, starts, steps),
    }
}

/// The op types a node may have, as the error for an unsupported one lists them.
pub fn supported_op_types() -> &'static [&'static str] {
    super::onnx::SUPPORTED_OP_TYPES
}

#[cfg(test)]
mod tests {
    use super::test_support::Case;
    use super::{Lowered, Op};

    #[test]
    fn reshape_is_an_alias() {
        let mut case = Case::new();
        case.input("x", &[2, 6]);
        let node = case.node(Op::Reshape, &["x"], &[3, 4]);
        assert!(matches!(case.lower(&node), Ok(Lowered::Alias)));
    }

    #[test]
    fn non_registry_dags_are_labelled_with_the_op_and_shapes() {
        let mut case = Case::new();
        case.input("x", &[2, 3, 4]);
        let node = case.node(
            Op::Transpose {
                perm: vec![0, 2, 1],
            },
            &["x"],
            &[2, 4, 3],
        );
        assert_eq!(case.kernel(&node).dag.label(), "Transpose[2x3x4→2x4x3]");
    }
}
