//! Constant folding: a node whose inputs are all constants is evaluated
//! once on the host (its lowered DAG through the te reference interpreter,
//! an alias by reinterpreting the elements) and its outputs become
//! constants. Weight transposes, reshapes and unsqueezes, scale arithmetic
//! on weights: whatever the model computes from constants alone.

use std::collections::BTreeMap;

use crate::graph::error::GraphError;
use crate::graph::ir::Graph;

use super::host_eval::evaluate_node;

/// The largest output (elements, all outputs of one node together) folded;
/// a bigger one stays a node, so that folding never blows up the model.
pub const MAX_FOLDED_ELEMENTS: usize = 64 << 20;

/// Folds every node whose inputs are all constants (and whose outputs hold
/// at most [`MAX_FOLDED_ELEMENTS`] elements) into constants. A node the
/// interpreter cannot evaluate stays a node.
pub(super) fn fold_constants(graph: &Graph) -> Result<(Graph, String), GraphError> {
    let mut after = graph.clone();
    after.nodes.clear();
    let mut folded: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut values = 0usize;
    for node in &graph.nodes {
        let all_constant =
            !node.inputs.is_empty() && node.inputs.iter().all(|i| after.constants.contains_key(i));
        let elements: usize = node
            .outputs
            .iter()
            .map(|o| graph.info(o).map_or(usize::MAX, |t| t.num_elements()))
            .fold(0, usize::saturating_add);
        if all_constant && elements <= MAX_FOLDED_ELEMENTS {
            if let Ok(outputs) = evaluate_node(&after, node, &after.constants) {
                for (name, value) in node.outputs.iter().zip(outputs) {
                    after.constants.insert(name.clone(), value);
                }
                *folded.entry(node.op.name()).or_default() += 1;
                values += elements;
                continue;
            }
        }
        after.nodes.push(node.clone());
    }
    let count: usize = folded.values().sum();
    let summary = if count == 0 {
        "no node computes from constants alone".to_string()
    } else {
        let by_op: Vec<String> = folded.iter().map(|(op, n)| format!("{n} {op}")).collect();
        format!(
            "folded {count} nodes into constants ({}; {values} values)",
            by_op.join(", ")
        )
    };
    Ok((after, summary))
}
