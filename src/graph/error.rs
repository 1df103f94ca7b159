//! Errors of the graph level: each names the file, node or tensor at fault
//! and what would fix it.

use std::path::PathBuf;

use thiserror::Error;

/// What went wrong reading, lowering or running a model.
#[derive(Debug, Error)]
pub enum GraphError {
    /// The model file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The bytes are not an ONNX model.
    #[error(
        "{path} is not an ONNX model (protobuf decoding failed: {reason}); is the file truncated, or another format?"
    )]
    NotOnnx {
        /// The file.
        path: PathBuf,
        /// The decoder's message.
        reason: String,
    },
    /// The model needs an opset this reader does not know.
    #[error(
        "{path}: the model uses opset {opset} of domain '{domain}'; tessera reads the default domain at opsets {min}..={max} — re-export it at opset {max} or lower"
    )]
    Opset {
        /// The file.
        path: PathBuf,
        /// The domain (`ai.onnx` for the default one).
        domain: String,
        /// The opset asked for.
        opset: i64,
        /// Oldest supported.
        min: i64,
        /// Newest supported.
        max: i64,
    },
    /// A node whose operator tessera does not support.
    #[error("node '{node}': operator {op_type} is not supported; supported operators: {supported}")]
    UnsupportedOp {
        /// The node's name.
        node: String,
        /// Its op type (with the domain when not the default one).
        op_type: String,
        /// The supported op types.
        supported: String,
    },
    /// A supported operator with an attribute value or input form tessera
    /// does not support.
    #[error("node '{node}' ({op_type}): {what}")]
    Unsupported {
        /// The node's name.
        node: String,
        /// Its op type.
        op_type: String,
        /// What is not supported, and what is.
        what: String,
    },
    /// A node whose inputs or attributes are inconsistent.
    #[error("node '{node}' ({op_type}): {what}")]
    BadNode {
        /// The node's name.
        node: String,
        /// Its op type.
        op_type: String,
        /// What is wrong.
        what: String,
    },
    /// A tensor read before anything produces it.
    #[error(
        "node '{node}' reads tensor '{tensor}', which no earlier node, input or initializer produces (a dangling tensor, or a cycle in the graph)"
    )]
    Dangling {
        /// The reading node.
        node: String,
        /// The tensor.
        tensor: String,
    },
    /// Nodes that wait on each other's outputs.
    #[error(
        "the graph has a cycle: nodes {nodes:?} (and any others in it) each wait on another's output; a model's graph must be acyclic"
    )]
    Cycle {
        /// Some nodes on or behind the cycle.
        nodes: Vec<String>,
    },
    /// A graph input with a dimension the model leaves open.
    #[error(
        "input '{input}' has a dynamic dimension {dim} ({shape}); give it a size with --input-shape {input}=<d0>,<d1>,…"
    )]
    DynamicInput {
        /// The input.
        input: String,
        /// Which dimension.
        dim: usize,
        /// The shape as the model writes it (`N,3,224,224`).
        shape: String,
    },
    /// An `--input-shape` for a name that is not a graph input, or of the wrong rank.
    #[error("--input-shape {input}: {what}")]
    BadInputShape {
        /// The name given.
        input: String,
        /// What is wrong.
        what: String,
    },
    /// A tensor of a dtype tessera does not compute with.
    #[error(
        "tensor '{tensor}' is {dtype}; tessera computes f32 tensors (other types only as constants the import folds away)"
    )]
    DType {
        /// The tensor.
        tensor: String,
        /// Its type.
        dtype: String,
    },
    /// A value given to `run` that does not fit the model.
    #[error("input '{input}': {what}")]
    BadInput {
        /// The input.
        input: String,
        /// What is wrong and what the model expects.
        what: String,
    },
    /// An output asked for that the model does not have.
    #[error("the model has no tensor '{name}'; its outputs are {available}")]
    UnknownOutput {
        /// The name asked for.
        name: String,
        /// The graph outputs.
        available: String,
    },
    /// An intermediate asked for after a run whose bytes the memory plan
    /// reuses.
    #[error(
        "tensor '{name}' is an intermediate whose memory is reused after its last reader (or that exists only channels last); name it when compiling to keep it (CompileOptions::keep, or `tessera run --output {name}=FILE.npy`)"
    )]
    NotKept {
        /// The tensor.
        name: String,
    },
    /// A node's DAG could not be built.
    #[error("node '{node}' ({op_type}): building its tensor expression failed: {reason}")]
    Lower {
        /// The node.
        node: String,
        /// Its op type.
        op_type: String,
        /// Why.
        reason: String,
    },
    /// A node's kernel could not be compiled or run.
    #[error("node '{node}' ({op_type}): {reason}")]
    Kernel {
        /// The node.
        node: String,
        /// Its op type.
        op_type: String,
        /// Why.
        reason: String,
    },
    /// A `.npy` file that cannot be used.
    #[error("{path}: {what}")]
    Npy {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A file that cannot be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl GraphError {
    /// A [`GraphError::BadNode`] of `node`.
    pub(crate) fn bad_node(node: &crate::graph::Node, what: impl Into<String>) -> GraphError {
        GraphError::BadNode {
            node: node.name.clone(),
            op_type: node.op.name().to_string(),
            what: what.into(),
        }
    }

    /// A [`GraphError::Unsupported`] of `node`.
    pub(crate) fn unsupported(node: &crate::graph::Node, what: impl Into<String>) -> GraphError {
        GraphError::Unsupported {
            node: node.name.clone(),
            op_type: node.op.name().to_string(),
            what: what.into(),
        }
    }

    /// A [`GraphError::Lower`] of `node`.
    pub(crate) fn lower(node: &crate::graph::Node, reason: impl ToString) -> GraphError {
        GraphError::Lower {
            node: node.name.clone(),
            op_type: node.op.name().to_string(),
            reason: reason.to_string(),
        }
    }
}
