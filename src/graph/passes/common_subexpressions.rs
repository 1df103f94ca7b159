//! Common-subexpression elimination: constants with equal values, and then
//! nodes with the same op (attributes included), the same inputs and the
//! same output types, are merged into the first; their readers read it.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};

use crate::graph::error::GraphError;
use crate::graph::ir::Graph;
use crate::te::HostTensor;

/// A hash of a constant's type and values (bit patterns).
fn value_hash(value: &HostTensor) -> u64 {
    let mut h = DefaultHasher::new();
    value.shape().hash(&mut h);
    value.dtype().to_string().hash(&mut h);
    for v in value.to_f64_vec() {
        v.to_bits().hash(&mut h);
    }
    h.finish()
}

/// Merges equal constants and equal nodes. A graph output is never merged
/// away (its name must stay), though others may be merged into it.
pub(super) fn eliminate_common_subexpressions(
    graph: &Graph,
) -> Result<(Graph, String), GraphError> {
    let pinned: BTreeSet<&str> = graph
        .outputs
        .iter()
        .chain(&graph.inputs)
        .map(String::as_str)
        .collect();
    let mut renamed: BTreeMap<String, String> = BTreeMap::new();

    // Constants: the first of each group of equal values stays.
    let mut seen: HashMap<u64, Vec<&String>> = HashMap::new();
    for (name, value) in &graph.constants {
        let bucket = seen.entry(value_hash(value)).or_default();
        match bucket.iter().find(|kept| graph.constants.get(**kept) == Some(value)) {
            Some(kept) if !pinned.contains(name.as_str()) => {
                renamed.insert(name.clone(), (*kept).clone());
            }
            _ => bucket.push(name),
        }
    }
    let merged_constants = renamed.len();

    // Nodes: the key is the op with its attributes, the (renamed) inputs and
    // the output types (a Reshape's target shape lives only there).
    let mut first: HashMap<String, Vec<String>> = HashMap::new();
    let mut after = graph.clone();
    after.nodes.clear();
    let mut merged_nodes = 0usize;
    for node in &graph.nodes {
        let mut node = node.clone();
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
        let pinned_output = node.outputs.iter().any(|o| pinned.contains(o.as_str()));
        match first.get(&key) {
            Some(earlier) if !pinned_output => {
                for (output, kept) in node.outputs.iter().zip(earlier) {
                    renamed.insert(output.clone(), kept.clone());
                }
                merged_nodes += 1;
            }
            _ => {
                first.entry(key).or_insert_with(|| node.outputs.clone());
                after.nodes.push(node);
            }
        }
    }
    for gone in renamed.keys() {
        after.constants.remove(gone);
        after.tensors.remove(gone);
    }
    Ok((
        after,
        format!("merged {merged_nodes} duplicate nodes and {merged_constants} duplicate constants"),
    ))
}
