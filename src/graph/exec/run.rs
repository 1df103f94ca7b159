//! Executing a compiled model: one buffer per constant and graph input, one
//! arena for every node output at the offsets of the memory plan (an alias
//! shares its input's place), nodes called in order.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::codegen::Kernel;
use crate::graph::error::GraphError;
use crate::graph::ir::{Graph, Node, TensorInfo};
use crate::graph::lower::NodeKernel;
use crate::graph::memory::MemoryPlan;
use crate::graph::passes::CHANNELS_LAST_SUFFIX;
use crate::runtime::NdBuffer;
use crate::te::{DType, HostTensor};

use super::compile::NodeSource;

/// Where a tensor's elements are.
#[derive(Clone, Copy)]
enum Place {
    /// Its own buffer (a constant or a graph input).
    Owned(usize),
    /// At a byte offset in the arena (a node output).
    Arena(usize),
}

/// One tensor's storage.
#[derive(Clone, Copy)]
struct Slot {
    place: Place,
    elements: usize,
    dtype: DType,
}

/// The storage of a model's tensors: one buffer per constant and graph
/// input, and one arena, laid out by the [`MemoryPlan`], for every node
/// output (an alias shares its input's slot).
pub(super) struct Slots {
    owned: Vec<NdBuffer>,
    arena: NdBuffer,
    slots: Vec<Slot>,
    of: HashMap<String, usize>,
    plan: MemoryPlan,
}

fn buffer_error(tensor: &str, e: impl ToString) -> GraphError {
    GraphError::BadInput {
        input: tensor.to_string(),
        what: e.to_string(),
    }
}

impl Slots {
    /// Buffers of the constants (filled) and the graph inputs, and the
    /// arena of `plan`, all poisoned (NaN) but the constants, so that an
    /// element no kernel writes cannot pass for a value.
    pub(super) fn new(graph: &Graph, plan: MemoryPlan) -> Result<Slots, GraphError> {
        let arena_elements = plan.arena_bytes.div_ceil(DType::F32.size_bytes());
        let mut arena = NdBuffer::zeros(&[arena_elements], DType::F32)
            .map_err(|e| buffer_error("memory arena", e))?;
        arena.poison();
        let mut slots = Slots {
            owned: Vec::new(),
            arena,
            slots: Vec::new(),
            of: HashMap::new(),
            plan,
        };
        for (name, value) in &graph.constants {
            let buffer = NdBuffer::from_host(value).map_err(|e| buffer_error(name, e))?;
            slots.own(name, buffer);
        }
        for name in &graph.inputs {
            let info = info(graph, name)?;
            let mut buffer =
                NdBuffer::zeros(&info.shape, info.dtype).map_err(|e| buffer_error(name, e))?;
            buffer.poison();
            slots.own(name, buffer);
        }
        Ok(slots)
    }

    /// `name` in its own buffer (a constant, a graph input, or a constant
    /// laid out ahead of time).
    pub(super) fn own(&mut self, name: &str, buffer: NdBuffer) {
        let slot = Slot {
            place: Place::Owned(self.owned.len()),
            elements: buffer.len(),
            dtype: buffer.dtype(),
        };
        self.owned.push(buffer);
        self.insert(name, slot);
    }

    fn insert(&mut self, name: &str, slot: Slot) {
        self.of.insert(name.to_string(), self.slots.len());
        self.slots.push(slot);
    }

    /// The node output `name` at its place in the arena.
    pub(super) fn place(&mut self, name: &str, graph: &Graph) -> Result<(), GraphError> {
        let info = info(graph, name)?;
        let placement = self
            .plan
            .placement(name)
            .ok_or_else(|| GraphError::Kernel {
                node: "executor".to_string(),
                op_type: String::new(),
                reason: format!("the memory plan has no place for tensor '{name}'"),
            })?;
        let slot = Slot {
            place: Place::Arena(placement.offset),
            elements: info.num_elements(),
            dtype: info.dtype,
        };
        let end = placement.offset + slot.elements * slot.dtype.size_bytes();
        if end > self.arena.as_bytes().len() {
            return Err(GraphError::Kernel {
                node: "executor".to_string(),
                op_type: String::new(),
                reason: format!("tensor '{name}' ends at byte {end}, past the arena"),
            });
        }
        self.insert(name, slot);
        Ok(())
    }

    /// `output` shares `input`'s slot.
    pub(super) fn alias(&mut self, output: &str, input: &str) {
        if let Some(&slot) = self.of.get(input) {
            self.of.insert(output.to_string(), slot);
        }
    }

    /// The slot of tensor `name`, if it has one.
    pub(super) fn slot(&self, name: &str) -> Option<usize> {
        self.of.get(name).copied()
    }

    /// The start of slot `slot`'s elements.
    fn pointer(&mut self, slot: usize) -> *mut u8 {
        match self.slots[slot].place {
            Place::Owned(i) => self.owned[i].as_mut_ptr(),
            // SAFETY: `place` checked that the tensor lies inside the arena.
            Place::Arena(offset) => unsafe { self.arena.as_mut_ptr().add(offset) },
        }
    }

    /// Slot `slot`'s bytes.
    fn bytes_of(&self, slot: usize) -> &[u8] {
        let s = self.slots[slot];
        match s.place {
            Place::Owned(i) => self.owned[i].as_bytes(),
            Place::Arena(offset) => {
                &self.arena.as_bytes()[offset..offset + s.elements * s.dtype.size_bytes()]
            }
        }
    }

    /// The bytes held by all buffers and the arena.
    pub(super) fn bytes(&self) -> usize {
        self.owned.iter().map(|b| b.as_bytes().len()).sum::<usize>() + self.arena.as_bytes().len()
    }
}

fn info<'g>(graph: &'g Graph, name: &str) -> Result<&'g TensorInfo, GraphError> {
    graph.info(name).ok_or_else(|| GraphError::Dangling {
        node: "executor".to_string(),
        tensor: name.to_string(),
    })
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
            let held = slots.slots[slot];
            let elements: usize = param.shape.iter().product();
            if elements != held.elements || param.dtype != held.dtype {
                return Err(GraphError::lower(
                    node,
                    format!(
                        "kernel parameter {} is {}{:?} but tensor '{tensor}' is {} elements of {}",
                        param.name, param.dtype, param.shape, held.elements, held.dtype
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

    /// Runs the node's kernel on the slots.
    /// Runs the node's kernel; `pointers` is scratch space reused across
    /// calls, so that running a model allocates nothing.
    fn call(&self, slots: &mut Slots, pointers: &mut Vec<*mut u8>) {
        let Some(kernel) = &self.kernel else {
            return;
        };
        pointers.clear();
        pointers.extend(self.args.iter().map(|&slot| slots.pointer(slot)));
        // SAFETY: every slot was checked at compile time to hold exactly
        // the elements and dtype of its parameter, inside its buffer or the
        // arena; buffers never shrink. An output shares bytes with an input
        // of the same call only where the memory plan made it overwrite that
        // input, which it does only when the kernel reads each input element
        // at the index of the output element it writes.
        unsafe { kernel.call_raw(pointers) };
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
    /// Scratch for a kernel call's argument pointers.
    pointers: Vec<*mut u8>,
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
            pointers: Vec::new(),
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

    /// The bytes of all buffers (constants, inputs, and the arena of the
    /// intermediates and outputs).
    pub fn buffer_bytes(&self) -> usize {
        self.slots.bytes()
    }

    /// The memory plan of the intermediates and outputs.
    pub fn memory_plan(&self) -> &MemoryPlan {
        &self.slots.plan
    }

    /// Copies `inputs` (every graph input, by name) into the model.
    pub fn set_inputs(&mut self, inputs: &[(String, HostTensor)]) -> Result<(), GraphError> {
        super::check_inputs(&self.graph, inputs)?;
        for (name, value) in inputs {
            let (Some(slot), Some(data)) = (self.slots.slot(name), value.as_f32()) else {
                continue;
            };
            let Place::Owned(buffer) = self.slots.slots[slot].place else {
                continue;
            };
            if let Some(dst) = self.slots.owned[buffer].as_f32_mut() {
                dst.copy_from_slice(data);
            }
        }
        Ok(())
    }

    /// Runs every node once on the inputs last set.
    pub fn execute(&mut self) {
        for node in &self.nodes {
            node.call(&mut self.slots, &mut self.pointers);
        }
    }

    /// The value of tensor `name` after a run: a graph output, an input, a
    /// constant, or an intermediate named in
    /// [`CompileOptions::keep`](super::CompileOptions::keep). Any other intermediate's bytes are reused
    /// by the memory plan after its last reader, so asking for one is
    /// [`GraphError::NotKept`].
    pub fn tensor(&self, name: &str) -> Result<HostTensor, GraphError> {
        let unknown = || GraphError::UnknownOutput {
            name: name.to_string(),
            available: format!("{:?}", self.graph.outputs),
        };
        // A tensor the layout pass replaced by its channels-last form
        // exists channels first only when asked for before compiling.
        let replaced = || {
            let last = format!("{name}{CHANNELS_LAST_SUFFIX}");
            self.slots.slot(&last).is_some()
        };
        let slot = match self.slots.slot(name) {
            Some(slot) => slot,
            None if replaced() => {
                return Err(GraphError::NotKept {
                    name: name.to_string(),
                });
            }
            None => return Err(unknown()),
        };
        if !self.slots.plan.survives(name) {
            return Err(GraphError::NotKept {
                name: name.to_string(),
            });
        }
        let shape = self.graph.shape(name).to_vec();
        let data: Vec<f32> = self
            .slots
            .bytes_of(slot)
            .chunks_exact(4)
            .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
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
                node.call(&mut self.slots, &mut self.pointers);
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
