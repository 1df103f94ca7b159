//! Running a whole model: [`Model::load`] imports it, [`Model::compile`]
//! runs the graph passes ([`Model::optimized`]), lowers every node and
//! compiles its kernel (the tuned schedule from a deployed library or the
//! tuning cache when there is one, the default schedule otherwise, saying
//! which per node), and [`CompiledModel::run`] executes the nodes in order
//! over the constants, the inputs and one arena laid out by the
//! [`MemoryPlan`](crate::graph::memory::MemoryPlan).

mod compile;
mod prepack;
mod run;

use std::path::{Path, PathBuf};

pub use compile::{CompileOptions, NodeSource};
pub use run::{CompiledModel, NodeTiming};

use super::error::GraphError;
use super::ir::Graph;
use super::onnx::{ImportOptions, import};
use super::passes::{PassReport, run_passes};
use crate::te::{DType, HostTensor};

/// An imported model.
#[derive(Clone, Debug)]
pub struct Model {
    path: PathBuf,
    graph: Graph,
}

impl Model {
    /// Imports the ONNX model at `path` (its input shapes must be static).
    pub fn load(path: impl AsRef<Path>) -> Result<Model, GraphError> {
        Model::load_with(path, &ImportOptions::default())
    }

    /// Imports the ONNX model at `path` with the shapes of dynamic inputs
    /// given in `options`.
    pub fn load_with(path: impl AsRef<Path>, options: &ImportOptions) -> Result<Model, GraphError> {
        let path = path.as_ref();
        Ok(Model {
            path: path.to_path_buf(),
            graph: import(path, options)?,
        })
    }

    /// A model of a graph built in memory (by a pass or a test); its path
    /// is empty.
    pub fn from_graph(graph: Graph) -> Model {
        Model {
            path: PathBuf::new(),
            graph,
        }
    }

    /// The model as a graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The graph after the graph passes, and what each pass changed.
    pub fn optimized(&self) -> Result<(Graph, Vec<PassReport>), GraphError> {
        run_passes(self.graph.clone())
    }

    /// Runs the graph passes (unless `options.passes` is off), then lowers
    /// and compiles every node.
    pub fn compile(&self, options: &CompileOptions) -> Result<CompiledModel, GraphError> {
        if !options.passes {
            return compile::compile(&self.graph, options);
        }
        if options.keep.is_empty() {
            let (optimized, _) = self.optimized()?;
            return compile::compile(&optimized, options);
        }
        // Tensors to keep are outputs while the passes run, so that no pass
        // removes, merges or folds them away.
        let mut graph = self.graph.clone();
        let added: Vec<String> = options
            .keep
            .iter()
            .filter(|k| graph.tensors.contains_key(*k) && !graph.outputs.contains(k))
            .cloned()
            .collect();
        graph.outputs.extend(added.iter().cloned());
        let (mut optimized, _) = run_passes(graph)?;
        optimized.outputs.retain(|o| !added.contains(o));
        compile::compile(&optimized, options)
    }
}

/// Checks that `inputs` name every graph input once, each f32 of the
/// model's shape, and nothing else.
pub fn check_inputs(graph: &Graph, inputs: &[(String, HostTensor)]) -> Result<(), GraphError> {
    for (i, (name, _)) in inputs.iter().enumerate() {
        if !graph.inputs.contains(name) {
            return Err(GraphError::BadInput {
                input: name.clone(),
                what: format!(
                    "the model has no such input; its inputs are {:?}",
                    graph.inputs
                ),
            });
        }
        if inputs[..i].iter().any(|(n, _)| n == name) {
            return Err(GraphError::BadInput {
                input: name.clone(),
                what: "given twice".to_string(),
            });
        }
    }
    for name in &graph.inputs {
        let expected = graph.shape(name);
        let Some((_, value)) = inputs.iter().find(|(n, _)| n == name) else {
            return Err(GraphError::BadInput {
                input: name.clone(),
                what: format!(
                    "not given (the model needs f32{expected:?}; pass --input {name}=FILE.npy)"
                ),
            });
        };
        if value.shape() != expected || value.dtype() != DType::F32 {
            return Err(GraphError::BadInput {
                input: name.clone(),
                what: format!(
                    "it is {}{:?}, the model expects f32{:?}",
                    value.dtype(),
                    value.shape(),
                    expected
                ),
            });
        }
    }
    Ok(())
}
