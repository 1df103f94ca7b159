//! From a [`Graph`] back to an ONNX model: what a deployed model stores as
//! its graph after the passes. Every op is written in the form the reader
//! takes at the graph's opset (attributes that moved to inputs become
//! int64 or f32 initializers), so that importing the bytes gives the same
//! graph: the same nodes, constants, shapes, inputs and outputs.

use std::collections::BTreeSet;

use crate::graph::error::GraphError;
use crate::graph::ir::{ConvAttrs, Graph, Node, Op, PoolAttrs};
use crate::te::{HostData, HostTensor};

use super::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto, attribute_proto, tensor_proto, tensor_shape_proto,
    type_proto,
};
use super::{TESSERA_DOMAIN, functions};

/// The ONNX IR version written (that of opsets up to 21).
const IR_VERSION: i64 = 8;

/// `graph` as an ONNX model at the graph's opset.
///
/// Errors: [`GraphError::Unsupported`] for a node the graph's opset cannot
/// express as one ONNX node (a Softmax over several axes at opset 13 or
/// later, a Slice with steps at opset 9 or earlier).
pub fn export(graph: &Graph) -> Result<ModelProto, GraphError> {
    let mut out = Exporter {
        graph,
        names: graph.tensors.keys().cloned().collect(),
        initializers: graph
            .constants
            .iter()
            .map(|(name, value)| tensor(name, value))
            .collect(),
    };
    let mut nodes = Vec::with_capacity(graph.nodes.len());
    for node in &graph.nodes {
        nodes.push(out.node(node)?);
    }
    let value_info = |name: &String| -> ValueInfoProto {
        let info = graph.info(name);
        let dims: Vec<usize> = info.map(|i| i.shape.clone()).unwrap_or_default();
        let elem = info.map_or(tensor_proto::DataType::Float, |i| data_type(&i.dtype));
        value(name, elem, &dims)
    };
    let graph_proto = GraphProto {
        name: Some(graph.name.clone()),
        node: nodes,
        input: graph.inputs.iter().map(value_info).collect(),
        output: graph.outputs.iter().map(value_info).collect(),
        initializer: out.initializers,
        ..Default::default()
    };
    let mut opset_import = vec![OperatorSetIdProto {
        domain: Some(String::new()),
        version: Some(graph.opset),
    }];
    let tessera_ops: BTreeSet<&str> = graph_proto
        .node
        .iter()
        .filter(|n| n.domain() == TESSERA_DOMAIN)
        .map(|n| n.op_type())
        .collect();
    if !tessera_ops.is_empty() {
        opset_import.push(OperatorSetIdProto {
            domain: Some(TESSERA_DOMAIN.to_string()),
            version: Some(1),
        });
    }
    let functions = tessera_ops
        .iter()
        .filter_map(|op| functions::function(op, graph.opset))
        .collect();
    Ok(ModelProto {
        ir_version: Some(IR_VERSION),
        opset_import,
        functions,
        producer_name: Some("tessera".to_string()),
        producer_version: Some(env!("CARGO_PKG_VERSION").to_string()),
        graph: Some(graph_proto),
        ..Default::default()
    })
}

/// The state of one export: tensor names taken, initializers written.
struct Exporter<'g> {
    graph: &'g Graph,
    names: BTreeSet<String>,
    initializers: Vec<TensorProto>,
}

impl Exporter<'_> {
    /// A fresh initializer holding `value`, named after `node` and `what`.
    fn constant(&mut self, node: &Node, what: &str, value: HostTensor) -> String {
        let base = format!("{}::{what}", node.name);
        let mut name = base.clone();
        let mut i = 1;
        while self.names.contains(&name) {
            name = format!("{base}{i}");
            i += 1;
        }
        self.names.insert(name.clone());
        self.initializers.push(tensor(&name, &value));
        name
    }

    fn ints(&mut self, node: &Node, what: &str, v: &[i64]) -> String {
        let value = HostTensor::new(&[v.len()], HostData::I64(v.to_vec()))
            .unwrap_or_else(|_| HostTensor::zeros(&[0], crate::te::DType::I64));
        self.constant(node, what, value)
    }

    fn scalar(&mut self, node: &Node, what: &str, v: f32) -> String {
        let value = HostTensor::from_f32(&[], vec![v])
            .unwrap_or_else(|_| HostTensor::zeros(&[], crate::te::DType::F32));
        self.constant(node, what, value)
    }

    fn node(&mut self, node: &Node) -> Result<NodeProto, GraphError> {
        let opset = self.graph.opset;
        let out_shape: Vec<i64> = node
            .outputs
            .first()
            .map(|o| self.graph.shape(o).iter().map(|&d| d as i64).collect())
            .unwrap_or_default();
        let in_rank = node.inputs.first().map_or(0, |i| self.graph.shape(i).len());
        let mut inputs = node.inputs.clone();
        let mut attrs: Vec<AttributeProto> = Vec::new();
        let channels_last = match &node.op {
            Op::Conv(c) => c.channels_last,
            Op::MaxPool(p) | Op::AveragePool(p) => p.channels_last,
            _ => false,
        };
        let op_type = match &node.op {
            Op::Conv(c) if c.channels_last => {
                conv_attrs(&mut attrs, c);
                "ConvChannelsLast"
            }
            Op::Conv(c) => {
                conv_attrs(&mut attrs, c);
                "Conv"
            }
            Op::BatchNormalization { epsilon } => {
                attrs.push(float("epsilon", *epsilon));
                "BatchNormalization"
            }
            Op::Clip { min, max } => {
                if opset < 11 {
                    attrs.push(float("min", *min));
                    attrs.push(float("max", *max));
                } else {
                    let lo = self.scalar(node, "min", *min);
                    let hi = self.scalar(node, "max", *max);
                    inputs.extend([lo, hi]);
                }
                "Clip"
            }
            Op::LeakyRelu { alpha } => {
                attrs.push(float("alpha", *alpha));
                "LeakyRelu"
            }
            Op::Gemm {
                alpha,
                beta,
                trans_a,
                trans_b,
            } => {
                attrs.push(float("alpha", *alpha));
                attrs.push(float("beta", *beta));
                attrs.push(int("transA", i64::from(*trans_a)));
                attrs.push(int("transB", i64::from(*trans_b)));
                "Gemm"
            }
            Op::MaxPool(p) => {
                pool_attrs(&mut attrs, p, true);
                if p.channels_last {
                    "MaxPoolChannelsLast"
                } else {
                    "MaxPool"
                }
            }
            Op::AveragePool(p) => {
                pool_attrs(&mut attrs, p, false);
                if p.channels_last {
                    "AveragePoolChannelsLast"
                } else {
                    "AveragePool"
                }
            }
            Op::Lrn {
                size,
                alpha,
                beta,
                bias,
            } => {
                attrs.push(int("size", *size));
                attrs.push(float("alpha", *alpha));
                attrs.push(float("beta", *beta));
                attrs.push(float("bias", *bias));
                "LRN"
            }
            Op::Reshape => {
                if opset < 5 {
                    attrs.push(ints("shape", &out_shape));
                } else {
                    let shape = self.ints(node, "shape", &out_shape);
                    inputs.push(shape);
                    if opset >= 14 && out_shape.contains(&0) {
                        attrs.push(int("allowzero", 1));
                    }
                }
                "Reshape"
            }
            Op::Transpose { perm } => {
                let perm: Vec<i64> = perm.iter().map(|&p| p as i64).collect();
                attrs.push(ints("perm", &perm));
                "Transpose"
            }
            Op::Concat { axis } => {
                attrs.push(int("axis", *axis as i64));
                "Concat"
            }
            Op::Softmax { axis, last_axis } => {
                let legacy = opset < 13;
                let expressible = if legacy {
                    *last_axis + 1 == in_rank
                } else {
                    axis == last_axis
                };
                if !expressible {
                    return Err(GraphError::unsupported(
                        node,
                        format!(
                            "a Softmax over axes {axis}..={last_axis} of a rank-{in_rank} tensor cannot be written as one ONNX Softmax at opset {opset}"
                        ),
                    ));
                }
                attrs.push(int("axis", *axis as i64));
                "Softmax"
            }
            Op::LayerNormalization { axis, epsilon } => {
                attrs.push(int("axis", *axis as i64));
                attrs.push(float("epsilon", *epsilon));
                "LayerNormalization"
            }
            Op::ReduceMean { axes, keepdims } => {
                let axes: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
                if opset < 18 {
                    attrs.push(ints("axes", &axes));
                } else {
                    let axes = self.ints(node, "axes", &axes);
                    inputs.push(axes);
                }
                attrs.push(int("keepdims", i64::from(*keepdims)));
                "ReduceMean"
            }
            Op::Gelu { tanh } => {
                if *tanh {
                    attrs.push(string("approximate", "tanh"));
                }
                "Gelu"
            }
            Op::Gather {
                axis,
                indices,
                indices_shape,
            } => {
                let value = HostTensor::new(indices_shape, HostData::I64(indices.clone()))
                    .map_err(|e| GraphError::bad_node(node, e.to_string()))?;
                let name = self.constant(node, "indices", value);
                inputs.push(name);
                attrs.push(int("axis", *axis as i64));
                "Gather"
            }
            Op::Slice { starts, steps } => {
                let ends: Vec<i64> = starts
                    .iter()
                    .zip(steps)
                    .zip(&out_shape)
                    .map(|((&s, &st), &len)| slice_end(s, st, len))
                    .collect();
                let axes: Vec<i64> = (0..starts.len() as i64).collect();
                if opset < 10 {
                    if steps.iter().any(|&s| s != 1) {
                        return Err(GraphError::unsupported(
                            node,
                            format!(
                                "a Slice with steps {steps:?} cannot be written at opset {opset} (steps came with opset 10)"
                            ),
                        ));
                    }
                    attrs.push(ints("starts", starts));
                    attrs.push(ints("ends", &ends));
                    attrs.push(ints("axes", &axes));
                } else {
                    let names = [
                        self.ints(node, "starts", starts),
                        self.ints(node, "ends", &ends),
                        self.ints(node, "axes", &axes),
                        self.ints(node, "steps", steps),
                    ];
                    inputs.extend(names);
                }
                "Slice"
            }
            op => op.name(),
        };
        Ok(NodeProto {
            name: Some(node.name.clone()),
            op_type: Some(op_type.to_string()),
            domain: channels_last.then(|| TESSERA_DOMAIN.to_string()),
            input: inputs,
            output: node.outputs.clone(),
            attribute: attrs,
            ..Default::default()
        })
    }
}

/// The exclusive end of a slice of `len` elements from `start` by `step`.
fn slice_end(start: i64, step: i64, len: i64) -> i64 {
    let end = start + (len - 1) * step + step.signum();
    // An end before element 0 of a backward slice: any value below -dim.
    if step < 0 && end < 0 { i64::MIN } else { end }
}

fn conv_attrs(attrs: &mut Vec<AttributeProto>, c: &ConvAttrs) {
    attrs.push(ints("kernel_shape", &c.kernel));
    attrs.push(ints("strides", &c.strides));
    attrs.push(ints("pads", &[&c.pads_begin[..], &c.pads_end[..]].concat()));
    attrs.push(ints("dilations", &c.dilations));
    attrs.push(int("group", c.group));
}

fn pool_attrs(attrs: &mut Vec<AttributeProto>, p: &PoolAttrs, max: bool) {
    attrs.push(ints("kernel_shape", &p.kernel));
    attrs.push(ints("strides", &p.strides));
    attrs.push(ints("pads", &[&p.pads_begin[..], &p.pads_end[..]].concat()));
    if max && p.dilations.iter().any(|&d| d != 1) {
        attrs.push(ints("dilations", &p.dilations));
    }
    if p.ceil_mode {
        attrs.push(int("ceil_mode", 1));
    }
    if p.count_include_pad {
        attrs.push(int("count_include_pad", 1));
    }
}

fn attribute(name: &str, kind: attribute_proto::AttributeType) -> AttributeProto {
    let mut a = AttributeProto {
        name: Some(name.to_string()),
        ..Default::default()
    };
    a.set_type(kind);
    a
}

fn int(name: &str, v: i64) -> AttributeProto {
    let mut a = attribute(name, attribute_proto::AttributeType::Int);
    a.i = Some(v);
    a
}

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    let mut a = attribute(name, attribute_proto::AttributeType::Ints);
    a.ints = v.to_vec();
    a
}

fn float(name: &str, v: f32) -> AttributeProto {
    let mut a = attribute(name, attribute_proto::AttributeType::Float);
    a.f = Some(v);
    a
}

fn string(name: &str, v: &str) -> AttributeProto {
    let mut a = attribute(name, attribute_proto::AttributeType::String);
    a.s = Some(v.as_bytes().to_vec());
    a
}

fn data_type(dtype: &crate::te::DType) -> tensor_proto::DataType {
    use crate::te::DType;
    match dtype {
        DType::F32 => tensor_proto::DataType::Float,
        DType::F64 => tensor_proto::DataType::Double,
        DType::I32 => tensor_proto::DataType::Int32,
        DType::I64 => tensor_proto::DataType::Int64,
        DType::Bool => tensor_proto::DataType::Bool,
    }
}

/// `value` as an initializer named `name`, its elements as little-endian
/// raw bytes (bit-exact).
fn tensor(name: &str, value: &HostTensor) -> TensorProto {
    let raw: Vec<u8> = match value.data() {
        HostData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
    };
    TensorProto {
        name: Some(name.to_string()),
        dims: value.shape().iter().map(|&d| d as i64).collect(),
        data_type: Some(data_type(&value.dtype()) as i32),
        raw_data: Some(raw),
        ..Default::default()
    }
}

fn value(name: &str, elem: tensor_proto::DataType, dims: &[usize]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| tensor_shape_proto::Dimension {
            value: Some(tensor_shape_proto::dimension::Value::DimValue(d as i64)),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem as i32),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::shapes;
    use super::*;

    #[test]
    fn slice_ends_give_back_every_slice() {
        for dim in 1..9usize {
            for start in 0..dim as i64 {
                for step in [-3i64, -2, -1, 1, 2, 3] {
                    let room = if step > 0 {
                        dim as i64 - start
                    } else {
                        start + 1
                    };
                    let longest = (room + step.abs() - 1) / step.abs();
                    for len in 1..=longest {
                        let end = slice_end(start, step, len);
                        assert_eq!(
                            shapes::slice(dim, start, end, step),
                            Ok((start, step, len as usize)),
                            "dim {dim}, start {start}, step {step}, len {len}: end {end}"
                        );
                    }
                }
            }
        }
    }
}
