//! Measurement in worker processes: bad candidates (crashes, hangs, wrong
//! answers) are recorded with their error kind while the rest of the batch
//! is measured; no worker process outlives the measurer; the device key is
//! stable. (The timing protocol's real-time checks are in `realtime`.)

use std::path::PathBuf;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use tessera::measure::{
    Fault, MeasureErrorKind, MeasureOptions, Measurer, Task, TimingOptions, tolerance,
};
use tessera::runtime::host_device;
use tessera::schedule::{State, Step, random::random_schedule, steps_from_json};

/// Held by every test that runs kernels or workers: two batches of worker
/// processes do not share this 2-core machine's cores.
static CORES: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    CORES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn worker() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tessera"))
}

fn quick_timing() -> TimingOptions {
    TimingOptions {
        warmup: 1,
        number: 1,
        repeat: 2,
        min_repeat_ms: 1.0,
        flush: tessera::measure::CacheFlush::Off,
    }
}

fn options(workers: usize) -> MeasureOptions {
    MeasureOptions {
        workers,
        kernel_threads: 1,
        run_timeout: Duration::from_secs(3),
        build_timeout: Duration::from_secs(60),
        timing: quick_timing(),
        worker_program: Some(worker()),
        ..MeasureOptions::default()
    }
}

fn tiled_matmul_steps() -> Vec<Step> {
    steps_from_json(
        r#"[{"kind":"split","stage":"C","iter":"i1","factors":[8]},
            {"kind":"reorder","stage":"C","order":["i0","i1.0","k","i1.1"]},
            {"kind":"annotate","stage":"C","iter":"i1.1","annotation":"vectorize"}]"#,
    )
    .expect("valid steps")
}

/// Whether `pid` is gone (reaped: no /proc entry; a zombie would still have
/// one), allowing a replaced worker's reaping a moment to finish on a loaded
/// machine. Without /proc this cannot be told, and the test fails rather
/// than call every worker gone.
fn is_gone(pid: u32) -> bool {
    assert!(
        std::path::Path::new("/proc/self/stat").exists(),
        "no /proc: cannot tell whether worker {pid} is gone"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn state_of(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(") ").next()?.chars().next()
}

#[test]
fn crashes_hangs_and_wrong_results_are_recorded_and_the_batch_goes_on() {
    let _cores = exclusive();
    let task = Task::from_registry("matmul", "M=16,N=16,K=16").expect("task");
    let good = tiled_matmul_steps();
    let faults = [
        None,
        Some(Fault::Segfault),
        None,
        Some(Fault::Hang),
        Some(Fault::Abort),
        None,
        Some(Fault::AbortInBuild),
        Some(Fault::WrongResult),
        None,
    ];
    let candidates: Vec<(Vec<Step>, Option<Fault>)> =
        faults.iter().map(|f| (good.clone(), *f)).collect();
    let mut measurer = Measurer::new(options(2)).expect("workers start");
    let first_workers = measurer.worker_pids();
    let results = measurer
        .measure_steps(&task, &candidates, &|_| {})
        .expect("the batch is measured");
    let kinds: Vec<MeasureErrorKind> = results.iter().map(|r| r.error_kind).collect();
    let expected = {
        use MeasureErrorKind::*;
        vec![
            None,
            RuntimeError,
            None,
            RunTimeout,
            RuntimeError,
            None,
            CompileError,
            WrongResult,
            None,
        ]
    };
    assert_eq!(kinds, expected, "{results:#?}");
    for (index, needle) in [
        (1, "SIGSEGV"),
        (4, "SIGABRT"),
        (6, "SIGABRT"),
        (7, "expected"),
    ] {
        let msg = &results[index].error_msg;
        assert!(msg.contains(needle), "candidate {index}: {msg}");
    }
    for r in &results {
        assert_eq!(
            r.is_ok(),
            !r.costs.is_empty(),
            "costs only for successes: {r:?}"
        );
        assert!(r.timestamp > 1.6e9);
    }
    for r in [&results[0], &results[2], &results[5], &results[8]] {
        assert!(r.median().expect("timed") > 0.0);
        assert!(r.max_rel_error.expect("verified") <= 1e-5);
        assert!(r.build_secs > 0.0 && r.run_secs > 0.0);
    }
    // Four workers died (segfault, hang, abort, abort in build). A dead
    // worker's slot is refilled when work needs it, so after the batch up to
    // one slot may still be empty: count the dead, not the replacements.
    let spawned = measurer.spawned_pids().to_vec();
    let running = measurer.worker_pids();
    assert!(
        spawned.len() - running.len() >= 4,
        "spawned {spawned:?}, running {running:?}"
    );
    for pid in &spawned {
        let alive = measurer.worker_pids().contains(pid);
        assert!(
            alive || is_gone(*pid),
            "worker {pid} left as {:?}",
            state_of(*pid)
        );
    }
    assert!(first_workers.iter().all(|p| spawned.contains(p)));
    // The replaced workers measure a second batch normally.
    let again = measurer
        .measure_steps(&task, &[(good.clone(), None), (Vec::new(), None)], &|_| {})
        .expect("measured");
    assert!(again.iter().all(|r| r.is_ok()), "{again:#?}");
    drop(measurer);
    for pid in &spawned {
        assert!(
            is_gone(*pid),
            "worker {pid} outlived the measurer as {:?}",
            state_of(*pid)
        );
    }
}

/// A fault at the middle element of `tolerances` times the verifier's own
/// tolerance for `task`.
fn off_by(task: &Task, tolerances: f64) -> Option<Fault> {
    Some(Fault::PerturbMiddle {
        relative_error: tolerances * tolerance(task),
    })
}

#[test]
fn ten_tolerances_off_is_a_wrong_result_and_a_tenth_of_one_is_not() {
    let _cores = exclusive();
    let task = Task::from_registry("matmul", "M=16,N=16,K=16").expect("task");
    let good = tiled_matmul_steps();
    let mut measurer = Measurer::new(options(1)).expect("worker starts");
    let results = measurer
        .measure_steps(
            &task,
            &[
                (good.clone(), off_by(&task, 10.0)),
                (good, off_by(&task, 0.1)),
            ],
            &|_| {},
        )
        .expect("measured");
    assert_eq!(
        results[0].error_kind,
        MeasureErrorKind::WrongResult,
        "{:?}",
        results[0]
    );
    assert_a_tenth_off_passes_and_was_seen(&task, &results[1]);
}

/// The 0.1-tolerance fault passes verification, and the verifier did see it
/// (a fault that changed nothing would pass too).
fn assert_a_tenth_off_passes_and_was_seen(task: &Task, result: &tessera::measure::MeasureResult) {
    assert!(result.is_ok(), "{result:?}");
    let seen = result.max_rel_error.expect("verified");
    assert!(
        seen > 0.05 * tolerance(task),
        "the fault was not seen: {result:?}"
    );
}

#[test]
fn a_batch_of_random_valid_candidates_is_measured_and_verified() {
    let _cores = exclusive();
    let task = Task::from_registry("matmul", "M=24,N=20,K=12").expect("task");
    let mut rng = StdRng::seed_from_u64(5);
    let states: Vec<State> = (0..24)
        .map(|_| random_schedule(task.dag(), &mut rng, 6))
        .collect();
    let mut opts = options(2);
    opts.concurrent_runs = true;
    opts.run_timeout = Duration::from_secs(30);
    let mut measurer = Measurer::new(opts).expect("workers start");
    let done = std::sync::atomic::AtomicUsize::new(0);
    let results = measurer
        .measure_with_progress(&task, &states, &|_| {
            done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
        .expect("measured");
    assert_eq!(done.into_inner(), states.len());
    for (r, s) in results.iter().zip(&states) {
        assert!(
            r.is_ok(),
            "a valid schedule must build, run and verify: {r:?}\n{}",
            s.to_text()
        );
    }
}

#[test]
fn a_large_task_is_verified_against_the_checked_default_kernel() {
    let _cores = exclusive();
    // Above the interpreter limit: the trusted result comes from the default
    // schedule's kernel, checked at sampled points against the interpreter.
    let task = Task::from_registry("matmul", "M=256,N=256,K=128").expect("task");
    assert!(task.dag().flop_count() > tessera::measure::INTERPRETER_FLOP_LIMIT);
    let mut measurer = Measurer::new(options(1)).expect("worker starts");
    let good = tiled_matmul_steps();
    let results = measurer
        .measure_steps(
            &task,
            &[
                (good.clone(), None),
                (good.clone(), Some(Fault::WrongResult)),
                (good.clone(), off_by(&task, 10.0)),
                (good, off_by(&task, 0.1)),
            ],
            &|_| {},
        )
        .expect("measured");
    let kinds: Vec<MeasureErrorKind> = results.iter().map(|r| r.error_kind).collect();
    let expected = {
        use MeasureErrorKind::*;
        [None, WrongResult, WrongResult, None]
    };
    assert_eq!(kinds, expected, "{results:#?}");
    assert_a_tenth_off_passes_and_was_seen(&task, &results[3]);
}

#[test]
fn a_program_that_is_not_a_worker_is_refused_clearly() {
    let mut opts = options(1);
    opts.worker_program = Some(PathBuf::from("/bin/true"));
    let err = Measurer::new(opts).err().expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("/bin/true") && msg.contains("TESSERA_WORKER"),
        "{msg}"
    );
    let mut opts = options(1);
    opts.workers = 0;
    assert!(Measurer::new(opts).is_err());
}

#[test]
fn the_device_key_is_stable_and_depends_on_the_features() {
    let run = || {
        let out = std::process::Command::new(worker())
            .args(["device", "--json"])
            .output()
            .expect("runs");
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        (
            v["hash"].as_str().expect("hash").to_string(),
            v["readable"].as_str().expect("readable").to_string(),
        )
    };
    let (first, second) = (run(), run());
    assert_eq!(first, second, "two processes, one key");
    let here = host_device().key();
    assert_eq!((here.hash.clone(), here.readable.clone()), first);
    let mut masked = host_device().clone();
    if masked.features.is_empty() {
        masked.features.push("has_sse3".into());
    } else {
        masked.features.pop();
    }
    assert_ne!(
        masked.key().hash,
        here.hash,
        "a masked feature is another device"
    );
}

/// matmul C = A·B with B copied into a panel `B.local` per column block.
fn b_panel_steps() -> Vec<Step> {
    steps_from_json(
        r#"[{"kind":"cache_read","stage":"B","readers":["C"]},
            {"kind":"split","stage":"C","iter":"i1","factors":[4]},
            {"kind":"reorder","stage":"C","order":["i1.0","i0","k","i1.1"]},
            {"kind":"compute_at","stage":"B.local","target":"C","iter":"i1.0"}]"#,
    )
    .expect("valid steps")
}

#[test]
fn a_task_with_a_constant_weight_is_measured_with_it_laid_out_ahead_of_time() {
    let _cores = exclusive();
    let plain = Task::from_registry("matmul", "M=24,N=20,K=12").expect("task");
    let task = plain
        .clone()
        .with_constants(&["B", "B"])
        .expect("B is an input");
    assert_eq!(task.constants(), ["B"]);
    assert_eq!(task.key(), plain.key(), "the workload stays the same");
    let e = plain
        .clone()
        .with_constants(&["W"])
        .expect_err("no input W");
    assert!(e.to_string().contains("its inputs are A, B"), "{e}");

    // The schedule's panel copy of B is hoisted: the kernel takes B packed,
    // so a worker that did not pack it could not even run it.
    let steps = b_panel_steps();
    let (built, _) = tessera::measure::build_with_constants(
        task.dag(),
        &steps,
        task.constants(),
        &Default::default(),
    )
    .map_err(|(failure, _)| failure.msg)
    .expect("builds");
    assert_eq!(built.packers.len(), 1, "B's copy is laid out ahead of time");
    assert_eq!(built.packers[0].0, 1, "B is the second input");
    let inputs = task.inputs();
    let packed = built.pack(&inputs).expect("packs");
    assert_ne!(packed[1].shape(), inputs[1].shape(), "B is taken packed");

    // Measured with and without the constant in one measurer, alternately:
    // each is set up again, each verifies against the reference.
    let state = State::replay(task.dag(), &steps).expect("replays");
    let mut measurer = Measurer::new(options(1)).expect("workers start");
    for t in [&task, &plain, &task] {
        let results = measurer
            .measure(t, std::slice::from_ref(&state))
            .expect("measured");
        assert!(results[0].is_ok(), "{t:?}: {:?}", results[0]);
    }
}

#[test]
fn every_cache_flush_times_verified_runs_of_a_task_with_a_constant() {
    use tessera::measure::CacheFlush;
    let _cores = exclusive();
    let task = Task::from_registry("matmul", "M=24,N=20,K=12")
        .expect("task")
        .with_constants(&["B"])
        .expect("B is an input");
    let state = State::replay(task.dag(), &b_panel_steps()).expect("replays");
    for flush in [CacheFlush::Off, CacheFlush::Weights, CacheFlush::Inputs] {
        let mut measurer = Measurer::new(MeasureOptions {
            timing: TimingOptions {
                flush,
                ..quick_timing()
            },
            ..options(1)
        })
        .expect("workers start");
        let results = measurer
            .measure(&task, std::slice::from_ref(&state))
            .expect("measured");
        let result = &results[0];
        assert!(result.is_ok(), "{flush:?}: {result:?}");
        assert_eq!(result.costs.len(), 2, "{flush:?}: {result:?}");
        assert!(
            result.costs.iter().all(|&c| c > 0.0),
            "{flush:?}: {result:?}"
        );
    }
}
