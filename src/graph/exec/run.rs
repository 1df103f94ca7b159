//! Executing a compiled model: one buffer per tensor (an alias shares its
//! input's), nodes called in order.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::codegen::Kernel;
use crate::graph::error::GraphError;
use crate::graph::ir::{Graph, Node};
use crate::graph::lower::NodeKernel;
use crate::runtime::NdBuffer;
use crate::te::HostTensor;

use super::compile::NodeSource;

/// The buffers of a model's tensors.
pub(super) struct Slots {
    buffers: Vec<NdBuffer>,
    of: HashMap<String, usize>,
}

fn buffer_error(tensor: &str, e: impl ToString) -> GraphError {
    GraphError::BadInput {
        input: tensor.to_string(),
        what: e.to_string(),
    }
}

impl Slots {
    /// Buffers of the constants (filled) and the graph inputs (zero).
    pub(super) fn new(graph: &Graph) -> Result<Slots, GraphError> {
        let mut slots = Slots {
            buffers: Vec::new(),
            of: HashMap::new(),
        };
        for (name, value) in &graph.constants {
            let buffer = NdBuffer::from_host(value).map_err(|e| buffer_error(name, e))?;
            slots.insert(name, buffer);
        }
        for name in &graph.inputs {
            slots.allocate(name, graph)?;
        }
        Ok(slots)
    }

    fn insert(&mut self, name: &str, buffer: NdBuffer) {
        self.of.insert(name.to_string(), self.buffers.len());
        self.buffers.push(buffer);
    }

    /// A fresh buffer for `name`, poisoned (NaN) so that an element no
    /// kernel writes cannot pass for a value.
    pub(super) fn allocate(&mut self, name: &str, graph: &Graph) -> Result<(), GraphError> {
        let info = graph.info(name).ok_or_else(|| GraphError::Dangling {
            node: "executor".to_string(),
            tensor: name.to_string(),
        })?;
        let mut buffer =
            NdBuffer::zeros(&info.shape, info.dtype).map_err(|e| buffer_error(name, e))?;
        buffer.poison();
        self.insert(name, buffer);
        Ok(())
    }

    /// `output` shares `input`'s buffer.
    pub(super) fn alias(&mut self, output: &str, input: &str) {
        if let Some(&slot) = self.of.get(input) {
            self.of.insert(output.to_string(), slot);
        }
    }

    fn slot(&self, name: &str) -> Option<usize> {
        self.of.get(name).copied()
    }

    /// The bytes held by all buffers.
    pub(super) fn bytes(&self) -> usize {
        self.buffers.iter().map(|b| b.as_bytes().len()).sum()
    }
}

/// One node, ready to run.
pub(super) struct CompiledNode {
    name: String,
    op_type: &'static str,
    kernel: Option<Rc<Kernel>>,
    /// Slots of the kernel's parameters, in order.
    args: Vec<usize>,
    source: NodeSource,
    flops: u64,
    label: String,
}

impl CompiledNode {
    pub(super) fn alias(node: &Node) -> CompiledNode {
        CompiledNode {
            name: node.name.clone(),
            op_type: node.op.name(),
            kernel: None,
            args: Vec::new(),
            source: NodeSource::Alias,
            flops: 0,
            label: "alias".to_string(),
        }
    }

    /// The node calling `kernel` on the slots of its tensors, each checked
    /// to hold exactly the parameter's elements and dtype.
    pub(super) fn kernel(
        node: &Node,
        lowered: &NodeKernel,
        kernel: Rc<Kernel>,
        source: NodeSource,
        slots: &Slots,
    ) -> Result<CompiledNode, GraphError> {
        let tensors: Vec<&String> = lowered.inputs.iter().chain(&lowered.outputs).collect();
        let params = kernel.params();
        if params.len() != tensors.len() {
            return Err(GraphError::lower(
                node,
                format!(
                    "its kernel takes {} buffers, the lowering names {}",
                    params.len(),
                    tensors.len()
                ),
            ));
        }
        let mut args = Vec::with_capacity(tensors.len());
        for (param, tensor) in params.iter().zip(tensors) {
            let slot = slots.slot(tensor).ok_or_else(|| GraphError::Dangling {
                node: node.name.clone(),
                tensor: tensor.clone(),
            })?;
            let buffer = &slots.buffers[slot];
            let elements: usize = param.shape.iter().product();
            if elements != buffer.len() || param.dtype != buffer.dtype() {
                return Err(GraphError::lower(
                    node,
                    format!(
                        "kernel parameter {} is {}{:?} but tensor '{tensor}' is {}{:?}",
                        param.name,
                        param.dtype,
                        param.shape,
                        buffer.dtype(),
                        buffer.shape()
                    ),
                ));
            }
            args.push(slot);
        }
        let label = match &lowered.registry_op {
            Some((op, shape)) => format!("{op}[{shape}]"),
            None => lowered.dag.label().to_string(),
        };
        Ok(CompiledNode {
            name: node.name.clone(),
            op_type: node.op.name(),
            kernel: Some(kernel),
            args,
            source,
            flops: lowered.dag.flop_count(),
            label,
        })
    }

    /// Runs the node's kernel on the buffers.
    fn call(&self, buffers: &mut [NdBuffer]) {
        let Some(kernel) = &self.kernel else {
            return;
        };
        let pointers: Vec<*mut u8> = self
            .args
            .iter()
            .map(|&slot| buffers[slot].as_mut_ptr())
            .collect();
        // SAFETY: every slot was checked at compile time to hold exactly
        // the elements and dtype of its parameter; buffers never shrink, and
        // no output slot is also an input of the same call.
        unsafe { kernel.call_raw(&pointers) };
    }
}

/// A node's share of a run.
#[derive(Clone, Debug)]
pub struct NodeTiming {
    /// The node's name.
    pub name: String,
    /// Its op type.
    pub op_type: &'static str,
    /// The registry op or DAG it runs (`alias` for none).
    pub kernel: String,
    /// Its schedule's source.
    pub source: NodeSource,
    /// Floating-point operations.
    pub flops: u64,
    /// Median time over the timed runs.
    pub time: Duration,
}

/// A model with every kernel compiled and every buffer allocated.
pub struct CompiledModel {
    graph: Graph,
    nodes: Vec<CompiledNode>,
    slots: Slots,
}

impl CompiledModel {
    pub(super) fn new(
        graph: Graph,
        nodes: Vec<CompiledNode>,
        slots: Slots,
    ) -> Result<CompiledModel, GraphError> {
        for output in &graph.outputs {
            if slots.slot(output).is_none() {
                return Err(GraphError::Dangling {
                    node: "graph output".to_string(),
                    tensor: output.clone(),
                });
            }
        }
        Ok(CompiledModel {
            graph,
            nodes,
            slots,
        })
    }

    /// The graph it runs.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Each node's name and schedule source, in execution order.
    pub fn sources(&self) -> Vec<(&str, &'static str, &NodeSource)> {
        self.nodes
            .iter()
            .map(|n| (n.name.as_str(), n.op_type, &n.source))
            .collect()
    }

    /// The bytes of all buffers (constants, inputs, intermediates, outputs).
    pub fn buffer_bytes(&self) -> usize {
        self.slots.bytes()
    }

    /// Copies `inputs` (every graph input, by name) into the model.
    pub fn set_inputs(&mut self, inputs: &[(String, HostTensor)]) -> Result<(), GraphError> {
        super::check_inputs(&self.graph, inputs)?;
        for (name, value) in inputs {
            let (Some(slot), Some(data)) = (self.slots.slot(name), value.as_f32()) else {
                continue;
            };
            if let Some(dst) = self.slots.buffers[slot].as_f32_mut() {
                dst.copy_from_slice(data);
            }
        }
        Ok(())
    }

    /// Runs every node once on the inputs last set.
    pub fn execute(&mut self) {
        for node in &self.nodes {
            node.call(&mut self.slots.buffers);
        }
    }

    /// The value of tensor `name` (a graph output, or any tensor) after a run.
    pub fn tensor(&self, name: &str) -> Result<HostTensor, GraphError> {
        let unknown = || GraphError::UnknownOutput {
            name: name.to_string(),
            available: format!("{:?}", self.graph.outputs),
        };
        let slot = self.slots.slot(name).ok_or_else(unknown)?;
        let shape = self.graph.shape(name).to_vec();
        let buffer = &self.slots.buffers[slot];
        let data = buffer.as_f32().ok_or_else(unknown)?.to_vec();
        HostTensor::from_f32(&shape, data).map_err(|e| GraphError::Kernel {
            node: "executor".to_string(),
            op_type: String::new(),
            reason: e.to_string(),
        })
    }

    /// Sets `inputs`, runs the model and returns its outputs in graph order.
    pub fn run(
        &mut self,
        inputs: &[(String, HostTensor)],
    ) -> Result<Vec<(String, HostTensor)>, GraphError> {
        self.set_inputs(inputs)?;
        self.execute();
        self.graph
            .outputs
            .iter()
            .map(|name| Ok((name.clone(), self.tensor(name)?)))
            .collect()
    }

    /// Runs the model `runs` times node by node and returns each node's
    /// median time (after one untimed run).
    pub fn time_nodes(&mut self, runs: usize) -> Vec<NodeTiming> {
        self.execute();
        let mut samples = vec![Vec::with_capacity(runs); self.nodes.len()];
        for _ in 0..runs.max(1) {
            for (i, node) in self.nodes.iter().enumerate() {
                let start = Instant::now();
                node.call(&mut self.slots.buffers);
                samples[i].push(start.elapsed());
            }
        }
        self.nodes
            .iter()
            .zip(samples)
            .map(|(node, mut times)| {
                times.sort();
                NodeTiming {
                    name: node.name.clone(),
                    op_type: node.op_type,
                    kernel: node.label.clone(),
                    source: node.source.clone(),
                    flops: node.flops,
                    time: times[times.len() / 2],
                }
            })
            .collect()
    }
}
