//! ONNX import: the protobuf model decoded with the types `build.rs`
//! generates from the vendored `proto/onnx.proto`, then turned into a
//! [`Graph`](super::Graph) with typed operators and static shapes.

mod attributes;
mod export;
mod fold;
mod functions;
mod import;
mod nodes;
mod shapes;

pub use export::export;
pub use import::{ImportOptions, import, import_bytes, read};

/// The protobuf messages of `onnx.proto`, generated at build time.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
}

/// The default-domain opsets the reader supports.
pub const OPSETS: std::ops::RangeInclusive<i64> = 7..=21;

/// The domain of tessera's own operators: the layouts graph passes choose,
/// written into a deployed model's graph (`ConvChannelsLast`, …).
pub const TESSERA_DOMAIN: &str = "ai.tessera";

/// The op types of [`TESSERA_DOMAIN`]: ONNX's Conv, MaxPool and
/// AveragePool, with the same attributes, over channels-last tensors.
pub const TESSERA_OP_TYPES: &[&str] = &[
    "ConvChannelsLast",
    "MaxPoolChannelsLast",
    "AveragePoolChannelsLast",
];

/// Every op type the reader accepts, as errors list them.
pub const SUPPORTED_OP_TYPES: &[&str] = &[
    "Abs",
    "Add",
    "AveragePool",
    "BatchNormalization",
    "Clip",
    "Cast",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Conv",
    "Div",
    "Dropout",
    "Erf",
    "Exp",
    "Flatten",
    "Gather",
    "Gelu",
    "Gemm",
    "GlobalAveragePool",
    "Identity",
    "LRN",
    "LayerNormalization",
    "LeakyRelu",
    "MatMul",
    "MaxPool",
    "Mul",
    "Neg",
    "Pow",
    "Reciprocal",
    "ReduceMean",
    "Relu",
    "Reshape",
    "Shape",
    "Sigmoid",
    "Slice",
    "Softmax",
    "Sqrt",
    "Squeeze",
    "Sub",
    "Sum",
    "Tanh",
    "Transpose",
    "Unsqueeze",
];

/// The bytes of `model` in the ONNX file format (for tools and tests that
/// build models with the [`proto`] types).
pub fn encode(model: &proto::ModelProto) -> Vec<u8> {
    prost::Message::encode_to_vec(model)
}
