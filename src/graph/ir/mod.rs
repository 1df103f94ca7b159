//! The graph IR: operator nodes in topological order over named tensors,
//! every tensor with a static shape and dtype, constants as values.

mod graph;
pub mod layout;
mod op;

pub use graph::{Graph, Node, TensorInfo};
pub use op::{BinaryOp, ConvAttrs, Op, PoolAttrs, UnaryOp};
