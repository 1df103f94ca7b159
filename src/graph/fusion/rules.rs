//! The fusion rules: one ordered list of objects, each deciding whether a
//! node may join the group that produces its input (like Ansor's sketch
//! rules). The first rule that decides wins; a node no rule accepts starts
//! a group of its own.

use crate::graph::ir::{Graph, Node};

use super::pattern::{Pattern, pattern};

/// What a rule says about one candidate join.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The node joins the group.
    Join,
    /// The node must not join the group.
    Refuse,
    /// The rule has nothing to say; ask the next one.
    Pass,
}

/// A node that could join the group producing one of its inputs.
pub struct Candidate<'a> {
    /// The graph.
    pub graph: &'a Graph,
    /// The node that would join.
    pub node: &'a Node,
    /// The group's first node (its anchor).
    pub anchor: &'a Node,
    /// The tensor the group produces and the node reads.
    pub tensor: &'a str,
    /// Whether the tensor must stay visible after the group runs (a graph
    /// output, or a tensor the caller asked to keep).
    pub visible: bool,
}

/// One fusion rule.
pub trait FusionRule: Sync {
    /// Its name, as `model show` prints it.
    fn name(&self) -> &'static str;
    /// What it decides, in one line.
    fn summary(&self) -> &'static str;
    /// Its decision for `candidate`.
    fn decide(&self, candidate: &Candidate) -> Decision;
}

/// The rules, in the order they are asked.
pub static FUSION_RULES: &[&dyn FusionRule] = &[
    &VisibleTensorsStay,
    &OnlyElementwiseJoins,
    &NoBroadcastOfTheResult,
    &ElementwiseEpilogue,
];

/// A graph output or kept tensor is never folded into a group.
struct VisibleTensorsStay;

impl FusionRule for VisibleTensorsStay {
    fn name(&self) -> &'static str {
        "visible_tensors_stay"
    }
    fn summary(&self) -> &'static str {
        "a graph output or a kept tensor ends its group"
    }
    fn decide(&self, candidate: &Candidate) -> Decision {
        if candidate.visible {
            Decision::Refuse
        } else {
            Decision::Pass
        }
    }
}

/// Only elementwise nodes with one output join a group; contractions,
/// reductions and moves of data start their own.
struct OnlyElementwiseJoins;

impl FusionRule for OnlyElementwiseJoins {
    fn name(&self) -> &'static str {
        "only_elementwise_joins"
    }
    fn summary(&self) -> &'static str {
        "contractions, reductions and data moves start a group; only elementwise nodes join one"
    }
    fn decide(&self, candidate: &Candidate) -> Decision {
        if pattern(&candidate.node.op) == Pattern::Elementwise && candidate.node.outputs.len() == 1
        {
            Decision::Pass
        } else {
            Decision::Refuse
        }
    }
}

/// A node whose output is larger than the group's tensor (it broadcasts
/// it) does not join: each element of the group's result would be
/// computed once per element of the broadcast.
struct NoBroadcastOfTheResult;

impl FusionRule for NoBroadcastOfTheResult {
    fn name(&self) -> &'static str {
        "no_broadcast_of_the_result"
    }
    fn summary(&self) -> &'static str {
        "a node that broadcasts the group's result to a larger shape starts a group"
    }
    fn decide(&self, candidate: &Candidate) -> Decision {
        let graph = candidate.graph;
        let produced = graph.info(candidate.tensor).map(|i| i.num_elements());
        let output = candidate
            .node
            .outputs
            .first()
            .and_then(|o| graph.info(o))
            .map(|i| i.num_elements());
        if produced.is_some() && produced == output {
            Decision::Pass
        } else {
            Decision::Refuse
        }
    }
}

/// An elementwise node joins the group of any kernel it follows: the
/// epilogue runs in the producer's loops (conv + bias + relu, matmul + add,
/// a residual add + relu, the tail of a normalisation).
struct ElementwiseEpilogue;

impl FusionRule for ElementwiseEpilogue {
    fn name(&self) -> &'static str {
        "elementwise_epilogue"
    }
    fn summary(&self) -> &'static str {
        "an elementwise node joins the group of the kernel whose result it reads"
    }
    fn decide(&self, candidate: &Candidate) -> Decision {
        match pattern(&candidate.anchor.op) {
            Pattern::Alias => Decision::Refuse,
            _ => Decision::Join,
        }
    }
}

/// Asks the rules in order; a candidate no rule accepts does not join.
pub fn decide(candidate: &Candidate) -> (Decision, &'static str) {
    for rule in FUSION_RULES {
        match rule.decide(candidate) {
            Decision::Pass => {}
            decided => return (decided, rule.name()),
        }
    }
    (Decision::Refuse, "no rule accepts it")
}
