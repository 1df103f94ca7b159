//! Which tensors share storage and when each storage is live: aliases share
//! their input's, an in-place output takes its input's, every other node
//! output gets its own.

use std::collections::{BTreeSet, HashMap};

use crate::graph::ir::Graph;
use crate::graph::lower::Lowered;

use super::greedy::Lifetime;
use super::in_place::reads_only_at_output_index;

/// A node output overwriting its input's storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InPlace {
    /// The node (its index in the graph).
    pub node: usize,
    /// The input whose storage it takes.
    pub input: String,
    /// The output written over it.
    pub output: String,
}

/// One storage: the tensors it holds over its lifetime.
#[derive(Clone, Debug)]
pub(super) struct Storage {
    /// The tensors, in the order they are written (aliases included).
    pub tensors: Vec<String>,
    /// The largest of their sizes.
    pub bytes: usize,
    /// From the first write to the last read of any of them.
    pub lifetime: Lifetime,
}

/// The storages of a graph's node outputs.
pub(super) struct Storages {
    pub storages: Vec<Storage>,
    pub in_place: Vec<InPlace>,
}

fn bytes_of(graph: &Graph, name: &str) -> usize {
    graph
        .info(name)
        .map_or(0, |info| info.num_elements() * info.dtype.size_bytes())
}

/// Groups the outputs of `graph`'s nodes (lowered as `lowered`) into
/// storages. `keep` are tensors that must hold their value after the run,
/// like the graph outputs.
pub(super) fn storages(graph: &Graph, lowered: &[Lowered], keep: &BTreeSet<String>) -> Storages {
    // Outputs and kept tensors live past the last node, so that no node
    // (the last one included) overwrites them.
    let end = graph.nodes.len();
    // The tensor whose buffer each tensor is (itself, or what it aliases).
    let mut base: HashMap<&str, &str> = HashMap::new();
    let mut written_at: HashMap<&str, usize> = HashMap::new();
    for (i, (node, lowered)) in graph.nodes.iter().zip(lowered).enumerate() {
        for output in &node.outputs {
            let target = match (lowered, node.inputs.first()) {
                (Lowered::Alias, Some(input)) => base.get(input.as_str()).copied().unwrap_or(input),
                _ => output.as_str(),
            };
            base.insert(output, target);
            written_at.entry(target).or_insert(i);
        }
    }
    let base_of = |name: &str| base.get(name).copied();
    // The last node reading each buffer (through any alias of it).
    let mut last_read: HashMap<&str, usize> = HashMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        for input in &node.inputs {
            if let Some(b) = base_of(input) {
                last_read.insert(b, i);
            }
        }
    }
    for name in graph.outputs.iter().chain(keep) {
        if let Some(b) = base_of(name) {
            last_read.insert(b, end.max(written_at.get(b).copied().unwrap_or(0)));
        }
    }

    // Buffers in the order they are written; in-place outputs join their
    // input's storage.
    let mut storage_of: HashMap<&str, usize> = HashMap::new();
    let mut storages: Vec<Storage> = Vec::new();
    let mut in_place = Vec::new();
    for (i, lowered) in lowered.iter().enumerate() {
        let Lowered::Kernel(kernel) = lowered else {
            continue;
        };
        for output in &kernel.outputs {
            let Some(b) = base_of(output) else { continue };
            if b != output || storage_of.contains_key(b) {
                continue;
            }
            let written = written_at.get(b).copied().unwrap_or(i);
            let lifetime = Lifetime {
                first: written,
                last: last_read.get(b).copied().unwrap_or(written).max(written),
            };
            // Whatever the op (a fused group's anchor may be a convolution), the
            // DAG decides: every input the output would overwrite is read
            // only at the output's index.
            let taken = (kernel.outputs.len() == 1)
                .then(|| {
                    kernel.inputs.iter().find_map(|input| {
                        let source = base_of(input)?;
                        let storage = *storage_of.get(source)?;
                        let fits = last_read.get(source) == Some(&i)
                            && storages[storage].bytes == bytes_of(graph, output)
                            // Every DAG input held in that storage is read
                            // only at the output's index.
                            && kernel.inputs.iter().enumerate().all(|(j, other)| {
                                base_of(other) != Some(source)
                                    || reads_only_at_output_index(&kernel.dag, j)
                            });
                        fits.then(|| (storage, input.clone()))
                    })
                })
                .flatten();
            match taken {
                Some((storage, input)) => {
                    storage_of.insert(b, storage);
                    let s = &mut storages[storage];
                    s.lifetime.last = s.lifetime.last.max(lifetime.last);
                    in_place.push(InPlace {
                        node: i,
                        input,
                        output: output.clone(),
                    });
                }
                None => {
                    storage_of.insert(b, storages.len());
                    storages.push(Storage {
                        tensors: Vec::new(),
                        bytes: bytes_of(graph, output),
                        lifetime,
                    });
                }
            }
        }
    }
    // Every tensor (aliases included) into its buffer's storage, in order.
    for node in &graph.nodes {
        for output in &node.outputs {
            if let Some(&s) = base_of(output).and_then(|b| storage_of.get(b)) {
                storages[s].tensors.push(output.clone());
            }
        }
    }
    Storages { storages, in_place }
}
