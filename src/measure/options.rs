//! How candidates are measured.

use std::path::PathBuf;
use std::time::Duration;

use crate::codegen::CodegenOptions;

use super::timing::TimingOptions;

/// Options of a [`Measurer`](super::Measurer).
#[derive(Clone, Debug)]
pub struct MeasureOptions {
    /// Worker processes. Builds run on all of them at once.
    pub workers: usize,
    /// Longest a candidate may take to build.
    pub build_timeout: Duration,
    /// Longest a candidate may take to run: verification run, warm-up and
    /// timed repeats together.
    pub run_timeout: Duration,
    /// Longest the default schedule may take to make the trusted result of
    /// a large task.
    pub reference_timeout: Duration,
    /// The timing protocol.
    pub timing: TimingOptions,
    /// Threads a kernel's parallel loops use.
    pub kernel_threads: usize,
    /// Time candidates on all workers at once (faster tuning, noisier
    /// timings). Off by default: one candidate is timed at a time, with the
    /// machine otherwise idle, as it will run when deployed.
    pub concurrent_runs: bool,
    /// How candidates are compiled (the same as deployment uses).
    pub codegen: CodegenOptions,
    /// The worker program (the tessera binary). Default: `TESSERA_WORKER`,
    /// else the running executable.
    pub worker_program: Option<PathBuf>,
}

impl Default for MeasureOptions {
    /// One worker per core, 15 s to build, 10 s to run, the default timing
    /// protocol, kernels on all cores, one timing at a time.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        MeasureOptions {
            workers: cores,
            build_timeout: Duration::from_secs(15),
            run_timeout: Duration::from_secs(10),
            reference_timeout: Duration::from_secs(300),
            timing: TimingOptions::default(),
            kernel_threads: cores,
            concurrent_runs: false,
            codegen: CodegenOptions::default(),
            worker_program: None,
        }
    }
}

impl MeasureOptions {
    /// The worker program these options name (see [`worker_program`](Self::worker_program)).
    pub fn resolved_worker_program(&self) -> std::io::Result<PathBuf> {
        if let Some(p) = &self.worker_program {
            return Ok(p.clone());
        }
        if let Some(p) = std::env::var_os("TESSERA_WORKER") {
            return Ok(PathBuf::from(p));
        }
        std::env::current_exe()
    }
}
