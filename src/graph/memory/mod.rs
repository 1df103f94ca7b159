//! Memory planning: every node output of a model placed in one arena from
//! the tensors' lifetimes over the node order.
//!
//! ```text
//! graph + lowered nodes ─► storages (aliases share their input's buffer; an
//!                          output overwrites an input read for the last
//!                          time when its DAG reads that input only at the
//!                          index it writes, see in_place) with lifetimes
//!                       ─► greedy by size (largest first, smallest gap that
//!                          fits, 64-byte aligned) ─► offsets, arena size
//! ```
//!
//! Graph inputs and constants are not in the arena: they are given or
//! loaded once. A tensor's value survives the run only when it is a graph
//! output or one of the tensors asked to be kept; any other intermediate's
//! bytes may be reused after its last reader.

mod greedy;
mod in_place;
mod storage;

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::fmt;

pub use greedy::{ARENA_ALIGN, Block, Lifetime, aligned, lower_bound, place};
pub use in_place::reads_only_at_output_index;
pub use storage::InPlace;

use super::error::GraphError;
use super::ir::Graph;
use super::lower::{Lowered, lower_node};

/// Where one tensor lives in the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Byte offset in the arena (a multiple of [`ARENA_ALIGN`]).
    pub offset: usize,
    /// Its bytes.
    pub bytes: usize,
    /// When its storage is live.
    pub lifetime: Lifetime,
}

/// The static memory plan of a model's intermediate tensors.
#[derive(Clone, Debug)]
pub struct MemoryPlan {
    /// The arena's size in bytes.
    pub arena_bytes: usize,
    /// The sum of every node output's bytes (what one buffer a tensor
    /// takes; aliases counted once, with their input).
    pub all_intermediate_bytes: usize,
    /// The largest sum of bytes live at one node: no plan of these
    /// storages is smaller.
    pub lower_bound_bytes: usize,
    /// The outputs that overwrite their input.
    pub in_place: Vec<InPlace>,
    placements: HashMap<String, Placement>,
    kept: BTreeSet<String>,
}

impl MemoryPlan {
    /// Plans the node outputs of `graph`, whose nodes lower as `lowered`
    /// (one entry a node). `keep` are tensors, besides the graph outputs,
    /// whose values must survive the run.
    ///
    /// Errors: [`GraphError::UnknownOutput`] for a `keep` name the graph
    /// does not have.
    pub fn new(
        graph: &Graph,
        lowered: &[Lowered],
        keep: &[String],
    ) -> Result<MemoryPlan, GraphError> {
        for name in keep {
            if graph.info(name).is_none() {
                return Err(GraphError::UnknownOutput {
                    name: name.clone(),
                    available: format!("{:?}", graph.outputs),
                });
            }
        }
        let mut kept: BTreeSet<String> = keep.iter().cloned().collect();
        let found = storage::storages(graph, lowered, &kept);
        kept.extend(graph.outputs.iter().cloned());
        let blocks: Vec<Block> = found
            .storages
            .iter()
            .map(|s| Block {
                bytes: s.bytes,
                lifetime: s.lifetime,
            })
            .collect();
        let (offsets, arena_bytes) = place(&blocks);
        let mut placements = HashMap::new();
        let mut all_intermediate_bytes = 0;
        for (storage, offset) in found.storages.iter().zip(offsets) {
            for tensor in &storage.tensors {
                let bytes = graph
                    .info(tensor)
                    .map_or(0, |i| i.num_elements() * i.dtype.size_bytes());
                let placement = Placement {
                    offset,
                    bytes,
                    lifetime: storage.lifetime,
                };
                placements.insert(tensor.clone(), placement);
            }
        }
        for lowered in lowered {
            if let Lowered::Kernel(kernel) = lowered {
                all_intermediate_bytes += kernel
                    .outputs
                    .iter()
                    .filter_map(|o| placements.get(o))
                    .map(|p| p.bytes)
                    .sum::<usize>();
            }
        }
        Ok(MemoryPlan {
            arena_bytes,
            all_intermediate_bytes,
            lower_bound_bytes: lower_bound(&blocks),
            in_place: found.in_place,
            placements,
            kept,
        })
    }

    /// Lowers every node of `graph` and plans it (see [`MemoryPlan::new`]).
    pub fn of_graph(graph: &Graph, keep: &[String]) -> Result<MemoryPlan, GraphError> {
        let lowered = graph
            .nodes
            .iter()
            .map(|node| lower_node(graph, node))
            .collect::<Result<Vec<_>, _>>()?;
        MemoryPlan::new(graph, &lowered, keep)
    }

    /// Where `tensor` lives, when it is in the arena (a node output, or an
    /// alias of one).
    pub fn placement(&self, tensor: &str) -> Option<Placement> {
        self.placements.get(tensor).copied()
    }

    /// The arena tensors with their placements, in no particular order.
    pub fn placements(&self) -> impl Iterator<Item = (&String, &Placement)> {
        self.placements.iter()
    }

    /// Whether `tensor`'s value survives the run: it is not in the arena,
    /// or it is a graph output or asked to be kept.
    pub fn survives(&self, tensor: &str) -> bool {
        !self.placements.contains_key(tensor) || self.kept.contains(tensor)
    }
}

impl fmt::Display for MemoryPlan {
    /// `arena 25.7 MB (lower bound 25.7 MB; all intermediates 112.4 MB; 3 in place)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mb = |b: usize| b as f64 / 1e6;
        write!(
            f,
            "arena {:.1} MB (lower bound {:.1} MB; all intermediates {:.1} MB; {} in place)",
            mb(self.arena_bytes),
            mb(self.lower_bound_bytes),
            mb(self.all_intermediate_bytes),
            self.in_place.len()
        )
    }
}
