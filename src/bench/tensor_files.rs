//! `tessera bench --save-io DIR`: the inputs a benchmark ran on and the
//! outputs of the timed kernel, written as NumPy `.npy` files (one per
//! tensor, named after it) plus `io.json` listing them in argument order,
//! so that another engine can be run on the same inputs and compared.

use std::io::Write;
use std::path::Path;

use crate::te::{ComputeDag, DType, HostData, HostTensor};

use super::error::BenchError;

/// Writes `inputs` (the DAG's placeholders, in order) and `outputs` (its
/// outputs, in order) into `dir`, creating it; then `io.json`.
pub(super) fn save(
    dir: &Path,
    dag: &ComputeDag,
    inputs: &[HostTensor],
    outputs: &[HostTensor],
) -> Result<(), BenchError> {
    let failed = |source| BenchError::SaveIo {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(failed)?;
    let input_names: Vec<&str> = dag.inputs().iter().map(|t| t.name()).collect();
    let output_names: Vec<&str> = dag.outputs().iter().map(|t| t.name()).collect();
    let mut listing = serde_json::Map::new();
    for (role, names, tensors) in [
        ("inputs", &input_names, inputs),
        ("outputs", &output_names, outputs),
    ] {
        let mut entries = Vec::new();
        for (name, tensor) in names.iter().zip(tensors) {
            let file = format!("{name}.npy");
            let path = dir.join(&file);
            write_npy(&path, tensor).map_err(|source| BenchError::SaveIo { path, source })?;
            entries.push(serde_json::json!({
                "name": name,
                "file": file,
                "shape": tensor.shape(),
                "dtype": numpy_descr(tensor.dtype()),
            }));
        }
        listing.insert(role.to_string(), serde_json::Value::Array(entries));
    }
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(listing))
        .expect("a JSON value prints");
    let path = dir.join("io.json");
    std::fs::write(&path, text + "\n").map_err(|source| BenchError::SaveIo { path, source })
}

/// NumPy's type string of a dtype (little-endian).
fn numpy_descr(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::Bool => "|b1",
    }
}

/// The `.npy` format, version 1.0: magic, header length, a Python dict
/// literal padded to a multiple of 64 bytes, then the data in C order.
fn write_npy(path: &Path, tensor: &HostTensor) -> std::io::Result<()> {
    let dims: Vec<String> = tensor.shape().iter().map(usize::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        numpy_descr(tensor.dtype())
    );
    const PREAMBLE: usize = 10; // magic (6) + version (2) + header length (2)
    let padded = (PREAMBLE + header.len() + 1).div_ceil(64) * 64;
    header.push_str(&" ".repeat(padded - PREAMBLE - header.len() - 1));
    header.push('\n');
    let header_len = u16::try_from(header.len())
        .map_err(|_| std::io::Error::other("an .npy header over 65535 bytes"))?;
    let mut bytes = Vec::with_capacity(padded + tensor.len() * 8);
    bytes.extend_from_slice(b"\x93NUMPY\x01\x00");
    bytes.extend_from_slice(&header_len.to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    match tensor.data() {
        HostData::F32(v) => v.iter().for_each(|x| bytes.extend(x.to_le_bytes())),
        HostData::F64(v) => v.iter().for_each(|x| bytes.extend(x.to_le_bytes())),
        HostData::I32(v) => v.iter().for_each(|x| bytes.extend(x.to_le_bytes())),
        HostData::I64(v) => v.iter().for_each(|x| bytes.extend(x.to_le_bytes())),
        HostData::Bool(v) => bytes.extend(v.iter().map(|&b| u8::from(b))),
    }
    std::fs::File::create(path)?.write_all(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_header_is_aligned_and_data_follows_in_c_order() {
        let dir = std::env::temp_dir().join(format!("tessera-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.npy");
        let tensor = HostTensor::from_f32(&[2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.5]).unwrap();
        write_npy(&path, &tensor).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
        let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + header_len) % 64, 0);
        let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
        assert!(header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert!(header.ends_with('\n'));
        let data: Vec<f32> = bytes[10 + header_len..]
            .chunks(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(data, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.5]);
    }
}
