//! Graph passes: named rewrites of the graph IR, run in one ordered list
//! before lowering (like Halide's lowering passes or TVM's pass list).
//!
//! ```text
//! fold_constants ─► fold_batch_norm ─► channels_last
//!                ─► pointwise_convolutions_as_matmuls ─► recognise_layer_norm
//!                ─► eliminate_common_subexpressions ─► eliminate_dead_nodes
//! ```
//!
//! Each pass takes a graph and returns a new one with the same outputs for
//! every input, and a [`PassReport`] of what it changed. Every pass keeps
//! the graph's invariants (topological order, every tensor typed, every
//! graph output produced — by a node, or as a constant), checked after each
//! pass by [`check_graph`].

mod batch_norm;
mod broadcast;
mod channels_last;
mod common_subexpressions;
mod constants;
mod dead_nodes;
mod host_eval;
mod invariants;
mod layer_norm;
mod names;
mod pointwise_conv;

#[cfg(test)]
pub(crate) mod test_support;

use std::fmt;

pub use channels_last::CHANNELS_LAST_SUFFIX;
pub use host_eval::{Engine, evaluate_graph, evaluate_lowered, evaluate_node};
pub use invariants::check_graph;

use super::error::GraphError;
use super::ir::Graph;

/// One named graph pass.
#[derive(Clone, Copy)]
pub struct Pass {
    /// Its name (`fold_constants`, …).
    pub name: &'static str,
    /// What it does, in one line.
    pub description: &'static str,
    rewrite: fn(Graph) -> Result<(Graph, String), GraphError>,
}

impl Pass {
    /// Runs the pass on `graph`: the rewritten graph and what changed.
    pub fn run(&self, graph: &Graph) -> Result<(Graph, PassReport), GraphError> {
        self.apply(graph.clone())
    }

    /// [`Pass::run`] on a graph it may consume (no copy of the constants).
    fn apply(&self, graph: Graph) -> Result<(Graph, PassReport), GraphError> {
        let (nodes_before, constants_before) = (graph.nodes.len(), graph.constants.len());
        let (after, summary) = (self.rewrite)(graph)?;
        check_graph(&after)?;
        let report = PassReport {
            pass: self.name,
            summary,
            nodes_before,
            nodes_after: after.nodes.len(),
            constants_before,
            constants_after: after.constants.len(),
        };
        Ok((after, report))
    }
}

impl fmt::Debug for Pass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pass").field("name", &self.name).finish()
    }
}

/// What one pass changed on one graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassReport {
    /// The pass's name.
    pub pass: &'static str,
    /// What it did (`folded 12 nodes into constants`).
    pub summary: String,
    /// Nodes before the pass.
    pub nodes_before: usize,
    /// Nodes after it.
    pub nodes_after: usize,
    /// Constants before the pass.
    pub constants_before: usize,
    /// Constants after it.
    pub constants_after: usize,
}

impl fmt::Display for PassReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} (nodes {} → {}, constants {} → {})",
            self.pass,
            self.summary,
            self.nodes_before,
            self.nodes_after,
            self.constants_before,
            self.constants_after
        )
    }
}

/// The passes, in the order [`run_passes`] runs them.
pub const PASSES: &[Pass] = &[
    Pass {
        name: "fold_constants",
        description: "evaluates every node whose inputs are all constants once, on the host, and makes its outputs constants",
        rewrite: constants::fold_constants,
    },
    Pass {
        name: "fold_batch_norm",
        description: "folds a BatchNormalization (or a per-channel Mul/Add) into the weights and bias of the convolution it follows",
        rewrite: batch_norm::fold_batch_norm,
    },
    Pass {
        name: "channels_last",
        description: "runs 2-D convolutions (constant weight, one group; none where the graph has grouped ones), and the pools and elementwise nodes their results reach, channels last [N,H,W,C], weights folded into [R,S,C,K], with layout transforms at the boundaries",
        rewrite: channels_last::channels_last,
    },
    Pass {
        name: "pointwise_convolutions_as_matmuls",
        description: "rewrites a 1×1 convolution (stride 1, no padding, batch 1, constant weight) as a MatMul on the input viewed as [C, H·W] ([H·W, C] channels last), with the elementwise nodes only its result feeds",
        rewrite: pointwise_conv::pointwise_convolutions_as_matmuls,
    },
    Pass {
        name: "recognise_layer_norm",
        description: "replaces the exporters' ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div (·γ +β) over the last axis by one LayerNormalization",
        rewrite: layer_norm::recognise_layer_norm,
    },
    Pass {
        name: "eliminate_common_subexpressions",
        description: "merges equal constants and nodes with the same op, attributes and inputs, renaming their readers",
        rewrite: common_subexpressions::eliminate_common_subexpressions,
    },
    Pass {
        name: "eliminate_dead_nodes",
        description: "removes nodes no graph output depends on and constants nothing reads",
        rewrite: dead_nodes::eliminate_dead_nodes,
    },
];

/// Runs every pass of [`PASSES`] in order on `graph`: the graph after them
/// and one report a pass.
pub fn run_passes(graph: Graph) -> Result<(Graph, Vec<PassReport>), GraphError> {
    let mut current = graph;
    let mut reports = Vec::with_capacity(PASSES.len());
    for pass in PASSES {
        let (next, report) = pass.apply(current)?;
        current = next;
        reports.push(report);
    }
    Ok((current, reports))
}

/// The pass list as text: one line a pass, its name and description, and
/// under it what it changed when `reports` has it.
pub fn describe_passes(reports: &[PassReport]) -> String {
    let mut out = String::from("passes, in order:\n");
    for (i, pass) in PASSES.iter().enumerate() {
        out.push_str(&format!(
            "{:>2}. {} — {}\n",
            i + 1,
            pass.name,
            pass.description
        ));
        if let Some(report) = reports.iter().find(|r| r.pass == pass.name) {
            out.push_str(&format!(
                "      {} (nodes {} → {}, constants {} → {})\n",
                report.summary,
                report.nodes_before,
                report.nodes_after,
                report.constants_before,
                report.constants_after
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::test_support::{Builder, assert_same_outputs, conv3x3, count};
    use super::*;
    use crate::graph::ir::{BinaryOp, Node, Op, UnaryOp};

    #[test]
    fn the_pass_list_runs_in_order_and_keeps_the_outputs() {
        let mut b = Builder::new();
        b.input("x", &[1, 2, 5, 5]).constant("w", &[3, 2, 3, 3]);
        for p in ["gamma", "beta", "mean", "var"] {
            b.constant(p, &[3]);
        }
        let before = b
            .constant("k", &[1])
            // A constant subgraph: w · k, folded; its result feeds the Conv.
            .node(
                "scale",
                Op::Binary(BinaryOp::Mul),
                &["w", "k"],
                "wk",
                &[3, 2, 3, 3],
            )
            .node("conv", conv3x3(), &["x", "wk"], "c", &[1, 3, 5, 5])
            .node(
                "bn",
                Op::BatchNormalization { epsilon: 1e-5 },
                &["c", "gamma", "beta", "mean", "var"],
                "n",
                &[1, 3, 5, 5],
            )
            .node("r1", Op::Unary(UnaryOp::Relu), &["n"], "r1", &[1, 3, 5, 5])
            .node("r2", Op::Unary(UnaryOp::Relu), &["n"], "r2", &[1, 3, 5, 5])
            .node("dead", Op::Unary(UnaryOp::Exp), &["r2"], "e", &[1, 3, 5, 5])
            .node(
                "add",
                Op::Binary(BinaryOp::Add),
                &["r1", "r2"],
                "y",
                &[1, 3, 5, 5],
            )
            .outputs(&["y"]);
        let (after, reports) = run_passes(before.clone()).unwrap();
        let names: Vec<&str> = reports.iter().map(|r| r.pass).collect();
        let listed: Vec<&str> = PASSES.iter().map(|p| p.name).collect();
        assert_eq!(names, listed);
        let ops: Vec<&str> = after.nodes.iter().map(|n| n.op.name()).collect();
        // The convolution runs channels last: its input goes in, its
        // result comes out, by a Transpose each.
        assert_eq!(
            ops,
            ["Transpose", "Conv", "Relu", "Add", "Transpose"],
            "{reports:?}"
        );
        assert_eq!(after.constants.len(), 2, "{:?}", after.constants.keys());
        assert_eq!(count(&after, "Mul"), 0);
        assert_same_outputs(&before, &after, 1e-5);
        let text = describe_passes(&reports);
        for pass in PASSES {
            assert!(
                text.contains(pass.name) && text.contains(pass.description),
                "{text}"
            );
        }
        assert!(text.contains("folded 1 BatchNormalizations"), "{text}");
    }

    #[test]
    fn a_broken_graph_is_caught() {
        let mut graph = Builder::new()
            .input("x", &[2])
            .node("r", Op::Unary(UnaryOp::Relu), &["x"], "y", &[2])
            .outputs(&["y"]);
        check_graph(&graph).unwrap();
        graph.nodes.insert(
            0,
            Node {
                name: "early".into(),
                op: Op::Unary(UnaryOp::Exp),
                inputs: vec!["y".into()],
                outputs: vec!["z".into()],
            },
        );
        graph
            .tensors
            .insert("z".into(), crate::graph::TensorInfo::f32(&[2]));
        assert!(matches!(
            check_graph(&graph),
            Err(GraphError::Dangling { .. })
        ));
        graph.nodes.remove(0);
        graph.outputs.push("nowhere".into());
        assert!(matches!(
            check_graph(&graph),
            Err(GraphError::Dangling { .. })
        ));
    }
}
