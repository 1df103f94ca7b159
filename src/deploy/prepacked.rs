//! Loading a kernel whose constant inputs are laid out ahead of time:
//! `library.kernel_with_constants(&dag, &["weight"])?` compiles the tuned
//! schedule without the packing copies of those inputs; the caller packs
//! its weights once with [`PrepackedKernel::pack_constants`] and then runs
//! the kernel as often as it likes.

use std::rc::Rc;

use crate::codegen::Kernel;
use crate::te::{ComputeDag, HostTensor};

use super::constant_inputs::{Packer, compile_with_constants, pack_inputs};
use super::error::DeployError;
use super::layout_rewrite::check_inputs;
use super::library::{KernelSource, Library, Resolution};

/// A compiled kernel that takes some inputs already packed.
#[derive(Clone)]
pub struct PrepackedKernel {
    /// The kernel: it takes each input a [`packers`](Self::packers) entry
    /// lays out packed by it, the other inputs as the DAG has them.
    pub kernel: Rc<Kernel>,
    /// Tuned, or fallback with the reason.
    pub source: KernelSource,
    /// One per input laid out ahead of time (empty: the plain kernel).
    pub packers: Vec<Rc<Packer>>,
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
        !self.packers.is_empty()
    }

    /// The inputs laid out ahead of time, in the DAG's order.
    pub fn packed_inputs(&self) -> Vec<&str> {
        self.inputs
            .iter()
            .filter(|name| self.packers.iter().any(|p| p.input() == name.as_str()))
            .map(String::as_str)
            .collect()
    }

    /// `inputs` (one per input of the DAG, in argument order, in the DAG's
    /// layouts) with the laid-out ones packed: what
    /// [`kernel`](Self::kernel) takes. Do it once per set of constants.
    pub fn pack_constants(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, DeployError> {
        pack_inputs(&self.packers, &self.inputs, inputs)
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
                packers: Vec::new(),
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
                let compiled = compile_with_constants(dag, state.steps(), &names, &self.options);
                match compiled {
                    Ok(c) if !c.packers.is_empty() => PrepackedKernel {
                        kernel: Rc::new(c.kernel),
                        source: KernelSource::Tuned { artifact, path },
                        packers: c.packers.into_iter().map(Rc::new).collect(),
                        not_rewritten: c.not_laid_out,
                        inputs: inputs.clone(),
                    },
                    Ok(c) => plain(c.not_laid_out)?,
                    Err(e) => plain(all(&format!("the schedule with constants failed: {e}")))?,
                }
            }
        };
        self.prepacked
            .borrow_mut()
            .insert(cache_key, loaded.clone());
        Ok(loaded)
    }
}
