//! Common-subexpression elimination: constants with equal values, and then
//! nodes with the same op (attributes included), the same inputs and the
//! same output types, are merged into the first; their readers read it.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};

use crate::graph::error::GraphError;
use crate::graph::ir::Graph;
use crate::te::{HostData, HostTensor};

/// A hash of a constant's type and values (bit patterns).
fn value_hash(value: &HostTensor) -> u64 {
    let mut h = DefaultHasher::new();
    value.shape().hash(&mut h);
    match value.data() {
        HostData::F32(v) => v.iter().for_each(|x| x.to_bits().hash(&mut h)),
        HostData::F64(v) => v.iter().for_each(|x| x.to_bits().hash(&mut h)),
        HostData::I32(v) => v.hash(&mut h),
        HostData::I64(v) => v.hash(&mut h),
        HostData::Bool(v) => v.hash(&mut h),
    }
    h.finish()
}

/// Merges equal constants and equal nodes. A graph output is never merged
/// away (its name must stay), though others may be merged into it.
pub(super) fn eliminate_common_subexpressions(
    mut graph: Graph,
) -> Result<(Graph, String), GraphError> {
    let pinned: BTreeSet<String> = graph.outputs.iter().chain(&graph.inputs).cloned().collect();
    let mut renamed: BTreeMap<String, String> = BTreeMap::new();

    // Constants: the first of each group of equal values stays.
    let mut seen: HashMap<u64, Vec<&String>> = HashMap::new();
    for (name, value) in &graph.constants {
        let bucket = seen.entry(value_hash(value)).or_default();
        match bucket
            .iter()
            .find(|kept| graph.constants.get(**kept) == Some(value))
        {
            Some(kept) if !pinned.contains(name) => {
                renamed.insert(name.clone(), (*kept).clone());
            }
            _ => bucket.push(name),
        }
    }
    let merged_constants = renamed.len();

    // Nodes: the key is the op with its attributes, the (renamed) inputs and
    // the output types (a Reshape's target shape lives only there).
    let mut first: HashMap<String, Vec<String>> = HashMap::new();
    let mut merged_nodes = 0usize;
    for mut node in std::mem::take(&mut graph.nodes) {
        for input in &mut node.inputs {
            if let Some(to) = renamed.get(input) {
                *input = to.clone();
            }
        }
        let key = format!(
            "{:?} {:?} {:?}",
            node.op,
            node.inputs,
            node.outputs
                .iter()
                .map(|o| graph.info(o))
                .collect::<Vec<_>>()
        );
        let pinned_output = node.outputs.iter().any(|o| pinned.contains(o));
        match first.get(&key) {
            Some(earlier) if !pinned_output => {
                for (output, kept) in node.outputs.iter().zip(earlier) {
                    renamed.insert(output.clone(), kept.clone());
                }
                merged_nodes += 1;
            }
            _ => {
                first.entry(key).or_insert_with(|| node.outputs.clone());
                graph.nodes.push(node);
            }
        }
    }
    for gone in renamed.keys() {
        graph.constants.remove(gone);
        graph.tensors.remove(gone);
    }
    Ok((
        graph,
        format!("merged {merged_nodes} duplicate nodes and {merged_constants} duplicate constants"),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{Builder, assert_same_outputs, count};
    use super::*;
    use crate::graph::ir::{BinaryOp, Op, UnaryOp};

    #[test]
    fn equal_nodes_and_equal_constants_merge() {
        let c = vec![0.5, 1.5, 2.5];
        let before = Builder::new()
            .input("x", &[2, 3])
            .constant_values("c1", &[3], c.clone())
            .constant_values("c2", &[3], c)
            .node("r1", Op::Unary(UnaryOp::Relu), &["x"], "a", &[2, 3])
            .node("r2", Op::Unary(UnaryOp::Relu), &["x"], "b", &[2, 3])
            // Equal only once c2 is known to be c1.
            .node("m1", Op::Binary(BinaryOp::Mul), &["a", "c1"], "ma", &[2, 3])
            .node("m2", Op::Binary(BinaryOp::Mul), &["b", "c2"], "mb", &[2, 3])
            // Same op and inputs, other attributes: not merged.
            .node("l1", Op::LeakyRelu { alpha: 0.1 }, &["x"], "l1", &[2, 3])
            .node("l2", Op::LeakyRelu { alpha: 0.2 }, &["x"], "l2", &[2, 3])
            // Same op and input, other output shapes: not merged; the
            // same shape: merged.
            .node("s1", Op::Reshape, &["x"], "s1", &[3, 2])
            .node("s2", Op::Reshape, &["x"], "s2", &[6])
            .node("s3", Op::Reshape, &["x"], "s3", &[3, 2])
            .node("f1", Op::Reshape, &["s1"], "f1", &[6])
            .node("f3", Op::Reshape, &["s3"], "f3", &[6])
            .node("add", Op::Sum, &["f1", "s2", "f3"], "z", &[6])
            .node("sum", Op::Sum, &["ma", "mb", "l1", "l2"], "y", &[2, 3])
            .outputs(&["y", "z"]);
        let (after, summary) = eliminate_common_subexpressions(before.clone()).unwrap();
        assert!(
            summary.contains("merged 4 duplicate nodes and 1 duplicate constants"),
            "{summary}"
        );
        assert_eq!(count(&after, "Relu"), 1);
        assert_eq!(count(&after, "Mul"), 1);
        assert_eq!(count(&after, "LeakyRelu"), 2);
        // s1, s2 and f1 stay; s3 is s1, then f3 is f1.
        assert_eq!(count(&after, "Reshape"), 3);
        let add = after.nodes.iter().find(|n| n.name == "add").unwrap();
        assert_eq!(add.inputs, ["f1", "s2", "f1"]);
        assert_eq!(after.constants.len(), 1);
        let sum = after.nodes.iter().find(|n| n.name == "sum").unwrap();
        assert_eq!(sum.inputs, ["ma", "ma", "l1", "l2"]);
        super::super::check_graph(&after).unwrap();
        assert_same_outputs(&before, &after, 0.0);
    }

    #[test]
    fn a_graph_output_is_never_merged_away() {
        let before = Builder::new()
            .input("x", &[4])
            .node("r1", Op::Unary(UnaryOp::Relu), &["x"], "a", &[4])
            .node("r2", Op::Unary(UnaryOp::Relu), &["x"], "b", &[4])
            .outputs(&["a", "b"]);
        let (after, _) = eliminate_common_subexpressions(before.clone()).unwrap();
        assert_eq!(after.nodes.len(), 2);
        assert_same_outputs(&before, &after, 0.0);
    }
}
