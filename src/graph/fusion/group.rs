//! Forming the groups: nodes in graph order, each joining the group that
//! produces one of its inputs (the first whose group the rules let it
//! join); then every
//! group is checked to have one result (no tensor inside it read from
//! outside), and the joins that break that are refused and the grouping is
//! done again.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::graph::ir::Graph;

use super::pattern::{Pattern, pattern};
use super::rules::{Candidate, Decision, decide};

/// A group: node indices in graph order, the first one its anchor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Group {
    pub(super) members: Vec<usize>,
}

/// Groups `graph`'s nodes; `visible` are the tensors that must survive the
/// run (graph outputs and kept tensors). `refused` are the joins (node,
/// anchor) a previous attempt found invalid.
fn attempt(
    graph: &Graph,
    visible: &BTreeSet<String>,
    refused: &HashSet<(usize, usize)>,
) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut group_of: HashMap<&str, usize> = HashMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        if pattern(&node.op) == Pattern::Alias {
            groups.push(Group { members: vec![i] });
            continue;
        }
        let joined = node.inputs.iter().find_map(|input| {
            let &g = group_of.get(input.as_str())?;
            let anchor = groups[g].members[0];
            if refused.contains(&(i, anchor)) {
                return None;
            }
            let candidate = Candidate {
                graph,
                node,
                anchor: &graph.nodes[anchor],
                tensor: input,
                visible: visible.contains(input),
            };
            (decide(&candidate).0 == Decision::Join).then_some(g)
        });
        let g = match joined {
            Some(g) => {
                groups[g].members.push(i);
                g
            }
            None => {
                groups.push(Group { members: vec![i] });
                groups.len() - 1
            }
        };
        for output in &node.outputs {
            group_of.insert(output, g);
        }
    }
    groups
}

/// The joins of `group` that make a tensor inside it visible outside: every
/// member after the first one whose result is read outside the group, a
/// graph output or kept.
fn invalid_joins(
    graph: &Graph,
    group: &Group,
    readers: &HashMap<&str, Vec<usize>>,
    visible: &BTreeSet<String>,
) -> Vec<usize> {
    let members: HashSet<usize> = group.members.iter().copied().collect();
    let last = group.members.len() - 1;
    let escapes = group.members[..last].iter().position(|&m| {
        graph.nodes[m].outputs.iter().any(|t| {
            visible.contains(t)
                || readers
                    .get(t.as_str())
                    .is_some_and(|r| r.iter().any(|n| !members.contains(n)))
        })
    });
    match escapes {
        Some(k) => group.members[k + 1..].to_vec(),
        None => Vec::new(),
    }
}

/// The groups of `graph` (see the module docs), in the order of their last
/// node, which is the order they can run in.
pub(super) fn groups(graph: &Graph, visible: &BTreeSet<String>) -> Vec<Group> {
    let mut readers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        for input in &node.inputs {
            readers.entry(input.as_str()).or_default().push(i);
        }
    }
    let mut refused: HashSet<(usize, usize)> = HashSet::new();
    loop {
        let groups = attempt(graph, visible, &refused);
        let before = refused.len();
        for group in &groups {
            let anchor = group.members[0];
            for m in invalid_joins(graph, group, &readers, visible) {
                refused.insert((m, anchor));
            }
        }
        if refused.len() == before {
            let mut groups = groups;
            groups.sort_by_key(|g| g.members.last().copied().unwrap_or(0));
            return groups;
        }
    }
}
