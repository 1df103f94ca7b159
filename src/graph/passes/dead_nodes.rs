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
    after
        .constants
        .retain(|name, _| live.contains(name.as_str()));
    let mut exists: BTreeSet<&str> = graph.inputs.iter().map(String::as_str).collect();
    exists.extend(after.constants.keys().map(String::as_str));
    exists.extend(
        after
            .nodes
            .iter()
            .flat_map(|n| n.outputs.iter().map(String::as_str)),
    );
    exists.extend(graph.outputs.iter().map(String::as_str));
    after
        .tensors
        .retain(|name, _| exists.contains(name.as_str()));
    let nodes = graph.nodes.len() - after.nodes.len();
    let constants = graph.constants.len() - after.constants.len();
    Ok((
        after,
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
        let (after, summary) = eliminate_dead_nodes(&before).unwrap();
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
