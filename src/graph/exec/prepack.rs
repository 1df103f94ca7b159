//! Weights laid out once at load: a node whose tuned schedule reads a
//! constant input only through one packing copy gets the kernel without
//! that copy ([`Library::kernel_with_constants`]) and the constant packed
//! into the copy's layout, in its own buffer, shared by every node of the
//! same workload that reads the same constant.

use std::rc::Rc;

use crate::codegen::Kernel;
use crate::deploy::{KernelSource, Library};
use crate::graph::error::GraphError;
use crate::graph::ir::{Graph, Node};
use crate::graph::lower::NodeKernel;
use crate::runtime::NdBuffer;

use super::compile::NodeSource;
use super::run::Slots;

/// The prepacked kernel of `lowered` and the node with its packed inputs
/// renamed to their buffers; `None` when no constant input of it can be
/// laid out ahead of time (the caller compiles the plain kernel).
pub(super) fn prepacked(
    library: &Library,
    graph: &Graph,
    node: &Node,
    lowered: &NodeKernel,
    slots: &mut Slots,
) -> Result<Option<(Rc<Kernel>, NodeSource, NodeKernel)>, GraphError> {
    let names: Vec<&str> = lowered
        .dag
        .inputs()
        .iter()
        .zip(&lowered.inputs)
        .filter(|(_, tensor)| graph.constant(tensor).is_some())
        .map(|(input, _)| input.name())
        .collect();
    if names.is_empty() {
        return Ok(None);
    }
    let failed = |reason: String| GraphError::Kernel {
        node: node.name.clone(),
        op_type: node.op.name().to_string(),
        reason,
    };
    let kernel = library
        .kernel_with_constants(&lowered.dag, &names)
        .map_err(|e| failed(e.to_string()))?;
    if !kernel.is_rewritten() {
        return Ok(None);
    }
    let key = lowered.dag.workload_key();
    let mut renamed = lowered.clone();
    let mut packed_names = Vec::new();
    for packer in &kernel.packers {
        let Some(i) = lowered
            .dag
            .inputs()
            .iter()
            .position(|t| t.name() == packer.input())
        else {
            return Err(failed(format!(
                "the library laid out input '{}', which its DAG does not have",
                packer.input()
            )));
        };
        let tensor = &lowered.inputs[i];
        let value = graph
            .constant(tensor)
            .ok_or_else(|| failed(format!("'{tensor}' is not a constant")))?;
        let packed_name = format!("{tensor}#packed-{}", key.short_hash());
        if slots.slot(&packed_name).is_none() {
            let packed = packer.pack(value).map_err(|e| failed(e.to_string()))?;
            let buffer = NdBuffer::from_host(&packed).map_err(|e| failed(e.to_string()))?;
            slots.own(&packed_name, buffer);
        }
        renamed.inputs[i] = packed_name;
        packed_names.push(tensor.clone());
    }
    let source = match &kernel.source {
        KernelSource::Tuned { path, .. } => NodeSource::Tuned(format!(
            "{}; {} laid out ahead of time",
            path.display(),
            packed_names.join(", ")
        )),
        // A rewritten kernel is always a tuned one; say so if not.
        KernelSource::Fallback(reason) => NodeSource::Default(reason.to_string()),
    };
    Ok(Some((kernel.kernel, source, renamed)))
}
