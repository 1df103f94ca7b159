//! The graph: nodes in topological order over named tensors.

use std::collections::BTreeMap;

use crate::te::{DType, HostTensor};

use super::op::Op;

/// A tensor's static type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Dimensions, row-major.
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DType,
}

impl TensorInfo {
    /// `f32` with `shape`.
    pub fn f32(shape: &[usize]) -> TensorInfo {
        TensorInfo {
            shape: shape.to_vec(),
            dtype: DType::F32,
        }
    }

    /// How many elements it holds.
    pub fn num_elements(&self) -> usize {
        self.shape.iter().product()
    }
}

/// One operator application.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The node's name in the model (made up from its first output when the
    /// model gives none).
    pub name: String,
    /// What it computes.
    pub op: Op,
    /// The tensors it reads, in the op's order (data inputs only).
    pub inputs: Vec<String>,
    /// The tensors it writes.
    pub outputs: Vec<String>,
}

/// A model as a graph of typed operators with static shapes.
///
/// Invariants (established by import, relied on by lowering and execution):
/// nodes are in topological order; every tensor a node reads is a graph
/// input, a constant or an earlier node's output; every tensor has an entry
/// in `tensors`; every tensor a node reads or writes is `f32`.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// The model's graph name.
    pub name: String,
    /// The default-domain opset the model was written against.
    pub opset: i64,
    /// Inputs given at run time (initializers excluded), in model order.
    pub inputs: Vec<String>,
    /// Outputs, in model order.
    pub outputs: Vec<String>,
    /// Every tensor's type.
    pub tensors: BTreeMap<String, TensorInfo>,
    /// Constant values: initializers, Constant nodes and folded subgraphs.
    pub constants: BTreeMap<String, HostTensor>,
    /// The nodes, in topological order.
    pub nodes: Vec<Node>,
}

impl Graph {
    /// The type of tensor `name`.
    pub fn info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.get(name)
    }

    /// The shape of tensor `name` (empty for an unknown name).
    pub fn shape(&self, name: &str) -> &[usize] {
        self.tensors.get(name).map_or(&[], |t| &t.shape)
    }

    /// The value of `name` when it is a constant.
    pub fn constant(&self, name: &str) -> Option<&HostTensor> {
        self.constants.get(name)
    }

    /// Constants some node reads (the model's weights), by name.
    pub fn weights(&self) -> impl Iterator<Item = (&String, &HostTensor)> {
        let read: std::collections::BTreeSet<&String> =
            self.nodes.iter().flat_map(|n| n.inputs.iter()).collect();
        self.constants
            .iter()
            .filter(move |(name, _)| read.contains(name))
    }
}
