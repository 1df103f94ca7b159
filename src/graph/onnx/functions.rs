//! tessera's own operators (`ai.tessera`: the layouts the graph passes
//! choose) as ONNX model-local functions, so that a deployed model's graph
//! stays a model any ONNX runtime runs: each channels-last node is defined
//! as the channels-first ONNX node between two Transposes (and its weight
//! transposed back). tessera's reader takes the nodes themselves and
//! never expands the bodies.

use super::TESSERA_DOMAIN;
use super::proto::{AttributeProto, FunctionProto, NodeProto, OperatorSetIdProto, attribute_proto};

/// `[N, H, W, C]` → `[N, C, H, W]`.
const TO_CHANNELS_FIRST: [i64; 4] = [0, 3, 1, 2];
/// `[N, C, H, W]` → `[N, H, W, C]`.
const TO_CHANNELS_LAST: [i64; 4] = [0, 2, 3, 1];
/// A weight `[R, S, C, K]` → `[K, C, R, S]`.
const WEIGHT_TO_CHANNELS_FIRST: [i64; 4] = [3, 2, 0, 1];

/// The function defining `op_type` of [`TESSERA_DOMAIN`] at `opset` of
/// the default domain, or `None` for an op type that is not tessera's.
pub(super) fn function(op_type: &str, opset: i64) -> Option<FunctionProto> {
    let (inner, inputs, attributes): (&str, &[&str], &[&str]) = match op_type {
        "ConvChannelsLast" => (
            "Conv",
            &["X", "W", "B"],
            &["kernel_shape", "strides", "pads", "dilations", "group"],
        ),
        "MaxPoolChannelsLast" => (
            "MaxPool",
            &["X"],
            &["kernel_shape", "strides", "pads", "dilations", "ceil_mode"],
        ),
        "AveragePoolChannelsLast" => (
            "AveragePool",
            &["X"],
            &[
                "kernel_shape",
                "strides",
                "pads",
                "ceil_mode",
                "count_include_pad",
            ],
        ),
        _ => return None,
    };
    let mut body = vec![transpose("X", "X_first", &TO_CHANNELS_FIRST)];
    let mut inner_inputs = vec!["X_first".to_string()];
    if inputs.contains(&"W") {
        body.push(transpose("W", "W_first", &WEIGHT_TO_CHANNELS_FIRST));
        inner_inputs.extend(["W_first".to_string(), "B".to_string()]);
    }
    body.push(NodeProto {
        op_type: Some(inner.to_string()),
        input: inner_inputs,
        output: vec!["Y_first".to_string()],
        attribute: attributes.iter().map(|a| reference(a)).collect(),
        ..Default::default()
    });
    body.push(transpose("Y_first", "Y", &TO_CHANNELS_LAST));
    Some(FunctionProto {
        name: Some(op_type.to_string()),
        domain: Some(TESSERA_DOMAIN.to_string()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec!["Y".to_string()],
        attribute: attributes.iter().map(|s| s.to_string()).collect(),
        node: body,
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        ..Default::default()
    })
}

fn transpose(input: &str, output: &str, perm: &[i64]) -> NodeProto {
    let mut a = AttributeProto {
        name: Some("perm".to_string()),
        ints: perm.to_vec(),
        ..Default::default()
    };
    a.set_type(attribute_proto::AttributeType::Ints);
    NodeProto {
        op_type: Some("Transpose".to_string()),
        input: vec![input.to_string()],
        output: vec![output.to_string()],
        attribute: vec![a],
        ..Default::default()
    }
}

/// The attribute `name` of the body node, taken from the call's attribute
/// of the same name (left out where the call has none).
fn reference(name: &str) -> AttributeProto {
    let mut a = AttributeProto {
        name: Some(name.to_string()),
        ref_attr_name: Some(name.to_string()),
        ..Default::default()
    };
    let kind = match name {
        "group" | "ceil_mode" | "count_include_pad" => attribute_proto::AttributeType::Int,
        _ => attribute_proto::AttributeType::Ints,
    };
    a.set_type(kind);
    a
}
