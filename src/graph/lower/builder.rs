//! The kernel builder every lowering uses: one placeholder per data input
//! (one-element constants become literals instead), broadcasting reads,
//! registry ops, and the checks that the finished DAG matches the graph.

use crate::ops::{self, ShapeParams};
use crate::te::{ComputeDag, DType, Expr, Tensor, placeholder};

use super::super::error::GraphError;
use super::super::ir::{Graph, Node};
use super::{Lowered, NodeKernel};

/// A node input as the DAG sees it: a placeholder, or a literal for a
/// constant with one element.
#[derive(Clone)]
pub(super) enum Value {
    /// A DAG input.
    Tensor(Tensor),
    /// An inlined constant.
    Literal(f32),
}

impl Value {
    /// The element at `indices` (the literal itself for a literal).
    pub(super) fn at(&self, indices: Vec<Expr>) -> Expr {
        match self {
            Value::Tensor(t) => t.at(indices),
            Value::Literal(v) => Expr::f32(*v),
        }
    }

    /// The literal's value, when this is one.
    pub(super) fn literal(&self) -> Option<f32> {
        match self {
            Value::Literal(v) => Some(*v),
            Value::Tensor(_) => None,
        }
    }
}

/// A node input read under numpy broadcasting against an output shape.
///
/// The placeholder holds only the input's dimensions that are not 1 (the
/// executor reinterprets the row-major elements), each read with the index of
/// the output dimension it lines up with.
#[derive(Clone)]
pub(super) struct Broadcast {
    value: Value,
    /// For each placeholder dimension, the output dimension indexing it.
    dims: Vec<usize>,
}

impl Broadcast {
    /// The element for the output point `ix`.
    pub(super) fn at(&self, ix: &[Expr]) -> Expr {
        match &self.value {
            Value::Literal(v) => Expr::f32(*v),
            Value::Tensor(t) if self.dims.is_empty() => t.at([Expr::i64(0)]),
            Value::Tensor(t) => t.at(self.dims.iter().map(|&d| ix[d].clone()).collect::<Vec<_>>()),
        }
    }

    /// The literal's value, when the input is one.
    pub(super) fn literal(&self) -> Option<f32> {
        self.value.literal()
    }
}

/// Builds one node's kernel.
pub(super) struct KernelBuilder<'a> {
    pub(super) graph: &'a Graph,
    pub(super) node: &'a Node,
    placeholders: Vec<Tensor>,
    tensors: Vec<String>,
    /// Whether an elementwise node may become a 2-D registry op (`relu`,
    /// `gelu` over `[rows, last axis]`); fusion needs the graph's shape.
    pub(super) registry_elementwise: bool,
}

impl<'a> KernelBuilder<'a> {
    /// A builder for `node` of `graph`.
    pub(super) fn new(graph: &'a Graph, node: &'a Node) -> KernelBuilder<'a> {
        KernelBuilder {
            graph,
            node,
            placeholders: Vec::new(),
            tensors: Vec::new(),
            registry_elementwise: true,
        }
    }

    /// The graph tensor name of data input `index`, or an error naming how
    /// many inputs the op takes.
    pub(super) fn input_name(&self, index: usize) -> Result<&'a str, GraphError> {
        self.node
            .inputs
            .get(index)
            .map(String::as_str)
            .ok_or_else(|| {
                GraphError::bad_node(
                    self.node,
                    format!(
                        "input {index} is missing; the node has {} input(s)",
                        self.node.inputs.len()
                    ),
                )
            })
    }

    /// Whether data input `index` is present.
    pub(super) fn has_input(&self, index: usize) -> bool {
        self.node.inputs.get(index).is_some_and(|n| !n.is_empty())
    }

    /// The graph shape of data input `index`.
    pub(super) fn input_shape(&self, index: usize) -> Result<Vec<usize>, GraphError> {
        let name = self.input_name(index)?;
        match self.graph.info(name) {
            Some(info) => Ok(info.shape.clone()),
            None => Err(GraphError::bad_node(
                self.node,
                format!("input '{name}' has no type in the graph"),
            )),
        }
    }

    /// The graph shape of the node's output.
    pub(super) fn output_shape(&self) -> Result<Vec<usize>, GraphError> {
        let Some(name) = self.node.outputs.first() else {
            return Err(GraphError::bad_node(self.node, "the node has no output"));
        };
        match self.graph.info(name) {
            Some(info) => Ok(info.shape.clone()),
            None => Err(GraphError::bad_node(
                self.node,
                format!("output '{name}' has no type in the graph"),
            )),
        }
    }

    /// A placeholder called `name` for data input `index`, with the graph
    /// tensor's shape.
    pub(super) fn tensor(&mut self, index: usize, name: &str) -> Result<Tensor, GraphError> {
        let shape = self.input_shape(index)?;
        self.tensor_as(index, name, &shape)
    }

    /// A placeholder called `name` for data input `index`, reinterpreted as
    /// `shape` (which must hold as many elements as the graph tensor).
    pub(super) fn tensor_as(
        &mut self,
        index: usize,
        name: &str,
        shape: &[usize],
    ) -> Result<Tensor, GraphError> {
        let tensor = self.input_name(index)?.to_string();
        let graph_shape = self.input_shape(index)?;
        let count = |s: &[usize]| s.iter().product::<usize>();
        if count(&graph_shape) != count(shape) {
            return Err(GraphError::bad_node(
                self.node,
                format!(
                    "input '{tensor}' has shape {} ({} elements), where {} ({} elements) is needed",
                    shape_text(&graph_shape),
                    count(&graph_shape),
                    shape_text(shape),
                    count(shape)
                ),
            ));
        }
        let dims = self.dims(shape)?;
        let t = placeholder(name, &dims, DType::F32);
        self.placeholders.push(t.clone());
        self.tensors.push(tensor);
        Ok(t)
    }

    /// Data input `index` as a [`Value`]: a literal when it is a constant with
    /// one element, otherwise a placeholder with the graph tensor's shape.
    pub(super) fn value(&mut self, index: usize, name: &str) -> Result<Value, GraphError> {
        if let Some(v) = self.scalar_constant(index)? {
            return Ok(Value::Literal(v));
        }
        Ok(Value::Tensor(self.tensor(index, name)?))
    }

    /// The value of data input `index` when it is a constant with one element.
    pub(super) fn scalar_constant(&self, index: usize) -> Result<Option<f32>, GraphError> {
        let name = self.input_name(index)?;
        let Some(constant) = self.graph.constant(name) else {
            return Ok(None);
        };
        if constant.len() != 1 {
            return Ok(None);
        }
        match constant.as_f32() {
            Some(data) => Ok(data.first().copied()),
            None => Err(GraphError::bad_node(
                self.node,
                format!(
                    "constant '{name}' is {}; tessera computes with f32",
                    constant.dtype()
                ),
            )),
        }
    }

    /// Data input `index` read under numpy broadcasting against `out`: each
    /// dimension is 1 or the output's, and missing leading dimensions count
    /// as 1.
    pub(super) fn broadcast(
        &mut self,
        index: usize,
        name: &str,
        out: &[usize],
    ) -> Result<Broadcast, GraphError> {
        let shape = self.input_shape(index)?;
        if shape.len() > out.len() {
            return Err(self.not_broadcastable(index, &shape, out));
        }
        let lead = out.len() - shape.len();
        let mut dims = Vec::new();
        let mut kept = Vec::new();
        for (j, &extent) in shape.iter().enumerate() {
            if extent == 1 {
                continue;
            }
            if extent != out[lead + j] {
                return Err(self.not_broadcastable(index, &shape, out));
            }
            dims.push(lead + j);
            kept.push(extent);
        }
        if let Some(v) = self.scalar_constant(index)? {
            return Ok(Broadcast {
                value: Value::Literal(v),
                dims,
            });
        }
        let placeholder_shape = if kept.is_empty() { vec![1] } else { kept };
        let tensor = self.tensor_as(index, name, &placeholder_shape)?;
        Ok(Broadcast {
            value: Value::Tensor(tensor),
            dims,
        })
    }

    fn not_broadcastable(&self, index: usize, shape: &[usize], out: &[usize]) -> GraphError {
        let name = self.node.inputs.get(index).map_or("", String::as_str);
        GraphError::bad_node(
            self.node,
            format!(
                "input '{name}' of shape {} does not broadcast to the output shape {}",
                shape_text(shape),
                shape_text(out)
            ),
        )
    }

    /// `shape` as te extents.
    pub(super) fn dims(&self, shape: &[usize]) -> Result<Vec<i64>, GraphError> {
        shape
            .iter()
            .map(|&d| {
                i64::try_from(d).map_err(|_| {
                    GraphError::bad_node(self.node, format!("dimension {d} is too large"))
                })
            })
            .collect()
    }

    /// The label `Op[in→out]` from the first input's and the output's shapes.
    pub(super) fn label(&self) -> String {
        let input = self
            .node
            .inputs
            .first()
            .map(|n| dims_text(self.graph.shape(n)))
            .unwrap_or_default();
        let output = self
            .node
            .outputs
            .first()
            .map(|n| dims_text(self.graph.shape(n)))
            .unwrap_or_default();
        format!("{}[{input}→{output}]", self.node.op.name())
    }

    /// The kernel computing `out` from the placeholders handed out so far.
    pub(super) fn finish(self, out: Tensor) -> Result<Lowered, GraphError> {
        let dag = ComputeDag::new(&self.placeholders, &[out])
            .map_err(|e| GraphError::lower(self.node, e))?
            .with_label(self.label());
        let kernel = NodeKernel {
            dag,
            inputs: self.tensors,
            outputs: self.node.outputs.iter().take(1).cloned().collect(),
            registry_op: None,
        };
        checked(self.graph, self.node, kernel)
    }

    /// The registry op `name` at `params`, its inputs being the graph tensors
    /// of data inputs `inputs` in the op's argument order.
    pub(super) fn registry(
        self,
        name: &str,
        params: &[(&str, usize)],
        inputs: &[usize],
    ) -> Result<Lowered, GraphError> {
        let mut given = Vec::with_capacity(params.len());
        for &(param, value) in params {
            let value = i64::try_from(value).map_err(|_| {
                GraphError::bad_node(self.node, format!("{param}={value} is too large"))
            })?;
            given.push((param, value));
        }
        let (dag, shape) =
            build_registry(name, &given).map_err(|e| GraphError::lower(self.node, e))?;
        let tensors = inputs
            .iter()
            .map(|&i| self.input_name(i).map(str::to_string))
            .collect::<Result<Vec<_>, _>>()?;
        let kernel = NodeKernel {
            dag,
            inputs: tensors,
            outputs: self.node.outputs.iter().take(1).cloned().collect(),
            registry_op: Some((name.to_string(), shape.to_text())),
        };
        checked(self.graph, self.node, kernel)
    }
}

fn build_registry(
    name: &str,
    params: &[(&str, i64)],
) -> Result<(ComputeDag, ShapeParams), ops::OpError> {
    let op = ops::find(name)?;
    let shape = op.shape(params)?;
    Ok((op.build(&shape)?, shape))
}

/// `kernel` when its buffers fit the graph: every input as many elements as
/// its graph tensor, the output the graph output's shape (a registry
/// operator's: its elements).
fn checked(graph: &Graph, node: &Node, kernel: NodeKernel) -> Result<Lowered, GraphError> {
    if kernel.inputs.len() != kernel.dag.inputs().len() {
        return Err(GraphError::lower(
            node,
            format!(
                "the DAG has {} inputs but {} graph tensors are bound to them",
                kernel.dag.inputs().len(),
                kernel.inputs.len()
            ),
        ));
    }
    for (t, name) in kernel.dag.inputs().iter().zip(&kernel.inputs) {
        let expected = graph.info(name).map_or(0, |i| i.num_elements());
        if usize::try_from(t.num_elements()).ok() != Some(expected) {
            return Err(GraphError::lower(
                node,
                format!(
                    "DAG input '{}' {:?} does not hold the {expected} elements of '{name}'",
                    t.name(),
                    t.shape()
                ),
            ));
        }
    }
    let outputs = kernel.dag.outputs();
    let Some(out) = outputs.first() else {
        return Err(GraphError::lower(node, "the DAG has no output"));
    };
    let expected = kernel.outputs.first().map_or(&[][..], |n| graph.shape(n));
    // A registry operator may compute the output under another shape of the
    // same elements (a `[B,T,N]` row op as `[B·T,N]`): the executor
    // reinterprets buffers row-major. A DAG built here must match exactly.
    let same = if kernel.registry_op.is_some() {
        usize::try_from(out.num_elements()).ok() == Some(expected.iter().product())
    } else {
        out.shape().len() == expected.len()
            && out
                .shape()
                .iter()
                .zip(expected)
                .all(|(&a, &b)| usize::try_from(a).ok() == Some(b))
    };
    if !same {
        return Err(GraphError::bad_node(
            node,
            format!(
                "the operator computes shape {}, but the graph's output has shape {}",
                dims_text(&out.shape().iter().map(|&d| d as usize).collect::<Vec<_>>()),
                dims_text(expected)
            ),
        ));
    }
    Ok(Lowered::Kernel(kernel))
}

/// `1x64x56x56` (`scalar` for rank 0).
pub(super) fn dims_text(shape: &[usize]) -> String {
    if shape.is_empty() {
        return "scalar".into();
    }
    shape
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join("x")
}

/// `[1,64,56,56]`.
pub(super) fn shape_text(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("[{}]", dims.join(","))
}
