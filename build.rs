//! Compiles the vendored ONNX schema (`proto/onnx.proto`) into Rust types with
//! a protobuf compiler written in Rust: no `protoc`, no network.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    let descriptors = protox::compile(["onnx.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
