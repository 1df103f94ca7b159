//! Fusion into tasks: the nodes of a graph grouped TVM's way — a kernel
//! (convolution, matrix product, reduction, data move or elementwise node)
//! followed by the elementwise nodes that read its result — and each group
//! lowered to one te [`ComputeDag`](crate::te::ComputeDag): one kernel to
//! run, one task to tune, keyed by its `WorkloadKey`.
//!
//! ```text
//! graph ─► group (rules::FUSION_RULES, asked in order per candidate join;
//!                 a group's inner tensors never read outside it)
//!       ─► lower each member (elementwise members at the graph's shape)
//!       ─► compose (splice the members' DAGs) ─► one node + kernel a group
//! ```
//!
//! A group of one node keeps that node's lowering, so a node that is a
//! registry operator stays one (its records apply). A group whose members
//! cannot be spliced runs its members one by one.

mod compose;
mod group;
mod pattern;
mod rules;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

pub use pattern::{Pattern, pattern};
pub use rules::{Candidate, Decision, FUSION_RULES, FusionRule};

use super::error::GraphError;
use super::ir::{Graph, Node};
use super::lower::{Lowered, lower_node, lower_node_at_graph_shape};

/// What became of a group of nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct FusedGroup {
    /// The name of the node the group runs as.
    pub name: String,
    /// Its members' names, in graph order (the anchor first).
    pub members: Vec<String>,
    /// Why the members run one by one after all, when they do.
    pub not_spliced: Option<String>,
}

/// A graph with one node per kernel to run, each with its lowering.
#[derive(Clone)]
pub struct FusedGraph {
    /// The graph: the same tensors, inputs and outputs; the nodes are the
    /// groups (a group of several nodes is one node with the anchor's op,
    /// reading the tensors the group reads and writing its result).
    pub graph: Graph,
    /// The lowering of each node of `graph`.
    pub lowered: Vec<Lowered>,
    /// The groups of more than one node.
    pub groups: Vec<FusedGroup>,
}

/// Fuses `graph`. `keep` are intermediate tensors that must stay visible
/// (never folded into a group), besides the graph outputs.
///
/// Errors: those of lowering a node.
pub fn fuse(graph: &Graph, keep: &[String]) -> Result<FusedGraph, GraphError> {
    let visible: BTreeSet<String> = graph.outputs.iter().chain(keep).cloned().collect();
    let mut nodes = Vec::new();
    let mut lowered = Vec::new();
    let mut groups = Vec::new();
    for g in group::groups(graph, &visible) {
        let members: Vec<&Node> = g.members.iter().map(|&m| &graph.nodes[m]).collect();
        if let [node] = members.as_slice() {
            nodes.push((*node).clone());
            lowered.push(lower_node(graph, node)?);
            continue;
        }
        let names: Vec<String> = members.iter().map(|n| n.name.clone()).collect();
        match splice(graph, &members)? {
            Ok(kernel) => {
                let anchor = members[0];
                let name = format!(
                    "{}{}",
                    anchor.name,
                    members[1..]
                        .iter()
                        .map(|n| format!("+{}", n.op.name()))
                        .collect::<String>()
                );
                nodes.push(Node {
                    name: name.clone(),
                    op: anchor.op.clone(),
                    inputs: kernel.inputs.clone(),
                    outputs: kernel.outputs.clone(),
                });
                lowered.push(Lowered::Kernel(kernel));
                groups.push(FusedGroup {
                    name,
                    members: names,
                    not_spliced: None,
                });
            }
            Err(reason) => {
                for node in &members {
                    nodes.push((*node).clone());
                    lowered.push(lower_node(graph, node)?);
                }
                groups.push(FusedGroup {
                    name: members[0].name.clone(),
                    members: names,
                    not_spliced: Some(reason),
                });
            }
        }
    }
    let mut fused = graph.clone();
    fused.nodes = nodes;
    Ok(FusedGraph {
        graph: fused,
        lowered,
        groups,
    })
}

/// The members' kernels spliced into one, or why they cannot be.
fn splice(
    graph: &Graph,
    members: &[&Node],
) -> Result<Result<super::lower::NodeKernel, String>, GraphError> {
    let mut kernels = Vec::with_capacity(members.len());
    for node in members {
        let lowered = if pattern(&node.op) == Pattern::Elementwise {
            lower_node_at_graph_shape(graph, node)?
        } else {
            lower_node(graph, node)?
        };
        match lowered {
            Lowered::Kernel(k) => kernels.push(k),
            Lowered::Alias => return Ok(Err(format!("'{}' has no kernel", node.name))),
        }
    }
    Ok(compose::compose(members, &kernels))
}
