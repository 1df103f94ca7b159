//! Tests of sketch generation: the rule list (order, conditions, a rule
//! that ends a stage's list) and the sketches it makes.

use super::*;
use crate::ops;
use crate::runtime::Target;
use crate::schedule::Step;

fn sketches_of(op: &str, shape: &str) -> Vec<Sketch> {
    generate_sketches(&dag_of(op, shape), &Target::from_env())
}

fn dag_of(op: &str, shape: &str) -> ComputeDag {
    let spec = ops::find(op).expect("registered");
    spec.build(&spec.parse_shape(shape).expect("shape"))
        .expect("dag")
}

fn stage_of(op: &str, shape: &str, name: &str) -> Stage {
    stages_of(&dag_of(op, shape))
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("{op} has no stage {name}"))
}

fn matmul_sketches() -> Vec<Sketch> {
    sketches_of("matmul", "M=64,N=64,K=64")
}

/// Each rule's condition on `stage`, by rule name.
fn conditions(stage: &Stage) -> Vec<(&'static str, Condition)> {
    RULES
        .iter()
        .map(|rule| (rule.name(), rule.condition(stage)))
        .filter(|(_, c)| *c != Condition::Skip)
        .collect()
}

#[test]
fn the_rules_are_tried_in_ansors_order() {
    assert_eq!(
        rule_names(),
        [
            "always_inline",
            "inline_padding",
            "padding_at_consumer",
            "stencil_rows",
            "multi_level_tiling_with_fusion",
            "tensorize_into_fused_consumer",
            "multi_level_tiling_with_packing",
            "multi_level_tiling_with_cache_write",
            "tensorize_into_cache_write",
            "multi_level_tiling",
            "rfactor",
            "vector_reduce",
            "row_fusion",
            "simple",
        ]
    );
}

#[test]
fn each_kind_of_stage_meets_the_conditions_of_its_rules() {
    use Condition::{Apply, ApplyAndSkipRest};
    let matmul = stage_of("matmul", "M=64,N=64,K=64", "C");
    assert_eq!(
        conditions(&matmul),
        [
            ("multi_level_tiling_with_packing", Apply),
            ("multi_level_tiling_with_cache_write", Apply),
            ("tensorize_into_cache_write", Apply),
            ("multi_level_tiling", ApplyAndSkipRest),
            ("simple", Apply),
        ]
    );
    // Fused with its consumer, or not: both are offered.
    let dense = stage_of("dense_bias_relu", "M=8,N=16,K=16", "dense");
    assert_eq!(
        conditions(&dense),
        [
            ("multi_level_tiling_with_fusion", Apply),
            ("tensorize_into_fused_consumer", Apply),
            ("multi_level_tiling_with_packing", Apply),
            ("multi_level_tiling_with_cache_write", Apply),
            ("tensorize_into_cache_write", Apply),
            ("multi_level_tiling", ApplyAndSkipRest),
            ("vector_reduce", Apply),
            ("simple", Apply),
        ]
    );
    // A matrix-vector product (one row of data): tiling reuses only the
    // row, so the vectorized reduction is offered as well.
    let gemv = stage_of("dense_bias", "M=1,N=1000,K=2048", "dense");
    assert_eq!(
        conditions(&gemv),
        [
            ("multi_level_tiling_with_fusion", Apply),
            ("tensorize_into_fused_consumer", Apply),
            ("multi_level_tiling_with_packing", Apply),
            ("multi_level_tiling_with_cache_write", Apply),
            ("multi_level_tiling", Apply),
            ("vector_reduce", Apply),
            ("simple", Apply),
        ]
    );
    let bias = stage_of("dense_bias_relu", "M=8,N=16,K=16", "bias_add");
    assert_eq!(
        conditions(&bias),
        [("always_inline", ApplyAndSkipRest), ("simple", Apply)]
    );
    let shape = "N=1,C=8,H=16,W=16,K=16,R=3,S=3,stride=1,pad=1";
    let pad = stage_of("conv2d", shape, "pad");
    assert_eq!(
        conditions(&pad),
        [("inline_padding", Apply), ("simple", Apply)]
    );
    let sum_squares = stage_of("norm", "B=1,M=32,N=32", "sum_squares");
    assert_eq!(
        conditions(&sum_squares),
        [
            ("rfactor", Apply),
            ("vector_reduce", Apply),
            ("simple", Apply)
        ]
    );
}

/// A rule that meets `condition` on every stage and gives one variant
/// named after itself.
struct Fixed(&'static str, Condition);

impl SketchRule for Fixed {
    fn name(&self) -> &'static str {
        self.0
    }

    fn condition(&self, _stage: &Stage) -> Condition {
        self.1
    }

    fn apply(&self, _stage: &Stage, _target: &Target) -> Vec<Variant> {
        assert_ne!(
            self.1,
            Condition::Skip,
            "{}: a skipped rule applied",
            self.0
        );
        vec![Variant {
            stage: self.0.to_string(),
            kind: VariantKind::Simple,
            steps: Vec::new(),
            sites: Vec::new(),
        }]
    }
}

#[test]
fn a_rule_that_applies_and_skips_the_rest_ends_the_stages_list() {
    let stage = stage_of("relu", "M=32,N=32", "relu");
    let rules: [&dyn SketchRule; 5] = [
        &Fixed("first", Condition::Apply),
        &Fixed("skipped", Condition::Skip),
        &Fixed("second", Condition::Apply),
        &Fixed("last", Condition::ApplyAndSkipRest),
        &Fixed("never", Condition::Apply),
    ];
    let stages: Vec<String> = variants_of(&stage, &rules, &Target::from_env())
        .into_iter()
        .map(|v| v.stage)
        .collect();
    assert_eq!(stages, ["first", "second", "last"]);
    // In the real list: an always-inlined stage gets no simple schedule,
    // and a stage with a fusible consumer its fused tiles first, then the
    // cache-write and plain tilings.
    let bias = stage_of("dense_bias_relu", "M=8,N=16,K=16", "bias_add");
    let kinds: Vec<VariantKind> = variants_of(&bias, RULES, &Target::from_env())
        .into_iter()
        .map(|v| v.kind)
        .collect();
    assert_eq!(kinds, [VariantKind::Inline]);
    let dense = stage_of("dense_bias_relu", "M=8,N=16,K=16", "dense");
    let variants = variants_of(&dense, RULES, &Target::from_env());
    assert_eq!(
        variants[0].kind,
        VariantKind::TileWithFusion {
            consumer: "relu".into()
        }
    );
    let kinds: Vec<&VariantKind> = variants.iter().map(|v| &v.kind).collect();
    let last_fused = kinds
        .iter()
        .rposition(|k| {
            **k == VariantKind::TileWithFusion {
                consumer: "relu".into(),
            }
        })
        .expect("fused tiles");
    let cache_write = kinds
        .iter()
        .position(|k| **k == VariantKind::TileWithCacheWrite)
        .expect("cache-write tiles");
    assert!(last_fused < cache_write);
    assert_eq!(kinds.last(), Some(&&VariantKind::Tile));
    assert!(
        variants
            .iter()
            .filter(|v| v.fused_consumer().is_some())
            .all(|v| v.fused_consumer() == Some("relu"))
    );
}

#[test]
fn a_fused_consumer_is_scheduled_by_its_producer_or_on_its_own() {
    let sketches = sketches_of("dense_bias_relu", "M=8,N=16,K=16");
    assert_eq!(sketches[0].name, "bias_add:inline dense:tile+fuse(relu)");
    // Where the dense's tiles host the relu, the relu has no schedule of
    // its own; where they do not (a cache write), it has.
    for sketch in &sketches {
        let fused = sketch.name.contains("dense:tile+fuse(relu)")
            || fixed(sketch)
                .iter()
                .any(|s| matches!(s, Step::ComputeAt { target, .. } if target == "relu"));
        assert_eq!(sketch.name.contains("relu:"), !fused, "{}", sketch.name);
    }
    assert!(
        sketches
            .iter()
            .any(|s| s.name.contains("dense:tile+cache_write"))
    );
    assert!(sketches.iter().any(|s| s.name.ends_with("relu:simple")));
}

#[test]
fn variant_kinds_print_as_the_names_recorded_so_far() {
    let variant = |kind| Variant {
        stage: "C".into(),
        kind,
        steps: Vec::new(),
        sites: Vec::new(),
    };
    let packed = |how| VariantKind::Tensorize {
        kernel: "avx2_6x16",
        in_place: false,
        transposed_accumulator: false,
        a_panel: false,
        reduction_outer: false,
        packing: Some(Packing {
            operand: "B".into(),
            how,
        }),
    };
    let names: Vec<String> = [
        VariantKind::Inline,
        VariantKind::TileWithFusion {
            consumer: "relu".into(),
        },
        VariantKind::TileWithCacheWrite,
        VariantKind::TileWithPacking { input: "A".into() },
        VariantKind::Tile,
        VariantKind::Tensorize {
            kernel: "avx2_6x16",
            in_place: false,
            transposed_accumulator: false,
            a_panel: false,
            reduction_outer: false,
            packing: None,
        },
        VariantKind::Tensorize {
            kernel: "avx2_6x16",
            in_place: true,
            transposed_accumulator: false,
            a_panel: false,
            reduction_outer: false,
            packing: None,
        },
        VariantKind::Tensorize {
            kernel: "avx2_6x16",
            in_place: false,
            transposed_accumulator: true,
            a_panel: true,
            reduction_outer: true,
            packing: None,
        },
        packed(PackHow::Copy),
        packed(PackHow::Transposed),
        packed(PackHow::Panel),
        VariantKind::Rfactor,
        VariantKind::Simple,
    ]
    .into_iter()
    .map(|kind| variant(kind).name())
    .collect();
    assert_eq!(
        names,
        [
            "C:inline",
            "C:tile+fuse(relu)",
            "C:tile+cache_write",
            "C:tile+cache_write+pack(A)",
            "C:tile",
            "C:tensorize(avx2_6x16)",
            "C:tensorize(avx2_6x16)+in_place",
            "C:tensorize(avx2_6x16)+transposed_accumulator+a_panel+reduction_outer",
            "C:tensorize(avx2_6x16)+pack(B)",
            "C:tensorize(avx2_6x16)+pack_transposed(B)",
            "C:tensorize(avx2_6x16)+pack_panel(B)",
            "C:rfactor",
            "C:simple",
        ]
    );
}
fn fixed(sketch: &Sketch) -> Vec<&Step> {
    sketch
        .steps
        .iter()
        .filter_map(|s| match s {
            SketchStep::Fixed(step) => Some(step),
            _ => None,
        })
        .collect()
}

#[test]
fn a_packed_operand_is_computed_at_the_outermost_loops_it_depends_on() {
    let sketches = matmul_sketches();
    for (input, axis) in [("B", "i1.0"), ("A", "i0.0")] {
        let sketch = sketches
            .iter()
            .find(|s| s.name.ends_with(&format!("pack({input})")))
            .unwrap_or_else(|| panic!("no pack({input}) sketch"));
        let steps = fixed(sketch);
        let order = steps.iter().rev().find_map(|s| match s {
            Step::Reorder { stage, order } if stage == "C" => Some(order.clone()),
            _ => None,
        });
        assert_eq!(
            order.as_ref().and_then(|o| o.first()).map(String::as_str),
            Some(axis)
        );
        assert!(steps.iter().any(|s| matches!(s,
            Step::ComputeAt { stage, target, iter }
                if *stage == format!("{input}.local") && target == "C" && iter == axis)));
    }
}

#[test]
fn tile_roles_mark_the_vectorized_axis_and_the_reduction() {
    let sketches = matmul_sketches();
    let sketch = sketches
        .iter()
        .find(|s| s.name == "C:tile+cache_write")
        .expect("cache_write sketch");
    let roles = sketch.tile_roles();
    assert_eq!(roles.len(), sketch.tiles().len());
    assert_eq!(
        &roles[..3],
        &[
            TileRole::Spatial { vector: false },
            TileRole::Spatial { vector: true },
            TileRole::Reduce
        ]
    );
    assert!(roles[3..].iter().all(|r| *r == TileRole::Free));
    assert!(sketch.sites.iter().any(|s| s.stage == "C" && s.unroll_tile));
}

#[test]
fn gemm_shaped_stages_get_tensorized_sketches_with_and_without_packing() {
    let matmul = sketches_of("matmul", "M=64,N=64,K=64");
    let tensorized: Vec<&Sketch> = matmul
        .iter()
        .filter(|s| s.name.contains(":tensorize("))
        .collect();
    if Target::from_env().kernels().is_empty() {
        return;
    }
    assert!(tensorized.iter().any(|s| s.name.ends_with("+pack(B)")));
    assert!(tensorized.iter().any(|s| !s.name.contains("+pack")));
    // In place: C's own loops, its block k.1 i0.1 i1.1 innermost; no
    // cache write, no copy out.
    assert!(tensorized.iter().any(|s| s.name.contains("+in_place")));
    for sketch in &tensorized {
        let steps = fixed(sketch);
        let in_place = sketch.name.contains("+in_place");
        let computed = if in_place { "C" } else { "C.local" };
        assert!(
            steps.iter().any(|s| matches!(s,
            Step::Tensorize { stage, iter, .. } if stage == computed && iter == "k.1")),
            "{}",
            sketch.name
        );
        let cache_write = steps.iter().any(|s| matches!(s, Step::CacheWrite { .. }));
        assert_eq!(cache_write, !in_place, "{}", sketch.name);
        if in_place {
            assert!(
                steps.iter().any(|s| matches!(s,
                Step::Reorder { stage, order } if stage == "C"
                    && order.ends_with(&["k.0".into(), "k.1".into(), "i0.1".into(), "i1.1".into()]))),
                "{}",
                sketch.name
            );
        }
    }
    // B stored transposed is not contiguous along n: always packed, transposed.
    let nt = sketches_of("matmul_nt", "M=64,N=64,K=64");
    let nt: Vec<&Sketch> = nt.iter().filter(|s| s.name.contains("tensorize")).collect();
    assert!(!nt.is_empty());
    for sketch in nt {
        assert!(
            sketch.name.ends_with("+pack_transposed(B)"),
            "{}",
            sketch.name
        );
        assert!(fixed(sketch).iter().any(|s| matches!(s,
            Step::CacheRead { stage, layout: Some(l), .. } if stage == "B" && l == &[1, 0])));
    }
    // A strided convolution is tensorized only through a panel of its
    // padded input (the padding inlined into the panel, or at the root);
    // a padded one also directly, with its padding at the root.
    let strided = sketches_of("conv2d", "N=1,C=8,H=16,W=16,K=16,R=3,S=3,stride=2,pad=1");
    let strided: Vec<&Sketch> = strided
        .iter()
        .filter(|s| s.name.contains("tensorize"))
        .collect();
    let (transposed, strided): (Vec<&Sketch>, Vec<&Sketch>) = strided
        .into_iter()
        .partition(|s| s.name.contains("+transposed_accumulator"));
    assert!(!strided.is_empty());
    // Accumulated as [n, y, x, k], the weight is B, read along k.
    assert!(!transposed.is_empty());
    for sketch in &transposed {
        assert!(
            sketch.name.contains("+transposed_accumulator")
                && sketch.name.ends_with("+pack_transposed(weight)"),
            "{}",
            sketch.name
        );
        assert!(fixed(sketch).iter().any(|s| matches!(s,
            Step::CacheWrite { stage, layout: Some(l) } if stage == "conv2d" && l == &[0, 2, 3, 1])));
    }
    for sketch in &strided {
        assert!(sketch.name.ends_with("+pack_panel(pad)"), "{}", sketch.name);
        assert!(fixed(sketch).iter().any(|s| matches!(s,
            Step::PackPanel { stage, axes, .. } if stage == "pad" && axes.ends_with(&["rc".into(), "i3".into()]))));
    }
    assert!(strided.iter().any(|s| s.name.starts_with("pad:inline ")));
    assert!(transposed.iter().any(|s| s.name.contains("+a_panel")));
    let padded = sketches_of("conv2d", "N=1,C=8,H=16,W=16,K=16,R=3,S=3,stride=1,pad=1");
    let padded: Vec<&Sketch> = padded
        .iter()
        .filter(|s| s.name.contains("tensorize"))
        .collect();
    assert!(padded.iter().any(|s| s.name.ends_with("+pack_panel(pad)")));
    assert!(
        padded
            .iter()
            .filter(|s| !s.name.ends_with("+pack_panel(pad)"))
            .filter(|s| !s.name.contains("+transposed_accumulator"))
            .all(|s| s.name.starts_with("pad:simple "))
    );
}

/// The names of the sketches of `op` at `shape`.
fn sketch_names(op: &str, shape: &str) -> Vec<String> {
    sketches_of(op, shape).into_iter().map(|s| s.name).collect()
}

#[test]
fn normalisations_get_one_row_fused_sketch_family_from_their_structure() {
    let softmax = sketch_names("softmax", "M=128,N=1024");
    let fused = "softmax:row_fusion(row_inv,row_sum,exp,row_max)";
    let with_fusion: Vec<&String> = softmax.iter().filter(|n| n.contains(fused)).collect();
    // row_max and row_sum each reduce lane-wise or not; never also placed
    // in another consumer.
    assert_eq!(with_fusion.len(), 4, "{softmax:?}");
    assert!(
        with_fusion.iter().all(|n| !n.contains("vector_reduce@")),
        "{with_fusion:?}"
    );
    // The per-row reciprocal is not inlined into the row.
    assert!(
        softmax.iter().all(|n| !n.contains("row_inv:inline")),
        "{softmax:?}"
    );
    let layer_norm = sketch_names("layer_norm", "M=128,N=1024");
    assert!(
        layer_norm
            .iter()
            .any(|n| n.contains("layer_norm:row_fusion(rstd,variance,mean)")),
        "{layer_norm:?}"
    );
    // No row chain: a 2-norm per batch, a matrix product with its bias.
    for (op, shape) in [
        ("norm", "B=2,M=8,N=8"),
        ("dense_bias_relu", "M=8,N=16,K=16"),
    ] {
        let names = sketch_names(op, shape);
        assert!(
            names.iter().all(|n| !n.contains("row_fusion")),
            "{op}: {names:?}"
        );
    }
}

#[test]
fn the_row_fused_sketch_places_consumers_first_at_the_row_loop() {
    let sketch = sketches_of("layer_norm", "M=16,N=40")
        .into_iter()
        .find(|s| s.name.contains("row_fusion"))
        .expect("a row-fused sketch");
    let placed: Vec<(&str, &str, &str)> = fixed(&sketch)
        .into_iter()
        .filter_map(|step| match step {
            Step::ComputeAt {
                stage,
                target,
                iter,
            } => Some((stage.as_str(), target.as_str(), iter.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        placed,
        [
            ("rstd", "layer_norm", "i0"),
            ("variance", "layer_norm", "i0"),
            ("mean", "layer_norm", "i0"),
        ]
    );
}

#[test]
fn padding_is_computed_in_its_window_consumers_plane_or_row_loop() {
    let shape = "N=1,C=8,H=14,W=14,R=3,S=3,stride=2,pad=1";
    let pad = stage_of("max_pool2d", shape, "pad");
    let consumer = pad.window_consumer.as_ref().expect("a window consumer");
    assert_eq!(consumer.name, "max_pool2d");
    assert_eq!(consumer.plane_loop, "i1");
    assert_eq!(consumer.row_loop.as_deref(), Some("i2"));
    let names: Vec<String> = sketches_of("max_pool2d", shape)
        .into_iter()
        .map(|s| s.name)
        .collect();
    for wanted in [
        "pad:inline",
        "pad:at(max_pool2d.i1)",
        "pad:at(max_pool2d.i2)",
        "pad:simple",
    ] {
        assert!(
            names.iter().any(|n| n.contains(wanted)),
            "{wanted} in {names:?}"
        );
    }
    // A tiled consumer (data reuse: the weights) would move the attachment
    // into its innermost tile; its padding stays inlined or at the root.
    let depthwise = stage_of("depthwise_conv2d", "N=1,C=8,H=14,W=14,R=3,S=3", "pad");
    assert!(depthwise.window_consumer.is_none());
    // No padding stage, no window consumer.
    let matmul = stages_of(&dag_of("matmul", "M=8,N=8,K=8"));
    assert!(matmul.iter().all(|s| s.window_consumer.is_none()));
}

#[test]
fn stencil_rows_apply_to_a_depthwise_window_and_not_to_a_gemm() {
    let applies = |op: &str, shape: &str, stage: &str| {
        conditions(&stage_of(op, shape, stage))
            .iter()
            .any(|(name, c)| *name == "stencil_rows" && *c == Condition::Apply)
    };
    let depthwise = "N=1,C=8,H=14,W=14,R=3,S=3,stride=2,pad=1";
    assert!(applies("depthwise_conv2d", depthwise, "depthwise_conv2d"));
    // Input channels summed outside the window: a GEMM.
    assert!(!applies(
        "conv2d",
        "N=1,C=4,H=14,W=14,K=8,R=3,S=3",
        "conv2d"
    ));
    assert!(applies("conv2d", "N=1,C=1,H=14,W=14,K=8,R=3,S=3", "conv2d"));
    assert!(!applies("matmul", "M=16,N=16,K=16", "C"));
    // A channel summed beside one window axis is no two-axis window.
    assert!(!applies("conv1d", "N=1,C=8,L=32,K=8,R=3", "conv1d"));
    let sketches = sketches_of("depthwise_conv2d", depthwise);
    let stencil: Vec<&str> = sketches
        .iter()
        .filter(|s| s.name.contains("_stencil)"))
        .map(|s| s.name.as_str())
        .collect();
    let wide = crate::runtime::stencil::allowed_isas(&Target::from_env());
    assert_eq!(stencil.is_empty(), wide.is_empty(), "{stencil:?}");
}

#[test]
fn a_short_channel_nhwc_convolution_is_tensorized_over_a_whole_window_row() {
    // The depth (kc) of every tensorized block of `op` at `shape`.
    let depths = |shape: &str| -> Vec<(String, i64)> {
        sketches_of("conv2d_nhwc_bias", shape)
            .iter()
            .filter(|s| s.name.contains(":tensorize("))
            .flat_map(|s| s.steps.iter())
            .filter_map(|step| match step {
                SketchStep::Tile {
                    iter,
                    extent,
                    role: TileRole::KernelDepth,
                    ..
                } => Some((iter.clone(), *extent)),
                _ => None,
            })
            .collect()
    };
    // An image's 3 channels: the 7 columns and 3 channels of a window row
    // are one contiguous run of 21, one kernel call's k.
    let stem = depths("N=1,C=3,H=32,W=32,K=64,R=7,S=7,stride=2,pad=3");
    assert!(!stem.is_empty());
    assert!(
        stem.iter().all(|d| d == &("rsc".to_string(), 21)),
        "{stem:?}"
    );
    // With 16 channels or more, the channels alone are k.
    let wide = depths("N=1,C=16,H=8,W=8,K=32,R=3,S=3,stride=1,pad=1");
    assert!(!wide.is_empty());
    assert!(
        wide.iter().all(|d| d == &("rc".to_string(), 16)),
        "{wide:?}"
    );
}

#[test]
fn a_constant_b_larger_than_l2_is_read_only_through_a_packing_copy() {
    let target = Target::from_env();
    if target.kernels().is_empty() {
        eprintln!("skipped: no micro-kernel on this target");
        return;
    }
    let Some(l2) = target.data_cache_bytes(2) else {
        eprintln!("skipped: this machine's L2 size is unknown");
        return;
    };
    // B is 64 MB: beyond any L2.
    assert!(4096 * 4096 * 4 > l2);
    let dag = dag_of("matmul", "M=16,N=4096,K=4096");
    let tensorized = |constants: &[String]| -> Vec<String> {
        generate_sketches_for(&dag, &target, constants)
            .into_iter()
            .filter(|s| s.name.contains(":tensorize("))
            .map(|s| s.name)
            .collect()
    };
    // A constant weight: its packing copy is laid out ahead of time.
    let constant = tensorized(&["B".to_string()]);
    assert!(!constant.is_empty());
    for name in &constant {
        assert!(name.ends_with("+pack(B)"), "{name}");
    }
    // An activation pays its copy on every run: read in place too.
    let activation = tensorized(&[]);
    assert!(
        activation.iter().any(|n| n.ends_with("+pack(B)")),
        "{activation:?}"
    );
    assert!(
        activation.iter().any(|n| !n.contains("pack(B)")),
        "{activation:?}"
    );
}
