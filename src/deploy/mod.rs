//! Deployment: tuned schedules out of the cache into artifacts
//! (`schedules/<device>/<workload>.json`), loaded back and compiled without
//! searching, or compiled ahead of time into object files; `verify` checks
//! every deployed artifact against the reference.

mod ahead;
pub mod aot;
mod artifact;
mod error;
mod export;
mod library;
mod rename;
mod verify;

pub use ahead::{AOT_DIR, AotWorkload, aot_symbol, compile_deployed};
pub use artifact::{
    ARTIFACT_SCHEMA, Artifact, INDEX_FILE, Index, IndexEntry, artifact_file_name, device_dir,
    intrinsics_of, write_atomic,
};
pub use error::DeployError;
pub use export::{
    DeployOptions, DeployOutcome, DeployReport, DeployedWorkload, deploy, deploy_device,
};
pub use library::{FallbackReason, KernelSource, Library, LoadedKernel, Resolution};
pub use rename::translate_steps;
pub use verify::{VerifiedArtifact, VerifyOutcome, VerifyReport, verify};
