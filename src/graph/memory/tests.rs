//! The memory plan on random graphs of elementwise, broadcast, layout,
//! convolution and alias nodes: checked against lifetimes recomputed here
//! from the graph alone, and run against the same model with no reuse.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::{ARENA_ALIGN, MemoryPlan, reads_only_at_output_index};
use crate::graph::exec::CompileOptions;
use crate::graph::ir::{BinaryOp, Graph, Node, Op, TensorInfo, UnaryOp};
use crate::graph::lower::{Lowered, lower_node};
use crate::te::{DType, HostTensor};

const A: [usize; 4] = [2, 3, 4, 4];
const FLAT: [usize; 2] = [2, 48];
const CHANNEL: [usize; 4] = [1, 3, 1, 1];

/// A random DAG over tensors of shape `A` (and its flattening), reading
/// earlier tensors at random so that lifetimes cross.
fn random_graph(rng: &mut StdRng) -> Graph {
    let mut g = Graph {
        name: "random".into(),
        opset: 17,
        ..Graph::default()
    };
    let constant = |g: &mut Graph, name: &str, shape: &[usize], seed: u64| {
        g.tensors.insert(name.into(), TensorInfo::f32(shape));
        g.constants
            .insert(name.into(), HostTensor::random(shape, DType::F32, seed));
    };
    constant(&mut g, "per_channel", &CHANNEL, 1);
    constant(&mut g, "weight", &[3, 3, 3, 3], 2);
    for (i, name) in ["gamma", "beta", "mean"].iter().enumerate() {
        constant(&mut g, name, &[3], 3 + i as u64);
    }
    g.tensors.insert("var".into(), TensorInfo::f32(&[3]));
    g.constants.insert(
        "var".into(),
        HostTensor::from_f32(&[3], vec![1.0, 0.5, 2.0]).expect("3"),
    );
    g.inputs.push("x".into());
    g.tensors.insert("x".into(), TensorInfo::f32(&A));
    let mut full = vec!["x".to_string()];
    let mut flat: Vec<String> = Vec::new();
    let nodes = rng.random_range(3..14);
    for i in 0..nodes {
        let out = format!("t{i}");
        // Mostly recent tensors, sometimes an old one (long lifetimes).
        let pick = |rng: &mut StdRng, from: &[String]| -> String {
            let back = if rng.random_bool(0.7) { 2 } else { from.len() };
            from[from.len() - rng.random_range(1..=back.min(from.len()))].clone()
        };
        let a = pick(rng, &full);
        let (op, inputs, shape): (Op, Vec<String>, &[usize]) = match rng.random_range(0..9) {
            0 if !flat.is_empty() => {
                let f = pick(rng, &flat);
                (Op::Unary(UnaryOp::Tanh), vec![f], &FLAT)
            }
            0 | 1 => (Op::Unary(UnaryOp::Relu), vec![a], &A),
            2 => {
                let b = pick(rng, &full);
                (Op::Binary(BinaryOp::Add), vec![a, b], &A)
            }
            3 => (Op::Binary(BinaryOp::Mul), vec!["per_channel".into(), a], &A),
            4 => (Op::Reshape, vec![a], &FLAT),
            5 if !flat.is_empty() => (Op::Reshape, vec![pick(rng, &flat)], &A),
            5 => (
                Op::Transpose {
                    perm: vec![0, 1, 3, 2],
                },
                vec![a],
                &A,
            ),
            6 => (
                crate::graph::passes::test_support::conv3x3(),
                vec![a, "weight".into()],
                &A,
            ),
            7 => (
                Op::BatchNormalization { epsilon: 1e-5 },
                vec![
                    a,
                    "gamma".into(),
                    "beta".into(),
                    "mean".into(),
                    "var".into(),
                ],
                &A,
            ),
            _ => {
                let b = pick(rng, &full);
                (Op::Sum, vec![a.clone(), b, a], &A)
            }
        };
        g.tensors.insert(out.clone(), TensorInfo::f32(shape));
        if shape == FLAT {
            flat.push(out.clone());
        } else {
            full.push(out.clone());
        }
        g.nodes.push(Node {
            name: format!("n{i}"),
            op,
            inputs,
            outputs: vec![out],
        });
    }
    let last = format!("t{}", nodes - 1);
    let other = format!("t{}", rng.random_range(0..nodes));
    g.outputs.push(last.clone());
    if other != last {
        g.outputs.push(other);
    }
    g
}

/// Each node output's buffer (what it aliases), written-at and last-read
/// node, recomputed from the graph alone.
fn lifetimes(g: &Graph) -> HashMap<String, (String, usize, usize)> {
    let mut base: HashMap<String, String> = HashMap::new();
    let mut out = HashMap::new();
    for (i, node) in g.nodes.iter().enumerate() {
        let o = &node.outputs[0];
        let b = match node.op {
            Op::Reshape => base.get(&node.inputs[0]).cloned(),
            _ => Some(o.clone()),
        };
        if let Some(b) = b {
            base.insert(o.clone(), b.clone());
            out.insert(o.clone(), (b, i, i));
        }
    }
    let mut last: HashMap<String, usize> = HashMap::new();
    for (i, node) in g.nodes.iter().enumerate() {
        for input in &node.inputs {
            if let Some(b) = base.get(input) {
                last.insert(b.clone(), i);
            }
        }
    }
    for o in &g.outputs {
        if let Some(b) = base.get(o) {
            last.insert(b.clone(), g.nodes.len());
        }
    }
    for (_, (b, first, end)) in out.iter_mut() {
        *end = last.get(b).copied().unwrap_or(*first).max(*first);
    }
    out
}

/// Checks `plan` of `g`; returns how many in-place pairs it has.
fn check_plan(g: &Graph, plan: &MemoryPlan) -> usize {
    let live = lifetimes(g);
    let by_index: HashMap<&String, usize> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (&n.outputs[0], i))
        .collect();
    // In-place pairs only where allowed.
    for pair in &plan.in_place {
        let node = &g.nodes[pair.node];
        let Ok(Lowered::Kernel(kernel)) = lower_node(g, node) else {
            panic!("{pair:?}: {} is no kernel", node.name);
        };
        let input = kernel
            .inputs
            .iter()
            .position(|t| *t == pair.input)
            .expect("the input is the kernel's");
        assert!(
            reads_only_at_output_index(&kernel.dag, input),
            "{pair:?}: {:?} reads its input elsewhere than at the output's index",
            node.op
        );
        assert_eq!(g.shape(&pair.input), g.shape(&pair.output), "{pair:?}");
        let input_buffer = &live[&pair.input].0;
        assert_eq!(
            live[input_buffer].2, pair.node,
            "{pair:?}: the input is read later"
        );
        assert!(
            !g.outputs.contains(&pair.input),
            "{pair:?}: a graph output overwritten"
        );
    }
    let placed: Vec<(&String, super::Placement)> = plan
        .placements()
        .map(|(t, p)| (t, *p))
        .filter(|(t, _)| by_index.contains_key(t))
        .collect();
    for (t, p) in &placed {
        assert_eq!(p.offset % ARENA_ALIGN, 0, "{t} misaligned");
        assert!(
            p.offset + p.bytes <= plan.arena_bytes,
            "{t} leaves the arena"
        );
    }
    for (i, (t1, p1)) in placed.iter().enumerate() {
        for (t2, p2) in &placed[i + 1..] {
            let (b1, f1, l1) = &live[*t1];
            let (b2, f2, l2) = &live[*t2];
            let bytes_overlap =
                p1.offset < p2.offset + p2.bytes && p2.offset < p1.offset + p1.bytes;
            if b1 == b2 || !bytes_overlap || l1 < f2 || l2 < f1 {
                continue;
            }
            // Live together and sharing bytes: only an in-place pair may,
            // touching at the node that overwrites.
            let (earlier, later, at) = if f1 < f2 {
                (b1, b2, *f2)
            } else {
                (b2, b1, *f1)
            };
            let touching = live[earlier].2 == at && live[later].1 == at;
            let pair = plan
                .in_place
                .iter()
                .any(|p| p.node == at && &live[&p.input].0 == earlier && &p.output == later);
            assert!(
                touching && pair,
                "{t1} [{f1},{l1}] and {t2} [{f2},{l2}] overlap in the arena"
            );
        }
    }
    assert!(plan.arena_bytes >= plan.lower_bound_bytes);
    assert!(plan.lower_bound_bytes <= plan.all_intermediate_bytes);
    plan.in_place.len()
}

#[test]
fn random_graphs_never_share_bytes_between_live_tensors() {
    let mut rng = StdRng::seed_from_u64(2424);
    let (mut in_place, mut graphs) = (0, 0);
    for _ in 0..300 {
        let g = random_graph(&mut rng);
        let plan = MemoryPlan::of_graph(&g, &[]).expect("plans");
        in_place += check_plan(&g, &plan);
        graphs += 1;
    }
    // The generator must exercise reuse, or the checks above prove nothing.
    assert!(
        in_place > graphs / 2,
        "{in_place} in-place pairs over {graphs} graphs"
    );
}

#[test]
fn random_graphs_compute_the_same_with_reuse_as_without() {
    let mut rng = StdRng::seed_from_u64(77);
    let input = HostTensor::random(&A, DType::F32, 9);
    let mut in_place = 0;
    for _ in 0..8 {
        // The graph after the passes, compiled as it is twice: the tensors
        // the passes make (a layout's) are planned like any other.
        let original = crate::graph::Model::from_graph(random_graph(&mut rng));
        let (g, _) = original.optimized().expect("the passes run");
        let model = crate::graph::Model::from_graph(g.clone());
        let as_it_is = CompileOptions {
            passes: false,
            ..CompileOptions::default()
        };
        let mut planned = model.compile(&as_it_is).expect("compiles");
        in_place += planned.memory_plan().in_place.len();
        // Every tensor kept: nothing is reused.
        let every: Vec<String> = g.nodes.iter().map(|n| n.outputs[0].clone()).collect();
        let mut unplanned = model
            .compile(&CompileOptions {
                keep: every,
                ..as_it_is
            })
            .expect("compiles");
        assert!(unplanned.memory_plan().in_place.is_empty());
        let inputs = vec![("x".to_string(), input.clone())];
        let want = unplanned.run(&inputs).expect("runs");
        let got = planned.run(&inputs).expect("runs");
        for ((name, w), (_, h)) in want.iter().zip(&got) {
            let (w, h) = (w.as_f32().expect("f32"), h.as_f32().expect("f32"));
            assert!(w.iter().all(|v| !v.is_nan()), "{name} holds poison");
            assert_eq!(w, h, "{name} differs with the memory plan");
        }
    }
    assert!(in_place > 0);
}

#[test]
fn an_intermediate_is_readable_only_when_kept() {
    let mut g = Graph::default();
    for (name, shape) in [("x", &A), ("r", &A), ("s", &A), ("y", &A)] {
        g.tensors.insert(name.into(), TensorInfo::f32(shape));
    }
    g.inputs.push("x".into());
    g.outputs.push("y".into());
    for (i, (input, output)) in [("x", "r"), ("r", "s"), ("s", "y")].iter().enumerate() {
        g.nodes.push(Node {
            name: format!("n{i}"),
            op: Op::Unary(UnaryOp::Neg),
            inputs: vec![input.to_string()],
            outputs: vec![output.to_string()],
        });
    }
    let model = crate::graph::Model::from_graph(g);
    let inputs = vec![("x".to_string(), HostTensor::random(&A, DType::F32, 3))];
    // Unfused, so that r and s are buffers at all.
    let unfused = CompileOptions {
        fuse: false,
        ..CompileOptions::default()
    };
    let mut compiled = model.compile(&unfused).expect("compiles");
    // r → s → y all overwrite one buffer.
    assert_eq!(compiled.memory_plan().in_place.len(), 2);
    compiled.run(&inputs).expect("runs");
    let err = compiled.tensor("r").expect_err("r was overwritten");
    assert!(err.to_string().contains("keep"), "{err}");
    let mut kept = model
        .compile(&CompileOptions {
            keep: vec!["r".into()],
            ..unfused
        })
        .expect("compiles");
    assert_eq!(kept.memory_plan().in_place.len(), 1);
    kept.run(&inputs).expect("runs");
    let r = kept.tensor("r").expect("kept");
    let x = inputs[0].1.as_f32().expect("f32");
    let r = r.as_f32().expect("f32");
    assert!(x.iter().zip(r).all(|(x, r)| *r == -*x));
}
