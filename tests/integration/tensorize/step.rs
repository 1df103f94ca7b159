//! The tensorize step: blocks lowered to one micro-kernel call, checked
//! through the IR interpreter and the JIT; typed errors for blocks that do
//! not match; the ISA cap at compile time, in the worker and in deployment.

use super::*;

use common::{
    Scratch, assert_close as assert_tensors_close, build, random_inputs, reduction_length,
    reference,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tessera::codegen::{CodegenOptions, compile};
use tessera::schedule::{State, Step, StepErrorKind, steps_from_json};
use tessera::te::ComputeDag;
use tessera::tir::{self, LowerError, Stmt};

pub(super) fn steps(json: &str) -> Vec<Step> {
    steps_from_json(json).unwrap_or_else(|e| panic!("{e}"))
}

/// Lowers `steps` on `dag`, checks the block became one micro-kernel call,
/// and compares the IR interpreter and the JIT (compiled for `target`) with
/// the reference.
pub(super) fn check_tensorized(target: &Target, label: &str, dag: &ComputeDag, steps: &[Step]) {
    check_calls(
        target,
        label,
        dag,
        steps,
        "one micro-kernel call",
        |s, n| n + usize::from(matches!(s, Stmt::MicroKernelCall(_))),
        |n| n == 1,
    );
}

/// Lowers `steps` on `dag`, counts its calls with `count` (folded over
/// every statement), checks the count with `expected` (described by
/// `what`), and compares the IR interpreter and the JIT (compiled for
/// `target`) with the reference.
pub(super) fn check_calls(
    target: &Target,
    label: &str,
    dag: &ComputeDag,
    steps: &[Step],
    what: &str,
    count: fn(&Stmt, usize) -> usize,
    expected: fn(usize) -> bool,
) {
    let state = State::replay(dag, steps).unwrap_or_else(|e| panic!("{label}: {e}"));
    let func = tir::lower(&state).unwrap_or_else(|e| panic!("{label}: lowering: {e}"));
    let mut calls = 0;
    func.body.visit(&mut |s| calls = count(s, calls));
    assert!(expected(calls), "{label}: {what}, {calls} found in\n{func}");
    let inputs = random_inputs(dag, 11);
    let want = reference(dag, &inputs);
    let interpreted =
        tir::run(&func, &inputs).unwrap_or_else(|e| panic!("{label}: IR: {e}\n{func}"));
    assert_tensors_close(
        &format!("{label} (IR)"),
        &interpreted,
        &want,
        reduction_length(dag),
    );
    let kernel = compile(&func, &CodegenOptions::for_target(*target))
        .unwrap_or_else(|e| panic!("{label}: compile: {e}\n{func}"));
    let compiled = kernel
        .run_host(&inputs)
        .unwrap_or_else(|e| panic!("{label}: run: {e}"));
    assert_tensors_close(
        &format!("{label} (JIT)"),
        &compiled,
        &want,
        reduction_length(dag),
    );
}

/// The block of matmul C tensorized in place: C's own loops, A and B read
/// where they are.
pub(crate) fn direct(m_t: i64, n_t: i64, k_t: Option<i64>, kernel: &str) -> Vec<Step> {
    let (k_split, k_loops, k_block) = match k_t {
        Some(k) => (
            format!(r#"{{"kind":"split","stage":"C","iter":"k","factors":[{k}]}},"#),
            r#""k.0","#,
            "k.1",
        ),
        None => (String::new(), "", "k"),
    };
    steps(&format!(
        r#"[
        {{"kind":"split","stage":"C","iter":"i0","factors":[{m_t}]}},
        {{"kind":"split","stage":"C","iter":"i1","factors":[{n_t}]}},
        {k_split}
        {{"kind":"reorder","stage":"C","order":["i0.0","i1.0",{k_loops}"{k_block}","i0.1","i1.1"]}},
        {{"kind":"tensorize","stage":"C","iter":"{k_block}","intrinsic":"{kernel}"}}
    ]"#
    ))
}

/// GotoBLAS style: the accumulator tile in C.local, B packed into a panel
/// B.local per column block, the outer column loop parallel.
pub(crate) fn packed(m_t: i64, n_t: i64, kernel: &str) -> Vec<Step> {
    steps(&format!(
        r#"[
        {{"kind":"cache_write","stage":"C"}},
        {{"kind":"cache_read","stage":"B","readers":["C.local"]}},
        {{"kind":"split","stage":"C","iter":"i0","factors":[{m_t}]}},
        {{"kind":"split","stage":"C","iter":"i1","factors":[{n_t}]}},
        {{"kind":"reorder","stage":"C","order":["i1.0","i0.0","i0.1","i1.1"]}},
        {{"kind":"compute_at","stage":"C.local","target":"C","iter":"i0.0"}},
        {{"kind":"compute_at","stage":"B.local","target":"C","iter":"i1.0"}},
        {{"kind":"reorder","stage":"C.local","order":["k","i0","i1"]}},
        {{"kind":"tensorize","stage":"C.local","iter":"k","intrinsic":"{kernel}"}},
        {{"kind":"annotate","stage":"C","iter":"i1.0","annotation":"parallel"}}
    ]"#
    ))
}

fn available() -> Vec<&'static MicroKernel> {
    let kernels = coverage().kernels();
    assert!(!kernels.is_empty(), "at least the portable kernel");
    kernels
}

#[test]
fn tensorized_matmuls_with_random_tiles_around_each_kernel_match_the_reference() {
    let mut rng = StdRng::seed_from_u64(5);
    for kernel in available() {
        for case in 0..3 {
            let (mr, nr) = (kernel.mr as i64, kernel.nr as i64);
            // The block at most the kernel's tile (edge tiles included).
            let m_t = if case == 0 {
                mr
            } else {
                rng.random_range(1..=mr)
            };
            let n_t = if case == 0 {
                nr
            } else {
                rng.random_range(1..=nr)
            };
            let (m, n) = (m_t * rng.random_range(1..=3), n_t * rng.random_range(1..=2));
            let k_t = rng.random_range(1..=24);
            let k = k_t * rng.random_range(1..=3);
            let dag = build("matmul", &[("M", m), ("N", n), ("K", k)]);
            let label = format!("{} matmul {m}x{n}x{k} tile {m_t}x{n_t}", kernel.name);
            check_tensorized(
                &host(),
                &format!("{label} direct"),
                &dag,
                &direct(m_t, n_t, None, kernel.name),
            );
            check_tensorized(
                &host(),
                &format!("{label} direct kc={k_t}"),
                &dag,
                &direct(m_t, n_t, Some(k_t), kernel.name),
            );
            check_tensorized(
                &host(),
                &format!("{label} packed"),
                &dag,
                &packed(m_t, n_t, kernel.name),
            );
        }
    }
}

/// The micro-kernel call of `func` and how many plain stores it has.
fn call_and_stores(func: &tir::PrimFunc) -> (tir::MicroKernelCall, usize) {
    let (mut call, mut stores) = (None, 0);
    func.body.visit(&mut |s| match s {
        Stmt::MicroKernelCall(c) => call = Some((**c).clone()),
        Stmt::Store { .. } => stores += 1,
        _ => {}
    });
    (call.unwrap_or_else(|| panic!("no call in\n{func}")), stores)
}

#[test]
fn a_tiles_first_call_starts_from_zero_unless_a_guard_reads_the_reductions_around_it() {
    let kernel = available()[0].name;
    // 37 is no multiple of the k tile: the last call of each tile is short.
    let dag = build("matmul", &[("M", 12), ("N", 20), ("K", 37)]);
    let lowered = |steps: &[Step]| {
        let state = State::replay(&dag, steps).unwrap_or_else(|e| panic!("{e}"));
        tir::lower(&state).unwrap_or_else(|e| panic!("{e}"))
    };
    let block = |order: &str, k_splits: &str| {
        steps(&format!(
            r#"[
            {{"kind":"split","stage":"C","iter":"i0","factors":[4]}},
            {{"kind":"split","stage":"C","iter":"i1","factors":[4]}},
            {{"kind":"split","stage":"C","iter":"k","factors":[5]}},
            {k_splits}
            {{"kind":"reorder","stage":"C","order":[{order}]}},
            {{"kind":"tensorize","stage":"C","iter":"k.1","intrinsic":"{kernel}"}}
        ]"#
        ))
    };
    // Only k.0 between the init and the block: no init, C = A·B where k.0 = 0.
    let only_reductions = block(r#""i0.0","i1.0","k.0","k.1","i0.1","i1.1""#, "");
    let func = lowered(&only_reductions);
    let (call, stores) = call_and_stores(&func);
    assert_eq!(stores, 0, "no init loop:\n{func}");
    assert_eq!(call.accumulate.to_string(), "k.0", "\n{func}");
    assert!(func.to_string().contains("(+)="), "{func}");
    check_tensorized(&host(), "from zero", &dag, &only_reductions);
    // A spatial loop between (the k blocks outside the column tiles, as
    // GotoBLAS): it only picks the tile, whose first call is still k.0 = 0.
    let spatial_between = block(r#""i0.0","k.0","i1.0","k.1","i0.1","i1.1""#, "");
    let func = lowered(&spatial_between);
    let (call, stores) = call_and_stores(&func);
    assert_eq!(stores, 0, "no init loop:\n{func}");
    assert_eq!(call.accumulate.to_string(), "k.0", "\n{func}");
    check_tensorized(&host(), "spatial loop between", &dag, &spatial_between);
    // A guard on the outer reduction loops alone (k.0 split by 3, which
    // does not divide its 8): the init is kept.
    let guarded = block(
        r#""i0.0","i1.0","k.0.0","k.0.1","k.1","i0.1","i1.1""#,
        r#"{"kind":"split","stage":"C","iter":"k.0","factors":[3]},"#,
    );
    let func = lowered(&guarded);
    let (call, stores) = call_and_stores(&func);
    assert_eq!(stores, 1, "the init is kept:\n{func}");
    assert_eq!(call.accumulate.as_int(), Some(1), "\n{func}");
    check_tensorized(&host(), "guard on k.0", &dag, &guarded);
}

#[test]
fn splits_that_do_not_divide_become_edge_tiles_of_the_kernel() {
    let mut rng = StdRng::seed_from_u64(9);
    for kernel in available() {
        let (mr, nr) = (kernel.mr as i64, kernel.nr as i64);
        let m_t = rng.random_range(1..=mr);
        let n_t = rng.random_range(1..=nr);
        // Extents that leave a partial tile in every direction.
        let (m, n) = (
            m_t * 2 + rng.random_range(1..=m_t),
            n_t + rng.random_range(1..=n_t),
        );
        let k_t = rng.random_range(2..=9);
        let k = k_t * 2 + rng.random_range(1..k_t);
        let dag = build("matmul", &[("M", m), ("N", n), ("K", k)]);
        let label = format!(
            "{} matmul {m}x{n}x{k} tile {m_t}x{n_t} kc {k_t}",
            kernel.name
        );
        check_tensorized(
            &host(),
            &label,
            &dag,
            &direct(m_t, n_t, Some(k_t), kernel.name),
        );
        check_tensorized(
            &host(),
            &format!("{label} packed"),
            &dag,
            &packed(m_t, n_t, kernel.name),
        );
    }
}

#[test]
fn batch_matmul_tensorizes_inside_the_batch_loop() {
    let kernel = available()[0];
    let (mr, nr) = (kernel.mr as i64, kernel.nr as i64);
    let dag = build(
        "batch_matmul",
        &[("B", 3), ("M", mr * 2), ("N", nr), ("K", 9)],
    );
    check_tensorized(
        &host(),
        "batch_matmul",
        &dag,
        &steps(&format!(
            r#"[
            {{"kind":"split","stage":"C","iter":"i1","factors":[{mr}]}},
            {{"kind":"reorder","stage":"C","order":["i0","i1.0","k","i1.1","i2"]}},
            {{"kind":"tensorize","stage":"C","iter":"k","intrinsic":"{}"}}
        ]"#,
            kernel.name
        )),
    );
}

fn step_error(dag: &ComputeDag, json: &str) -> String {
    match State::replay(dag, &steps(json)) {
        Err(e) => {
            assert!(matches!(e.kind, StepErrorKind::Tensorize { .. }), "{e}");
            e.to_string()
        }
        Ok(_) => panic!("{json} applied"),
    }
}

fn lower_error(dag: &ComputeDag, json: &str) -> String {
    let state = State::replay(dag, &steps(json)).unwrap_or_else(|e| panic!("{e}"));
    match tir::lower(&state) {
        Err(e @ LowerError::Tensorize { .. }) => e.to_string(),
        Err(e) => panic!("another error: {e}"),
        Ok(f) => panic!("{json} lowered:\n{f}"),
    }
}

#[test]
fn blocks_that_do_not_match_are_typed_errors() {
    let kernel = available()[0];
    let name = kernel.name;
    let (mr, nr) = (kernel.mr as i64, kernel.nr as i64);
    let matmul = build("matmul", &[("M", mr * 2), ("N", nr * 2), ("K", 8)]);
    // Not the three innermost loops.
    let e = step_error(
        &matmul,
        &format!(
            r#"[{{"kind":"split","stage":"C","iter":"i0","factors":[2]}},
            {{"kind":"tensorize","stage":"C","iter":"i0.0","intrinsic":"{name}"}}]"#
        ),
    );
    assert!(e.contains("innermost loops"), "{e}");
    // An annotated loop inside the block.
    let e = step_error(
        &matmul,
        &format!(
            r#"[{{"kind":"reorder","stage":"C","order":["k","i0","i1"]}},
            {{"kind":"annotate","stage":"C","iter":"i1","annotation":"vectorize"}},
            {{"kind":"tensorize","stage":"C","iter":"k","intrinsic":"{name}"}}]"#
        ),
    );
    assert!(e.contains("annotated vectorize"), "{e}");
    // Not a reduction.
    let relu = build("relu", &[("M", 4), ("N", 4)]);
    let e = step_error(
        &relu,
        &format!(r#"[{{"kind":"tensorize","stage":"relu","iter":"i0","intrinsic":"{name}"}}]"#),
    );
    assert!(e.contains("not a sum reduction"), "{e}");

    // B stored transposed is strided along n: pack it first.
    let nt = build("matmul_nt", &[("M", mr), ("N", nr), ("K", 8)]);
    let e = lower_error(
        &nt,
        &format!(
            r#"[{{"kind":"reorder","stage":"C","order":["k","i0","i1"]}},
            {{"kind":"tensorize","stage":"C","iter":"k","intrinsic":"{name}"}}]"#
        ),
    );
    assert!(e.contains("contiguous along the n loop"), "{e}");
    // A block larger than the kernel's tile.
    let e = lower_error(
        &matmul,
        &format!(
            r#"[{{"kind":"reorder","stage":"C","order":["k","i0","i1"]}},
            {{"kind":"tensorize","stage":"C","iter":"k","intrinsic":"{name}"}}]"#
        ),
    );
    assert!(e.contains("computes at most"), "{e}");
    // An unknown micro-kernel.
    let e = lower_error(&matmul, &direct_json(mr, nr, "avx9000_1x1"));
    assert!(e.contains("no micro-kernel 'avx9000_1x1'"), "{e}");
}

fn direct_json(m_t: i64, n_t: i64, kernel: &str) -> String {
    serde_json::to_string(&direct(m_t, n_t, None, kernel)).expect("json")
}

/// A micro-kernel this CPU runs that the SSE cap forbids (`None`, saying
/// why the test skips, on CPUs without one; a failure where
/// `TESSERA_REQUIRE_ISA` asks for a wider ISA).
fn wider_than_sse() -> Option<&'static MicroKernel> {
    coverage().kernel_wider_than(Isa::Sse)
}

#[test]
fn a_kernel_the_isa_cap_forbids_is_a_compile_error_not_a_crash() {
    let Some(wide) = wider_than_sse() else {
        return;
    };
    let dag = build(
        "matmul",
        &[("M", wide.mr as i64), ("N", wide.nr as i64), ("K", 16)],
    );
    let state = State::replay(
        &dag,
        &direct(wide.mr as i64, wide.nr as i64, None, wide.name),
    )
    .expect("replays");
    let func = tir::lower(&state).expect("lowers");
    let capped = compile(
        &func,
        &CodegenOptions::for_target(host().with_isa_cap(Isa::Sse)),
    );
    let message = capped.err().expect("refused under the cap").to_string();
    assert!(
        message.contains(wide.name)
            && message.contains("needs")
            && message.contains("with_isa_cap(sse)"),
        "{message}"
    );
    assert!(compile(&func, &CodegenOptions::default()).is_ok());
}

/// The target travels to the measurement worker with the codegen options:
/// under a capped measurer the worker refuses the wide kernel, uncapped it
/// runs it.
#[test]
fn the_measurement_worker_compiles_for_the_measurers_target() {
    use std::path::PathBuf;
    use tessera::measure::{MeasureErrorKind, MeasureOptions, Measurer, Task, TimingOptions};

    let Some(wide) = wider_than_sse() else {
        return;
    };
    let (mr, nr) = (wide.mr as i64, wide.nr as i64);
    let task = Task::from_registry("matmul", &format!("M={mr},N={nr},K=16")).expect("task");
    let state = State::replay(task.dag(), &direct(mr, nr, None, wide.name)).expect("replays");
    let measure = |target: Target| {
        let mut measurer = Measurer::new(MeasureOptions {
            workers: 1,
            kernel_threads: 1,
            timing: TimingOptions {
                warmup: 0,
                number: 1,
                repeat: 1,
                min_repeat_ms: 0.0,
                flush: tessera::measure::CacheFlush::Off,
            },
            codegen: CodegenOptions::for_target(target),
            worker_program: Some(PathBuf::from(env!("CARGO_BIN_EXE_tessera"))),
            ..MeasureOptions::default()
        })
        .expect("workers start");
        assert_eq!(measurer.target(), &target);
        let results = measurer
            .measure(&task, std::slice::from_ref(&state))
            .expect("measures");
        results.into_iter().next().expect("one result")
    };
    let capped = measure(host().with_isa_cap(Isa::Sse));
    assert_eq!(
        capped.error_kind,
        MeasureErrorKind::CompileError,
        "{capped:?}"
    );
    assert!(
        capped.error_msg.contains(wide.name) && capped.error_msg.contains("with_isa_cap(sse)"),
        "{}",
        capped.error_msg
    );
    let uncapped = measure(host());
    assert!(uncapped.is_ok(), "{uncapped:?}");
}

#[test]
fn a_deployed_tensorized_artifact_names_its_kernel_and_falls_back_where_the_isa_is_missing() {
    use tessera::deploy::{FallbackReason, KernelSource, Library};
    use tessera::measure::Task;

    let Some(wide) = wider_than_sse() else {
        return;
    };
    let (mr, nr) = (wide.mr as i64, wide.nr as i64);
    let shape = format!("M={},N={},K=16", mr * 2, nr);
    let dir = Scratch::new("tensorize-deploy");
    let task = Task::from_registry("matmul", &shape).expect("task");
    let steps = direct(mr, nr, None, wide.name);
    let artifact = common::deploy_one_record(&dir, &task, &steps);
    assert_eq!(artifact.micro_kernels, vec![wide.name.to_string()]);
    assert_eq!(artifact.isa.as_deref(), Some(wide.isa.name()));

    let inputs = random_inputs(task.dag(), 4);
    let want = reference(task.dag(), &inputs);
    let capped = Library::open_with_target(dir.join("schedules"), host().with_isa_cap(Isa::Sse))
        .and_then(|library| library.kernel(task.dag()));
    let capped_run = capped.as_ref().ok().map(|l| l.kernel.run_host(&inputs));
    let loaded = capped.expect("falls back rather than failing");
    match &loaded.source {
        KernelSource::Fallback(reason @ FallbackReason::MissingIsa { needs, .. }) => {
            assert_eq!(needs, wide.isa.name());
            assert!(reason.to_string().contains(wide.name), "{reason}");
        }
        other => panic!("expected a missing-ISA fallback, got {other:?}"),
    }
    let got = capped_run.expect("ran").expect("the default schedule runs");
    assert_tensors_close("fallback", &got, &want, 16);

    let library = Library::open(dir.join("schedules")).expect("library");
    let tuned = library.kernel(task.dag()).expect("loads");
    assert!(
        matches!(tuned.source, KernelSource::Tuned { .. }),
        "{:?}",
        tuned.source
    );
    let got = tuned.kernel.run_host(&inputs).expect("runs");
    assert_tensors_close("tuned", &got, &want, 16);
}
