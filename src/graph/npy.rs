//! `.npy` files of f32 tensors (numpy's format, through `npyz`): what
//! `tessera run` reads its inputs from and writes its outputs to.

use std::io::BufReader;
use std::path::Path;

use npyz::WriterBuilder;

use crate::te::HostTensor;

use super::error::GraphError;

/// Reads an f32 `.npy` file (C order).
pub fn read_npy(path: &Path) -> Result<HostTensor, GraphError> {
    let bad = |what: String| GraphError::Npy {
        path: path.to_path_buf(),
        what,
    };
    let file = std::fs::File::open(path).map_err(|source| GraphError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let npy = npyz::NpyFile::new(BufReader::new(file))
        .map_err(|e| bad(format!("not a .npy file ({e})")))?;
    let descr = npy.dtype().descr();
    let dtype = descr.trim_matches('\'');
    if dtype != "<f4" {
        return Err(bad(format!(
            "holds dtype {dtype}; tessera takes float32 ('<f4'): save it with array.astype(numpy.float32)"
        )));
    }
    if npy.order() != npyz::Order::C {
        return Err(bad(
            "is in Fortran order; save a C-ordered array (numpy.ascontiguousarray)".to_string(),
        ));
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let data: Vec<f32> = npy
        .into_vec()
        .map_err(|e| bad(format!("cannot read its data: {e}")))?;
    HostTensor::from_f32(&shape, data).map_err(|e| bad(e.to_string()))
}

/// Writes `tensor` (f32) to `path`, through a temporary file renamed into
/// place, so that a failed write leaves nothing behind.
pub fn write_npy(path: &Path, tensor: &HostTensor) -> Result<(), GraphError> {
    let data = tensor.as_f32().ok_or_else(|| GraphError::Npy {
        path: path.to_path_buf(),
        what: format!(
            "only f32 tensors are written, this one is {}",
            tensor.dtype()
        ),
    })?;
    let failed = |source: std::io::Error| GraphError::Write {
        path: path.to_path_buf(),
        source,
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = path.with_file_name(format!(".{file_name}.{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&temp)?);
        let shape: Vec<u64> = tensor.shape().iter().map(|&d| d as u64).collect();
        let mut writer = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&shape)
            .writer(&mut file)
            .begin_nd()?;
        writer.extend(data.iter().copied())?;
        writer.finish()?;
        std::io::Write::flush(&mut file)?;
        drop(file);
        std::fs::rename(&temp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        failed(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_dtypes() {
        let dir = std::env::temp_dir().join(format!("tessera-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.npy");
        let t = HostTensor::random(&[2, 3, 5], crate::te::DType::F32, 7);
        write_npy(&path, &t).unwrap();
        assert_eq!(read_npy(&path).unwrap(), t);
        let i64_path = dir.join("i.npy");
        npyz::to_file_1d(&i64_path, vec![1i64, 2, 3]).unwrap();
        let err = read_npy(&i64_path).unwrap_err().to_string();
        assert!(err.contains("<i8") && err.contains("float32"), "{err}");
        std::fs::write(dir.join("junk.npy"), b"not numpy").unwrap();
        let err = read_npy(&dir.join("junk.npy")).unwrap_err().to_string();
        assert!(err.contains("not a .npy file"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
