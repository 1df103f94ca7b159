//! The ComputeDag: the stages of an operator in topological order, checked.

use std::collections::HashMap;

use super::check::check_stage;
use super::error::DagError;
use super::expr::ExprKind;
use super::ids::TensorId;
use super::tensor::{Tensor, TensorOp};

/// The most elements one tensor may have (2^31 − 1): keeps every flat offset
/// within `i32` and every buffer allocatable.
pub const MAX_TENSOR_ELEMENTS: i64 = i32::MAX as i64;

/// A checked operator: input placeholders and compute stages in topological
/// order (inputs first, in the order given), plus the outputs.
#[derive(Clone)]
pub struct ComputeDag {
    tensors: Vec<Tensor>,
    num_inputs: usize,
    outputs: Vec<usize>,
    position: HashMap<TensorId, usize>,
    label: String,
}

impl ComputeDag {
    /// Assembles and checks the DAG that computes `outputs` from `inputs`.
    ///
    /// The order of `inputs` then `outputs` is the argument order of the
    /// operator. Every placeholder that an output depends on must be among the
    /// inputs. Errors name the stage at fault (see [`DagError`]).
    pub fn new(inputs: &[Tensor], outputs: &[Tensor]) -> Result<ComputeDag, DagError> {
        if outputs.is_empty() {
            return Err(DagError::NoOutputs);
        }
        let mut position = HashMap::new();
        let mut tensors = Vec::new();
        for t in inputs.iter().chain(outputs) {
            if position.contains_key(&t.id()) {
                return Err(DagError::DuplicateArgument {
                    name: t.name().into(),
                });
            }
            position.insert(t.id(), usize::MAX);
        }
        position.clear();
        for t in inputs {
            if !t.is_placeholder() {
                return Err(DagError::InputNotPlaceholder {
                    name: t.name().into(),
                });
            }
            check_shape(t)?;
            position.insert(t.id(), tensors.len());
            tensors.push(t.clone());
        }
        for t in outputs {
            if t.is_placeholder() {
                return Err(DagError::OutputIsPlaceholder {
                    name: t.name().into(),
                });
            }
            visit_post_order(t, &mut position, &mut tensors)?;
        }
        let outputs: Vec<usize> = outputs.iter().map(|t| position[&t.id()]).collect();
        let label = default_label(&tensors[outputs[0]]);
        Ok(ComputeDag {
            tensors,
            num_inputs: inputs.len(),
            outputs,
            position,
            label,
        })
    }

    /// Sets the readable label used in the [`WorkloadKey`](super::WorkloadKey),
    /// e.g. `matmul[M=64,N=64,K=64,f32]`. The label does not affect the hash.
    pub fn with_label(mut self, label: impl Into<String>) -> ComputeDag {
        self.label = label.into();
        self
    }

    /// The readable label.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// All tensors in topological order: inputs first, then compute stages.
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }

    /// The input placeholders, in argument order.
    pub fn inputs(&self) -> &[Tensor] {
        &self.tensors[..self.num_inputs]
    }

    /// The compute stages, in topological order.
    pub fn stages(&self) -> &[Tensor] {
        &self.tensors[self.num_inputs..]
    }

    /// The output tensors, in argument order.
    pub fn outputs(&self) -> Vec<&Tensor> {
        self.outputs.iter().map(|&i| &self.tensors[i]).collect()
    }

    /// Positions of the outputs in [`tensors`](Self::tensors).
    pub fn output_positions(&self) -> &[usize] {
        &self.outputs
    }

    /// The position of `tensor` in [`tensors`](Self::tensors), if it belongs here.
    pub fn position(&self, tensor: &Tensor) -> Option<usize> {
        self.position.get(&tensor.id()).copied()
    }
}

fn default_label(t: &Tensor) -> String {
    let dims: Vec<String> = t.shape().iter().map(i64::to_string).collect();
    format!("{}[{},{}]", t.name(), dims.join("x"), t.dtype())
}

fn check_shape(t: &Tensor) -> Result<(), DagError> {
    for (dim, &extent) in t.shape().iter().enumerate() {
        if extent < 1 {
            return Err(DagError::InvalidExtent {
                tensor: t.name().into(),
                dim,
                extent,
            });
        }
    }
    let elements = t.num_elements();
    if elements > MAX_TENSOR_ELEMENTS {
        return Err(DagError::TensorTooLarge {
            tensor: t.name().into(),
            elements,
            limit: MAX_TENSOR_ELEMENTS,
        });
    }
    Ok(())
}

/// Places `t` after everything it reads (depth-first, reads in rule order).
fn visit_post_order(
    t: &Tensor,
    position: &mut HashMap<TensorId, usize>,
    tensors: &mut Vec<Tensor>,
) -> Result<(), DagError> {
    if position.contains_key(&t.id()) {
        return Ok(());
    }
    let op = match t.op() {
        TensorOp::Compute(op) => op,
        TensorOp::Placeholder => {
            return Err(DagError::MissingInput {
                name: t.name().into(),
                stage: t.name().into(),
            });
        }
    };
    check_shape(t)?;
    let mut reads = Vec::new();
    op.body.visit(&mut |e| {
        if let ExprKind::Read(src, _) = e.kind() {
            reads.push(src.clone());
        }
    });
    for src in &reads {
        if src.is_placeholder() && !position.contains_key(&src.id()) {
            return Err(DagError::MissingInput {
                name: src.name().into(),
                stage: t.name().into(),
            });
        }
        visit_post_order(src, position, tensors)?;
    }
    check_stage(t, op)?;
    position.insert(t.id(), tensors.len());
    tensors.push(t.clone());
    Ok(())
}
