//! Small ONNX models built in Rust with the reader's own protobuf types
//! (no Python needed), and where the Python with onnx and onnxruntime is
//! for the tests that compare with ONNX Runtime.

use std::path::{Path, PathBuf};

use tessera::graph::onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto, attribute_proto, tensor_shape_proto, type_proto,
};

/// The environment variable that makes a test needing ONNX Runtime fail
/// instead of skipping when the Python packages are missing (`.ci/run` sets it).
pub const REQUIRE_ORT_ENV: &str = "TESSERA_REQUIRE_ORT";

/// A Python with `onnx`, `onnxruntime` and `numpy`: `$TESSERA_PYTHON`, else
/// the virtual environment `bench/ort/compare` makes (`target/ort-venv`).
/// `None` (and a "skipped" line) when there is none, unless
/// [`REQUIRE_ORT_ENV`] is set, then the test fails.
pub fn ort_python(test: &str) -> Option<PathBuf> {
    let candidates = std::env::var_os("TESSERA_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([super::package_root().join("target/ort-venv/bin/python")]);
    for python in candidates {
        let ok = std::process::Command::new(&python)
            .args(["-c", "import onnx, onnxruntime, numpy"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(python);
        }
    }
    if std::env::var_os(REQUIRE_ORT_ENV).is_some() {
        panic!(
            "{test}: no Python with onnx, onnxruntime and numpy (set TESSERA_PYTHON, or run bench/ort/compare once to make target/ort-venv), and {REQUIRE_ORT_ENV} is set"
        );
    }
    eprintln!("{test}: skipped: no Python with onnx and onnxruntime (see TESSERA_PYTHON)");
    None
}

/// The folder of the `onnx` package's `light_*.onnx` models.
pub fn light_models_dir(python: &Path) -> PathBuf {
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend/test/data/light'))",
        ])
        .output()
        .expect("python runs");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// An attribute.
pub enum Attr {
    Int(i64),
    Float(f32),
    Ints(Vec<i64>),
    Str(&'static str),
}

/// A node `op_type(inputs) -> outputs` named `name`.
pub fn node(
    op_type: &str,
    name: &str,
    inputs: &[&str],
    outputs: &[&str],
    attrs: Vec<(&str, Attr)>,
) -> NodeProto {
    NodeProto {
        op_type: Some(op_type.to_string()),
        name: Some(name.to_string()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs
            .into_iter()
            .map(|(key, value)| {
                let mut a = AttributeProto {
                    name: Some(key.to_string()),
                    ..Default::default()
                };
                use attribute_proto::AttributeType as T;
                match value {
                    Attr::Int(i) => {
                        a.i = Some(i);
                        a.set_type(T::Int);
                    }
                    Attr::Float(f) => {
                        a.f = Some(f);
                        a.set_type(T::Float);
                    }
                    Attr::Ints(v) => {
                        a.ints = v;
                        a.set_type(T::Ints);
                    }
                    Attr::Str(s) => {
                        a.s = Some(s.as_bytes().to_vec());
                        a.set_type(T::String);
                    }
                }
                a
            })
            .collect(),
        ..Default::default()
    }
}

/// A graph input or output: f32 (elem type 1) of `dims` (`None` = dynamic).
pub fn value(name: &str, dims: &[Option<i64>]) -> ValueInfoProto {
    value_typed(name, 1, dims)
}

/// A graph input or output of ONNX element type `elem_type`.
pub fn value_typed(name: &str, elem_type: i32, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| tensor_shape_proto::Dimension {
            value: Some(match d {
                Some(v) => tensor_shape_proto::dimension::Value::DimValue(*v),
                None => tensor_shape_proto::dimension::Value::DimParam("batch".to_string()),
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem_type),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An f32 initializer.
pub fn floats(name: &str, dims: &[i64], data: Vec<f32>) -> TensorProto {
    TensorProto {
        name: Some(name.to_string()),
        dims: dims.to_vec(),
        data_type: Some(1),
        float_data: data,
        ..Default::default()
    }
}

/// An int64 initializer.
pub fn int64s(name: &str, data: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.to_string()),
        dims: vec![data.len() as i64],
        data_type: Some(7),
        int64_data: data.to_vec(),
        ..Default::default()
    }
}

/// Deterministic values in [-1, 1).
pub fn ramp(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let x = (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(seed.wrapping_mul(97));
            (x % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// A model of `graph` at default-domain `opset`.
pub fn model(opset: i64, graph: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        producer_name: Some("tessera tests".to_string()),
        graph: Some(graph),
        ..Default::default()
    }
}

/// A graph of `nodes` with the given inputs, outputs and initializers.
pub fn graph(
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    initializers: Vec<TensorProto>,
) -> GraphProto {
    GraphProto {
        name: Some("test".to_string()),
        node: nodes,
        input: inputs,
        output: outputs,
        initializer: initializers,
        ..Default::default()
    }
}

/// Writes `models.py what… --out dir/name.onnx --seed 3` (bench/models)
/// with `python` and returns the path.
pub fn generated_model(python: &Path, dir: &Path, name: &str, what: &[&str]) -> PathBuf {
    let path = dir.join(format!("{name}.onnx"));
    let out = std::process::Command::new(python)
        .arg(super::package_root().join("bench/models/models.py"))
        .args(what)
        .args(["--out", path.to_str().expect("utf-8 path"), "--seed", "3"])
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "models.py {what:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

/// Writes `model` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, model: &ModelProto) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, tessera::graph::onnx::encode(model)).expect("write the model");
    path
}

/// A small CNN written the way exporters write it: Conv → Relu → MaxPool,
/// then the shape subgraph Shape → Gather → Unsqueeze → Concat → Reshape
/// (folded at import), then Gemm with transB and Softmax. Input
/// `x[1,3,8,8]`, output `y[1,10]`.
pub fn small_cnn(opset: i64) -> ModelProto {
    let nodes = vec![
        node(
            "Conv",
            "conv",
            &["x", "w", "b"],
            &["c"],
            vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        ),
        node("Relu", "relu", &["c"], &["r"], vec![]),
        node(
            "MaxPool",
            "pool",
            &["r"],
            &["p"],
            vec![
                ("kernel_shape", Attr::Ints(vec![2, 2])),
                ("strides", Attr::Ints(vec![2, 2])),
            ],
        ),
        node("Shape", "shape", &["p"], &["s"], vec![]),
        node(
            "Gather",
            "batch",
            &["s", "zero"],
            &["n"],
            vec![("axis", Attr::Int(0))],
        ),
        node("Unsqueeze", "unsq", &["n", "axes0"], &["n1"], vec![]),
        node(
            "Concat",
            "target",
            &["n1", "minus1"],
            &["t"],
            vec![("axis", Attr::Int(0))],
        ),
        node("Reshape", "flat", &["p", "t"], &["f"], vec![]),
        node(
            "Gemm",
            "fc",
            &["f", "fw", "fb"],
            &["g"],
            vec![("transB", Attr::Int(1))],
        ),
        node(
            "Softmax",
            "prob",
            &["g"],
            &["y"],
            vec![("axis", Attr::Int(1))],
        ),
    ];
    let zero = TensorProto {
        name: Some("zero".to_string()),
        data_type: Some(7),
        int64_data: vec![0],
        ..Default::default()
    };
    let inits = vec![
        floats("w", &[4, 3, 3, 3], ramp(108, 1)),
        floats("b", &[4], ramp(4, 2)),
        floats("fw", &[10, 64], ramp(640, 3)),
        floats("fb", &[10], ramp(10, 4)),
        zero,
        int64s("axes0", &[0]),
        int64s("minus1", &[-1]),
    ];
    model(
        opset,
        graph(
            nodes,
            vec![value("x", &[Some(1), Some(3), Some(8), Some(8)])],
            vec![value("y", &[Some(1), Some(10)])],
            inits,
        ),
    )
}
