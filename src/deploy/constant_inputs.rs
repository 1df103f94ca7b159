//! A schedule compiled with some constant inputs laid out ahead of time:
//! the schedule is lowered as it is, then the one packing copy it makes of
//! each constant is hoisted out of the kernel into a packer
//! ([`tir::hoist_constant_copy`]). The packer makes every panel once, in the
//! order the kernel's loops visit them; the kernel reads each panel where
//! the packer put it instead of copying it on every call.

use crate::codegen::{self, CodegenOptions, Kernel};
use crate::schedule::{State, Step};
use crate::te::{ComputeDag, HostTensor};
use crate::tir;

use super::error::DeployError;
use super::layout_rewrite::check_inputs;

/// Lays one input out ahead of time: the input in, the packed buffer out.
pub struct Packer {
    input: String,
    kernel: Kernel,
}

impl Packer {
    /// The input it packs.
    pub fn input(&self) -> &str {
        &self.input
    }

    /// `tensor` (the input as the DAG takes it) packed: what the kernel
    /// compiled with it takes in its place. Run it once per constant.
    pub fn pack(&self, tensor: &HostTensor) -> Result<HostTensor, DeployError> {
        let mut outputs = self
            .kernel
            .run_host(std::slice::from_ref(tensor))
            .map_err(|e| DeployError::Pack {
                input: self.input.clone(),
                reason: e.to_string(),
            })?;
        Ok(outputs.remove(0))
    }
}

/// The kernel with its constants laid out ahead of time.
pub struct CompiledWithConstants {
    /// The kernel: each input of [`packers`](Self::packers) packed by it,
    /// the other inputs as the DAG has them.
    pub kernel: Kernel,
    /// One per input laid out ahead of time.
    pub packers: Vec<Packer>,
    /// The constants asked for that stay as they are, each with the reason
    /// (the kernel reads it directly, or copies it more than once, …).
    pub not_laid_out: Vec<(String, String)>,
}

/// Compiles `steps` on `dag` with each input named in `constants` laid out
/// ahead of time where the lowered kernel reads it only through one copy.
/// With none of them, the kernel is the plain one.
///
/// Errors: a name that is not an input ([`DeployError::NotAnInput`]), steps
/// that do not replay, or a kernel that does not lower or compile.
pub fn compile_with_constants(
    dag: &ComputeDag,
    steps: &[Step],
    constants: &[&str],
    options: &CodegenOptions,
) -> Result<CompiledWithConstants, DeployError> {
    check_inputs(dag, constants)?;
    let state = State::replay(dag, steps)?;
    let hoisted = tir::hoist_constant_copies(tir::lower(&state)?, constants);
    let not_laid_out = hoisted
        .not_hoisted
        .into_iter()
        .map(|(name, reason)| (name, reason.to_string()))
        .collect();
    let kernel = codegen::compile(&hoisted.kernel, options)?;
    let packers = hoisted
        .packers
        .into_iter()
        .map(|(input, packer)| {
            Ok(Packer {
                input,
                kernel: codegen::compile(&packer, options)?,
            })
        })
        .collect::<Result<Vec<_>, DeployError>>()?;
    Ok(CompiledWithConstants {
        kernel,
        packers,
        not_laid_out,
    })
}

/// `inputs` (one per input of the DAG, in argument order) with those that
/// `packers` lay out packed.
pub fn pack_inputs(
    packers: &[impl AsRef<Packer>],
    names: &[String],
    inputs: &[HostTensor],
) -> Result<Vec<HostTensor>, DeployError> {
    if inputs.len() != names.len() {
        return Err(DeployError::BadInputs(format!(
            "{} tensors given, the DAG has {} inputs ({})",
            inputs.len(),
            names.len(),
            names.join(", ")
        )));
    }
    inputs
        .iter()
        .zip(names)
        .map(
            |(tensor, name)| match packers.iter().find(|p| p.as_ref().input() == name) {
                Some(packer) => packer.as_ref().pack(tensor),
                None => Ok(tensor.clone()),
            },
        )
        .collect()
}

impl AsRef<Packer> for Packer {
    fn as_ref(&self) -> &Packer {
        self
    }
}
