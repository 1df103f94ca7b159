//! The pack step: a packing copy (`cache_read` panel) whose two innermost
//! loops become one call of a `runtime::pack` routine, checked through the
//! IR interpreter and the JIT against the reference on tensorized matmul
//! (plain panel) and dense (transposing panel), random sizes with edges,
//! and on a convolution's window panel (gathered by a routine, read by one
//! call over the whole window); typed errors for loops that are no copy;
//! deployment records the ISA and falls back where it is capped away; AOT
//! refuses it.

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

/// A small-channel strided convolution (a network's stem) as an im2col
/// GEMM: its padded input gathered per output row and column block into a
/// `[rc, rr, rs, column]` panel by the routine of `isa`, the block
/// tensorized at `rs`.
fn window_panel_steps(m_t: i64, n_t: i64, kernel: &str, isa: Isa) -> Vec<Step> {
    let isa = isa.name();
    steps(&format!(
        r#"[
        {{"kind":"split","stage":"conv2d_bias","iter":"i1","factors":[{m_t}]}},
        {{"kind":"split","stage":"conv2d_bias","iter":"i3","factors":[{n_t}]}},
        {{"kind":"reorder","stage":"conv2d_bias","order":["i0","i2","i3.0","i1.0","i1.1","i3.1"]}},
        {{"kind":"compute_at","stage":"conv2d","target":"conv2d_bias","iter":"i1.0"}},
        {{"kind":"reorder","stage":"conv2d","order":["i0","i2","rc","rr","rs","i1","i3"]}},
        {{"kind":"tensorize","stage":"conv2d","iter":"rs","intrinsic":"{kernel}"}},
        {{"kind":"pack_panel","stage":"pad","reader":"conv2d","axes":["i0","i2","rc","rr","rs","i3"]}},
        {{"kind":"compute_at","stage":"pad.panel","target":"conv2d_bias","iter":"i3.0"}},
        {{"kind":"pack","stage":"pad.panel","iter":"rs","isa":"{isa}"}}
    ]"#
    ))
}

#[test]
fn a_window_panel_is_gathered_by_a_packing_routine_and_read_by_one_call_over_the_whole_window() {
    let mut rng = StdRng::seed_from_u64(7);
    let kernels = coverage().kernels();
    for isa in isas() {
        let kernel = kernels[rng.random_range(0..kernels.len())];
        let (mr, nr) = (kernel.mr as i64, kernel.nr as i64);
        // Output channels and columns leave edge blocks; stride 2 reads
        // every other column (the strided routine's path), stride 1 rows.
        for (stride, c, r) in [(2, 3, 5), (1, 2, 3)] {
            let k = mr + rng.random_range(1..mr.max(2));
            let params = [
                ("N", 1),
                ("C", c),
                ("H", 9),
                ("W", nr + 7),
                ("K", k),
                ("R", r),
                ("S", r),
                ("stride", stride),
                ("pad", r / 2),
                ("dilation", 1),
            ];
            let dag = build("conv2d_bias", &params);
            let label = format!("stem {params:?} {} pack {isa}", kernel.name);
            let steps = window_panel_steps(mr, nr, kernel.name, isa);
            check_packed(&label, &dag, &steps);
            let state = State::replay(&dag, &steps).unwrap_or_else(|e| panic!("{label}: {e}"));
            let func = tir::lower(&state).unwrap_or_else(|e| panic!("{label}: {e}"));
            let mut depth = Vec::new();
            func.body.visit(&mut |s| {
                if let Stmt::MicroKernelCall(call) = s {
                    depth.push((call.kc, call.counts[2].as_int(), call.accumulate.as_int()));
                }
            });
            // The rc and rr loops around the kernel's rs block are folded
            // into one call that starts every tile from zero.
            assert_eq!(
                depth,
                vec![(c * r * r, Some(c * r * r), Some(0))],
                "{label}\n{func}"
            );
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
fn a_panel_of_an_inlined_stage_is_no_packing_copy_in_either_order() {
    let params = [
        ("N", 1),
        ("C", 3),
        ("H", 9),
        ("W", 11),
        ("K", 4),
        ("R", 3),
        ("S", 3),
        ("stride", 2),
        ("pad", 1),
        ("dilation", 1),
    ];
    let dag = build("conv2d_bias", &params);
    let json = |steps: &[Step]| serde_json::to_string(steps).expect("serialises");
    let packed = window_panel_steps(4, 4, "generic_4x4", Isa::Generic);
    let inline = Step::ComputeInline {
        stage: "pad".into(),
    };
    // The padding inlined first: the panel stores a select, not a read.
    let mut inline_then_pack = packed.clone();
    inline_then_pack.insert(inline_then_pack.len() - 1, inline.clone());
    let err = pack_error(&dag, &json(&inline_then_pack));
    assert!(err.contains("stage 'pad', which is inlined"), "{err}");
    // Packed first: inlining the padding afterwards is refused.
    let mut pack_then_inline = packed;
    pack_then_inline.push(inline);
    let err = pack_error(&dag, &json(&pack_then_inline));
    assert!(
        err.contains("must stay so") && err.contains("inlined"),
        "{err}"
    );
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
