//! One ONNX node to a typed graph node (attributes resolved for the model's
//! opset, output shapes inferred), or to constants when it computes only
//! from constants (shape subgraphs, Constant, ConstantOfShape).

use std::collections::BTreeMap;

use crate::graph::error::GraphError;
use crate::graph::ir::{BinaryOp, ConvAttrs, Node, Op, PoolAttrs, TensorInfo, UnaryOp, layout};
use crate::te::{HostData, HostTensor};

use super::SUPPORTED_OP_TYPES;
use super::attributes::{Attributes, decode_tensor};
use super::fold;
use super::import::Context;
use super::proto::NodeProto;
use super::shapes;

/// What a node became.
pub(super) enum Converted {
    /// Constant values of its outputs.
    Folded(Vec<(String, HostTensor)>),
    /// A graph node and the types of its outputs.
    Node(Box<Node>, BTreeMap<String, TensorInfo>),
}

/// The node being converted: its proto, name and the tensors known so far.
struct At<'a> {
    cx: &'a Context,
    proto: &'a NodeProto,
    name: &'a str,
    attrs: Attributes<'a>,
}

impl At<'_> {
    fn bad(&self, what: impl Into<String>) -> GraphError {
        GraphError::BadNode {
            node: self.name.to_string(),
            op_type: self.proto.op_type().to_string(),
            what: what.into(),
        }
    }

    fn unsupported(&self, what: impl Into<String>) -> GraphError {
        GraphError::Unsupported {
            node: self.name.to_string(),
            op_type: self.proto.op_type().to_string(),
            what: what.into(),
        }
    }

    /// Input `i` when given (ONNX marks a skipped optional input by "").
    fn input(&self, i: usize) -> Option<&str> {
        self.proto
            .input
            .get(i)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    fn required(&self, i: usize) -> Result<&str, GraphError> {
        self.input(i).ok_or_else(|| {
            self.bad(format!(
                "input {i} is missing (the node has {} inputs)",
                self.proto.input.len()
            ))
        })
    }

    fn shape(&self, i: usize) -> Result<&[usize], GraphError> {
        let name = self.required(i)?;
        self.cx
            .tensors
            .get(name)
            .map(|t| t.shape.as_slice())
            .ok_or_else(|| GraphError::Dangling {
                node: self.name.to_string(),
                tensor: name.to_string(),
            })
    }

    fn constant(&self, i: usize) -> Option<&HostTensor> {
        self.input(i).and_then(|n| self.cx.constants.get(n))
    }

    /// Input `i` as constant integers (an attribute passed as an input).
    fn const_ints(&self, i: usize, what: &str) -> Result<Option<Vec<i64>>, GraphError> {
        if self.input(i).is_none() {
            return Ok(None);
        }
        let value = self.constant(i).ok_or_else(|| {
            self.unsupported(format!(
                "its {what} (input {i}) must be a constant: tessera needs static shapes"
            ))
        })?;
        ints_of(value)
            .map(Some)
            .ok_or_else(|| self.bad(format!("its {what} is not an integer tensor")))
    }

    /// Input `i` as one constant float, if given.
    fn const_scalar(&self, i: usize, what: &str) -> Result<Option<f32>, GraphError> {
        if self.input(i).is_none() {
            return Ok(None);
        }
        let value = self.constant(i).ok_or_else(|| {
            self.unsupported(format!("its {what} (input {i}) must be a constant"))
        })?;
        if value.len() != 1 {
            return Err(self.bad(format!("its {what} has {} elements, not 1", value.len())));
        }
        Ok(Some(value.to_f64_vec()[0] as f32))
    }

    fn attr<T>(&self, read: Result<T, String>) -> Result<T, GraphError> {
        read.map_err(|what| self.bad(what))
    }

    fn shape_err<T>(&self, read: Result<T, String>) -> Result<T, GraphError> {
        read.map_err(|what| self.bad(what))
    }

    fn axis(&self, axis: i64, rank: usize) -> Result<usize, GraphError> {
        self.shape_err(shapes::axis(axis, rank))
    }

    /// An attribute that the model must leave at its default for tessera.
    fn must_be(&self, key: &str, default: i64, why: &str) -> Result<(), GraphError> {
        match self.attr(self.attrs.int(key))? {
            Some(v) if v != default => Err(self.unsupported(format!(
                "attribute {key}={v} is not supported ({why}); only {key}={default}"
            ))),
            _ => Ok(()),
        }
    }

    /// Errors when an optional output beyond the first is asked for.
    fn only_first_output(&self, why: &str) -> Result<(), GraphError> {
        if self.proto.output.iter().skip(1).any(|o| !o.is_empty()) {
            return Err(self.unsupported(format!(
                "only its first output is supported ({why}); it asks for {:?}",
                self.proto.output
            )));
        }
        Ok(())
    }
}

/// The integers of a constant, if it holds integers.
pub(super) fn ints_of(value: &HostTensor) -> Option<Vec<i64>> {
    match value.data() {
        HostData::I64(v) => Some(v.clone()),
        HostData::I32(v) => Some(v.iter().map(|&x| i64::from(x)).collect()),
        _ => None,
    }
}

/// Converts `proto` (named `name`).
pub(super) fn convert(
    cx: &mut Context,
    proto: &NodeProto,
    name: &str,
) -> Result<Converted, GraphError> {
    let at = At {
        cx,
        proto,
        name,
        attrs: Attributes::of(proto),
    };
    let op_type = proto.op_type();
    // Nodes that only make constants.
    match op_type {
        "Constant" => {
            let value = at.attr(at.attrs.constant_value())?;
            return Ok(Converted::Folded(vec![(output(&at, 0)?, value)]));
        }
        "Shape" => {
            let shape = at.shape(0)?;
            let rank = shape.len() as i64;
            let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
            let start = clamp(at.attr(at.attrs.int_or("start", 0))?);
            let end = clamp(at.attr(at.attrs.int_or("end", rank))?);
            let dims: Vec<i64> = shape[start..end.max(start)]
                .iter()
                .map(|&d| d as i64)
                .collect();
            let value = HostTensor::new(&[dims.len()], HostData::I64(dims))
                .map_err(|e| at.bad(e.to_string()))?;
            return Ok(Converted::Folded(vec![(output(&at, 0)?, value)]));
        }
        "ConstantOfShape" => {
            let dims = at
                .const_ints(0, "shape")?
                .ok_or_else(|| at.bad("it needs its shape input"))?;
            let shape: Vec<usize> = dims
                .iter()
                .map(|&d| usize::try_from(d).map_err(|_| at.bad(format!("shape {dims:?}"))))
                .collect::<Result<_, _>>()?;
            let fill = match at.attr(at.attrs.tensor("value"))? {
                Some(t) => at.attr(decode_tensor(t))?,
                None => HostTensor::from_f32(&[1], vec![0.0]).map_err(|e| at.bad(e.to_string()))?,
            };
            let value = fold::filled(&shape, &fill).map_err(|e| at.bad(e))?;
            return Ok(Converted::Folded(vec![(output(&at, 0)?, value)]));
        }
        "Cast" if at.constant(0).is_some() => {
            let to = at
                .attr(at.attrs.int("to"))?
                .ok_or_else(|| at.bad("it needs 'to'"))?;
            let value = at.constant(0).map(|v| fold::cast(v, to)).transpose();
            let value = value
                .map_err(|e| at.unsupported(e))?
                .ok_or_else(|| at.bad("no input"))?;
            return Ok(Converted::Folded(vec![(output(&at, 0)?, value)]));
        }
        _ => {}
    }
    let (op, inputs, out_shape) = typed(&at, op_type)?;
    let out_name = output(&at, 0)?;
    let all_constant = !inputs.is_empty() && inputs.iter().all(|i| cx.constants.contains_key(i));
    if all_constant && let Some(value) = fold::evaluate(&op, &inputs, &out_shape, &cx.constants) {
        let value = value.map_err(|e| at.bad(e))?;
        return Ok(Converted::Folded(vec![(out_name, value)]));
    }
    let node = Node {
        name: name.to_string(),
        op,
        inputs,
        outputs: vec![out_name.clone()],
    };
    let infos = BTreeMap::from([(out_name, TensorInfo::f32(&out_shape))]);
    Ok(Converted::Node(Box::new(node), infos))
}

fn output(at: &At, i: usize) -> Result<String, GraphError> {
    at.proto
        .output
        .get(i)
        .filter(|o| !o.is_empty())
        .cloned()
        .ok_or_else(|| at.bad(format!("it has no output {i}")))
}

type Typed = (Op, Vec<String>, Vec<usize>);

/// The typed op, its data inputs and its output shape.
fn typed(at: &At, op_type: &str) -> Result<Typed, GraphError> {
    let tessera = at.proto.domain() == super::TESSERA_DOMAIN;
    let data = |n: usize| -> Result<Vec<String>, GraphError> {
        (0..n).map(|i| at.required(i).map(str::to_string)).collect()
    };
    let unary = |u: UnaryOp| -> Result<Typed, GraphError> {
        Ok((Op::Unary(u), data(1)?, at.shape(0)?.to_vec()))
    };
    match op_type {
        "Relu" => unary(UnaryOp::Relu),
        "Sigmoid" => unary(UnaryOp::Sigmoid),
        "Tanh" => unary(UnaryOp::Tanh),
        "Erf" => unary(UnaryOp::Erf),
        "Sqrt" => unary(UnaryOp::Sqrt),
        "Exp" => unary(UnaryOp::Exp),
        "Neg" => unary(UnaryOp::Neg),
        "Abs" => unary(UnaryOp::Abs),
        "Reciprocal" => unary(UnaryOp::Reciprocal),
        "Identity" | "Dropout" => {
            // A Dropout's mask output is often named but never read; a node
            // that reads it fails as reading a tensor nothing produces.
            if op_type == "Dropout"
                && let Some(true) = at.constant(2).map(|t| t.to_f64_vec().first() != Some(&0.0))
            {
                return Err(at.unsupported("training_mode=true: tessera runs inference"));
            }
            Ok((Op::Reshape, data(1)?, at.shape(0)?.to_vec()))
        }
        "Cast" => {
            let to = at.attr(at.attrs.int("to"))?.unwrap_or(0);
            if to != 1 {
                return Err(at.unsupported(format!(
                    "a Cast of a computed tensor to type {to}: tessera computes f32 (type 1) only"
                )));
            }
            Ok((Op::Reshape, data(1)?, at.shape(0)?.to_vec()))
        }
        "Add" | "Sub" | "Mul" | "Div" | "Pow" => {
            let b = match op_type {
                "Add" => BinaryOp::Add,
                "Sub" => BinaryOp::Sub,
                "Mul" => BinaryOp::Mul,
                "Div" => BinaryOp::Div,
                _ => BinaryOp::Pow,
            };
            let out = at.shape_err(shapes::broadcast(&[at.shape(0)?, at.shape(1)?]))?;
            Ok((Op::Binary(b), data(2)?, out))
        }
        "Sum" => {
            let n = at.proto.input.len();
            if n == 0 {
                return Err(at.bad("a Sum needs at least one input"));
            }
            let all: Vec<&[usize]> = (0..n).map(|i| at.shape(i)).collect::<Result<_, _>>()?;
            let out = at.shape_err(shapes::broadcast(&all))?;
            let op = if n == 1 { Op::Reshape } else { Op::Sum };
            Ok((op, data(n)?, out))
        }
        "Clip" => {
            let (min, max) = if at.cx.opset < 11 {
                (
                    at.attr(at.attrs.float_or("min", f32::NEG_INFINITY))?,
                    at.attr(at.attrs.float_or("max", f32::INFINITY))?,
                )
            } else {
                (
                    at.const_scalar(1, "min")?.unwrap_or(f32::NEG_INFINITY),
                    at.const_scalar(2, "max")?.unwrap_or(f32::INFINITY),
                )
            };
            Ok((Op::Clip { min, max }, data(1)?, at.shape(0)?.to_vec()))
        }
        "LeakyRelu" => {
            let alpha = at.attr(at.attrs.float_or("alpha", 0.01))?;
            Ok((Op::LeakyRelu { alpha }, data(1)?, at.shape(0)?.to_vec()))
        }
        "Gelu" => {
            let approx = at.attr(at.attrs.string("approximate"))?;
            let tanh = match approx.as_deref() {
                None | Some("none") => false,
                Some("tanh") => true,
                Some(other) => {
                    return Err(
                        at.unsupported(format!("approximate='{other}' (supported: none, tanh)"))
                    );
                }
            };
            Ok((Op::Gelu { tanh }, data(1)?, at.shape(0)?.to_vec()))
        }
        "BatchNormalization" => {
            at.only_first_output("running statistics exist only in training")?;
            at.must_be("training_mode", 0, "tessera runs inference")?;
            at.must_be("spatial", 1, "per-activation statistics")?;
            let epsilon = at.attr(at.attrs.float_or("epsilon", 1e-5))?;
            let x = at.shape(0)?;
            if x.len() < 2 {
                return Err(at.bad(format!("its input {x:?} has no channel axis")));
            }
            for i in 1..5 {
                if at.shape(i)? != [x[1]] {
                    return Err(at.bad(format!(
                        "parameter input {i} has shape {:?}, expected [{}] (the channels of {x:?})",
                        at.shape(i)?,
                        x[1]
                    )));
                }
            }
            Ok((Op::BatchNormalization { epsilon }, data(5)?, x.to_vec()))
        }
        "Conv" => conv(at, false),
        "MaxPool" | "AveragePool" => pool(at, op_type == "MaxPool", false),
        "ConvChannelsLast" if tessera => conv(at, true),
        "MaxPoolChannelsLast" | "AveragePoolChannelsLast" if tessera => {
            pool(at, op_type == "MaxPoolChannelsLast", true)
        }
        "GlobalAveragePool" => {
            let x = at.shape(0)?;
            if x.len() < 3 {
                return Err(at.bad(format!("its input {x:?} has no spatial axes")));
            }
            let mut out = x[..2].to_vec();
            out.resize(x.len(), 1);
            Ok((Op::GlobalAveragePool, data(1)?, out))
        }
        "LRN" => {
            let size = at
                .attr(at.attrs.int("size"))?
                .ok_or_else(|| at.bad("it needs the attribute 'size'"))?;
            if size < 1 {
                return Err(at.bad(format!("size={size} must be at least 1")));
            }
            let op = Op::Lrn {
                size,
                alpha: at.attr(at.attrs.float_or("alpha", 1e-4))?,
                beta: at.attr(at.attrs.float_or("beta", 0.75))?,
                bias: at.attr(at.attrs.float_or("bias", 1.0))?,
            };
            let x = at.shape(0)?;
            if x.len() < 3 {
                return Err(at.bad(format!("its input {x:?} has no spatial axes")));
            }
            Ok((op, data(1)?, x.to_vec()))
        }
        "MatMul" => {
            let out = at.shape_err(shapes::matmul(at.shape(0)?, at.shape(1)?))?;
            Ok((Op::MatMul, data(2)?, out))
        }
        "Gemm" => gemm(at),
        "Flatten" => {
            let x = at.shape(0)?;
            let axis = at.attr(at.attrs.int_or("axis", 1))?;
            let axis = if axis == x.len() as i64 {
                x.len()
            } else {
                at.axis(axis, x.len())?
            };
            let out = vec![x[..axis].iter().product(), x[axis..].iter().product()];
            Ok((Op::Reshape, data(1)?, out))
        }
        "Reshape" => {
            let target = if at.cx.opset < 5 {
                at.attr(at.attrs.ints("shape"))?
            } else {
                at.const_ints(1, "target shape")?
            }
            .ok_or_else(|| at.bad("it needs a target shape"))?;
            let allow_zero = at.attr(at.attrs.int_or("allowzero", 0))? != 0;
            let out = at.shape_err(shapes::reshape(at.shape(0)?, &target, allow_zero))?;
            Ok((Op::Reshape, data(1)?, out))
        }
        "Squeeze" | "Unsqueeze" => squeeze(at, op_type == "Unsqueeze"),
        "Transpose" => {
            let x = at.shape(0)?;
            let perm = match at.attr(at.attrs.ints("perm"))? {
                Some(p) => p,
                None => (0..x.len() as i64).rev().collect(),
            };
            let mut seen = vec![false; x.len()];
            let mut perm_u = Vec::with_capacity(perm.len());
            for &p in &perm {
                let p = at.axis(p, x.len())?;
                if std::mem::replace(&mut seen[p], true) {
                    return Err(at.bad(format!("perm {perm:?} repeats axis {p}")));
                }
                perm_u.push(p);
            }
            if perm_u.len() != x.len() {
                return Err(at.bad(format!("perm {perm:?} does not fit rank {}", x.len())));
            }
            let out = perm_u.iter().map(|&p| x[p]).collect();
            Ok((Op::Transpose { perm: perm_u }, data(1)?, out))
        }
        "Concat" => {
            let n = at.proto.input.len();
            let first = at.shape(0)?.to_vec();
            let raw = at
                .attr(at.attrs.int("axis"))?
                .ok_or_else(|| at.bad("it needs the attribute 'axis'"))?;
            let axis = at.axis(raw, first.len())?;
            let mut out = first.clone();
            out[axis] = 0;
            for i in 0..n {
                let s = at.shape(i)?;
                let fits = s.len() == first.len()
                    && s.iter()
                        .zip(&first)
                        .enumerate()
                        .all(|(d, (a, b))| d == axis || a == b);
                if !fits {
                    return Err(at.bad(format!(
                        "input {i} has shape {s:?}, which does not join {first:?} along axis {axis}"
                    )));
                }
                out[axis] += s[axis];
            }
            Ok((Op::Concat { axis }, data(n)?, out))
        }
        "Softmax" => {
            let x = at.shape(0)?;
            let legacy = at.cx.opset < 13;
            let raw = at.attr(at.attrs.int_or("axis", if legacy { 1 } else { -1 }))?;
            let axis = at.axis(raw, x.len())?;
            let last_axis = if legacy { x.len() - 1 } else { axis };
            Ok((Op::Softmax { axis, last_axis }, data(1)?, x.to_vec()))
        }
        "LayerNormalization" => {
            at.only_first_output("mean and inverse deviation are training outputs")?;
            let x = at.shape(0)?;
            let axis = at.axis(at.attr(at.attrs.int_or("axis", -1))?, x.len())?;
            let epsilon = at.attr(at.attrs.float_or("epsilon", 1e-5))?;
            let n = if at.input(2).is_some() { 3 } else { 2 };
            for i in 1..n {
                let s = at.shape(i)?;
                if at.shape_err(shapes::broadcast(&[s, &x[axis..]]))? != x[axis..] {
                    return Err(at.bad(format!(
                        "input {i} has shape {s:?}, which does not broadcast to the normalised axes {:?}",
                        &x[axis..]
                    )));
                }
            }
            Ok((
                Op::LayerNormalization { axis, epsilon },
                data(n)?,
                x.to_vec(),
            ))
        }
        "ReduceMean" => {
            let x = at.shape(0)?;
            let raw = if at.cx.opset < 18 {
                at.attr(at.attrs.ints("axes"))?
            } else {
                at.const_ints(1, "axes")?
            };
            let keepdims = at.attr(at.attrs.int_or("keepdims", 1))? != 0;
            let noop = at.attr(at.attrs.int_or("noop_with_empty_axes", 0))? != 0;
            let raw = raw.unwrap_or_default();
            if raw.is_empty() && noop {
                return Ok((Op::Reshape, data(1)?, x.to_vec()));
            }
            let mut axes: Vec<usize> = if raw.is_empty() {
                (0..x.len()).collect()
            } else {
                raw.iter()
                    .map(|&a| at.axis(a, x.len()))
                    .collect::<Result<_, _>>()?
            };
            axes.sort_unstable();
            axes.dedup();
            let out = x
                .iter()
                .enumerate()
                .filter_map(|(i, &d)| match (axes.contains(&i), keepdims) {
                    (true, true) => Some(1),
                    (true, false) => None,
                    (false, _) => Some(d),
                })
                .collect();
            Ok((
                Op::ReduceMean { axes, keepdims },
                vec![at.required(0)?.to_string()],
                out,
            ))
        }
        "Gather" => {
            let x = at.shape(0)?;
            let axis = at.axis(at.attr(at.attrs.int_or("axis", 0))?, x.len())?;
            let indices = at.constant(1).ok_or_else(|| {
                at.unsupported(
                    "its indices must be a constant (tessera gathers with constant indices only)",
                )
            })?;
            let raw = ints_of(indices).ok_or_else(|| at.bad("its indices are not integers"))?;
            let extent = x[axis] as i64;
            let mut normal = Vec::with_capacity(raw.len());
            for &i in &raw {
                let j = if i < 0 { i + extent } else { i };
                if !(0..extent).contains(&j) {
                    return Err(at.bad(format!(
                        "index {i} is out of range for axis {axis} of extent {extent}"
                    )));
                }
                normal.push(j);
            }
            let indices_shape = indices.shape().to_vec();
            let mut out = x[..axis].to_vec();
            out.extend(&indices_shape);
            out.extend(&x[axis + 1..]);
            let op = Op::Gather {
                axis,
                indices: normal,
                indices_shape,
            };
            Ok((op, vec![at.required(0)?.to_string()], out))
        }
        "Slice" => slice(at),
        _ => Err(GraphError::UnsupportedOp {
            node: at.name.to_string(),
            op_type: op_type.to_string(),
            supported: SUPPORTED_OP_TYPES.join(", "),
        }),
    }
}

/// Explicit pads from `pads` / `auto_pad` for `spatial` dimensions.
fn window_pads(
    at: &At,
    input: &[usize],
    kernel: &[i64],
    strides: &[i64],
    dilations: &[i64],
) -> Result<(Vec<i64>, Vec<i64>), GraphError> {
    let spatial = kernel.len();
    let auto = at.attr(at.attrs.string("auto_pad"))?.unwrap_or_default();
    match auto.as_str() {
        "" | "NOTSET" => {
            let pads = at
                .attr(at.attrs.ints("pads"))?
                .unwrap_or(vec![0; 2 * spatial]);
            if pads.len() != 2 * spatial || pads.iter().any(|&p| p < 0) {
                return Err(at.bad(format!(
                    "pads {pads:?} must hold {} non-negative values (begins, then ends)",
                    2 * spatial
                )));
            }
            Ok((pads[..spatial].to_vec(), pads[spatial..].to_vec()))
        }
        "VALID" => Ok((vec![0; spatial], vec![0; spatial])),
        "SAME_UPPER" | "SAME_LOWER" => {
            let upper = auto == "SAME_UPPER";
            let (begin, end) = (0..spatial)
                .map(|d| {
                    let extent = dilations[d] * (kernel[d] - 1) + 1;
                    shapes::same_pads(input[d], extent, strides[d], upper)
                })
                .unzip();
            Ok((begin, end))
        }
        other => Err(at.bad(format!(
            "auto_pad='{other}' (supported: NOTSET, VALID, SAME_UPPER, SAME_LOWER)"
        ))),
    }
}

fn per_dim(at: &At, key: &str, spatial: usize) -> Result<Vec<i64>, GraphError> {
    let v = at.attr(at.attrs.ints(key))?.unwrap_or(vec![1; spatial]);
    if v.len() != spatial || v.iter().any(|&x| x < 1) {
        return Err(at.bad(format!("{key} {v:?} must hold {spatial} positive values")));
    }
    Ok(v)
}

/// A Conv node, or (`channels_last`) tessera's `ConvChannelsLast`: the
/// same attributes over `X[N, spatial…, C]`, `W[kernel…, C/group, K]`.
fn conv(at: &At, channels_last: bool) -> Result<Typed, GraphError> {
    let (x, w) = if channels_last {
        (
            layout::channels_first(at.shape(0)?),
            layout::weight_channels_first(at.shape(1)?),
        )
    } else {
        (at.shape(0)?.to_vec(), at.shape(1)?.to_vec())
    };
    if x.len() < 3 || w.len() != x.len() {
        return Err(at.bad(format!(
            "input {x:?} and weight {w:?} must both be [N, C, spatial…] and [K, C/group, kernel…]"
        )));
    }
    let spatial = x.len() - 2;
    let group = at.attr(at.attrs.int_or("group", 1))?;
    let (c, k) = (x[1] as i64, w[0] as i64);
    if group < 1 || c % group != 0 || k % group != 0 || w[1] as i64 != c / group {
        return Err(at.bad(format!(
            "group={group} does not fit input channels {c}, weight {w:?} (need C/group = weight dim 1, K divisible by group)"
        )));
    }
    let kernel: Vec<i64> = w[2..].iter().map(|&d| d as i64).collect();
    if let Some(given) = at.attr(at.attrs.ints("kernel_shape"))?
        && given != kernel
    {
        return Err(at.bad(format!(
            "kernel_shape {given:?} differs from the weight's {kernel:?}"
        )));
    }
    let strides = per_dim(at, "strides", spatial)?;
    let dilations = per_dim(at, "dilations", spatial)?;
    let (pads_begin, pads_end) = window_pads(at, &x[2..], &kernel, &strides, &dilations)?;
    let mut out = vec![x[0], w[0]];
    for d in 0..spatial {
        let extent = dilations[d] * (kernel[d] - 1) + 1;
        out.push(at.shape_err(shapes::window_out(
            x[2 + d],
            extent,
            strides[d],
            pads_begin[d],
            pads_end[d],
            false,
        ))?);
    }
    let n = if at.input(2).is_some() {
        if at.shape(2)? != [w[0]] {
            return Err(at.bad(format!(
                "bias {:?} must be [{}] (the output channels)",
                at.shape(2)?,
                w[0]
            )));
        }
        3
    } else {
        2
    };
    let inputs = (0..n)
        .map(|i| at.required(i).map(str::to_string))
        .collect::<Result<_, _>>()?;
    let attrs = ConvAttrs {
        kernel,
        strides,
        pads_begin,
        pads_end,
        dilations,
        group,
        channels_last,
    };
    let out = if channels_last {
        layout::channels_last(&out)
    } else {
        out
    };
    Ok((Op::Conv(attrs), inputs, out))
}

/// A MaxPool or AveragePool node, or (`channels_last`) tessera's
/// `MaxPoolChannelsLast` / `AveragePoolChannelsLast` over `X[N, spatial…, C]`.
fn pool(at: &At, max: bool, channels_last: bool) -> Result<Typed, GraphError> {
    if max {
        at.only_first_output("indices of the maxima")?;
        at.must_be("storage_order", 0, "row-major indices")?;
    }
    let x = if channels_last {
        layout::channels_first(at.shape(0)?)
    } else {
        at.shape(0)?.to_vec()
    };
    if x.len() < 3 {
        return Err(at.bad(format!("its input {x:?} has no spatial axes")));
    }
    let spatial = x.len() - 2;
    let kernel = at
        .attr(at.attrs.ints("kernel_shape"))?
        .ok_or_else(|| at.bad("it needs the attribute 'kernel_shape'"))?;
    if kernel.len() != spatial || kernel.iter().any(|&k| k < 1) {
        return Err(at.bad(format!("kernel_shape {kernel:?} does not fit input {x:?}")));
    }
    let strides = per_dim(at, "strides", spatial)?;
    let dilations = per_dim(at, "dilations", spatial)?;
    if !max && dilations.iter().any(|&d| d != 1) {
        return Err(at.unsupported(format!(
            "dilations {dilations:?} of an average pool (only 1)"
        )));
    }
    let (pads_begin, pads_end) = window_pads(at, &x[2..], &kernel, &strides, &dilations)?;
    let ceil_mode = at.attr(at.attrs.int_or("ceil_mode", 0))? != 0;
    let count_include_pad = at.attr(at.attrs.int_or("count_include_pad", 0))? != 0;
    let mut out = x[..2].to_vec();
    for d in 0..spatial {
        out.push(at.shape_err(shapes::window_out(
            x[2 + d],
            dilations[d] * (kernel[d] - 1) + 1,
            strides[d],
            pads_begin[d],
            pads_end[d],
            ceil_mode,
        ))?);
    }
    let attrs = PoolAttrs {
        kernel,
        strides,
        pads_begin,
        pads_end,
        dilations,
        ceil_mode,
        count_include_pad,
        channels_last,
    };
    let out = if channels_last {
        layout::channels_last(&out)
    } else {
        out
    };
    let op = if max {
        Op::MaxPool(attrs)
    } else {
        Op::AveragePool(attrs)
    };
    Ok((op, vec![at.required(0)?.to_string()], out))
}

fn gemm(at: &At) -> Result<Typed, GraphError> {
    let (a, b) = (at.shape(0)?, at.shape(1)?);
    if a.len() != 2 || b.len() != 2 {
        return Err(at.bad(format!("A {a:?} and B {b:?} must be matrices")));
    }
    let trans_a = at.attr(at.attrs.int_or("transA", 0))? != 0;
    let trans_b = at.attr(at.attrs.int_or("transB", 0))? != 0;
    let (m, ka) = if trans_a { (a[1], a[0]) } else { (a[0], a[1]) };
    let (kb, n) = if trans_b { (b[1], b[0]) } else { (b[0], b[1]) };
    if ka != kb {
        return Err(at.bad(format!(
            "inner dimensions differ: A {a:?} (transA={}) · B {b:?} (transB={})",
            u8::from(trans_a),
            u8::from(trans_b)
        )));
    }
    let mut inputs = vec![at.required(0)?.to_string(), at.required(1)?.to_string()];
    if let Some(c) = at.input(2) {
        let cs = at.shape(2)?;
        if at.shape_err(shapes::broadcast(&[cs, &[m, n]]))? != [m, n] {
            return Err(at.bad(format!("C {cs:?} does not broadcast to [{m}, {n}]")));
        }
        inputs.push(c.to_string());
    }
    let op = Op::Gemm {
        alpha: at.attr(at.attrs.float_or("alpha", 1.0))?,
        beta: at.attr(at.attrs.float_or("beta", 1.0))?,
        trans_a,
        trans_b,
    };
    Ok((op, inputs, vec![m, n]))
}

fn squeeze(at: &At, unsqueeze: bool) -> Result<Typed, GraphError> {
    let x = at.shape(0)?.to_vec();
    let axes = if at.cx.opset < 13 {
        at.attr(at.attrs.ints("axes"))?
    } else {
        at.const_ints(1, "axes")?
    };
    let out = if unsqueeze {
        let axes = axes.ok_or_else(|| at.bad("it needs axes"))?;
        let rank = x.len() + axes.len();
        let mut positions: Vec<usize> = axes
            .iter()
            .map(|&a| at.axis(a, rank))
            .collect::<Result<_, _>>()?;
        positions.sort_unstable();
        let mut out = Vec::with_capacity(rank);
        let mut rest = x.iter();
        for i in 0..rank {
            if positions.binary_search(&i).is_ok() {
                out.push(1);
            } else {
                out.push(
                    *rest
                        .next()
                        .ok_or_else(|| at.bad(format!("axes {axes:?} repeat")))?,
                );
            }
        }
        out
    } else {
        match axes {
            None => x.iter().copied().filter(|&d| d != 1).collect(),
            Some(axes) => {
                let axes: Vec<usize> = axes
                    .iter()
                    .map(|&a| at.axis(a, x.len()))
                    .collect::<Result<_, _>>()?;
                for &a in &axes {
                    if x[a] != 1 {
                        return Err(at.bad(format!("axis {a} of {x:?} has size {}, not 1", x[a])));
                    }
                }
                x.iter()
                    .enumerate()
                    .filter(|(i, _)| !axes.contains(i))
                    .map(|(_, &d)| d)
                    .collect()
            }
        }
    };
    Ok((Op::Reshape, vec![at.required(0)?.to_string()], out))
}

fn slice(at: &At) -> Result<Typed, GraphError> {
    let x = at.shape(0)?.to_vec();
    let (starts, ends, axes, steps) = if at.cx.opset < 10 {
        (
            at.attr(at.attrs.ints("starts"))?,
            at.attr(at.attrs.ints("ends"))?,
            at.attr(at.attrs.ints("axes"))?,
            None,
        )
    } else {
        (
            at.const_ints(1, "starts")?,
            at.const_ints(2, "ends")?,
            at.const_ints(3, "axes")?,
            at.const_ints(4, "steps")?,
        )
    };
    let starts = starts.ok_or_else(|| at.bad("it needs starts"))?;
    let ends = ends.ok_or_else(|| at.bad("it needs ends"))?;
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(at.bad(format!(
            "starts {starts:?}, ends {ends:?}, axes {axes:?}, steps {steps:?} differ in length"
        )));
    }
    let mut first = vec![0i64; x.len()];
    let mut step = vec![1i64; x.len()];
    let mut out = x.clone();
    for i in 0..starts.len() {
        let a = at.axis(axes[i], x.len())?;
        let (s, st, len) = at.shape_err(shapes::slice(x[a], starts[i], ends[i], steps[i]))?;
        first[a] = s;
        step[a] = st;
        out[a] = len;
    }
    if out.contains(&0) {
        return Err(at.unsupported(format!("the slice is empty (shape {out:?})")));
    }
    let op = Op::Slice {
        starts: first,
        steps: step,
    };
    Ok((op, vec![at.required(0)?.to_string()], out))
}
