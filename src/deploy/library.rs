//! Loading tuned kernels: `Library::open("schedules")?.kernel(&dag)?` picks
//! the artifact of this device and this exact workload, checks it by
//! replay, compiles it once and says plainly when it had to fall back to
//! the default schedule, and why.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::codegen::{self, CodegenOptions, Kernel};
use crate::runtime::micro_kernels::Isa;
use crate::runtime::{DeviceDescription, DeviceKey, Target, host_device};
use crate::schedule::State;
use crate::te::{ComputeDag, WorkloadKey};

use super::artifact::{Artifact, INDEX_FILE, Index, device_dir};
use super::error::DeployError;
use super::rename::translate_steps;

/// Why a kernel is the default schedule rather than a tuned one.
#[derive(Clone, Debug, PartialEq)]
pub enum FallbackReason {
    /// The library has no folder for this device.
    NoArtifactsForDevice {
        /// This device.
        device: String,
        /// The device folders the library does have.
        available: Vec<String>,
    },
    /// This device has no artifact for this workload.
    NoArtifact {
        /// The workload asked for.
        workload: String,
        /// Workloads of the same operator that are tuned (other shapes).
        other_shapes: Vec<String>,
    },
    /// An artifact for this operator and shape exists but was tuned for a
    /// different definition of it, or no longer replays on it.
    Stale {
        /// The artifact file.
        path: PathBuf,
        /// What differs.
        reason: String,
    },
    /// The artifact's schedule calls a micro-kernel this CPU cannot run
    /// (or the target's cap, e.g. `TESSERA_ISA`, forbids): its vector ISA
    /// is missing.
    MissingIsa {
        /// The artifact file.
        path: PathBuf,
        /// The micro-kernel.
        kernel: String,
        /// The ISA it needs.
        needs: String,
        /// The widest ISA this CPU runs (under the cap).
        host: String,
    },
    /// The artifact's schedule runs transcendental functions through row
    /// primitives (a `row_math` step) of an ISA this CPU lacks or the
    /// target's cap forbids.
    MissingRowMathIsa {
        /// The artifact file.
        path: PathBuf,
        /// The ISA the row primitives need.
        needs: String,
        /// The widest ISA this CPU runs (under the cap).
        host: String,
        /// What capped it, e.g. `TESSERA_ISA=sse`, or `none`.
        cap: String,
    },
    /// The artifact's schedule packs panels with a packing routine (a
    /// `pack` step) of an ISA this CPU lacks or the target's cap forbids.
    MissingPackIsa {
        /// The artifact file.
        path: PathBuf,
        /// The ISA the packing routine needs.
        needs: String,
        /// The widest ISA this CPU runs (under the cap).
        host: String,
        /// What capped it, e.g. `TESSERA_ISA=sse`, or `none`.
        cap: String,
    },
    /// The artifact or index file cannot be read as one.
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

impl fmt::Display for FallbackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FallbackReason::NoArtifactsForDevice { device, available } => {
                write!(f, "no tuned schedules for this device ({device})")?;
                if available.is_empty() {
                    write!(f, "; the library is empty")
                } else {
                    write!(f, "; the library has: {}", available.join(", "))
                }?;
                write!(f, " — tune on this machine, then `tessera deploy`")
            }
            FallbackReason::NoArtifact {
                workload,
                other_shapes,
            } => {
                write!(f, "no tuned schedule for {workload} on this device")?;
                if !other_shapes.is_empty() {
                    write!(f, " (tuned shapes: {})", other_shapes.join(", "))?;
                }
                write!(
                    f,
                    " — run `tessera tune` for this shape, then `tessera deploy`"
                )
            }
            FallbackReason::Stale { path, reason } => write!(
                f,
                "stale artifact {}: {reason} — tune again and redeploy",
                path.display()
            ),
            FallbackReason::MissingIsa {
                path,
                kernel,
                needs,
                host,
            } => write!(
                f,
                "artifact {} calls micro-kernel {kernel}, which needs {needs}; this CPU runs up to {host} — tune on this machine for a tuned kernel",
                path.display()
            ),
            FallbackReason::MissingRowMathIsa {
                path,
                needs,
                host,
                cap,
            } => write!(
                f,
                "artifact {} runs transcendental functions through {needs} row primitives; this target runs up to {host} (cap: {cap}) — tune on this machine for a tuned kernel",
                path.display()
            ),
            FallbackReason::MissingPackIsa {
                path,
                needs,
                host,
                cap,
            } => write!(
                f,
                "artifact {} packs panels with the {needs} packing routine; this target runs up to {host} (cap: {cap}) — tune on this machine for a tuned kernel",
                path.display()
            ),
            FallbackReason::Corrupt { path, reason } => write!(
                f,
                "unreadable artifact {}: {reason} — redeploy it with `tessera deploy`",
                path.display()
            ),
        }
    }
}

/// Where a loaded kernel's schedule came from.
#[derive(Clone, Debug, PartialEq)]
pub enum KernelSource {
    /// The tuned artifact.
    Tuned {
        /// The artifact.
        artifact: Box<Artifact>,
        /// Its file.
        path: PathBuf,
    },
    /// The default schedule, and why.
    Fallback(FallbackReason),
}

impl KernelSource {
    /// `tuned` or `fallback`.
    pub fn label(&self) -> &'static str {
        match self {
            KernelSource::Tuned { .. } => "tuned",
            KernelSource::Fallback(_) => "fallback",
        }
    }
}

impl fmt::Display for KernelSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelSource::Tuned { artifact, path } => write!(
                f,
                "tuned: {} ({:.2} GFLOP/s when measured, {} trials)",
                path.display(),
                artifact.gflops,
                artifact.trials
            ),
            KernelSource::Fallback(reason) => {
                write!(f, "fallback to the default schedule: {reason}")
            }
        }
    }
}

/// A compiled kernel and where its schedule came from.
pub struct LoadedKernel {
    /// The kernel (shared with the library's cache).
    pub kernel: Rc<Kernel>,
    /// Tuned, or fallback with the reason.
    pub source: KernelSource,
}

impl LoadedKernel {
    /// Whether the kernel runs the tuned schedule.
    pub fn is_tuned(&self) -> bool {
        matches!(self.source, KernelSource::Tuned { .. })
    }
}

/// The schedule a DAG resolves to, before compiling.
pub enum Resolution {
    /// The tuned schedule, replayed.
    Tuned {
        /// The artifact.
        artifact: Box<Artifact>,
        /// Its file.
        path: PathBuf,
        /// The replayed state.
        state: Box<State>,
    },
    /// The default schedule, and why.
    Fallback(FallbackReason),
}

enum Folder {
    Ready { dir: PathBuf, index: Index },
    Missing { available: Vec<String> },
    BadIndex { path: PathBuf, reason: String },
}

/// Compiled kernels and their sources by workload key hash (a library's
/// answer for a workload does not change while it is open).
type KernelCache = RefCell<HashMap<String, (Rc<Kernel>, KernelSource)>>;

/// The tuned schedules of one device, loaded from a schedules folder.
pub struct Library {
    device: DeviceKey,
    folder: Folder,
    pub(super) options: CodegenOptions,
    kernels: KernelCache,
    /// Kernels with constants laid out ahead of time, by workload key hash
    /// and constant names (another ABI than the plain kernel's).
    pub(super) prepacked: RefCell<HashMap<String, super::PrepackedKernel>>,
}

impl Library {
    /// The library of this machine in `root` (e.g. `schedules/`), compiling
    /// for this machine as `TESSERA_ISA` caps it ([`Target::from_env`]).
    pub fn open(root: impl AsRef<Path>) -> Result<Library, DeployError> {
        Library::open_with_target(root, Target::from_env())
    }

    /// The library of this machine in `root`, compiling for `target`:
    /// artifacts that call micro-kernels it does not allow fall back.
    pub fn open_with_target(
        root: impl AsRef<Path>,
        target: Target,
    ) -> Result<Library, DeployError> {
        let mut library = Library::open_for(root, host_device())?;
        library.options.target = target;
        Ok(library)
    }

    /// The library of `device` in `root`, compiling for this machine as
    /// `TESSERA_ISA` caps it.
    pub fn open_for(
        root: impl AsRef<Path>,
        device: &DeviceDescription,
    ) -> Result<Library, DeployError> {
        let root = root.as_ref();
        if !root.is_dir() {
            return Err(DeployError::NoLibrary(root.to_path_buf()));
        }
        let key = device.key();
        let dir = device_dir(root, &key);
        let index_path = dir.join(INDEX_FILE);
        let folder = if !index_path.is_file() {
            let mut available: Vec<String> = std::fs::read_dir(root)
                .map_err(DeployError::io(root))?
                .filter_map(|e| e.ok())
                .filter(|e| e.path().join(INDEX_FILE).is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            available.sort();
            Folder::Missing { available }
        } else {
            match Index::read(&index_path) {
                Ok(index) if index.device_key == key.hash => Folder::Ready { dir, index },
                Ok(index) => Folder::BadIndex {
                    path: index_path,
                    reason: format!(
                        "it lists device {} but sits in this device's folder",
                        index.device
                    ),
                },
                Err(e) => Folder::BadIndex {
                    path: index_path,
                    reason: e.to_string(),
                },
            }
        };
        Ok(Library {
            device: key,
            folder,
            options: CodegenOptions::default(),
            kernels: RefCell::new(HashMap::new()),
            prepacked: RefCell::new(HashMap::new()),
        })
    }

    /// The device this library serves.
    pub fn device(&self) -> &DeviceKey {
        &self.device
    }

    /// The target its kernels are compiled for.
    pub fn target(&self) -> &Target {
        &self.options.target
    }

    /// Which schedule `dag` gets, without compiling it.
    pub fn resolve(&self, dag: &ComputeDag) -> Resolution {
        self.resolve_keyed(dag, &dag.workload_key())
    }

    pub(super) fn resolve_keyed(&self, dag: &ComputeDag, key: &WorkloadKey) -> Resolution {
        let (dir, index) = match &self.folder {
            Folder::Ready { dir, index } => (dir, index),
            Folder::Missing { available } => {
                return Resolution::Fallback(FallbackReason::NoArtifactsForDevice {
                    device: self.device.to_string(),
                    available: available.clone(),
                });
            }
            Folder::BadIndex { path, reason } => {
                return Resolution::Fallback(FallbackReason::Corrupt {
                    path: path.clone(),
                    reason: reason.clone(),
                });
            }
        };
        let Some(entry) = index.entry(&key.hash) else {
            if let Some(same) = index.artifacts.iter().find(|e| e.readable == key.readable) {
                return Resolution::Fallback(FallbackReason::Stale {
                    path: dir.join(&same.file),
                    reason: format!(
                        "tuned for another definition of {} (workload key {} there, {} now)",
                        key.readable,
                        same.workload_key.get(..12).unwrap_or(&same.workload_key),
                        key.short_hash()
                    ),
                });
            }
            let op = op_of(&key.readable);
            return Resolution::Fallback(FallbackReason::NoArtifact {
                workload: key.readable.clone(),
                other_shapes: index
                    .artifacts
                    .iter()
                    .filter(|e| op_of(&e.readable) == op)
                    .map(|e| e.readable.clone())
                    .collect(),
            });
        };
        let path = dir.join(&entry.file);
        let corrupt = |reason: String| {
            Resolution::Fallback(FallbackReason::Corrupt {
                path: path.clone(),
                reason,
            })
        };
        let artifact = match Artifact::read(&path) {
            Ok(a) => a,
            Err(DeployError::BadFile { reason, .. }) => return corrupt(reason),
            Err(e) => return corrupt(e.to_string()),
        };
        if artifact.workload.key != key.hash || artifact.device.key != self.device.hash {
            return corrupt(format!(
                "it is the artifact of {} on {}, not of its index entry",
                artifact.workload.readable, artifact.device.readable
            ));
        }
        // Never compile a call of a kernel this CPU cannot execute.
        for name in super::artifact::micro_kernels_of(&artifact.steps) {
            match crate::runtime::intrinsic_isa(&name) {
                Some(isa) if isa <= self.options.target.isa() => {}
                Some(isa) => {
                    return Resolution::Fallback(FallbackReason::MissingIsa {
                        path,
                        kernel: name,
                        needs: isa.name().to_string(),
                        host: self.options.target.isa().name().to_string(),
                    });
                }
                None => {
                    return Resolution::Fallback(FallbackReason::Stale {
                        path,
                        reason: format!(
                            "it calls micro-kernel '{name}', which this tessera does not have"
                        ),
                    });
                }
            }
        }
        // Never call a row primitive or packing routine of an ISA the
        // target does not allow.
        type Missing = fn(PathBuf, String, String, String) -> FallbackReason;
        type IsaOf = fn(&str) -> Result<Isa, String>;
        let routines: [(Vec<String>, IsaOf, Missing); 2] = [
            (
                crate::schedule::row_math_isas_of(&artifact.steps),
                crate::schedule::row_math_isa,
                |path, needs, host, cap| FallbackReason::MissingRowMathIsa {
                    path,
                    needs,
                    host,
                    cap,
                },
            ),
            (
                crate::schedule::pack_isas_of(&artifact.steps),
                crate::schedule::pack_isa,
                |path, needs, host, cap| FallbackReason::MissingPackIsa {
                    path,
                    needs,
                    host,
                    cap,
                },
            ),
        ];
        let target = &self.options.target;
        for (names, isa_of, missing) in routines {
            for name in names {
                match isa_of(&name) {
                    Ok(isa) if isa <= target.isa() => {}
                    Ok(isa) => {
                        return Resolution::Fallback(missing(
                            path,
                            isa.name().to_string(),
                            target.isa().name().to_string(),
                            target.cap_description(),
                        ));
                    }
                    Err(reason) => {
                        return Resolution::Fallback(FallbackReason::Stale { path, reason });
                    }
                }
            }
        }
        // A DAG of the same workload may name its tensors and axes its own
        // way: the steps are recorded with the registry operator's names.
        let replayed = State::replay(dag, &artifact.steps).or_else(|e| {
            artifact
                .workload
                .op
                .as_deref()
                .zip(artifact.workload.shape.as_deref())
                .and_then(|(op, shape)| crate::measure::Task::from_registry(op, shape).ok())
                .and_then(|task| translate_steps(task.dag(), dag, &artifact.steps))
                .map_or(Err(e), |steps| State::replay(dag, &steps))
        });
        match replayed {
            Ok(state) => Resolution::Tuned {
                artifact: Box::new(artifact),
                path,
                state: Box::new(state),
            },
            Err(e) => Resolution::Fallback(FallbackReason::Stale {
                path,
                reason: format!("its schedule no longer applies: {e}"),
            }),
        }
    }

    /// The kernel of `dag`: the tuned schedule when this device has a valid
    /// artifact for exactly this workload, else the default schedule with
    /// the reason. Each is compiled once and then shared.
    pub fn kernel(&self, dag: &ComputeDag) -> Result<LoadedKernel, DeployError> {
        let key = dag.workload_key();
        if let Some((kernel, source)) = self.kernels.borrow().get(&key.hash) {
            return Ok(LoadedKernel {
                kernel: kernel.clone(),
                source: source.clone(),
            });
        }
        let (state, source) = match self.resolve_keyed(dag, &key) {
            Resolution::Tuned {
                artifact,
                path,
                state,
            } => (*state, KernelSource::Tuned { artifact, path }),
            Resolution::Fallback(reason) => (State::new(dag), KernelSource::Fallback(reason)),
        };
        let compiled = crate::tir::lower(&state)
            .map_err(DeployError::from)
            .and_then(|f| codegen::compile(&f, &self.options).map_err(DeployError::from));
        let (kernel, source) = match (compiled, source) {
            (Ok(kernel), source) => (Rc::new(kernel), source),
            // A tuned schedule that no longer compiles is stale, not fatal.
            (Err(e), KernelSource::Tuned { path, .. }) => {
                let func = crate::tir::lower(&State::new(dag))?;
                let kernel = Rc::new(codegen::compile(&func, &self.options)?);
                let source = KernelSource::Fallback(FallbackReason::Stale {
                    path,
                    reason: e.to_string(),
                });
                (kernel, source)
            }
            (Err(e), KernelSource::Fallback(_)) => return Err(e),
        };
        self.kernels
            .borrow_mut()
            .insert(key.hash, (kernel.clone(), source.clone()));
        Ok(LoadedKernel { kernel, source })
    }

    /// How many kernels have been compiled so far (plain and prepacked).
    pub fn compiled(&self) -> usize {
        let prepacked = self.prepacked.borrow();
        let rewritten = prepacked.values().filter(|k| k.is_rewritten()).count();
        self.kernels.borrow().len() + rewritten
    }
}

/// The operator part of a readable workload name (`matmul` of `matmul[…]`).
fn op_of(readable: &str) -> &str {
    readable.split('[').next().unwrap_or(readable)
}
