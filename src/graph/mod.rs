//! The graph level: models imported from ONNX into a typed graph IR with
//! static shapes, each node lowered to a te [`ComputeDag`](crate::te::ComputeDag),
//! and an executor that compiles and runs the whole model.
//!
//! ```text
//! model.onnx ─► onnx::read (protobuf) ─► onnx::import (typed ops, shapes,
//!               shape subgraphs folded) ─► Graph ─► passes (constant and
//!               BatchNormalization folding, CSE, dead nodes) ─► lower (one
//!               DAG a node) ─► memory::MemoryPlan (every node output at an
//!               offset in one arena, from lifetimes; elementwise outputs in
//!               place)
//!               ─► exec::CompiledModel (kernels from a Library or the
//!               default schedule, over the arena) ─► run
//! ```
//!
//! In the layering the graph level stands between deploy and cli: it uses
//! te, ops, schedule, codegen and deploy; only the CLI uses it.

pub mod bench;
pub mod deployed;
mod error;
pub mod exec;
pub mod fusion;
pub mod ir;
pub mod kernels;
pub mod lower;
pub mod memory;
pub mod npy;
pub mod onnx;
pub mod passes;
pub mod printer;
pub mod tasks;

pub use error::GraphError;
pub use exec::{CompileOptions, CompiledModel, Model, NodeSource, NodeTiming};
pub use ir::{Graph, Node, Op, TensorInfo};
