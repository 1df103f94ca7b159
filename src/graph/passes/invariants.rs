//! The graph invariants every pass keeps, checked: topological order,
//! every tensor typed, each tensor produced once, every graph output
//! produced.

use std::collections::BTreeSet;

use crate::graph::error::GraphError;
use crate::graph::ir::Graph;

/// Checks that every tensor has a type; that nodes read only graph inputs,
/// constants and earlier nodes' outputs (topological order); that no tensor
/// is produced twice; and that every graph output is an input, a constant
/// or some node's output.
///
/// Errors: [`GraphError::Dangling`] for a tensor read before anything
/// produces it (or a graph output nothing produces), [`GraphError::BadNode`]
/// for an untyped or twice-produced tensor.
pub fn check_graph(graph: &Graph) -> Result<(), GraphError> {
    let untyped = |node: &str, tensor: &str| GraphError::BadNode {
        node: node.to_string(),
        op_type: String::new(),
        what: format!("tensor '{tensor}' has no type in the graph's tensor table"),
    };
    let mut available: BTreeSet<&str> = BTreeSet::new();
    for name in graph.inputs.iter().chain(graph.constants.keys()) {
        if !graph.tensors.contains_key(name) {
            return Err(untyped("graph", name));
        }
        available.insert(name);
    }
    for node in &graph.nodes {
        for input in &node.inputs {
            if !available.contains(input.as_str()) {
                return Err(GraphError::Dangling {
                    node: node.name.clone(),
                    tensor: input.clone(),
                });
            }
        }
        for output in &node.outputs {
            if !graph.tensors.contains_key(output) {
                return Err(untyped(&node.name, output));
            }
            if !available.insert(output) {
                return Err(GraphError::bad_node(
                    node,
                    format!("tensor '{output}' is produced twice"),
                ));
            }
        }
    }
    for output in &graph.outputs {
        if !available.contains(output.as_str()) {
            return Err(GraphError::Dangling {
                node: "graph output".to_string(),
                tensor: output.clone(),
            });
        }
    }
    Ok(())
}
