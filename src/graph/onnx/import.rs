//! From the protobuf model to a [`Graph`]: opsets checked, initializers
//! decoded, input shapes fixed, nodes ordered, each node converted to a
//! typed op with its output shapes, and shape subgraphs folded to constants.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use prost::Message;

use crate::graph::error::GraphError;
use crate::graph::ir::{Graph, TensorInfo};
use crate::te::DType;

use super::attributes::decode_tensor;
use super::nodes::{Converted, convert};
use super::proto::{ModelProto, NodeProto, ValueInfoProto, tensor_proto, type_proto};
use super::{OPSETS, SUPPORTED_OP_TYPES};

/// What the model leaves to the user.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Shapes of inputs (by name), replacing the model's where it has
    /// dynamic dimensions or fixing it where it has none.
    pub input_shapes: BTreeMap<String, Vec<usize>>,
}

/// Decodes the model file at `path`.
pub fn read(path: &Path) -> Result<ModelProto, GraphError> {
    let bytes = std::fs::read(path).map_err(|source| GraphError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    decode(path, &bytes)
}

/// Decodes the bytes of a model file (`path` names it in errors).
fn decode(path: &Path, bytes: &[u8]) -> Result<ModelProto, GraphError> {
    let not_onnx = |reason: String| GraphError::NotOnnx {
        path: path.to_path_buf(),
        reason,
    };
    let model = ModelProto::decode(bytes).map_err(|e| not_onnx(e.to_string()))?;
    // Almost any short byte string decodes as *some* message: a model has
    // an IR version and a graph.
    if model.ir_version.is_none() || model.graph.is_none() {
        return Err(not_onnx("it has no IR version or no graph".to_string()));
    }
    Ok(model)
}

/// Imports a model from its bytes; `path` names it in errors.
pub fn import_bytes(
    path: &Path,
    bytes: &[u8],
    options: &ImportOptions,
) -> Result<Graph, GraphError> {
    let model = decode(path, bytes)?;
    import_model(path, &model, options)
}

/// Reads and imports the model at `path`.
pub fn import(path: &Path, options: &ImportOptions) -> Result<Graph, GraphError> {
    let model = read(path)?;
    import_model(path, &model, options)
}

/// The tensors known while converting, and the opset.
pub(super) struct Context {
    pub opset: i64,
    pub tensors: BTreeMap<String, TensorInfo>,
    pub constants: BTreeMap<String, crate::te::HostTensor>,
}

fn import_model(
    path: &Path,
    model: &ModelProto,
    options: &ImportOptions,
) -> Result<Graph, GraphError> {
    let opset = default_opset(path, model)?;
    let Some(graph) = model.graph.as_ref() else {
        return Err(GraphError::NotOnnx {
            path: path.to_path_buf(),
            reason: "it has no graph".to_string(),
        });
    };
    let mut cx = Context {
        opset,
        tensors: BTreeMap::new(),
        constants: BTreeMap::new(),
    };
    for init in &graph.initializer {
        let value = decode_tensor(init).map_err(|what| GraphError::BadNode {
            node: format!("initializer {}", init.name()),
            op_type: "initializer".to_string(),
            what,
        })?;
        cx.tensors.insert(
            init.name().to_string(),
            TensorInfo {
                shape: value.shape().to_vec(),
                dtype: value.dtype(),
            },
        );
        cx.constants.insert(init.name().to_string(), value);
    }
    let mut inputs = Vec::new();
    for input in &graph.input {
        if cx.constants.contains_key(input.name()) {
            continue;
        }
        let info = input_info(input, options)?;
        cx.tensors.insert(input.name().to_string(), info);
        inputs.push(input.name().to_string());
    }
    for name in options.input_shapes.keys() {
        if !inputs.contains(name) {
            return Err(GraphError::BadInputShape {
                input: name.clone(),
                what: format!("the model has no input '{name}'; its inputs are {inputs:?}"),
            });
        }
    }
    let order = topological_order(&graph.node, &cx)?;
    let mut nodes = Vec::new();
    for index in order {
        let proto = &graph.node[index];
        let name = node_name(proto, index);
        let tessera_op = proto.domain() == super::TESSERA_DOMAIN
            && super::TESSERA_OP_TYPES.contains(&proto.op_type());
        if !proto.domain().is_empty() && proto.domain() != "ai.onnx" && !tessera_op {
            return Err(GraphError::UnsupportedOp {
                node: name,
                op_type: format!("{}.{}", proto.domain(), proto.op_type()),
                supported: SUPPORTED_OP_TYPES.join(", "),
            });
        }
        match convert(&mut cx, proto, &name)? {
            Converted::Folded(values) => {
                for (tensor, value) in values {
                    cx.tensors.insert(
                        tensor.clone(),
                        TensorInfo {
                            shape: value.shape().to_vec(),
                            dtype: value.dtype(),
                        },
                    );
                    cx.constants.insert(tensor, value);
                }
            }
            Converted::Node(node, infos) => {
                for tensor in node.inputs.iter().chain(&node.outputs) {
                    let dtype = cx
                        .tensors
                        .get(tensor)
                        .or(infos.get(tensor))
                        .map(|i| i.dtype);
                    if let Some(dtype) = dtype.filter(|d| *d != DType::F32) {
                        return Err(GraphError::DType {
                            tensor: tensor.clone(),
                            dtype: dtype.to_string(),
                        });
                    }
                }
                cx.tensors.extend(infos);
                nodes.push(*node);
            }
        }
    }
    let outputs: Vec<String> = graph.output.iter().map(|o| o.name().to_string()).collect();
    for output in &outputs {
        if !cx.tensors.contains_key(output) {
            return Err(GraphError::Dangling {
                node: "graph output".to_string(),
                tensor: output.clone(),
            });
        }
    }
    // Constants nothing reads any more (shape inputs, folded subgraphs) go.
    let read: HashSet<&String> = nodes
        .iter()
        .flat_map(|n| n.inputs.iter())
        .chain(&outputs)
        .collect();
    let constants = cx
        .constants
        .into_iter()
        .filter(|(name, _)| read.contains(name))
        .collect::<BTreeMap<_, _>>();
    let produced: HashSet<&String> = nodes
        .iter()
        .flat_map(|n| n.outputs.iter())
        .chain(&inputs)
        .chain(constants.keys())
        .collect();
    let tensors = cx
        .tensors
        .iter()
        .filter(|(name, _)| produced.contains(name))
        .map(|(n, i)| (n.clone(), i.clone()))
        .collect();
    Ok(Graph {
        name: graph.name().to_string(),
        opset,
        inputs,
        outputs,
        tensors,
        constants,
        nodes,
    })
}

/// The default domain's opset, checked against what the reader supports.
fn default_opset(path: &Path, model: &ModelProto) -> Result<i64, GraphError> {
    let version = model
        .opset_import
        .iter()
        .find(|o| o.domain().is_empty() || o.domain() == "ai.onnx")
        .map_or(1, |o| o.version());
    if !OPSETS.contains(&version) {
        return Err(GraphError::Opset {
            path: path.to_path_buf(),
            domain: "ai.onnx".to_string(),
            opset: version,
            min: *OPSETS.start(),
            max: *OPSETS.end(),
        });
    }
    Ok(version)
}

/// A graph input's type, with `--input-shape` applied.
fn input_info(input: &ValueInfoProto, options: &ImportOptions) -> Result<TensorInfo, GraphError> {
    let name = input.name().to_string();
    let Some(type_proto::Value::TensorType(tensor)) =
        input.r#type.as_ref().and_then(|t| t.value.as_ref())
    else {
        return Err(GraphError::BadInput {
            input: name,
            what: "the model gives it no tensor type".to_string(),
        });
    };
    let dtype = match tensor_proto::DataType::try_from(tensor.elem_type()) {
        Ok(tensor_proto::DataType::Float) => DType::F32,
        Ok(other) => {
            return Err(GraphError::DType {
                tensor: name,
                dtype: other.as_str_name().to_lowercase(),
            });
        }
        Err(_) => {
            return Err(GraphError::DType {
                tensor: name,
                dtype: format!("type {}", tensor.elem_type()),
            });
        }
    };
    let dims: Vec<Option<i64>> = tensor.shape.as_ref().map_or(Vec::new(), |s| {
        s.dim
            .iter()
            .map(|d| match d.value {
                Some(super::proto::tensor_shape_proto::dimension::Value::DimValue(v)) if v > 0 => {
                    Some(v)
                }
                _ => None,
            })
            .collect()
    });
    let written = || {
        tensor.shape.as_ref().map_or(String::new(), |s| {
            s.dim
                .iter()
                .map(|d| match &d.value {
                    Some(super::proto::tensor_shape_proto::dimension::Value::DimValue(v)) => {
                        v.to_string()
                    }
                    Some(super::proto::tensor_shape_proto::dimension::Value::DimParam(p)) => {
                        p.clone()
                    }
                    None => "?".to_string(),
                })
                .collect::<Vec<_>>()
                .join(",")
        })
    };
    if let Some(given) = options.input_shapes.get(&name) {
        if tensor.shape.is_some() && given.len() != dims.len() {
            return Err(GraphError::BadInputShape {
                input: name,
                what: format!(
                    "the model's input has {} dimensions ({}), {} were given",
                    dims.len(),
                    written(),
                    given.len()
                ),
            });
        }
        for (i, (g, d)) in given.iter().zip(&dims).enumerate() {
            if let Some(d) = d
                && *d != *g as i64
            {
                return Err(GraphError::BadInputShape {
                    input: name,
                    what: format!(
                        "dimension {i} is fixed at {d} by the model ({}), {g} was given",
                        written()
                    ),
                });
            }
        }
        return Ok(TensorInfo {
            shape: given.clone(),
            dtype,
        });
    }
    if tensor.shape.is_none() {
        return Err(GraphError::DynamicInput {
            input: name,
            dim: 0,
            shape: "unknown rank".to_string(),
        });
    }
    let mut shape = Vec::with_capacity(dims.len());
    for (i, d) in dims.iter().enumerate() {
        match d {
            Some(v) => shape.push(*v as usize),
            None => {
                return Err(GraphError::DynamicInput {
                    input: name,
                    dim: i,
                    shape: written(),
                });
            }
        }
    }
    Ok(TensorInfo { shape, dtype })
}

/// The name of node `index`: its own, or made from its op type and first output.
pub(super) fn node_name(node: &NodeProto, index: usize) -> String {
    if !node.name().is_empty() {
        return node.name().to_string();
    }
    match node.output.first() {
        Some(out) if !out.is_empty() => format!("{}_{out}", node.op_type()),
        _ => format!("{}_{index}", node.op_type()),
    }
}

/// The nodes in an order where every input is produced first (Kahn's
/// algorithm, keeping the model's order among ready nodes).
fn topological_order(nodes: &[NodeProto], cx: &Context) -> Result<Vec<usize>, GraphError> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, node) in nodes.iter().enumerate() {
        for out in node.output.iter().filter(|o| !o.is_empty()) {
            producer.insert(out, i);
        }
    }
    let known = |name: &str| name.is_empty() || cx.tensors.contains_key(name);
    let mut waiting_on: Vec<usize> = vec![0; nodes.len()];
    let mut consumers: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, node) in nodes.iter().enumerate() {
        for input in &node.input {
            if known(input) {
                continue;
            }
            match producer.get(input.as_str()) {
                Some(&p) => {
                    waiting_on[i] += 1;
                    consumers.entry(p).or_default().push(i);
                }
                None => {
                    return Err(GraphError::Dangling {
                        node: node_name(node, i),
                        tensor: input.clone(),
                    });
                }
            }
        }
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..nodes.len()).filter(|&i| waiting_on[i] == 0).collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &c in consumers.get(&i).map_or(&[][..], Vec::as_slice) {
            waiting_on[c] -= 1;
            if waiting_on[c] == 0 {
                ready.insert(c);
            }
        }
    }
    if order.len() < nodes.len() {
        let stuck: Vec<String> = (0..nodes.len())
            .filter(|i| waiting_on[*i] > 0)
            .take(4)
            .map(|i| node_name(&nodes[i], i))
            .collect();
        return Err(GraphError::Cycle { nodes: stuck });
    }
    Ok(order)
}
