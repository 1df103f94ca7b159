//! The pipe protocol between the measuring process and its workers.
//!
//! A frame is a little-endian `u32` header length, the header (one JSON
//! object), a little-endian `u64` payload length and the payload (raw output
//! bytes of a run, empty otherwise). The worker speaks first, with
//! [`Response::Hello`]; then each [`Request`] gets exactly one response.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

use super::result::MeasureErrorKind;
use super::task::TaskSource;
use super::timing::TimingOptions;
use crate::codegen::CodegenOptions;
use crate::schedule::Step;

/// Test hooks: faults a worker injects on purpose, so the isolation of bad
/// candidates can be tested with real crashes, hangs and wrong answers.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// Abort the worker while building.
    AbortInBuild,
    /// Call the compiled kernel with unmapped buffer addresses (SIGSEGV in
    /// generated code).
    Segfault,
    /// Abort the worker while running.
    Abort,
    /// Never finish running.
    Hang,
    /// Change one output element after the kernel ran.
    WrongResult,
    /// Move the middle element of the first output by `relative_error`, as
    /// the verifier measures it ([`relative_error`](super::relative_error)),
    /// after the kernel ran: a wrong answer as small as the tolerance under
    /// test. The first output must be `f32` or `f64`.
    PerturbMiddle {
        /// The relative error to add.
        relative_error: f64,
    },
}

/// Parent → worker.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Request {
    /// Switch to a task: rebuild its DAG, check its key, make its inputs.
    Setup {
        source: TaskSource,
        key_hash: String,
        threads: usize,
        codegen: CodegenOptions,
        /// Inputs laid out ahead of time ([`Task::constants`](super::Task::constants)).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        constants: Vec<String>,
    },
    /// Replay, lower and compile a candidate; keep the kernel under `id`.
    Build {
        id: u64,
        steps: Vec<Step>,
        fault: Option<Fault>,
    },
    /// Run kernel `id` once on fresh buffers (returning its outputs), then
    /// time it when `timing` is given.
    Run {
        id: u64,
        timing: Option<TimingOptions>,
        fault: Option<Fault>,
    },
    /// Drop every kept kernel.
    Forget,
}

/// Worker → parent.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Response {
    Hello {
        version: String,
        debug_build: bool,
    },
    Ready,
    SetupFailed {
        msg: String,
    },
    Built {
        id: u64,
        build_secs: f64,
    },
    BuildFailed {
        id: u64,
        kind: MeasureErrorKind,
        msg: String,
        build_secs: f64,
    },
    /// The payload holds the outputs of the first run.
    Ran {
        id: u64,
        costs: Vec<f64>,
        run_secs: f64,
    },
    RunFailed {
        id: u64,
        msg: String,
    },
    Forgotten,
}

/// `source` as a worker reads it out of a [`Request::Setup`] header: an
/// error when the JSON parser cannot read it back (an expression nested
/// deeper than serde_json's recursion limit).
pub(crate) fn setup_round_trip(source: TaskSource) -> Result<TaskSource, String> {
    let setup = Request::Setup {
        source,
        key_hash: String::new(),
        threads: 1,
        codegen: CodegenOptions::default(),
        constants: Vec::new(),
    };
    let json = serde_json::to_string(&setup).map_err(|e| e.to_string())?;
    match serde_json::from_str(&json).map_err(|e| e.to_string())? {
        Request::Setup { source, .. } => Ok(source),
        other => Err(format!("read back as {other:?}")),
    }
}

/// Largest header accepted (a step list of a few thousand steps).
const MAX_HEADER: u32 = 64 << 20;
/// Largest payload accepted (the outputs of one run).
const MAX_PAYLOAD: u64 = 16 << 30;

/// Writes one frame.
pub(crate) fn write_frame<T: Serialize>(
    w: &mut impl Write,
    header: &T,
    payload: &[u8],
) -> io::Result<()> {
    let json = serde_json::to_vec(header).map_err(io::Error::other)?;
    let len = u32::try_from(json.len()).map_err(io::Error::other)?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(&json)?;
    w.write_all(&(payload.len() as u64).to_le_bytes())?;
    w.write_all(payload)?;
    w.flush()
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub(crate) fn read_frame<T: for<'de> Deserialize<'de>>(
    r: &mut impl Read,
) -> io::Result<Option<(T, Vec<u8>)>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len);
    if len > MAX_HEADER {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame header of {len} bytes is not a tessera worker message"),
        ));
    }
    let mut json = vec![0u8; len as usize];
    r.read_exact(&mut json)?;
    let header =
        serde_json::from_slice(&json).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut size = [0u8; 8];
    r.read_exact(&mut size)?;
    let size = u64::from_le_bytes(size);
    if size > MAX_PAYLOAD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame payload of {size} bytes is too large"),
        ));
    }
    let mut payload = vec![0u8; size as usize];
    r.read_exact(&mut payload)?;
    Ok(Some((header, payload)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let mut wire = Vec::new();
        let request = Request::Run {
            id: 7,
            timing: Some(TimingOptions::default()),
            fault: Some(Fault::Hang),
        };
        write_frame(&mut wire, &request, &[1, 2, 3]).expect("writes");
        write_frame(&mut wire, &Request::Forget, &[]).expect("writes");
        let mut r = &wire[..];
        let (first, payload): (Request, _) = read_frame(&mut r).expect("reads").expect("frame");
        assert!(matches!(
            first,
            Request::Run {
                id: 7,
                fault: Some(Fault::Hang),
                ..
            }
        ));
        assert_eq!(payload, vec![1, 2, 3]);
        let (second, _): (Request, _) = read_frame(&mut r).expect("reads").expect("frame");
        assert!(matches!(second, Request::Forget));
        assert!(read_frame::<Request>(&mut r).expect("clean end").is_none());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut r: &[u8] = b"Usage: something else entirely\n";
        assert!(read_frame::<Response>(&mut r).is_err());
    }
}
