//! The pack step: a packing copy (`cache_read` panel) whose two innermost
//! loops become one call of a `runtime::pack` routine, checked through the
//! IR interpreter and the JIT against the reference on tensorized matmul
//! (plain panel) and dense (transposing panel), random sizes with edges;
//! typed errors for loops that are no copy; deployment records the ISA and
//! falls back where it is capped away; AOT refuses it.

use super::*;

use common::{Scratch, assert_close, build, random_inputs, reduction_length, reference};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tessera::codegen::{CodegenOptions, compile, compile_object};
use tessera::runtime::pack;
use tessera::schedule::{State, Step, StepErrorKind};
use tessera::te::ComputeDag;
use tessera::tir::{self, Stmt};

use super::step::steps;

/// The packing ISAs this host allows (at least the portable one).
fn isas() -> Vec<Isa> {
    let isas = pack::allowed_isas(&host());
    assert!(isas.contains(&Isa::Generic), "{isas:?}");
    isas
}

/// Counts the micro-kernel and packing calls of `func`.
fn calls(func: &tir::PrimFunc) -> (usize, usize) {
    let (mut gemm, mut packs) = (0, 0);
    func.body.visit(&mut |s| {
        gemm += usize::from(matches!(s, Stmt::MicroKernelCall(_)));
        packs += usize::from(matches!(s, Stmt::PackCall(_)));
    });
    (gemm, packs)
}

/// Lowers `steps`, checks one packing call, and compares the IR
/// interpreter and the JIT with the reference.
fn check_packed(label: &str, dag: &ComputeDag, steps: &[Step]) {
    let state = State::replay(dag, steps).unwrap_or_else(|e| panic!("{label}: {e}"));
    let func = tir::lower(&state).unwrap_or_else(|e| panic!("{label}: lowering: {e}"));
    assert_eq!(calls(&func), (1, 1), "{label}: one of each call in\n{func}");
    let inputs = random_inputs(dag, 17);
    let want = reference(dag, &inputs);
    let interpreted =
        tir::run(&func, &inputs).unwrap_or_else(|e| panic!("{label}: IR: {e}\n{func}"));
    assert_close(
        &format!("{label} (IR)"),
        &interpreted,
        &want,
        reduction_length(dag),
    );
    let kernel = compile(&func, &CodegenOptions::for_target(host()))
        .unwrap_or_else(|e| panic!("{label}: compile: {e}\n{func}"));
    let compiled = kernel
        .run_host(&inputs)
        .unwrap_or_else(|e| panic!("{label}: run: {e}"));
    assert_close(
        &format!("{label} (JIT)"),
        &compiled,
        &want,
        reduction_length(dag),
    );
}

/// Tensorized `op` (matmul: B, dense: weight) with its B operand packed
/// per column block (transposed for dense) by the routine of `isa`.
fn packed_steps(op: &str, m_t: i64, n_t: i64, kernel: &str, isa: Isa) -> Vec<Step> {
    let (op, b, layout) = match op {
        "dense" => ("dense", "weight", r#","layout":[1,0]"#),
        _ => ("C", "B", ""),
    };
    let isa = isa.name();
    steps(&format!(
        r#"[
        {{"kind":"cache_write","stage":"{op}"}},
        {{"kind":"cache_read","stage":"{b}","readers":["{op}.local"]{layout}}},
        {{"kind":"split","stage":"{op}","iter":"i0","factors":[{m_t}]}},
        {{"kind":"split","stage":"{op}","iter":"i1","factors":[{n_t}]}},
        {{"kind":"reorder","stage":"{op}","order":["i1.0","i0.0","i0.1","i1.1"]}},
        {{"kind":"compute_at","stage":"{op}.local","target":"{op}","iter":"i0.0"}},
        {{"kind":"compute_at","stage":"{b}.local","target":"{op}","iter":"i1.0"}},
        {{"kind":"pack","stage":"{b}.local","iter":"i0","isa":"{isa}"}},
        {{"kind":"reorder","stage":"{op}.local","order":["k","i0","i1"]}},
        {{"kind":"tensorize","stage":"{op}.local","iter":"k","intrinsic":"{kernel}"}},
        {{"kind":"annotate","stage":"{op}","iter":"i1.0","annotation":"parallel"}}
    ]"#
    ))
}

#[test]
fn packed_panels_of_tensorized_matmul_and_dense_match_the_reference_for_every_isa() {
    let mut rng = StdRng::seed_from_u64(22);
    let kernels = coverage().kernels();
    for isa in isas() {
        for op in ["matmul", "dense"] {
            for case in 0..3 {
                let kernel = kernels[rng.random_range(0..kernels.len())];
                let (mr, nr) = (kernel.mr as i64, kernel.nr as i64);
                // The first case divides; the others leave edge blocks.
                let m = mr * rng.random_range(1..=2)
                    + if case == 0 {
                        0
                    } else {
                        rng.random_range(1..mr.max(2))
                    };
                let n = nr * rng.random_range(1..=2)
                    + if case == 0 {
                        0
                    } else {
                        rng.random_range(1..nr.max(2))
                    };
                let k = rng.random_range(1..=40);
                let names: [&str; 3] = ["M", "N", "K"];
                let dag = build(op, &[(names[0], m), (names[1], n), (names[2], k)]);
                let label = format!("{op} {m}x{n}x{k} {} pack {isa}", kernel.name);
                check_packed(&label, &dag, &packed_steps(op, mr, nr, kernel.name, isa));
            }
        }
    }
}

#[test]
fn the_lowered_call_has_the_strides_of_the_copy() {
    let dag = build("dense", &[("M", 8), ("N", 12), ("K", 20)]);
    let state = State::replay(
        &dag,
        &packed_steps("dense", 4, 4, "generic_4x4", Isa::Generic),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let func = tir::lower(&state).unwrap_or_else(|e| panic!("{e}"));
    let mut found = Vec::new();
    func.body.visit(&mut |s| {
        if let Stmt::PackCall(call) = s {
            found.push((
                call.extents,
                call.src.row_stride,
                call.src.col_stride,
                call.dst.row_stride,
                call.dst.col_stride,
            ));
        }
    });
    // weight[n, k] (K = 20) into weight.local[k, n] per 4 columns: rows k
    // (contiguous in the weight), columns n (20 apart).
    assert_eq!(found, vec![([20, 4], 1, 20, 4, 1)], "{func}");
    assert!(
        func.to_string().contains("// pack generic_pack 20x4"),
        "{func}"
    );
}

fn pack_error(dag: &ComputeDag, json: &str) -> String {
    match State::replay(dag, &steps(json)) {
        Err(e) => {
            assert!(matches!(e.kind, StepErrorKind::Pack { .. }), "{e}");
            e.to_string()
        }
        Ok(_) => panic!("{json} applied"),
    }
}

#[test]
fn loops_that_are_no_packing_copy_are_typed_errors() {
    let dag = build("matmul", &[("M", 8), ("N", 8), ("K", 8)]);
    let err = pack_error(
        &dag,
        r#"[{"kind":"pack","stage":"C","iter":"i0","isa":"generic"}]"#,
    );
    assert!(err.contains("not a plain copy"), "{err}");
    let read = r#"{"kind":"cache_read","stage":"B","readers":["C"]},"#;
    let err = pack_error(
        &dag,
        &format!(r#"[{read}{{"kind":"pack","stage":"B.local","iter":"i1","isa":"generic"}}]"#),
    );
    assert!(
        err.contains("second innermost") && err.contains("i0, i1"),
        "{err}"
    );
    let err = pack_error(
        &dag,
        &format!(r#"[{read}{{"kind":"pack","stage":"B.local","iter":"i0","isa":"neon"}}]"#),
    );
    assert!(
        err.contains("no packing routine for ISA 'neon'") && err.contains("generic"),
        "{err}"
    );
    let err = pack_error(
        &dag,
        &format!(
            r#"[{read}{{"kind":"pack","stage":"B.local","iter":"i0","isa":"generic"}},
            {{"kind":"annotate","stage":"B.local","iter":"i1","annotation":"vectorize"}}]"#
        ),
    );
    assert!(
        err.contains("must stay so") && err.contains("vectorize"),
        "{err}"
    );
    // A packed copy without a micro-kernel is fine on its own.
    let ok = State::replay(
        &dag,
        &steps(&format!(
            r#"[{read}{{"kind":"pack","stage":"B.local","iter":"i0","isa":"generic"}}]"#
        )),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let func = tir::lower(&ok).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(calls(&func), (0, 1), "{func}");
    let inputs = random_inputs(&dag, 3);
    let got = tir::run(&func, &inputs).unwrap_or_else(|e| panic!("{e}"));
    assert_close("copy only", &got, &reference(&dag, &inputs), 8);
}

#[test]
fn aot_refuses_a_packing_call_with_a_clear_error() {
    let dag = build("dense", &[("M", 8), ("N", 8), ("K", 8)]);
    let state = State::replay(
        &dag,
        &packed_steps("dense", 4, 4, "generic_4x4", Isa::Generic),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let func = tir::lower(&state).unwrap_or_else(|e| panic!("{e}"));
    let err =
        compile_object(&func, &CodegenOptions::for_target(host()), "dense_k").expect_err("refused");
    assert!(err.to_string().contains("packing routines"), "{err}");
}

#[test]
fn a_deployed_packed_artifact_records_its_isa_and_falls_back_where_it_is_capped_away() {
    use tessera::deploy::{FallbackReason, KernelSource, Library};
    use tessera::measure::Task;

    let widest = *isas().last().expect("one");
    if widest == Isa::Generic {
        eprintln!("skipped: only the portable packing routine runs here");
        return;
    }
    let dir = Scratch::new("pack-deploy");
    let task = Task::from_registry("dense", "M=8,N=12,K=20").expect("task");
    let steps = packed_steps("dense", 4, 4, "generic_4x4", widest);
    let artifact = common::deploy_one_record(&dir, &task, &steps);
    assert_eq!(artifact.isa.as_deref(), Some(widest.name()));

    let inputs = random_inputs(task.dag(), 4);
    let want = reference(task.dag(), &inputs);
    let library =
        Library::open_with_target(dir.join("schedules"), host().with_isa_cap(Isa::Generic))
            .expect("library");
    let loaded = library
        .kernel(task.dag())
        .expect("falls back rather than failing");
    match &loaded.source {
        KernelSource::Fallback(reason @ FallbackReason::MissingPackIsa { needs, cap, .. }) => {
            assert_eq!(needs, widest.name());
            assert!(cap.contains("with_isa_cap(generic)"), "{reason}");
            assert!(reason.to_string().contains("packing routine"), "{reason}");
        }
        other => panic!("expected a missing packing-ISA fallback, got {other:?}"),
    }
    let got = loaded
        .kernel
        .run_host(&inputs)
        .expect("the default schedule runs");
    assert_close("fallback", &got, &want, 20);

    let tuned = Library::open_with_target(dir.join("schedules"), host())
        .and_then(|l| l.kernel(task.dag()))
        .expect("loads");
    assert!(
        matches!(tuned.source, KernelSource::Tuned { .. }),
        "{:?}",
        tuned.source
    );
    let got = tuned.kernel.run_host(&inputs).expect("runs");
    assert_close("tuned", &got, &want, 20);
}
