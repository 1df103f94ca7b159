//! The rows of `bench/ort/workloads.json` (tessera against ONNX Runtime),
//! read, and each checked against the DAG tessera builds for its op and
//! shape: every ONNX graph input and output names a tensor of that DAG and
//! has its shape (or, where the row says `reshape`, its element count), and
//! the ONNX nodes are wired (each node input is a graph input, an
//! initializer or an earlier node's output; each graph output is made).

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Deserialize;
use tessera::ops;

/// The workload file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workloads {
    /// The ONNX opset of every model.
    pub opset: i64,
    /// The rows, in table order.
    pub rows: Vec<Row>,
}

/// One row: a tessera op at a shape, and its ONNX model.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// The table's label.
    pub name: String,
    /// The tessera op (`tessera ops`, or an `op!` op of the `custom_op` example).
    pub op: String,
    /// Its `--shape`.
    pub shape: String,
    /// `custom_op` for ops of the example binary; absent for built-ins.
    #[serde(default)]
    pub binary: Option<String>,
    /// The graph inputs.
    pub inputs: Vec<Tensor>,
    /// The graph outputs.
    pub outputs: Vec<Tensor>,
    /// Constant tensors of the graph (axes, eps).
    #[serde(default)]
    pub initializers: Vec<Initializer>,
    /// The ONNX nodes, in order.
    pub nodes: Vec<Node>,
}

/// A graph input or output and the tessera tensor it is.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tensor {
    /// Its ONNX name.
    pub name: String,
    /// The tessera tensor's name (a placeholder, or an output).
    pub tessera: String,
    /// Its ONNX shape.
    pub shape: Vec<usize>,
    /// The ONNX shape is the tessera tensor's data viewed in another shape.
    #[serde(default)]
    pub reshape: bool,
    /// A weight: by default an ORT initializer and laid out ahead of time
    /// by tessera (`bench --constants`).
    #[serde(default)]
    pub constant: bool,
}

/// A constant of the graph.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Initializer {
    /// Its name.
    pub name: String,
    /// `float32` or `int64`.
    pub dtype: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its values.
    pub values: Vec<f64>,
}

/// An ONNX node.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// The ONNX operator.
    pub op_type: String,
    /// Its input names.
    pub inputs: Vec<String>,
    /// Its output names.
    pub outputs: Vec<String>,
    /// Its attributes, as `onnx.helper.make_node` takes them.
    #[serde(default)]
    pub attributes: serde_json::Map<String, serde_json::Value>,
}

/// The file's path.
pub fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bench/ort/workloads.json")
}

/// The workload file, parsed.
pub fn load() -> Workloads {
    let text = std::fs::read_to_string(path()).expect("bench/ort/workloads.json is readable");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bench/ort/workloads.json: {e}"))
}

/// Whether the row runs on the `custom_op` example binary.
pub fn is_custom(row: &Row) -> bool {
    row.binary.as_deref() == Some("custom_op")
}

/// Checks `row` against the DAG this process's op registry builds for it.
pub fn check_row(row: &Row) -> Result<(), String> {
    let op = ops::find(&row.op).map_err(|e| e.to_string())?;
    let shape = op.parse_shape(&row.shape).map_err(|e| e.to_string())?;
    let dag = op.build(&shape).map_err(|e| e.to_string())?;
    let dag_inputs: Vec<(String, Vec<usize>)> = dag
        .inputs()
        .iter()
        .map(|t| (t.name().to_string(), dims(t.shape())))
        .collect();
    let dag_outputs: Vec<(String, Vec<usize>)> = dag
        .outputs()
        .iter()
        .map(|t| (t.name().to_string(), dims(t.shape())))
        .collect();
    match_tensors("input", &row.inputs, &dag_inputs)?;
    match_tensors("output", &row.outputs, &dag_outputs)?;
    // A constant is laid out as tessera reads it: the same shape.
    if let Some(t) = row.inputs.iter().find(|t| t.constant && t.reshape) {
        return Err(format!(
            "input {}: a constant must have tessera's shape (no reshape)",
            t.name
        ));
    }
    check_wiring(row)
}

fn dims(shape: &[i64]) -> Vec<usize> {
    shape.iter().map(|&d| d as usize).collect()
}

/// Each of tessera's tensors is named by exactly one ONNX tensor, of its
/// shape (or its element count, when `reshape`).
fn match_tensors(
    role: &str,
    onnx: &[Tensor],
    tessera: &[(String, Vec<usize>)],
) -> Result<(), String> {
    let named: BTreeSet<&str> = onnx.iter().map(|t| t.tessera.as_str()).collect();
    let have: BTreeSet<&str> = tessera.iter().map(|(n, _)| n.as_str()).collect();
    if named != have || named.len() != onnx.len() {
        return Err(format!(
            "the ONNX {role}s name tessera's {named:?}, tessera's DAG has {have:?} (each once)"
        ));
    }
    for t in onnx {
        let (_, want) = tessera
            .iter()
            .find(|(n, _)| *n == t.tessera)
            .expect("matched by name above");
        let same = if t.reshape {
            t.shape.iter().product::<usize>() == want.iter().product::<usize>() && t.shape != *want
        } else {
            t.shape == *want
        };
        if !same {
            return Err(format!(
                "ONNX {role} {} {:?}{}: tessera's {} is {want:?}",
                t.name,
                t.shape,
                if t.reshape { " (reshape)" } else { "" },
                t.tessera
            ));
        }
    }
    Ok(())
}

/// Every node input is defined before it is used; every graph output is made.
fn check_wiring(row: &Row) -> Result<(), String> {
    let mut defined: BTreeSet<&str> = row.inputs.iter().map(|t| t.name.as_str()).collect();
    for init in &row.initializers {
        let count: usize = init.shape.iter().product();
        if init.values.len() != count || !["float32", "int64"].contains(&init.dtype.as_str()) {
            return Err(format!(
                "initializer {}: {} {} values for shape {:?}",
                init.name,
                init.values.len(),
                init.dtype,
                init.shape
            ));
        }
        defined.insert(&init.name);
    }
    for node in &row.nodes {
        if let Some(missing) = node.inputs.iter().find(|i| !defined.contains(i.as_str())) {
            return Err(format!(
                "node {}: input {missing} is not defined before it",
                node.op_type
            ));
        }
        defined.extend(node.outputs.iter().map(String::as_str));
    }
    match row
        .outputs
        .iter()
        .find(|t| !defined.contains(t.name.as_str()))
    {
        Some(t) => Err(format!("graph output {} is made by no node", t.name)),
        None => Ok(()),
    }
}
