//! Tensorize with a stencil intrinsic: a depthwise convolution's output
//! rows as calls of the `std::arch` stencil primitives, by hand-written
//! schedules (strides, dilations, windows, split rows with edges, a fused
//! bias + clip consumer) and by the stencil sketches filled at random,
//! each checked through the IR interpreter and the JIT against the
//! reference; blocks that do not fit are typed errors.

use super::step::{check_calls, steps};
use super::*;

use common::build;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tessera::runtime::stencil;
use tessera::schedule::{State, StepErrorKind};
use tessera::search::{generate_sketches, materialize, random_decisions};
use tessera::te::ComputeDag;
use tessera::tir::Stmt;

/// The stencil primitives this host may run, widest first; the ones left
/// out are said.
fn primitives() -> Vec<&'static stencil::StencilPrimitive> {
    let target = host();
    let allowed = stencil::allowed_isas(&target);
    let mut out: Vec<_> = stencil::all_primitives()
        .iter()
        .filter(|p| allowed.contains(&p.isa))
        .collect();
    for p in stencil::all_primitives() {
        if !allowed.contains(&p.isa) {
            eprintln!(
                "skipped stencil primitive {}: this host allows {}",
                p.name,
                target.isa()
            );
        }
    }
    out.sort_by_key(|p| std::cmp::Reverse(p.isa));
    let _ = coverage();
    out
}

/// Lowers `steps` on `dag`, checks it calls the stencil at least once, and
/// compares the IR interpreter and the JIT (for `target`) with the reference.
fn check_stencil(
    target: &Target,
    label: &str,
    dag: &ComputeDag,
    steps: &[tessera::schedule::Step],
) {
    let count = |s: &Stmt, n| n + usize::from(matches!(s, Stmt::StencilCall(_)));
    check_calls(target, label, dag, steps, "stencil calls", count, |n| {
        n >= 1
    });
}

/// `depthwise_conv2d` with the padding per channel plane and each output
/// row one stencil call; with `row_split`, the row split in two and the
/// block its inner part (an edge where the split does not divide).
fn depthwise_steps(
    primitive: &str,
    padded: bool,
    row_split: Option<i64>,
    parallel: bool,
) -> Vec<tessera::schedule::Step> {
    let stage = "depthwise_conv2d";
    let (split, row_loops, block) = match row_split {
        Some(f) => (
            format!(r#"{{"kind":"split","stage":"{stage}","iter":"i3","factors":[{f}]}},"#),
            r#""i3.0","#,
            "i3.1",
        ),
        None => (String::new(), "", "i3"),
    };
    let parallel = if parallel {
        format!(r#",{{"kind":"annotate","stage":"{stage}","iter":"i1","annotation":"parallel"}}"#)
    } else {
        String::new()
    };
    let pad = if padded {
        format!(r#"{{"kind":"compute_at","stage":"pad","target":"{stage}","iter":"i1"}},"#)
    } else {
        String::new()
    };
    steps(&format!(
        r#"[
        {split}
        {{"kind":"reorder","stage":"{stage}","order":["i0","i1","i2",{row_loops}"{block}","rr","rs"]}},
        {pad}
        {{"kind":"tensorize","stage":"{stage}","iter":"{block}","intrinsic":"{primitive}"}}
        {parallel}
    ]"#
    ))
}

#[test]
fn depthwise_rows_as_stencil_calls_match_the_reference() {
    let cases: &[(i64, i64, i64, i64, i64, i64)] = &[
        // (C, H=W, R=S, stride, pad, dilation)
        (3, 9, 3, 1, 1, 1),
        (2, 16, 3, 2, 1, 1),
        (4, 7, 3, 1, 1, 1),
        (2, 23, 5, 1, 2, 1),
        (3, 19, 3, 2, 0, 1),
        (2, 40, 3, 1, 2, 2),
        (1, 70, 7, 3, 3, 1),
        (2, 33, 1, 1, 0, 1),
    ];
    for p in primitives() {
        for &(c, hw, rs, stride, pad, dilation) in cases {
            let dag = build(
                "depthwise_conv2d",
                &[
                    ("N", 1),
                    ("C", c),
                    ("H", hw),
                    ("W", hw),
                    ("R", rs),
                    ("S", rs),
                    ("stride", stride),
                    ("pad", pad),
                    ("dilation", dilation),
                ],
            );
            let label = format!(
                "{} C={c} {hw}x{hw} {rs}x{rs}/{stride} pad {pad} dil {dilation}",
                p.name
            );
            check_stencil(
                &host(),
                &format!("{label} rows"),
                &dag,
                &depthwise_steps(p.name, pad > 0, None, true),
            );
            check_stencil(
                &host(),
                &format!("{label} rows split 16"),
                &dag,
                &depthwise_steps(p.name, pad > 0, Some(16), false),
            );
            check_stencil(
                &host(),
                &format!("{label} rows split 5"),
                &dag,
                &depthwise_steps(p.name, pad > 0, Some(5), true),
            );
        }
    }
}

#[test]
fn a_depthwise_block_tensorized_with_a_gemm_kernel_or_a_gemm_block_with_a_stencil_is_refused() {
    let Some(p) = primitives().first().copied() else {
        return;
    };
    let refused = |dag: &ComputeDag, json: &str, why: &str| {
        let err = State::replay(dag, &steps(json))
            .err()
            .unwrap_or_else(|| panic!("{json} was accepted"));
        assert!(
            matches!(&err.kind, StepErrorKind::Tensorize { reason, .. } if reason.contains(why)),
            "{err}"
        );
    };
    let dag = build("depthwise_conv2d", &[("C", 2), ("H", 8), ("W", 8)]);
    refused(
        &dag,
        &format!(
            r#"[{{"kind":"reorder","stage":"depthwise_conv2d","order":["i0","i1","rr","i2","i3","rs"]}},
                {{"kind":"tensorize","stage":"depthwise_conv2d","iter":"i2","intrinsic":"{}"}}]"#,
            p.name
        ),
        "one spatial loop and two reduction loops (a stencil), it has 1",
    );
    let gemm = micro_kernels::all_kernels()
        .first()
        .map(|k| k.name)
        .unwrap_or("generic_4x4");
    refused(
        &dag,
        &format!(
            r#"[{{"kind":"tensorize","stage":"depthwise_conv2d","iter":"i3","intrinsic":"{gemm}"}}]"#
        ),
        "exactly one reduction loop and two spatial loops (a micro-kernel), it has 2",
    );
    let matmul = build("matmul", &[("M", 8), ("N", 8), ("K", 8)]);
    refused(
        &matmul,
        &format!(
            r#"[{{"kind":"reorder","stage":"C","order":["k","i0","i1"]}},
                {{"kind":"tensorize","stage":"C","iter":"k","intrinsic":"{}"}}]"#,
            p.name
        ),
        "it has 1 reduction loop(s)",
    );
}

/// The depthwise convolution of a MobileNet block as a model task has it:
/// padding, the convolution, a per-channel bias and a clip to [0, 6].
fn depthwise_bias_clip(c: i64, hw: i64, stride: i64) -> ComputeDag {
    use tessera::te::{DType, compute, floordiv, max, min, placeholder, reduce_axis, select, sum};
    let out = (hw + 2 - 3) / stride + 1;
    let data = placeholder("data", &[1, c, hw, hw], DType::F32);
    let weight = placeholder("weight", &[c, 1, 3, 3], DType::F32);
    let bias = placeholder("bias", &[c], DType::F32);
    let padded = compute("pad", &[1, c, hw + 2, hw + 2], |ix| {
        let inside = ix[2].ge(1) & ix[2].lt(hw + 1) & ix[3].ge(1) & ix[3].lt(hw + 1);
        select(
            inside,
            data.at([ix[0].clone(), ix[1].clone(), &ix[2] - 1, &ix[3] - 1]),
            0.0f32,
        )
    });
    // As the ONNX importer writes a grouped convolution: the group's one
    // input channel as a reduction axis of extent 1.
    let rc = reduce_axis(1, "rc");
    let (rr, rs) = (reduce_axis(3, "rr"), reduce_axis(3, "rs"));
    let conv = compute("conv", &[1, c, out, out], |ix| {
        sum(
            padded.at([
                ix[0].clone(),
                floordiv(&ix[1], 1) * 1 + &rc,
                &ix[2] * stride + &rr,
                &ix[3] * stride + &rs,
            ]) * weight.at([ix[1].clone(), rc.clone(), rr.clone(), rs.clone()]),
            [&rc, &rr, &rs],
        )
    });
    let biased = compute("bias_add", &[1, c, out, out], |ix| {
        conv.at(ix.to_vec()) + bias.at([&ix[1]])
    });
    let clip = compute("clip", &[1, c, out, out], |ix| {
        min(max(biased.at(ix.to_vec()), 0.0f32), 6.0f32)
    });
    ComputeDag::new(&[data, weight, bias], &[clip]).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn stencil_sketches_filled_at_random_match_the_reference() {
    if primitives().is_empty() {
        return;
    }
    let dags = [
        (
            "depthwise 3x3",
            build("depthwise_conv2d", &[("C", 3), ("H", 20), ("W", 20)]),
        ),
        (
            "depthwise 3x3/2",
            build(
                "depthwise_conv2d",
                &[("C", 2), ("H", 17), ("W", 17), ("stride", 2)],
            ),
        ),
        ("depthwise+bias+clip", depthwise_bias_clip(4, 18, 1)),
        ("depthwise+bias+clip /2", depthwise_bias_clip(3, 15, 2)),
    ];
    // Under every cap that still allows a stencil primitive.
    let caps: Vec<Target> = coverage()
        .covered()
        .iter()
        .map(|&isa| host().with_isa_cap(isa))
        .filter(|t| !stencil::allowed_isas(t).is_empty())
        .collect();
    for ((label, dag), target) in dags.iter().flat_map(|d| caps.iter().map(move |t| (d, t))) {
        let sketches: Vec<_> = generate_sketches(dag, target)
            .into_iter()
            .filter(|s| s.name.contains("_stencil)"))
            .collect();
        assert!(!sketches.is_empty(), "{label}: no stencil sketch");
        let label = format!("{label} (ISA cap {})", target.isa());
        for sketch in &sketches {
            for seed in 0..3 {
                let mut rng = StdRng::seed_from_u64(seed);
                let decisions = random_decisions(sketch, &mut rng);
                let state = materialize(dag, sketch, &decisions)
                    .unwrap_or_else(|e| panic!("{label} [{}]: {e}", sketch.name));
                check_stencil(
                    target,
                    &format!("{label} [{}] {decisions:?}", sketch.name),
                    dag,
                    state.steps(),
                );
            }
        }
    }
}

#[test]
fn the_rows_of_a_channel_are_one_call() {
    let Some(p) = primitives().first().copied() else {
        return;
    };
    for (stride, out_rows) in [(1, 20), (2, 10)] {
        let dag = build(
            "depthwise_conv2d",
            &[("C", 3), ("H", 20), ("W", 20), ("stride", stride)],
        );
        let steps = depthwise_steps(p.name, true, None, true);
        let state = State::replay(&dag, &steps).unwrap_or_else(|e| panic!("{e}"));
        let func = tessera::tir::lower(&state).unwrap_or_else(|e| panic!("{e}"));
        let mut rows = Vec::new();
        func.body.visit(&mut |s| {
            if let Stmt::StencilCall(call) = s {
                rows.push(call.rows);
            }
        });
        assert_eq!(
            rows,
            [out_rows],
            "stride {stride}: one call of every row in\n{func}"
        );
        check_stencil(&host(), &format!("stride {stride} rows"), &dag, &steps);
    }
}

#[test]
fn a_depthwise_rows_bias_and_clip_are_its_calls_epilogue_one_call_per_plane() {
    for p in primitives() {
        for (stride, hw) in [(1, 18), (2, 15)] {
            let dag = depthwise_bias_clip(3, hw, stride);
            let out_rows = (hw + 2 - 3) / stride + 1;
            let steps = steps(&format!(
                r#"[
                {{"kind":"compute_inline","stage":"bias_add"}},
                {{"kind":"compute_inline","stage":"pad"}},
                {{"kind":"compute_at","stage":"conv","target":"clip","iter":"i2"}},
                {{"kind":"compute_at","stage":"pad","target":"clip","iter":"i1"}},
                {{"kind":"reorder","stage":"conv","order":["i0","i1","i2","rc","i3","rr","rs"]}},
                {{"kind":"tensorize","stage":"conv","iter":"i3","intrinsic":"{}"}},
                {{"kind":"annotate","stage":"clip","iter":"i3","annotation":"vectorize"}},
                {{"kind":"fuse","stage":"clip","iters":["i0","i1"]}},
                {{"kind":"annotate","stage":"clip","iter":"i0@i1","annotation":"parallel"}}
            ]"#,
                p.name
            ));
            let state = State::replay(&dag, &steps).unwrap_or_else(|e| panic!("{e}"));
            let func = tessera::tir::lower(&state).unwrap_or_else(|e| panic!("{e}"));
            let mut calls = Vec::new();
            func.body.visit(&mut |s| {
                if let Stmt::StencilCall(call) = s {
                    calls.push((**call).clone());
                }
            });
            let [call] = calls.as_slice() else {
                panic!("one call in\n{func}");
            };
            let epilogue = call
                .epilogue
                .as_ref()
                .unwrap_or_else(|| panic!("an epilogue in\n{func}"));
            let addends: Vec<(i64, i64)> = epilogue
                .addends
                .iter()
                .map(|a| (a.row_stride, a.col_stride))
                .collect();
            assert_eq!(addends, [(0, 0)], "the channel's bias\n{func}");
            assert_eq!((epilogue.lower, epilogue.upper), (Some(0.0), Some(6.0)));
            assert_eq!(call.rows, out_rows, "one call per plane\n{func}");
            assert!(
                !func.to_string().contains("alloc conv"),
                "no row buffer left\n{func}"
            );
            check_stencil(
                &host(),
                &format!("{} stride {stride} fused", p.name),
                &dag,
                &steps,
            );
        }
    }
}
