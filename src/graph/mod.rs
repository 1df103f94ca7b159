//! The graph level: models imported from ONNX into a typed graph IR with
//! static shapes, each node lowered to a te [`ComputeDag`](crate::te::ComputeDag),
//! and an executor that compiles and runs the whole model.

mod error;
pub mod ir;
pub mod lower;
pub mod onnx;

pub use error::GraphError;
pub use ir::{Graph, Node, Op, TensorInfo};
