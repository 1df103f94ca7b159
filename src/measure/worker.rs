//! The worker process: builds and runs candidates on request (see
//! [`protocol`](super::protocol)). It holds the current task's inputs and
//! the kernels built for the current batch; everything it does with a
//! candidate may crash or hang it, and the parent replaces it when it does.

use std::collections::HashMap;
use std::io::{self, BufReader, BufWriter};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use crate::codegen::{CodegenOptions, Kernel};
use crate::runtime::{self, NdBuffer};
use crate::te::{DType, HostTensor};

use super::builder::{BuiltCandidate, build_with_constants};
use super::flush::flush_buffers;
use super::protocol::{Fault, Request, Response, read_frame, write_frame};
use super::result::MeasureErrorKind;
use super::task::{Task, TaskSource};
use super::timing::{CacheFlush, TimingOptions, time_runs};

/// Serves requests on stdin/stdout until stdin closes; returns the exit code.
/// This is what `tessera measure-worker` runs; a binary of your own that
/// embeds tessera can offer the same entry point.
pub fn worker_main() -> i32 {
    let mut input = BufReader::new(io::stdin().lock());
    let mut output = BufWriter::new(io::stdout().lock());
    let hello = Response::Hello {
        version: env!("CARGO_PKG_VERSION").to_string(),
        debug_build: cfg!(debug_assertions),
    };
    if write_frame(&mut output, &hello, &[]).is_err() {
        return 1;
    }
    let mut worker = Worker::default();
    loop {
        let (request, _) = match read_frame::<Request>(&mut input) {
            Ok(Some(frame)) => frame,
            Ok(None) => return 0,
            Err(e) => {
                eprintln!("tessera measure-worker: {e}");
                return 1;
            }
        };
        let (response, payload) = worker.handle(request);
        if write_frame(&mut output, &response, &payload).is_err() {
            return 1;
        }
    }
}

#[derive(Default)]
struct Worker {
    task: Option<Task>,
    inputs: Vec<HostTensor>,
    codegen: CodegenOptions,
    kernels: HashMap<u64, BuiltCandidate>,
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

impl Worker {
    fn handle(&mut self, request: Request) -> (Response, Vec<u8>) {
        match request {
            Request::Setup {
                source,
                key_hash,
                threads,
                codegen,
                constants,
            } => (
                self.setup(source, &key_hash, threads, codegen, &constants),
                Vec::new(),
            ),
            Request::Build { id, steps, fault } => {
                if fault == Some(Fault::AbortInBuild) {
                    std::process::abort();
                }
                (self.build(id, &steps), Vec::new())
            }
            Request::Run { id, timing, fault } => self.run(id, timing, fault),
            Request::Forget => {
                self.kernels.clear();
                (Response::Forgotten, Vec::new())
            }
        }
    }

    fn setup(
        &mut self,
        source: TaskSource,
        key_hash: &str,
        threads: usize,
        codegen: CodegenOptions,
        constants: &[String],
    ) -> Response {
        self.kernels.clear();
        self.task = None;
        let task = match Task::from_source(source).and_then(|t| t.with_constants(constants)) {
            Ok(task) => task,
            Err(e) => return Response::SetupFailed { msg: e.to_string() },
        };
        if task.key().hash != key_hash {
            return Response::SetupFailed {
                msg: format!(
                    "this worker builds {} with key {}, not {key_hash} (is it another tessera version?)",
                    task.key().readable,
                    task.key().hash
                ),
            };
        }
        runtime::set_num_threads(threads);
        self.inputs = task.inputs();
        self.codegen = codegen;
        self.task = Some(task);
        Response::Ready
    }

    fn build(&mut self, id: u64, steps: &[crate::schedule::Step]) -> Response {
        let Some(task) = &self.task else {
            return Response::BuildFailed {
                id,
                kind: MeasureErrorKind::UnknownError,
                msg: "the worker has no task".into(),
                build_secs: 0.0,
            };
        };
        let start = Instant::now();
        let built = catch_unwind(AssertUnwindSafe(|| {
            build_with_constants(task.dag(), steps, task.constants(), &self.codegen)
        }));
        match built {
            Ok(Ok((kernel, build_secs))) => {
                self.kernels.insert(id, kernel);
                Response::Built { id, build_secs }
            }
            Ok(Err((failure, build_secs))) => Response::BuildFailed {
                id,
                kind: failure.kind,
                msg: failure.msg,
                build_secs,
            },
            Err(panic) => Response::BuildFailed {
                id,
                kind: MeasureErrorKind::CompileError,
                msg: format!("internal error while building: {}", panic_message(&*panic)),
                build_secs: start.elapsed().as_secs_f64(),
            },
        }
    }

    fn run(
        &mut self,
        id: u64,
        timing: Option<TimingOptions>,
        fault: Option<Fault>,
    ) -> (Response, Vec<u8>) {
        let failed = |msg: String| (Response::RunFailed { id, msg }, Vec::new());
        let Some(candidate) = self.kernels.get(&id) else {
            return failed(format!("no kernel {id} was built in this worker"));
        };
        let start = Instant::now();
        // Constants are laid out once, before the kernel runs and is timed.
        let inputs = match candidate.pack(&self.inputs) {
            Ok(inputs) => inputs,
            Err(e) => return failed(e),
        };
        let kernel = &candidate.kernel;
        let mut buffers = match kernel.buffers_for(&inputs) {
            Ok(b) => b,
            Err(e) => return failed(e.to_string()),
        };
        let n_in = kernel.num_inputs();
        inject_before_run(kernel, fault);
        if let Err(e) = run_once(kernel, &mut buffers) {
            return failed(e);
        }
        let mut payload = Vec::new();
        for out in &buffers[n_in..] {
            payload.extend_from_slice(out.as_bytes());
        }
        if let Err(e) = inject_after_run(kernel, fault, &mut payload) {
            return failed(e);
        }
        let mut costs = Vec::new();
        if let Some(mut options) = timing {
            let (inputs, outputs) = buffers.split_at_mut(n_in);
            let mut pointers: Vec<*mut u8> = inputs
                .iter_mut()
                .chain(outputs.iter_mut())
                .map(NdBuffer::as_mut_ptr)
                .collect();
            let flushed = self.flushed_inputs(options.flush);
            let input_refs: Vec<&NdBuffer> = inputs
                .iter()
                .enumerate()
                .filter(|(index, _)| flushed.contains(index))
                .map(|(_, buffer)| buffer)
                .collect();
            if input_refs.is_empty() {
                options.flush = CacheFlush::Off;
            }
            let pointers_ref = &mut pointers;
            let timing = time_runs(
                &options,
                // SAFETY: the buffers were checked against the kernel's
                // parameters by the first run and stay alive and in place.
                || unsafe { kernel.call_raw(pointers_ref) },
                || flush_buffers(&input_refs),
            );
            costs = timing.costs;
        }
        let run_secs = start.elapsed().as_secs_f64();
        (
            Response::Ran {
                id,
                costs,
                run_secs,
            },
            payload,
        )
    }
}

impl Worker {
    /// The positions of the inputs that `flush` evicts before a timed run.
    fn flushed_inputs(&self, flush: CacheFlush) -> Vec<usize> {
        let Some(task) = &self.task else {
            return Vec::new();
        };
        let inputs = task.dag().inputs().iter().enumerate();
        match flush {
            CacheFlush::Off => Vec::new(),
            CacheFlush::Inputs => inputs.map(|(index, _)| index).collect(),
            CacheFlush::Weights => inputs
                .filter(|(_, t)| task.constants().iter().any(|c| c == t.name()))
                .map(|(index, _)| index)
                .collect(),
        }
    }
}

fn run_once(kernel: &Kernel, buffers: &mut [NdBuffer]) -> Result<(), String> {
    let mut refs: Vec<&mut NdBuffer> = buffers.iter_mut().collect();
    kernel.run(&mut refs).map_err(|e| e.to_string())
}

/// The crash and hang test hooks (see [`Fault`]).
fn inject_before_run(kernel: &Kernel, fault: Option<Fault>) {
    match fault {
        Some(Fault::Segfault) => {
            // Addresses below 64 KiB are never mapped on Linux (mmap_min_addr).
            let unmapped = vec![0x1000 as *mut u8; kernel.params().len()];
            // SAFETY: deliberately violated; this worker is meant to die here.
            unsafe { kernel.call_raw(&unmapped) };
            std::process::abort();
        }
        Some(Fault::Abort) => std::process::abort(),
        Some(Fault::Hang) => loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
        _ => {}
    }
}

/// The wrong-answer test hooks (see [`Fault`]), applied to the output bytes.
fn inject_after_run(
    kernel: &Kernel,
    fault: Option<Fault>,
    payload: &mut [u8],
) -> Result<(), String> {
    let Some(first_output) = kernel.params().get(kernel.num_inputs()) else {
        return Ok(());
    };
    match fault {
        Some(Fault::WrongResult) => {
            // The most significant byte of the first element: sign and exponent.
            let top = first_output.dtype.size_bytes().saturating_sub(1);
            if let Some(byte) = payload.get_mut(top) {
                *byte ^= 0x40;
            }
            Ok(())
        }
        Some(Fault::PerturbMiddle { relative_error }) => {
            let middle = first_output.shape.iter().product::<usize>() / 2;
            perturb_element(payload, first_output.dtype, middle, relative_error)
        }
        _ => Ok(()),
    }
}

/// Moves element `index` of the raw `dtype` elements in `bytes` by
/// `relative_error` in the measure of [`relative_error`](super::relative_error):
/// `x + relative_error · max(1, |x|)`.
pub(crate) fn perturb_element(
    bytes: &mut [u8],
    dtype: DType,
    index: usize,
    relative_error: f64,
) -> Result<(), String> {
    let size = dtype.size_bytes();
    let Some(element) = bytes.get_mut(index * size..(index + 1) * size) else {
        return Err(format!("no element {index} to perturb"));
    };
    let moved = |x: f64| x + relative_error * x.abs().max(1.0);
    match dtype {
        DType::F32 => {
            let x = f32::from_ne_bytes(element.try_into().map_err(|_| "f32 size")?);
            element.copy_from_slice(&(moved(f64::from(x)) as f32).to_ne_bytes());
        }
        DType::F64 => {
            let x = f64::from_ne_bytes(element.try_into().map_err(|_| "f64 size")?);
            element.copy_from_slice(&moved(x).to_ne_bytes());
        }
        other => {
            return Err(format!(
                "cannot perturb a {other} output by a relative error"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::task::tests::{chain, dense_relu_dag};

    /// `request` as the worker reads it off the pipe.
    fn through_the_wire(request: &Request) -> Request {
        let mut wire = Vec::new();
        write_frame(&mut wire, request, &[]).expect("writes");
        let (request, _) = read_frame(&mut &wire[..]).expect("reads").expect("a frame");
        request
    }

    #[test]
    fn a_dag_task_sets_up_with_its_key_and_is_refused_with_another() {
        let task = Task::from_dag(dense_relu_dag(8, 4, 6)).expect("task");
        let setup = |key_hash: &str| Request::Setup {
            source: task.source().clone(),
            key_hash: key_hash.to_string(),
            threads: 1,
            codegen: CodegenOptions::default(),
            constants: Vec::new(),
        };
        let mut worker = Worker::default();
        let (ready, _) = worker.handle(through_the_wire(&setup(&task.key().hash)));
        assert!(matches!(ready, Response::Ready), "{ready:?}");
        let built = worker.build(1, &[]);
        assert!(matches!(built, Response::Built { id: 1, .. }), "{built:?}");

        let wrong = "0".repeat(64);
        match worker.handle(through_the_wire(&setup(&wrong))).0 {
            Response::SetupFailed { msg } => {
                assert!(msg.contains(&task.key().hash), "{msg}");
                assert!(msg.contains(&format!("not {wrong}")), "{msg}");
            }
            other => panic!("set up with a wrong key: {other:?}"),
        }
        assert!(worker.task.is_none(), "no task kept after a refused setup");
    }

    #[test]
    fn the_deepest_dag_a_task_accepts_sets_up_in_a_worker() {
        let deepest = (100..140)
            .take_while(|&depth| Task::from_dag(chain(depth)).is_ok())
            .last()
            .expect("100 levels are accepted");
        assert!(deepest < 139, "the limit lies in the range searched");
        let task = Task::from_dag(chain(deepest)).expect("task");
        let setup = Request::Setup {
            source: task.source().clone(),
            key_hash: task.key().hash.clone(),
            threads: 1,
            codegen: CodegenOptions::default(),
            constants: Vec::new(),
        };
        let (ready, _) = Worker::default().handle(through_the_wire(&setup));
        assert!(matches!(ready, Response::Ready), "{ready:?}");
    }

    #[test]
    fn weights_flush_the_constants_and_inputs_flush_every_input() {
        let task = Task::from_dag(dense_relu_dag(8, 4, 6)).expect("task");
        let mut worker = Worker::default();
        let setup = |constants: &[&str]| Request::Setup {
            source: task.source().clone(),
            key_hash: task.key().hash.clone(),
            threads: 1,
            codegen: CodegenOptions::default(),
            constants: constants.iter().map(|c| c.to_string()).collect(),
        };
        let (ready, _) = worker.handle(through_the_wire(&setup(&["bias", "B"])));
        assert!(matches!(ready, Response::Ready), "{ready:?}");
        // Inputs A, B, bias: B and bias are the constants.
        assert_eq!(worker.flushed_inputs(CacheFlush::Weights), [1, 2]);
        assert_eq!(worker.flushed_inputs(CacheFlush::Inputs), [0, 1, 2]);
        assert!(worker.flushed_inputs(CacheFlush::Off).is_empty());
        let (ready, _) = worker.handle(through_the_wire(&setup(&[])));
        assert!(matches!(ready, Response::Ready), "{ready:?}");
        assert!(worker.flushed_inputs(CacheFlush::Weights).is_empty());
    }
}
