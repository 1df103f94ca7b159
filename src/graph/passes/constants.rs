//! Constant folding: a node whose inputs are all constants is evaluated
//! once on the host (its lowered DAG through the te reference interpreter
//! when small, JIT-compiled on the default schedule when large, an alias by
//! reinterpreting the elements) and its outputs become constants. Weight transposes, reshapes and unsqueezes, scale arithmetic
//! on weights: whatever the model computes from constants alone.

use std::collections::BTreeMap;

use crate::graph::error::GraphError;
use crate::graph::ir::Graph;

use super::host_eval::{Engine, evaluate_node};

/// The largest output (elements, all outputs of one node together) folded;
/// a bigger one stays a node, so that folding never blows up the model.
pub const MAX_FOLDED_ELEMENTS: usize = 64 << 20;

/// Outputs up to this many elements are folded by the te interpreter
/// (exact, and cheaper than compiling); larger ones by the JIT, which
/// computes what the executor would have.
const INTERPRETED_ELEMENTS: usize = 1 << 16;

/// Folds every node whose inputs are all constants (and whose outputs hold
/// at most [`MAX_FOLDED_ELEMENTS`] elements) into constants. A node the
/// interpreter cannot evaluate stays a node.
pub(super) fn fold_constants(graph: Graph) -> Result<(Graph, String), GraphError> {
    fold_constants_up_to(graph, MAX_FOLDED_ELEMENTS)
}

/// [`fold_constants`] with outputs of at most `cap` elements folded.
fn fold_constants_up_to(mut after: Graph, cap: usize) -> Result<(Graph, String), GraphError> {
    let mut folded: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut values = 0usize;
    for node in std::mem::take(&mut after.nodes) {
        let all_constant =
            !node.inputs.is_empty() && node.inputs.iter().all(|i| after.constants.contains_key(i));
        let elements: usize = node
            .outputs
            .iter()
            .map(|o| after.info(o).map_or(usize::MAX, |t| t.num_elements()))
            .fold(0, usize::saturating_add);
        let evaluated = if all_constant && elements <= cap {
            let engine = if elements <= INTERPRETED_ELEMENTS {
                Engine::Interpreter
            } else {
                Engine::Jit
            };
            evaluate_node(&after, &node, &after.constants, engine).ok()
        } else {
            None
        };
        if let Some(outputs) = evaluated {
            for (name, value) in node.outputs.iter().zip(outputs) {
                after.constants.insert(name.clone(), value);
            }
            *folded.entry(node.op.name()).or_default() += 1;
            values += elements;
            continue;
        }
        after.nodes.push(node);
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

#[cfg(test)]
mod tests {
    use super::super::test_support::{Builder, assert_same_outputs, count};
    use super::*;
    use crate::graph::ir::{BinaryOp, Op, UnaryOp};
    use crate::te::HostTensor;

    /// `y = x · (transpose(w) · s)`, and `u = unsqueeze(v) + 1` as a
    /// second, all-constant graph output.
    fn weight_arithmetic() -> Graph {
        Builder::new()
            .input("x", &[2, 3])
            .constant("w", &[4, 3])
            .constant("s", &[1])
            .constant("v", &[4])
            .constant("one", &[1])
            .node(
                "t",
                Op::Transpose { perm: vec![1, 0] },
                &["w"],
                "wt",
                &[3, 4],
            )
            .node("m", Op::Binary(BinaryOp::Mul), &["wt", "s"], "ws", &[3, 4])
            .node("mm", Op::MatMul, &["x", "ws"], "y", &[2, 4])
            .node("u", Op::Reshape, &["v"], "vu", &[1, 4])
            .node("a", Op::Binary(BinaryOp::Add), &["vu", "one"], "z", &[1, 4])
            .node("r", Op::Unary(UnaryOp::Relu), &["y"], "out", &[2, 4])
            .outputs(&["out", "z"])
    }

    #[test]
    fn nodes_of_constants_become_constants() {
        let before = weight_arithmetic();
        let (after, summary) = fold_constants(before.clone()).unwrap();
        let left: Vec<&str> = after.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(left, ["MatMul", "Relu"], "{summary}");
        assert!(summary.contains("folded 4 nodes"), "{summary}");
        for node in &after.nodes {
            assert!(
                node.inputs.iter().any(|i| !after.constants.contains_key(i)),
                "node {} still computes from constants alone",
                node.name
            );
        }
        // The folded graph output is a constant and still an output.
        assert!(after.constants.contains_key("z"));
        assert_eq!(after.outputs, ["out", "z"]);
        super::super::check_graph(&after).unwrap();
        assert_same_outputs(&before, &after, 1e-6);
        assert_eq!(count(&after, "Transpose"), 0);
    }

    #[test]
    fn outputs_beyond_the_cap_stay_nodes() {
        let before = weight_arithmetic();
        // Up to 4 elements: z (1×4) folds, the 3×4 weight products do not.
        let (after, summary) = fold_constants_up_to(before.clone(), 4).unwrap();
        let left: Vec<&str> = after.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(left, ["t", "m", "mm", "r"], "{summary}");
        assert_same_outputs(&before, &after, 1e-6);
    }

    #[test]
    fn large_folds_run_on_the_jit_and_agree_with_the_interpreter() {
        let (rows, cols) = (300, 256);
        assert!(rows * cols > INTERPRETED_ELEMENTS);
        let before = Builder::new()
            .input("x", &[1, rows])
            .constant("w", &[cols, rows])
            .constant("k", &[1])
            .node(
                "t",
                Op::Transpose { perm: vec![1, 0] },
                &["w"],
                "wt",
                &[rows, cols],
            )
            .node(
                "m",
                Op::Binary(BinaryOp::Mul),
                &["wt", "k"],
                "wk",
                &[rows, cols],
            )
            .node("mm", Op::MatMul, &["x", "wk"], "y", &[1, cols])
            .outputs(&["y"]);
        let (after, summary) = fold_constants(before.clone()).unwrap();
        assert!(summary.contains("folded 2 nodes"), "{summary}");
        let mut values: BTreeMap<String, HostTensor> = before.constants.clone();
        for node in &before.nodes[..2] {
            let exact = evaluate_node(&before, node, &values, Engine::Interpreter).unwrap();
            values.insert(node.outputs[0].clone(), exact[0].clone());
        }
        // One multiplication rounded once: the JIT's f32 product is the
        // interpreter's correctly rounded one.
        assert_eq!(after.constants["wk"], values["wk"]);
        assert_same_outputs(&before, &after, 1e-6);
    }
}
