//! Dead-node elimination: nodes no graph output depends on are removed,
//! then constants nothing reads and types of tensors nothing holds.

use std::collections::BTreeSet;

use crate::graph::error::GraphError;
use crate::graph::ir::Graph;

/// Removes the nodes whose outputs no graph output depends on, the
/// constants no remaining node reads (unless they are graph outputs), and
/// the types of tensors that no longer exist.
pub(super) fn eliminate_dead_nodes(graph: &Graph) -> Result<(Graph, String), GraphError> {
    let mut live: BTreeSet<&str> = graph.outputs.iter().map(String::as_str).collect();
    let mut keep = vec![false; graph.nodes.len()];
    for (i, node) in graph.nodes.iter().enumerate().rev() {
        if node.outputs.iter().any(|o| live.contains(o.as_str())) {
            keep[i] = true;
            live.extend(node.inputs.iter().map(String::as_str));
        }
    }
    let mut after = graph.clone();
    after.nodes = graph
        .nodes
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(n, _)| n.clone())
        .collect();
    after.constants.retain(|name, _| live.contains(name.as_str()));
    let mut exists: BTreeSet<&str> = graph.inputs.iter().map(String::as_str).collect();
    exists.extend(after.constants.keys().map(String::as_str));
    exists.extend(after.nodes.iter().flat_map(|n| n.outputs.iter().map(String::as_str)));
    exists.extend(graph.outputs.iter().map(String::as_str));
    after.tensors.retain(|name, _| exists.contains(name.as_str()));
    let nodes = graph.nodes.len() - after.nodes.len();
    let constants = graph.constants.len() - after.constants.len();
    Ok((
        after,
        format!("removed {nodes} dead nodes and {constants} unread constants"),
    ))
}
