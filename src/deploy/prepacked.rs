//! Loading a kernel whose constant inputs are laid out ahead of time:
//! `library.kernel_with_constants(&dag, &["weight"])?` compiles the tuned
//! schedule without the packing copies of those inputs; the caller packs
//! its weights once with [`PrepackedKernel::pack_constants`] and then runs
//! the kernel as often as it likes.

use std::rc::Rc;

use crate::codegen::{self, Kernel};
use crate::schedule::State;
use crate::te::{ComputeDag, HostTensor};

use super::error::DeployError;
use super::layout_rewrite::{LayoutRewrite, check_inputs, plan_constants, rewrite_layouts};
use super::library::{KernelSource, Library, Resolution};
use super::permute::pack_input;

/// A compiled kernel that takes some inputs already packed.
#[derive(Clone)]
pub struct PrepackedKernel {
    /// The kernel: it takes each input of [`rewrites`](Self::rewrites) in
    /// that rewrite's layout, the other inputs as the DAG has them.
    pub kernel: Rc<Kernel>,
    /// Tuned, or fallback with the reason.
    pub source: KernelSource,
    /// The inputs laid out ahead of time (empty: the plain kernel).
    pub rewrites: Vec<LayoutRewrite>,
    /// The constants asked for that are not laid out ahead of time, each
    /// with the reason (the schedule reads it directly, the default
    /// schedule was used, …).
    pub not_rewritten: Vec<(String, String)>,
    /// The DAG's input names, in argument order.
    inputs: Vec<String>,
}

impl PrepackedKernel {
    /// Whether any input is laid out ahead of time.
    pub fn is_rewritten(&self) -> bool {
        !self.rewrites.is_empty()
    }

    /// `inputs` (one per input of the DAG, in argument order, in the DAG's
    /// layouts) with the rewritten ones packed into their layouts: what
    /// [`kernel`](Self::kernel) takes. Do it once per set of constants.
    pub fn pack_constants(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, DeployError> {
        if inputs.len() != self.inputs.len() {
            return Err(DeployError::BadInputs(format!(
                "{} tensors given, the DAG has {} inputs ({})",
                inputs.len(),
                self.inputs.len(),
                self.inputs.join(", ")
            )));
        }
        inputs
            .iter()
            .zip(&self.inputs)
            .map(
                |(tensor, name)| match self.rewrites.iter().find(|r| &r.input == name) {
                    Some(rewrite) => pack_input(tensor, &rewrite.layout),
                    None => Ok(tensor.clone()),
                },
            )
            .collect()
    }
}

impl Library {
    /// The kernel of `dag` with the inputs named in `constants` laid out
    /// ahead of time where the tuned schedule allows it (it reads them only
    /// through one packing copy, see the artifact's `layout_rewrites`).
    /// Where it does not — the default schedule, or a schedule that reads
    /// the input directly — the constant stays as it is and
    /// [`PrepackedKernel::not_rewritten`] says why; the kernel is then the
    /// plain one when nothing is rewritten. Compiled once per workload and
    /// set of constants, never shared with the plain kernel's entry.
    ///
    /// Errors: a name that is not an input of `dag`
    /// ([`DeployError::NotAnInput`]), or a default schedule that does not
    /// compile.
    pub fn kernel_with_constants(
        &self,
        dag: &ComputeDag,
        constants: &[&str],
    ) -> Result<PrepackedKernel, DeployError> {
        check_inputs(dag, constants)?;
        let mut names: Vec<&str> = constants.to_vec();
        names.sort_unstable();
        names.dedup();
        let key = dag.workload_key();
        let cache_key = format!("{}|{}", key.hash, names.join(","));
        if let Some(cached) = self.prepacked.borrow().get(&cache_key) {
            return Ok(cached.clone());
        }
        let inputs: Vec<String> = dag.inputs().iter().map(|t| t.name().to_string()).collect();
        let plain = |not_rewritten: Vec<(String, String)>| -> Result<PrepackedKernel, DeployError> {
            let loaded = self.kernel(dag)?;
            Ok(PrepackedKernel {
                kernel: loaded.kernel,
                source: loaded.source,
                rewrites: Vec::new(),
                not_rewritten,
                inputs: inputs.clone(),
            })
        };
        let all = |reason: &str| -> Vec<(String, String)> {
            names
                .iter()
                .map(|n| (n.to_string(), reason.to_string()))
                .collect()
        };
        let loaded = match self.resolve_keyed(dag, &key) {
            Resolution::Fallback(_) => plain(all("the default schedule is used (see the source)"))?,
            Resolution::Tuned {
                artifact,
                path,
                state,
            } => {
                let steps = state.steps().to_vec();
                let planned = plan_constants(dag, &steps, &names)?;
                let usable: Vec<&str> = planned
                    .iter()
                    .filter(|(_, v)| v.is_ok())
                    .map(|(n, _)| n.as_str())
                    .collect();
                let mut not_rewritten: Vec<(String, String)> = planned
                    .iter()
                    .filter_map(|(n, v)| v.as_ref().err().map(|e| (n.clone(), e.clone())))
                    .collect();
                let compiled = if usable.is_empty() {
                    None
                } else {
                    Some(self.compile_rewritten(dag, &steps, &usable))
                };
                match compiled {
                    None => plain(not_rewritten)?,
                    Some(Ok((kernel, rewrites))) => PrepackedKernel {
                        kernel: Rc::new(kernel),
                        source: KernelSource::Tuned { artifact, path },
                        rewrites,
                        not_rewritten,
                        inputs: inputs.clone(),
                    },
                    Some(Err(e)) => {
                        let reason = format!("the rewritten schedule failed: {e}");
                        not_rewritten
                            .extend(usable.iter().map(|n| (n.to_string(), reason.clone())));
                        plain(not_rewritten)?
                    }
                }
            }
        };
        self.prepacked
            .borrow_mut()
            .insert(cache_key, loaded.clone());
        Ok(loaded)
    }

    fn compile_rewritten(
        &self,
        dag: &ComputeDag,
        steps: &[crate::schedule::Step],
        constants: &[&str],
    ) -> Result<(Kernel, Vec<LayoutRewrite>), DeployError> {
        let (new_dag, new_steps, rewrites) = rewrite_layouts(dag, steps, constants)?;
        let state = State::replay(&new_dag, &new_steps)?;
        let func = crate::tir::lower(&state)?;
        let kernel = codegen::compile(&func, &self.options)?;
        Ok((kernel, rewrites))
    }
}
