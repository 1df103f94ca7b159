//! Fresh names for what a pass adds to a graph: `base`, else `base.1`,
//! `base.2`, …, none that the graph has or that the pass already took.

use std::collections::BTreeSet;

use crate::graph::ir::Graph;

/// Fresh tensor and node names: none that the graph has or that this
/// rewrite already took.
pub(super) struct FreshNames {
    tensors: BTreeSet<String>,
    nodes: BTreeSet<String>,
}

impl FreshNames {
    /// The names `graph` already has, taken.
    pub(super) fn new(graph: &Graph) -> FreshNames {
        FreshNames {
            tensors: graph.tensors.keys().cloned().collect(),
            nodes: graph.nodes.iter().map(|n| n.name.clone()).collect(),
        }
    }

    /// `base`, or `base.1`, `base.2`, …: the first name not in `taken`, now taken.
    fn fresh(taken: &mut BTreeSet<String>, base: &str) -> String {
        let mut name = base.to_string();
        let mut n = 0;
        while taken.contains(&name) {
            n += 1;
            name = format!("{base}.{n}");
        }
        taken.insert(name.clone());
        name
    }

    /// A fresh tensor name from `base`.
    pub(super) fn tensor(&mut self, base: &str) -> String {
        FreshNames::fresh(&mut self.tensors, base)
    }

    /// A fresh node name from `base`.
    pub(super) fn node(&mut self, base: &str) -> String {
        FreshNames::fresh(&mut self.nodes, base)
    }
}
