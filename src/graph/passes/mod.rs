//! Graph passes: named rewrites of the graph IR, run in one ordered list
//! before lowering (like Halide's lowering passes or TVM's pass list).
//!
//! ```text
//! fold_constants ─► fold_batch_norm ─► eliminate_common_subexpressions ─► eliminate_dead_nodes
//! ```
//!
//! Each pass takes a graph and returns a new one with the same outputs for
//! every input, and a [`PassReport`] of what it changed. Every pass keeps
//! the graph's invariants (topological order, every tensor typed, every
//! graph output produced — by a node, or as a constant), checked after each
//! pass by [`check_graph`].

mod batch_norm;
mod common_subexpressions;
mod constants;
mod dead_nodes;
mod host_eval;
mod invariants;

#[cfg(test)]
mod test_support;

use std::fmt;

pub use host_eval::{evaluate_graph, evaluate_node};
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
    rewrite: fn(&Graph) -> Result<(Graph, String), GraphError>,
}

impl Pass {
    /// Runs the pass on `graph`: the rewritten graph and what changed.
    pub fn run(&self, graph: &Graph) -> Result<(Graph, PassReport), GraphError> {
        let (after, summary) = (self.rewrite)(graph)?;
        check_graph(&after)?;
        let report = PassReport {
            pass: self.name,
            summary,
            nodes_before: graph.nodes.len(),
            nodes_after: after.nodes.len(),
            constants_before: graph.constants.len(),
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
pub fn run_passes(graph: &Graph) -> Result<(Graph, Vec<PassReport>), GraphError> {
    let mut current = graph.clone();
    let mut reports = Vec::with_capacity(PASSES.len());
    for pass in PASSES {
        let (next, report) = pass.run(&current)?;
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
        out.push_str(&format!("{:>2}. {} — {}\n", i + 1, pass.name, pass.description));
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
