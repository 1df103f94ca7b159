//! Model files (`cost_model/*.model`): one JSON header line saying which
//! learner, which feature version and what it was trained on, then the
//! learner's bytes, gzip-compressed (tree ensembles serialise to verbose
//! JSON that shrinks about 6×).

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::CostError;
use super::features::{FEATURE_LEN, FEATURE_VERSION};
use super::learner::Learner;
use super::registry::learner_from_bytes;

/// What a model file says about itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelHeader {
    /// Always `tessera-cost-model`.
    pub format: String,
    /// The learner (see [`learner_names`](super::learner_names)).
    pub learner: String,
    /// The feature version the model was trained on.
    pub feature_version: u32,
    /// Features per row.
    pub feature_len: usize,
    /// Rows trained on.
    pub rows: usize,
    /// Readable workload keys trained on.
    pub workloads: Vec<String>,
    /// The device key (readable#hash) the records were measured on.
    pub device: String,
    /// How the file was made (the command).
    pub made_with: String,
    /// How the learner's bytes are stored: `gzip` (what [`save_model`]
    /// writes) or absent (plain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
}

const FORMAT: &str = "tessera-cost-model";

/// Writes `learner` with `header` to `path` (whole or not at all).
pub fn save_model(
    path: &Path,
    header: &ModelHeader,
    learner: &dyn Learner,
) -> Result<(), CostError> {
    let io = |source| CostError::Io {
        path: path.into(),
        source,
    };
    let mut header = header.clone();
    header.format = FORMAT.into();
    header.learner = learner.name().into();
    header.feature_version = FEATURE_VERSION;
    header.feature_len = FEATURE_LEN;
    header.compression = Some("gzip".into());
    let mut bytes = serde_json::to_vec(&header).map_err(|e| io(std::io::Error::other(e)))?;
    bytes.push(b'\n');
    let mut gz = GzEncoder::new(bytes, Compression::best());
    gz.write_all(&learner.to_bytes()?).map_err(io)?;
    let bytes = gz.finish().map_err(io)?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(&bytes)?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    Ok(())
}

/// Reads a model file: its header and its learner.
pub fn load_model(path: &Path) -> Result<(ModelHeader, Box<dyn Learner>), CostError> {
    let bytes = std::fs::read(path).map_err(|source| CostError::Io {
        path: path.into(),
        source,
    })?;
    let bad = |reason: String| CostError::BadFile {
        path: path.into(),
        reason,
    };
    let newline = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| bad("no header line; not a tessera cost model".into()))?;
    let header: ModelHeader = serde_json::from_slice(&bytes[..newline]).map_err(|e| {
        bad(format!(
            "its header does not parse ({e}); not a tessera cost model"
        ))
    })?;
    if header.format != FORMAT {
        return Err(bad(format!("format '{}' is not {FORMAT}", header.format)));
    }
    if header.feature_version != FEATURE_VERSION || header.feature_len != FEATURE_LEN {
        return Err(bad(format!(
            "trained on features v{} ({} per row), this tessera extracts v{FEATURE_VERSION} ({FEATURE_LEN}); retrain it with `tessera cost-model train`",
            header.feature_version, header.feature_len
        )));
    }
    let payload = &bytes[newline + 1..];
    let learner = match header.compression.as_deref() {
        None => learner_from_bytes(&header.learner, payload)?,
        Some("gzip") => {
            let mut plain = Vec::new();
            GzDecoder::new(payload)
                .read_to_end(&mut plain)
                .map_err(|e| bad(format!("its model does not decompress ({e})")))?;
            learner_from_bytes(&header.learner, &plain)?
        }
        Some(other) => return Err(bad(format!("unknown compression '{other}'"))),
    };
    Ok((header, learner))
}
