//! Compiling a graph: nodes fused into groups and lowered, every distinct
//! workload compiled once, with the schedule it gets and why.

use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

use crate::codegen::{self, CodegenOptions, Kernel};
use crate::db::{Lookup, TuningDb};
use crate::deploy::{KernelSource, Library};
use crate::graph::error::GraphError;
use crate::graph::fusion::fuse;
use crate::graph::ir::{Graph, Node};
use crate::graph::lower::{Lowered, NodeKernel, lower_node};
use crate::graph::memory::MemoryPlan;
use crate::runtime::host_device;
use crate::schedule::State;

use super::run::{CompiledModel, CompiledNode, Slots};

/// Where the schedules come from, and whether the graph passes run.
pub struct CompileOptions<'a> {
    /// A deployed library (`schedules/`): its artifact of a node's workload
    /// is used when this device has one.
    pub library: Option<&'a Library>,
    /// A tuning cache: the best record of a node's workload on this device
    /// (for nodes that are registry operators), when no library is given.
    pub db: Option<&'a TuningDb>,
    /// Intermediate tensors whose values must survive a run, to read them
    /// with [`CompiledModel::tensor`] like the graph outputs (the memory
    /// plan reuses every other intermediate's bytes after its last reader).
    pub keep: Vec<String>,
    /// Run the graph passes ([`crate::graph::passes::PASSES`]) before
    /// lowering (default: on).
    pub passes: bool,
    /// Fuse nodes into groups, one kernel each ([`crate::graph::fusion`];
    /// default: on). Off, every node is its own kernel.
    pub fuse: bool,
    /// With a library: lay out each constant input that a node's tuned
    /// schedule reads only through one packing copy once, here, instead of
    /// on every run (default: off).
    pub prepack: bool,
}

impl Default for CompileOptions<'_> {
    fn default() -> Self {
        CompileOptions {
            library: None,
            db: None,
            keep: Vec::new(),
            passes: true,
            fuse: true,
            prepack: false,
        }
    }
}

/// Which schedule a node runs.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeSource {
    /// A tuned schedule, and where it came from.
    Tuned(String),
    /// The default schedule, and why.
    Default(String),
    /// No kernel: the node only gives its input another shape.
    Alias,
}

impl NodeSource {
    /// `tuned`, `default` or `alias`.
    pub fn label(&self) -> &'static str {
        match self {
            NodeSource::Tuned(_) => "tuned",
            NodeSource::Default(_) => "default",
            NodeSource::Alias => "alias",
        }
    }
}

impl fmt::Display for NodeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeSource::Tuned(from) => write!(f, "tuned ({from})"),
            NodeSource::Default(why) => write!(f, "default schedule ({why})"),
            NodeSource::Alias => f.write_str("no kernel (same elements, new shape)"),
        }
    }
}

/// Compiles every node of `graph`.
pub(super) fn compile(
    graph: &Graph,
    options: &CompileOptions,
) -> Result<CompiledModel, GraphError> {
    let codegen_options = options.library.map_or_else(CodegenOptions::default, |l| {
        CodegenOptions::for_target(*l.target())
    });
    let (fused, lowered) = if options.fuse {
        let fused = fuse(graph, &options.keep)?;
        (fused.graph, fused.lowered)
    } else {
        let lowered = graph
            .nodes
            .iter()
            .map(|node| lower_node(graph, node))
            .collect::<Result<Vec<_>, _>>()?;
        (graph.clone(), lowered)
    };
    let graph = &fused;
    let plan = MemoryPlan::new(graph, &lowered, &options.keep)?;
    let mut slots = Slots::new(graph, plan)?;
    let mut compiled: HashMap<String, (Rc<Kernel>, NodeSource)> = HashMap::new();
    let mut nodes = Vec::with_capacity(graph.nodes.len());
    for (node, lowered) in graph.nodes.iter().zip(lowered) {
        match lowered {
            Lowered::Alias => {
                let (input, output) = match (node.inputs.first(), node.outputs.first()) {
                    (Some(i), Some(o)) => (i, o),
                    _ => {
                        return Err(GraphError::bad_node(
                            node,
                            "an alias needs one input and one output",
                        ));
                    }
                };
                slots.alias(output, input);
                nodes.push(CompiledNode::alias(node));
            }
            Lowered::Kernel(lowered) => {
                let prepacked = match options.library.filter(|_| options.prepack) {
                    Some(library) => {
                        super::prepack::prepacked(library, graph, node, &lowered, &mut slots)?
                    }
                    None => None,
                };
                let (kernel, source, lowered) = match prepacked {
                    Some(done) => done,
                    None => {
                        let hash = lowered.dag.workload_key().hash;
                        let (kernel, source) = match compiled.get(&hash) {
                            Some(done) => done.clone(),
                            None => {
                                let done = kernel_of(node, &lowered, options, &codegen_options)?;
                                compiled.insert(hash, done.clone());
                                done
                            }
                        };
                        (kernel, source, lowered)
                    }
                };
                for output in &lowered.outputs {
                    slots.place(output, graph)?;
                }
                nodes.push(CompiledNode::kernel(
                    node, &lowered, kernel, source, &slots,
                )?);
            }
        }
    }
    CompiledModel::new(graph.clone(), nodes, slots)
}

/// The kernel of one lowered node and where its schedule came from.
fn kernel_of(
    node: &Node,
    lowered: &NodeKernel,
    options: &CompileOptions,
    codegen_options: &CodegenOptions,
) -> Result<(Rc<Kernel>, NodeSource), GraphError> {
    let failed = |reason: String| GraphError::Kernel {
        node: node.name.clone(),
        op_type: node.op.name().to_string(),
        reason,
    };
    if let Some(library) = options.library {
        let loaded = library
            .kernel(&lowered.dag)
            .map_err(|e| failed(e.to_string()))?;
        let source = match &loaded.source {
            KernelSource::Tuned { path, .. } => NodeSource::Tuned(path.display().to_string()),
            KernelSource::Fallback(reason) => NodeSource::Default(reason.to_string()),
        };
        return Ok((loaded.kernel, source));
    }
    let (state, source) = match options.db {
        Some(db) => cached_state(db, lowered),
        None => (
            State::new(&lowered.dag),
            NodeSource::Default("no library or tuning cache given".to_string()),
        ),
    };
    let func = crate::tir::lower(&state).map_err(|e| failed(e.to_string()))?;
    let kernel = codegen::compile(&func, codegen_options).map_err(|e| failed(e.to_string()))?;
    Ok((Rc::new(kernel), source))
}

/// The best record of the kernel's workload in the cache (its registry
/// operator's, or its DAG's), replayed.
fn cached_state(db: &TuningDb, lowered: &NodeKernel) -> (State, NodeSource) {
    let default = |why: String| (State::new(&lowered.dag), NodeSource::Default(why));
    let task = match lowered.task() {
        Ok(task) => task,
        Err(e) => return default(format!("{}: {e}", lowered.dag.label())),
    };
    let device = host_device().key();
    match db.lookup(&task, &device) {
        Ok((Lookup::Exact(record), _)) => match State::replay(&lowered.dag, &record.steps) {
            Ok(state) => (
                state,
                NodeSource::Tuned(format!("tuning cache, {} record", task.key().readable)),
            ),
            Err(e) => default(format!("the cached record no longer replays: {e}")),
        },
        Ok((Lookup::OtherDevices(devices), _)) => default(format!(
            "{} is tuned only on other devices ({})",
            task.key().readable,
            devices
                .iter()
                .map(|d| d.0.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Ok((Lookup::Nothing(_), _)) => default(format!(
            "{} is not tuned on this device",
            task.key().readable
        )),
        Err(e) => default(format!("the tuning cache failed: {e}")),
    }
}
