//! The tunable tasks of a model: every node that lowers to a registry
//! operator is a workload of the tuning cache (the same records as tuning
//! that operator alone); identical workloads are one task, weighted by how
//! often they occur. Nodes built with the te API are not tasks yet.

use std::collections::BTreeMap;

use crate::search::{Suite, SuiteWorkload};

use super::error::GraphError;
use super::ir::Graph;
use super::lower::{Lowered, lower_node};

/// A model's tasks as a suite, and the nodes that are not tasks.
#[derive(Clone, Debug)]
pub struct ModelTasks {
    /// One workload per distinct registry operator and shape, weighted by
    /// its occurrences, in order of first occurrence.
    pub suite: Suite,
    /// Kernel nodes that are no registry operator, with the DAG they run
    /// (`Op[in→out]`): they keep the default schedule.
    pub untunable: Vec<(String, String)>,
}

/// The tasks of `graph`, as a suite named `name`.
pub fn model_tasks(graph: &Graph, name: &str) -> Result<ModelTasks, GraphError> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut counts: BTreeMap<(String, String), f64> = BTreeMap::new();
    let mut untunable = Vec::new();
    for node in &graph.nodes {
        match lower_node(graph, node)? {
            Lowered::Alias => {}
            Lowered::Kernel(k) => match k.registry_op {
                Some(workload) => {
                    let count = counts.entry(workload.clone()).or_insert(0.0);
                    if *count == 0.0 {
                        order.push(workload);
                    }
                    *count += 1.0;
                }
                None => untunable.push((node.name.clone(), k.dag.label().to_string())),
            },
        }
    }
    let workloads = order
        .into_iter()
        .enumerate()
        .map(|(i, (op, shape))| {
            let weight = counts
                .get(&(op.clone(), shape.clone()))
                .copied()
                .unwrap_or(1.0);
            SuiteWorkload {
                label: format!("T{i}-{op}"),
                op,
                shape,
                weight,
            }
        })
        .collect();
    Ok(ModelTasks {
        suite: Suite {
            name: name.to_string(),
            description: format!(
                "the registry-operator tasks of model {name} (weight: occurrences)"
            ),
            workloads,
        },
        untunable,
    })
}
