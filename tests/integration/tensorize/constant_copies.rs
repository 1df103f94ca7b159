//! Copies of constant inputs hoisted out of the kernel
//! (`tir::hoist_constant_copy`): every tensorized sketch of the small cases,
//! randomly filled, with each input in turn taken as a constant — the
//! packer run on the input, the kernel run on the packed buffer, both
//! through the IR interpreter and the JIT, against the reference.

use super::*;

use common::{assert_close, build, random_inputs, reduction_length, reference};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tessera::codegen::{CodegenOptions, compile};
use tessera::schedule::State;
use tessera::search::{generate_sketches, materialize, random_decisions};
use tessera::te::{ComputeDag, HostTensor};
use tessera::tir::{self, ConstantCopyError, Stmt};

/// Runs `func` on `inputs` through the interpreter and the JIT.
fn both_ways(label: &str, func: &tir::PrimFunc, inputs: &[HostTensor]) -> [Vec<HostTensor>; 2] {
    let interpreted = tir::run(func, inputs).unwrap_or_else(|e| panic!("{label}: IR: {e}\n{func}"));
    let compiled = compile(func, &CodegenOptions::for_target(host()))
        .unwrap_or_else(|e| panic!("{label}: compile: {e}\n{func}"))
        .run_host(inputs)
        .unwrap_or_else(|e| panic!("{label}: run: {e}\n{func}"));
    [interpreted, compiled]
}

/// Hoists every input of `state`'s kernel that can be, checks each hoisted
/// kernel on its packed input; returns how many were hoisted.
fn check_hoisted(label: &str, dag: &ComputeDag, state: &State) -> usize {
    let func = tir::lower(state).unwrap_or_else(|e| panic!("{label}: lowering: {e}"));
    let inputs = random_inputs(dag, 5);
    let want = reference(dag, &inputs);
    let mut hoisted = 0;
    for (position, input) in dag.inputs().iter().enumerate() {
        let label = format!("{label} constant {}", input.name());
        let Ok(h) = tir::hoist_constant_copy(&func, input.name()) else {
            continue;
        };
        hoisted += 1;
        // The kernel copies nothing from the input any more: it takes the
        // packed buffer, which the packer fills.
        let copies_left = h
            .kernel
            .to_string()
            .matches(&format!("{}.local", input.name()))
            .count();
        assert_eq!(copies_left, 0, "{label}: a copy is left\n{}", h.kernel);
        let [packed_ir, packed_jit] = both_ways(&label, &h.packer, &[inputs[position].clone()]);
        assert_eq!(packed_ir[0].shape(), &[h.packed_len as usize], "{label}");
        assert_eq!(packed_ir, packed_jit, "{label}: the packers disagree");
        let mut packed_inputs = inputs.clone();
        packed_inputs[position] = packed_jit[0].clone();
        for (way, got) in ["IR", "JIT"]
            .iter()
            .zip(both_ways(&label, &h.kernel, &packed_inputs))
        {
            assert_close(
                &format!("{label} ({way})"),
                &got,
                &want,
                reduction_length(dag),
            );
        }
    }
    hoisted
}

#[test]
fn hoisted_copies_of_random_tensorized_sketches_compute_the_reference() {
    let mut hoisted = 0;
    let mut ops_hoisted = Vec::new();
    for (op, params) in common::small_cases() {
        let dag = build(op, &params);
        let sketches: Vec<_> = generate_sketches(&dag, &host())
            .into_iter()
            .filter(|s| s.name.contains(":tensorize("))
            .collect();
        for sketch in &sketches {
            for seed in 0..3 {
                let mut rng = StdRng::seed_from_u64(seed);
                let decisions = random_decisions(sketch, &mut rng);
                let state = materialize(&dag, sketch, &decisions)
                    .unwrap_or_else(|e| panic!("{op} [{}]: {e}", sketch.name));
                let label = format!("{op} {params:?} [{}] {decisions:?}", sketch.name);
                let n = check_hoisted(&label, &dag, &state);
                if n > 0 && !ops_hoisted.contains(&op) {
                    ops_hoisted.push(op);
                }
                hoisted += n;
            }
        }
    }
    // Matrix products and convolutions pack their weights in most sketches.
    for op in ["matmul", "dense", "conv2d", "conv1d", "batch_matmul"] {
        assert!(
            ops_hoisted.contains(&op),
            "nothing of {op} hoisted: {ops_hoisted:?}"
        );
    }
    assert!(hoisted >= 50, "only {hoisted} hoisted copies");
}

/// matmul with B packed per column panel inside the row loop, through the
/// `pack` routine when `pack` is set.
fn panel_steps(pack: bool) -> Vec<tessera::schedule::Step> {
    let pack = if pack {
        r#",{"kind":"pack","stage":"B.local","iter":"i0","isa":"generic"}"#
    } else {
        ""
    };
    super::step::steps(&format!(
        r#"[
        {{"kind":"cache_write","stage":"C"}},
        {{"kind":"split","stage":"C","iter":"i0","factors":[4]}},
        {{"kind":"split","stage":"C","iter":"i1","factors":[4]}},
        {{"kind":"reorder","stage":"C","order":["i1.0","i0.0","i0.1","i1.1"]}},
        {{"kind":"compute_at","stage":"C.local","target":"C","iter":"i0.0"}},
        {{"kind":"reorder","stage":"C.local","order":["k","i0","i1"]}},
        {{"kind":"tensorize","stage":"C.local","iter":"k","intrinsic":"generic_4x4"}},
        {{"kind":"cache_read","stage":"B","readers":["C.local"]}},
        {{"kind":"compute_at","stage":"B.local","target":"C","iter":"i1.0"}}{pack}
    ]"#
    ))
}

#[test]
fn a_panel_per_column_block_is_made_once_per_block_and_padded_at_the_edge() {
    // N = 10 in blocks of 4: three panels of K × 4, the last one half
    // padding, which the packer leaves zero.
    let dag = build("matmul", &[("M", 6), ("N", 10), ("K", 5)]);
    for pack in [false, true] {
        let state = State::replay(&dag, &panel_steps(pack)).expect("replays");
        let func = tir::lower(&state).expect("lowers");
        let h = tir::hoist_constant_copy(&func, "B").expect("hoists");
        assert_eq!(h.packed_len, 3 * 5 * 4, "pack {pack}");
        let calls = |f: &tir::PrimFunc| {
            let mut n = 0;
            f.body
                .visit(&mut |s| n += usize::from(matches!(s, Stmt::PackCall(_))));
            n
        };
        assert_eq!(calls(&h.kernel), 0, "pack {pack}: the kernel packs nothing");
        assert_eq!(calls(&h.packer), usize::from(pack), "pack {pack}");
        let inputs = random_inputs(&dag, 3);
        let b = inputs[1].as_f32().expect("f32").to_vec();
        let packed = tir::run(&h.packer, &[inputs[1].clone()]).expect("packs");
        let packed = packed[0].as_f32().expect("f32");
        // Panel p, row k, column c is B[k, 4p + c], zero past column 9.
        for p in 0..3 {
            for k in 0..5 {
                for c in 0..4 {
                    let want = if 4 * p + c < 10 {
                        b[k * 10 + 4 * p + c]
                    } else {
                        0.0
                    };
                    assert_eq!(
                        packed[(p * 5 + k) * 4 + c],
                        want,
                        "pack {pack}: ({p}, {k}, {c})"
                    );
                }
            }
        }
        check_hoisted(&format!("panels, pack {pack}"), &dag, &state);
    }
}

#[test]
fn what_cannot_be_hoisted_is_a_typed_error_naming_the_input() {
    let dag = build("matmul", &[("M", 6), ("N", 10), ("K", 5)]);
    let state = State::replay(&dag, &panel_steps(false)).expect("replays");
    let func = tir::lower(&state).expect("lowers");
    // A is read in place by the micro-kernel.
    match tir::hoist_constant_copy(&func, "A") {
        Err(e @ ConstantCopyError::NoCopy(_)) => assert!(e.to_string().contains("'A'"), "{e}"),
        other => panic!("expected NoCopy, got {:?}", other.map(|h| h.packed_len)),
    }
    match tir::hoist_constant_copy(&func, "C") {
        Err(e @ ConstantCopyError::NotAnInput { .. }) => {
            assert!(e.to_string().contains("A, B"), "{e}")
        }
        other => panic!("expected NotAnInput, got {:?}", other.map(|h| h.packed_len)),
    }
    // B copied for C.local and read directly by nothing else, but copied
    // twice when both of its readers get a copy of their own.
    let two = build("matmul", &[("M", 6), ("N", 10), ("K", 5)]);
    let twice = super::step::steps(
        r#"[
        {"kind":"cache_read","stage":"B","readers":["C"]},
        {"kind":"split","stage":"C","iter":"i0","factors":[2]},
        {"kind":"compute_at","stage":"B.local","target":"C","iter":"i0.0"},
        {"kind":"cache_read","stage":"A","readers":["C"]},
        {"kind":"compute_at","stage":"A.local","target":"C","iter":"i0.1"}
    ]"#,
    );
    let state = State::replay(&two, &twice).expect("replays");
    let func = tir::lower(&state).expect("lowers");
    // B's copy depends on no loop: hoisted once, a single panel.
    let h = tir::hoist_constant_copy(&func, "B").expect("B hoists");
    assert_eq!(h.packed_len, 50);
    // A's copy per row block is hoisted too; the hoisted kernel still runs.
    let h = tir::hoist_constant_copy(&h.kernel, "A").expect("A hoists");
    assert_eq!(h.packed_len, 30);
}

/// conv1d over 2 channels of 20 with `taps` taps, no padding.
fn conv1d_taps(taps: i64) -> ComputeDag {
    build(
        "conv1d",
        &[
            ("N", 1),
            ("C", 2),
            ("L", 20),
            ("K", 2),
            ("R", taps),
            ("stride", 1),
            ("pad", 0),
            ("dilation", 1),
        ],
    )
}

#[test]
fn panels_that_overlap_too_much_are_refused_rather_than_stored_many_times() {
    // A copy of conv1d's input per output position: 14 windows of 7 taps
    // over an input of 20, each window stored once per position (4.9× the
    // input) — more than the packed buffer may grow.
    let dag = conv1d_taps(7);
    let steps = super::step::steps(
        r#"[
        {"kind":"cache_read","stage":"data","readers":["conv1d"]},
        {"kind":"compute_at","stage":"data.local","target":"conv1d","iter":"i2"}
    ]"#,
    );
    let state = State::replay(&dag, &steps).expect("replays");
    let func = tir::lower(&state).expect("lowers");
    match tir::hoist_constant_copy(&func, "data") {
        Err(e @ ConstantCopyError::Unsupported { .. }) => {
            let message = e.to_string();
            assert!(
                message.contains("196 elements packed") && message.contains("40"),
                "{message}"
            );
        }
        other => panic!(
            "expected Unsupported, got {:?}",
            other.map(|h| h.packed_len)
        ),
    }
    // Windows of 3 (2.7×) are within bounds: hoisted, and still right.
    let dag = conv1d_taps(3);
    let state = State::replay(&dag, &steps).expect("replays");
    assert_eq!(check_hoisted("conv1d windows of 3", &dag, &state), 1);
}
