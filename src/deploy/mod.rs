//! Deployment: tuned schedules out of the cache into artifacts
//! (`schedules/<device>/<workload>.json`), loaded back and compiled without
//! searching, or compiled ahead of time into object files; `verify` checks
//! every deployed artifact against the reference.

pub mod aot;
mod artifact;
mod constant_inputs;
mod error;
mod export;
mod layout_rewrite;
mod library;
mod prepacked;
mod rename;
mod verify;
mod verify_prepacked;

pub use aot::{AOT_DIR, AotWorkload, aot_symbol, compile_deployed};
pub use artifact::{
    ARTIFACT_SCHEMA, Artifact, INDEX_FILE, Index, IndexEntry, artifact_file_name, device_dir,
    micro_kernels_of, write_atomic,
};
pub use constant_inputs::{CompiledWithConstants, Packer, compile_with_constants, pack_inputs};
pub use error::DeployError;
pub use export::{
    DeployOptions, DeployOutcome, DeployReport, DeployedWorkload, deploy, deploy_device,
};
pub(crate) use layout_rewrite::check_inputs;
pub use layout_rewrite::{LayoutRewrite, plan_layout_rewrites};
pub use library::{FallbackReason, KernelSource, Library, LoadedKernel, Resolution};
pub use prepacked::PrepackedKernel;
pub use rename::translate_steps;
pub use verify::{
    InjectedWrongAnswer, VerifiedArtifact, VerifyOutcome, VerifyReport, WRONG_ANSWER_ENV,
    WrongAnswer, verify, verify_with,
};
