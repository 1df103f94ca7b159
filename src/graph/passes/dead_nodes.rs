//! Dead-node elimination: nodes no graph output depends on are removed,
//! then constants nothing reads and types of tensors nothing holds.

use std::collections::BTreeSet;

use crate::graph::error::GraphError;
use crate::graph::ir::Graph;

/// Removes the nodes whose outputs no graph output depends on, the
/// constants no remaining node reads (unless they are graph outputs), and
/// the types of tensors that no longer exist.
pub(super) fn eliminate_dead_nodes(mut graph: Graph) -> Result<(Graph, String), GraphError> {
    let mut live: BTreeSet<String> = graph.outputs.iter().cloned().collect();
    let nodes_before = graph.nodes.len();
    let mut kept = Vec::with_capacity(nodes_before);
    for node in std::mem::take(&mut graph.nodes).into_iter().rev() {
        if node.outputs.iter().any(|o| live.contains(o)) {
            live.extend(node.inputs.iter().cloned());
            kept.push(node);
        }
    }
    kept.reverse();
    graph.nodes = kept;
    let constants_before = graph.constants.len();
    graph.constants.retain(|name, _| live.contains(name));
    let mut exists: BTreeSet<&String> = graph.inputs.iter().chain(&graph.outputs).collect();
    exists.extend(graph.constants.keys());
    exists.extend(graph.nodes.iter().flat_map(|n| &n.outputs));
    let exists: BTreeSet<String> = exists.into_iter().cloned().collect();
    graph.tensors.retain(|name, _| exists.contains(name));
    let nodes = nodes_before - graph.nodes.len();
    let constants = constants_before - graph.constants.len();
    Ok((
        graph,
        format!("removed {nodes} dead nodes and {constants} unread constants"),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{Builder, assert_same_outputs};
    use super::*;
    use crate::graph::ir::{BinaryOp, Op, UnaryOp};

    #[test]
    fn nodes_no_output_depends_on_and_unread_constants_are_removed() {
        let before = Builder::new()
            .input("x", &[2, 3])
            .constant("c", &[2, 3])
            .constant("unread", &[5])
            .node("dead1", Op::Unary(UnaryOp::Exp), &["x"], "e", &[2, 3])
            .node("live", Op::Unary(UnaryOp::Relu), &["x"], "r", &[2, 3])
            .node(
                "dead2",
                Op::Binary(BinaryOp::Mul),
                &["e", "c"],
                "ec",
                &[2, 3],
            )
            .node("out", Op::Unary(UnaryOp::Sigmoid), &["r"], "y", &[2, 3])
            .outputs(&["y"]);
        let (after, summary) = eliminate_dead_nodes(before.clone()).unwrap();
        let names: Vec<&str> = after.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["live", "out"]);
        assert!(after.constants.is_empty(), "{:?}", after.constants.keys());
        for gone in ["e", "ec", "c", "unread"] {
            assert!(!after.tensors.contains_key(gone), "{gone}");
        }
        assert!(
            summary.contains("removed 2 dead nodes and 2 unread constants"),
            "{summary}"
        );
        super::super::check_graph(&after).unwrap();
        assert_same_outputs(&before, &after, 0.0);
    }
}
