//! Evaluating one node on host values through its lowered DAG, with the
//! te reference interpreter (exact, slow: the oracle the pass tests run
//! whole small graphs on) or JIT-compiled on the default schedule (what
//! the executor would run: for large constant folds).

use std::collections::BTreeMap;

use crate::codegen::{self, CodegenOptions};
use crate::graph::error::GraphError;
use crate::graph::ir::{Graph, Node};
use crate::graph::lower::{Lowered, lower_node};
use crate::schedule::State;
use crate::te::{ComputeDag, HostTensor, evaluate};

/// How a node's DAG is evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// The te reference interpreter.
    Interpreter,
    /// The DAG compiled on its default schedule and run.
    Jit,
}

impl Engine {
    fn run(self, dag: &ComputeDag, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
        match self {
            Engine::Interpreter => evaluate(dag, inputs).map_err(|e| e.to_string()),
            Engine::Jit => {
                let func = crate::tir::lower(&State::new(dag)).map_err(|e| e.to_string())?;
                let kernel = codegen::compile(&func, &CodegenOptions::default())
                    .map_err(|e| e.to_string())?;
                kernel.run_host(inputs).map_err(|e| e.to_string())
            }
        }
    }
}

/// `value`'s elements under `shape` (row-major, same count).
fn reshaped(value: &HostTensor, shape: &[usize]) -> Result<HostTensor, String> {
    HostTensor::new(shape, value.data().clone()).map_err(|e| e.to_string())
}

/// The outputs of `node` of `graph` computed by `engine`, given the values
/// of its inputs in `values`, each under its graph output's shape.
///
/// Errors: a missing input value ([`GraphError::Dangling`]), a node that
/// does not lower, or an interpreter failure ([`GraphError::Kernel`]).
pub fn evaluate_node(
    graph: &Graph,
    node: &Node,
    values: &BTreeMap<String, HostTensor>,
    engine: Engine,
) -> Result<Vec<HostTensor>, GraphError> {
    evaluate_lowered(graph, node, &lower_node(graph, node)?, values, engine)
}

/// Like [`evaluate_node`], with the node already lowered as `lowered` (a
/// fused group's node: see [`crate::graph::fusion`]).
pub fn evaluate_lowered(
    graph: &Graph,
    node: &Node,
    lowered: &Lowered,
    values: &BTreeMap<String, HostTensor>,
    engine: Engine,
) -> Result<Vec<HostTensor>, GraphError> {
    let value_of = |name: &String| {
        values.get(name).ok_or_else(|| GraphError::Dangling {
            node: node.name.clone(),
            tensor: name.clone(),
        })
    };
    let failed = |reason: String| GraphError::Kernel {
        node: node.name.clone(),
        op_type: node.op.name().to_string(),
        reason,
    };
    match lowered {
        Lowered::Alias => {
            let (Some(input), Some(output)) = (node.inputs.first(), node.outputs.first()) else {
                return Err(GraphError::bad_node(
                    node,
                    "an alias needs one input and one output",
                ));
            };
            let value = reshaped(value_of(input)?, graph.shape(output)).map_err(failed)?;
            Ok(vec![value])
        }
        Lowered::Kernel(kernel) => {
            let mut inputs = Vec::with_capacity(kernel.inputs.len());
            for (placeholder, name) in kernel.dag.inputs().iter().zip(&kernel.inputs) {
                let shape: Vec<usize> = placeholder.shape().iter().map(|&d| d as usize).collect();
                inputs.push(reshaped(value_of(name)?, &shape).map_err(failed)?);
            }
            let outputs = engine.run(&kernel.dag, &inputs).map_err(failed)?;
            outputs
                .iter()
                .zip(&kernel.outputs)
                .map(|(value, name)| reshaped(value, graph.shape(name)).map_err(failed))
                .collect()
        }
    }
}

/// The graph outputs of `graph` on `inputs`, every node evaluated in order
/// by the te reference interpreter (constants taken from the graph).
pub fn evaluate_graph(
    graph: &Graph,
    inputs: &[(String, HostTensor)],
) -> Result<Vec<(String, HostTensor)>, GraphError> {
    let mut values = graph.constants.clone();
    values.extend(inputs.iter().cloned());
    for node in &graph.nodes {
        let outputs = evaluate_node(graph, node, &values, Engine::Interpreter)?;
        values.extend(node.outputs.iter().cloned().zip(outputs));
    }
    graph
        .outputs
        .iter()
        .map(|name| {
            let value = values.get(name).ok_or_else(|| GraphError::Dangling {
                node: "graph output".to_string(),
                tensor: name.clone(),
            })?;
            Ok((name.clone(), value.clone()))
        })
        .collect()
}
