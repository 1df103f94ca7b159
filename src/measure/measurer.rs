//! The measurer: a pool of worker processes that builds a batch of
//! candidates in parallel, then runs, verifies and times each one. A
//! candidate that crashes or hangs its worker is recorded with that error
//! kind, the worker is replaced, and the batch goes on.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, Mutex, PoisonError};
use std::time::Duration;

use crate::runtime::Target;
use crate::schedule::{State, Step};

use super::error::MeasureError;
use super::options::MeasureOptions;
use super::process::{Failure, WorkerProcess};
use super::protocol::{Fault, Request, Response};
use super::result::{MeasureErrorKind, MeasureResult};
use super::task::Task;
use super::verify::{INTERPRETER_FLOP_LIMIT, Reference, Verdict};

/// How long a new worker has to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);

/// Measures candidates in worker processes (see the module docs).
pub struct Measurer {
    options: MeasureOptions,
    program: PathBuf,
    workers: Vec<Option<WorkerProcess>>,
    references: HashMap<String, Arc<Reference>>,
    spawned: Vec<u32>,
    next_id: u64,
    warned_debug: bool,
}

/// A candidate of a batch, with its test hook.
struct Candidate {
    id: u64,
    steps: Vec<Step>,
    fault: Option<Fault>,
}

/// What the driver threads of one batch share.
struct Batch<'a> {
    task: &'a Task,
    candidates: &'a [Candidate],
    options: &'a MeasureOptions,
    program: &'a Path,
    reference: &'a Reference,
    queue: Mutex<VecDeque<usize>>,
    results: Mutex<Vec<Option<MeasureResult>>>,
    run_lock: Mutex<()>,
    barrier: Barrier,
    spawned: Mutex<Vec<u32>>,
    progress: &'a (dyn Fn(&MeasureResult) + Sync),
}

impl Measurer {
    /// Starts `options.workers` worker processes.
    pub fn new(options: MeasureOptions) -> Result<Measurer, MeasureError> {
        if options.workers == 0 {
            return Err(MeasureError::Options("workers must be at least 1".into()));
        }
        if options.kernel_threads == 0 {
            return Err(MeasureError::Options(
                "kernel threads must be at least 1".into(),
            ));
        }
        let program = options
            .resolved_worker_program()
            .map_err(|e| MeasureError::WorkerStart {
                program: PathBuf::from("<current executable>"),
                reason: e.to_string(),
            })?;
        let mut measurer = Measurer {
            workers: Vec::new(),
            program,
            references: HashMap::new(),
            spawned: Vec::new(),
            next_id: 0,
            warned_debug: false,
            options,
        };
        measurer.start_workers(measurer.options.workers)?;
        Ok(measurer)
    }

    fn start_workers(&mut self, count: usize) -> Result<(), MeasureError> {
        for _ in 0..count {
            let worker = WorkerProcess::spawn(&self.program, HELLO_TIMEOUT).map_err(|reason| {
                MeasureError::WorkerStart {
                    program: self.program.clone(),
                    reason,
                }
            })?;
            self.spawned.push(worker.pid());
            self.warn_if_debug(&worker);
            self.workers.push(Some(worker));
        }
        Ok(())
    }

    /// The options.
    pub fn options(&self) -> &MeasureOptions {
        &self.options
    }

    /// The target candidates are compiled for (`options().codegen.target`).
    pub fn target(&self) -> &Target {
        &self.options.codegen.target
    }

    /// Process ids of every worker this measurer has started, replaced ones included.
    pub fn spawned_pids(&self) -> &[u32] {
        &self.spawned
    }

    /// Replaces every worker by a newly started process (the old ones are
    /// shut down first), so that what follows is measured in fresh
    /// processes: no JIT memory, heap or caches left by earlier candidates.
    pub fn restart_workers(&mut self) -> Result<(), MeasureError> {
        let count = self.workers.len();
        self.workers.clear();
        self.start_workers(count)
    }

    /// Process ids of the workers running now.
    pub fn worker_pids(&self) -> Vec<u32> {
        self.workers
            .iter()
            .flatten()
            .map(WorkerProcess::pid)
            .collect()
    }

    fn warn_if_debug(&mut self, worker: &WorkerProcess) {
        if worker.debug_build && !self.warned_debug {
            self.warned_debug = true;
            eprintln!(
                "warning: the measurement workers are a debug build of tessera; timings are not representative (build with --release)"
            );
        }
    }

    /// Measures `states` (candidates for `task`); one result per state, in order.
    pub fn measure(
        &mut self,
        task: &Task,
        states: &[State],
    ) -> Result<Vec<MeasureResult>, MeasureError> {
        self.measure_with_progress(task, states, &|_| {})
    }

    /// As [`measure`](Self::measure), calling `progress` as each result is final.
    pub fn measure_with_progress(
        &mut self,
        task: &Task,
        states: &[State],
        progress: &(dyn Fn(&MeasureResult) + Sync),
    ) -> Result<Vec<MeasureResult>, MeasureError> {
        let candidates: Vec<(Vec<Step>, Option<Fault>)> =
            states.iter().map(|s| (s.steps().to_vec(), None)).collect();
        self.measure_steps(task, &candidates, progress)
    }

    /// Measures step lists, each with an optional injected fault (the test
    /// hooks of [`Fault`]).
    #[doc(hidden)]
    pub fn measure_steps(
        &mut self,
        task: &Task,
        candidates: &[(Vec<Step>, Option<Fault>)],
        progress: &(dyn Fn(&MeasureResult) + Sync),
    ) -> Result<Vec<MeasureResult>, MeasureError> {
        let reference = self.reference(task)?;
        let candidates: Vec<Candidate> = candidates
            .iter()
            .map(|(steps, fault)| {
                self.next_id += 1;
                Candidate {
                    id: self.next_id,
                    steps: steps.clone(),
                    fault: *fault,
                }
            })
            .collect();
        let batch = Batch {
            task,
            candidates: &candidates,
            options: &self.options,
            program: &self.program,
            reference: &reference,
            queue: Mutex::new((0..candidates.len()).collect()),
            results: Mutex::new(vec![None; candidates.len()]),
            run_lock: Mutex::new(()),
            barrier: Barrier::new(self.workers.len()),
            spawned: Mutex::new(Vec::new()),
            progress,
        };
        std::thread::scope(|scope| {
            for slot in self.workers.iter_mut() {
                let batch = &batch;
                scope.spawn(move || drive(slot, batch));
            }
        });
        self.spawned.extend(lock(&batch.spawned).iter());
        let results = batch
            .results
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    MeasureResult::error(
                        MeasureErrorKind::UnknownError,
                        "the candidate was not measured",
                        0.0,
                    )
                })
            })
            .collect())
    }

    /// The trusted result for `task`, made once and kept.
    fn reference(&mut self, task: &Task) -> Result<Arc<Reference>, MeasureError> {
        if let Some(r) = self.references.get(&task.key().hash) {
            return Ok(r.clone());
        }
        let reference = if task.dag().flop_count() <= INTERPRETER_FLOP_LIMIT {
            Reference::from_interpreter(task)?
        } else {
            self.reference_from_default_schedule(task)?
        };
        let reference = Arc::new(reference);
        self.references
            .insert(task.key().hash.clone(), reference.clone());
        Ok(reference)
    }

    fn reference_from_default_schedule(&mut self, task: &Task) -> Result<Reference, MeasureError> {
        let failed = |reason: String| MeasureError::Reference {
            task: task.key().readable.clone(),
            reason,
        };
        self.next_id += 1;
        let id = self.next_id;
        let timeout = self.options.reference_timeout;
        let mut spawned = Vec::new();
        let slot = &mut self.workers[0];
        let worker = ensure_worker(slot, task, &self.options, &self.program, &mut spawned)
            .map_err(failed)?;
        let build = Request::Build {
            id,
            steps: Vec::new(),
            fault: None,
        };
        let run = Request::Run {
            id,
            timing: None,
            fault: None,
        };
        let answer = worker
            .request(&build, timeout)
            .and_then(|_| worker.request(&run, timeout));
        self.spawned.extend(spawned);
        match answer {
            Ok((Response::Ran { .. }, payload)) => Reference::from_checked_kernel(task, &payload),
            Ok((other, _)) => Err(failed(format!(
                "the default schedule did not run: {other:?}"
            ))),
            Err(Failure::Timeout) => {
                self.workers[0] = None;
                Err(failed(format!(
                    "the default schedule took longer than {timeout:?}"
                )))
            }
            Err(Failure::Died(msg)) => {
                self.workers[0] = None;
                Err(failed(msg))
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The worker of `slot`, started and set up for `task` if need be.
fn ensure_worker<'s>(
    slot: &'s mut Option<WorkerProcess>,
    task: &Task,
    options: &MeasureOptions,
    program: &Path,
    spawned: &mut Vec<u32>,
) -> Result<&'s mut WorkerProcess, String> {
    if slot.is_none() {
        let worker = WorkerProcess::spawn(program, HELLO_TIMEOUT)
            .map_err(|e| format!("could not start a replacement worker: {e}"))?;
        spawned.push(worker.pid());
        *slot = Some(worker);
    }
    let setup = Request::Setup {
        source: task.source().clone(),
        key_hash: task.key().hash.clone(),
        threads: options.kernel_threads,
        codegen: options.codegen,
        constants: task.constants().to_vec(),
    };
    let outcome = match slot.as_mut() {
        None => Err(("no worker".to_string(), false)),
        Some(worker) if worker.task.as_deref() == Some(task.setup_identity().as_str()) => Ok(()),
        Some(worker) => match worker.request(&setup, options.build_timeout) {
            Ok((Response::Ready, _)) => {
                worker.task = Some(task.setup_identity());
                worker.held.clear();
                Ok(())
            }
            Ok((Response::SetupFailed { msg }, _)) => {
                Err((format!("the worker refused the task: {msg}"), false))
            }
            Ok((other, _)) => Err((format!("the worker answered {other:?} to a setup"), true)),
            Err(Failure::Timeout) => {
                Err(("the worker did not set up the task in time".into(), true))
            }
            Err(Failure::Died(msg)) => Err((msg, true)),
        },
    };
    match outcome {
        Ok(()) => slot.as_mut().ok_or_else(|| "no worker".to_string()),
        Err((msg, dead)) => {
            if dead {
                *slot = None;
            }
            Err(msg)
        }
    }
}

impl Batch<'_> {
    fn record(&self, index: usize, result: MeasureResult) {
        (self.progress)(&result);
        lock(&self.results)[index] = Some(result);
    }

    fn ensure<'s>(
        &self,
        slot: &'s mut Option<WorkerProcess>,
    ) -> Result<&'s mut WorkerProcess, String> {
        let mut spawned = Vec::new();
        let worker = ensure_worker(slot, self.task, self.options, self.program, &mut spawned);
        lock(&self.spawned).extend(spawned);
        worker
    }

    /// Builds candidate `index` on the worker of `slot`; the build seconds,
    /// or the final result of a candidate that did not build.
    fn build(&self, slot: &mut Option<WorkerProcess>, index: usize) -> Result<f64, MeasureResult> {
        let candidate = &self.candidates[index];
        let worker = self
            .ensure(slot)
            .map_err(|msg| MeasureResult::error(MeasureErrorKind::UnknownError, msg, 0.0))?;
        let request = Request::Build {
            id: candidate.id,
            steps: candidate.steps.clone(),
            fault: candidate.fault,
        };
        let timeout = self.options.build_timeout;
        match worker.request(&request, timeout) {
            Ok((Response::Built { build_secs, .. }, _)) => {
                worker.held.push(candidate.id);
                Ok(build_secs)
            }
            Ok((
                Response::BuildFailed {
                    kind,
                    msg,
                    build_secs,
                    ..
                },
                _,
            )) => Err(MeasureResult::error(kind, msg, build_secs)),
            Ok((other, _)) => {
                *slot = None;
                Err(MeasureResult::error(
                    MeasureErrorKind::UnknownError,
                    format!("the worker answered {other:?} to a build"),
                    0.0,
                ))
            }
            Err(Failure::Timeout) => {
                *slot = None;
                Err(MeasureResult::error(
                    MeasureErrorKind::BuildTimeout,
                    format!("building took longer than {timeout:?}; the worker was killed"),
                    timeout.as_secs_f64(),
                ))
            }
            Err(Failure::Died(msg)) => {
                *slot = None;
                Err(MeasureResult::error(
                    MeasureErrorKind::CompileError,
                    format!("the build crashed: {msg}"),
                    0.0,
                ))
            }
        }
    }

    /// Runs, verifies and times a built candidate (rebuilding it first if
    /// its worker was replaced since).
    fn run(
        &self,
        slot: &mut Option<WorkerProcess>,
        index: usize,
        build_secs: f64,
    ) -> MeasureResult {
        let candidate = &self.candidates[index];
        let held = slot
            .as_ref()
            .is_some_and(|w| w.held.contains(&candidate.id));
        if !held && let Err(mut failed) = self.build(slot, index) {
            failed.build_secs = build_secs;
            return failed;
        }
        let Some(worker) = slot.as_mut() else {
            return MeasureResult::error(MeasureErrorKind::UnknownError, "no worker", build_secs);
        };
        let request = Request::Run {
            id: candidate.id,
            timing: Some(self.options.timing),
            fault: candidate.fault,
        };
        let timeout = self.options.run_timeout;
        let answer = worker.request(&request, timeout);
        let error = |kind, msg: String| MeasureResult::error(kind, msg, build_secs);
        match answer {
            Ok((
                Response::Ran {
                    costs, run_secs, ..
                },
                payload,
            )) => {
                let mut result = error(MeasureErrorKind::None, String::new());
                result.run_secs = run_secs;
                match self.reference.check(self.task, &payload) {
                    Verdict::Match(err) => {
                        result.costs = costs;
                        result.max_rel_error = Some(err);
                    }
                    Verdict::Mismatch(err, msg) => {
                        result.error_kind = MeasureErrorKind::WrongResult;
                        result.error_msg = msg;
                        result.max_rel_error = Some(err);
                    }
                }
                result
            }
            Ok((Response::RunFailed { msg, .. }, _)) => error(MeasureErrorKind::RuntimeError, msg),
            Ok((other, _)) => {
                *slot = None;
                error(
                    MeasureErrorKind::UnknownError,
                    format!("the worker answered {other:?} to a run"),
                )
            }
            Err(Failure::Timeout) => {
                *slot = None;
                let mut r = error(
                    MeasureErrorKind::RunTimeout,
                    format!("running took longer than {timeout:?}; the worker was killed"),
                );
                r.run_secs = timeout.as_secs_f64();
                r
            }
            Err(Failure::Died(msg)) => {
                *slot = None;
                error(
                    MeasureErrorKind::RuntimeError,
                    format!("the kernel crashed: {msg}"),
                )
            }
        }
    }
}

/// One worker's share of a batch: build from the shared queue, wait for
/// every worker to finish building, then run what it built.
fn drive(slot: &mut Option<WorkerProcess>, batch: &Batch) {
    let mut built = Vec::new();
    loop {
        let next = lock(&batch.queue).pop_front();
        let Some(index) = next else { break };
        match batch.build(slot, index) {
            Ok(build_secs) => built.push((index, build_secs)),
            Err(result) => batch.record(index, result),
        }
    }
    batch.barrier.wait();
    for (index, build_secs) in built {
        let result = if batch.options.concurrent_runs {
            batch.run(slot, index, build_secs)
        } else {
            let _alone = lock(&batch.run_lock);
            batch.run(slot, index, build_secs)
        };
        batch.record(index, result);
    }
    if let Some(worker) = slot.as_mut() {
        match worker.request(&Request::Forget, batch.options.build_timeout) {
            Ok((Response::Forgotten, _)) => worker.held.clear(),
            _ => *slot = None,
        }
    }
}
