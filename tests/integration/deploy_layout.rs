//! The ahead-of-time layout rewrite of constant inputs: a schedule that
//! reads a weight only through one packing copy gets a kernel that takes the
//! weight already packed, without the copy — planned, rewritten, compiled,
//! loaded through the `Library` and checked by `tessera deploy --verify`.

use crate::common;

use std::path::{Path, PathBuf};

use common::{
    Scratch, assert_close, build, ok_result, random_inputs, reduction_length, reference,
    tessera_command,
};
use tessera::codegen::{CodegenOptions, compile};
use tessera::db::TuningDb;
use tessera::deploy::{
    self, Artifact, DeployError, DeployOptions, INDEX_FILE, Index, KernelSource, LayoutRewrite,
    Library, device_dir, pack_input, plan_layout_rewrites, rewrite_layouts,
};
use tessera::measure::{MeasureResult, Task};
use tessera::runtime::host_device;
use tessera::schedule::{State, Step, steps_from_json};
use tessera::te::{self, ComputeDag, DType, HostTensor};
use tessera::tir;

const DENSE: &str = "M=16,N=40,K=24";

fn dense() -> ComputeDag {
    build("dense", &[("M", 16), ("N", 40), ("K", 24)])
}

fn steps(json: &str) -> Vec<Step> {
    steps_from_json(json).unwrap_or_else(|e| panic!("{e}"))
}

/// GotoBLAS style on dense: the accumulator tile in `dense.local`, the
/// weight packed per column panel into `weight.local` as [k, n] (a
/// transposing copy), the portable 4×4 micro-kernel on the block.
pub(crate) fn tensorized_dense() -> Vec<Step> {
    steps(
        r#"[
        {"kind":"cache_write","stage":"dense"},
        {"kind":"cache_read","stage":"weight","readers":["dense.local"],"layout":[1,0]},
        {"kind":"split","stage":"dense","iter":"i0","factors":[4]},
        {"kind":"split","stage":"dense","iter":"i1","factors":[4]},
        {"kind":"reorder","stage":"dense","order":["i1.0","i0.0","i0.1","i1.1"]},
        {"kind":"compute_at","stage":"dense.local","target":"dense","iter":"i0.0"},
        {"kind":"compute_at","stage":"weight.local","target":"dense","iter":"i1.0"},
        {"kind":"annotate","stage":"weight.local","iter":"i1","annotation":"vectorize"},
        {"kind":"reorder","stage":"dense.local","order":["k","i0","i1"]},
        {"kind":"tensorize","stage":"dense.local","iter":"k","intrinsic":"generic_4x4"},
        {"kind":"annotate","stage":"dense","iter":"i1.0","annotation":"parallel"}
    ]"#,
    )
}

/// A plain tiled dense that copies `data` (identity layout) per row block.
fn copied_data_dense() -> Vec<Step> {
    steps(
        r#"[
        {"kind":"cache_read","stage":"data","readers":["dense"]},
        {"kind":"split","stage":"dense","iter":"i0","factors":[4]},
        {"kind":"compute_at","stage":"data.local","target":"dense","iter":"i0.0"}
    ]"#,
    )
}

/// Compiles `steps` on `dag`, runs it on `inputs`.
fn run(dag: &ComputeDag, steps: &[Step], inputs: &[HostTensor]) -> Vec<HostTensor> {
    let state = State::replay(dag, steps).unwrap_or_else(|e| panic!("replays: {e}"));
    let func = tir::lower(&state).unwrap_or_else(|e| panic!("lowers: {e}"));
    let kernel = compile(&func, &CodegenOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    kernel
        .run_host(inputs)
        .unwrap_or_else(|e| panic!("runs: {e}"))
}

/// Rewrites `constants` of `steps` on `dag`, checks the copies are gone (or,
/// transposing panel copies, plain) and the rewritten kernel on packed
/// inputs matches the reference.
fn check_rewrite(label: &str, dag: &ComputeDag, steps: &[Step], constants: &[&str]) {
    let (new_dag, new_steps, rewrites) =
        rewrite_layouts(dag, steps, constants).unwrap_or_else(|e| panic!("{label}: {e}"));
    for rewrite in &rewrites {
        let copy = format!("{}.local", rewrite.input);
        let kept = new_steps
            .iter()
            .find(|s| matches!(s, Step::CacheRead { stage, .. } if *stage == rewrite.input));
        let state = State::replay(&new_dag, &new_steps).expect("replays");
        match kept {
            // A transposing panel copy stays, as a plain copy.
            Some(Step::CacheRead { layout, .. }) => {
                assert_eq!(layout, &None, "{label}: {copy} still transposes");
                assert!(
                    rewrite.layout.iter().enumerate().any(|(d, &l)| d != l),
                    "{label}: a plain copy of {} was kept",
                    rewrite.input
                );
            }
            _ => {
                assert!(
                    !new_steps.iter().any(|s| s.stage() == copy),
                    "{label}: a step of {copy} survived: {new_steps:?}"
                );
                assert!(
                    state.stage_index(&copy).is_none(),
                    "{label}: {copy} is gone"
                );
            }
        }
    }
    let inputs = random_inputs(dag, 3);
    let packed: Vec<HostTensor> = inputs
        .iter()
        .zip(dag.inputs())
        .map(
            |(t, input)| match rewrites.iter().find(|r| r.input == input.name()) {
                Some(r) => pack_input(t, &r.layout).expect("packs"),
                None => t.clone(),
            },
        )
        .collect();
    let got = run(&new_dag, &new_steps, &packed);
    assert_close(label, &got, &reference(dag, &inputs), reduction_length(dag));
}

#[test]
fn a_transposing_pack_of_the_weight_is_planned_and_rewritten_into_a_plain_copy() {
    let dag = dense();
    let steps = tensorized_dense();
    assert_eq!(
        plan_layout_rewrites(&dag, &steps),
        vec![LayoutRewrite {
            input: "weight".into(),
            layout: vec![1, 0],
        }]
    );
    let (new_dag, new_steps, rewrites) =
        rewrite_layouts(&dag, &steps, &["weight"]).expect("rewrites");
    assert_eq!(rewrites.len(), 1);
    assert_eq!(new_dag.inputs()[1].name(), "weight");
    assert_eq!(new_dag.inputs()[1].shape(), &[24, 40]);
    assert_eq!(new_dag.inputs()[0].shape(), dag.inputs()[0].shape());
    // The panels are still packed per n block (read in place, the laid-out
    // weight would be walked a whole row apart per k), now by a plain copy.
    assert_eq!(new_steps.len(), steps.len());
    assert!(new_steps.iter().any(|s| matches!(s,
        Step::CacheRead { stage, layout: None, .. } if stage == "weight")));
    let state = State::replay(&new_dag, &new_steps).expect("replays");
    let ir = tir::lower(&state).expect("lowers").to_string();
    assert!(ir.contains("micro-kernel generic_4x4"), "{ir}");
    assert!(ir.contains("weight.local"), "{ir}");
    check_rewrite("tensorized dense", &dag, &steps, &["weight"]);
}

#[test]
fn a_plain_identity_copy_of_an_input_is_rewritten_too() {
    let dag = dense();
    let steps = copied_data_dense();
    assert_eq!(
        plan_layout_rewrites(&dag, &steps),
        vec![LayoutRewrite {
            input: "data".into(),
            layout: vec![0, 1],
        }]
    );
    check_rewrite("identity copy of data", &dag, &steps, &["data"]);
    // Both copies at once, each input with its own layout.
    let mut both = tensorized_dense();
    both.insert(
        0,
        Step::CacheRead {
            stage: "data".into(),
            readers: vec!["dense".into()],
            layout: Some(vec![1, 0]),
        },
    );
    let planned = plan_layout_rewrites(&dag, &both);
    assert_eq!(planned.len(), 2, "{planned:?}");
    check_rewrite("both inputs", &dag, &both, &["weight", "data"]);
}

/// `out[i, j] = 2·A[i, j] + A[j, i]` through a middle stage `B`.
fn two_readers() -> ComputeDag {
    let a = te::placeholder("A", &[6, 6], DType::F32);
    let b = te::compute("B", &[6, 6], |ix| a.at([&ix[0], &ix[1]]) * 2.0);
    let c = te::compute("C", &[6, 6], |ix| {
        b.at([&ix[0], &ix[1]]) + a.at([&ix[1], &ix[0]])
    });
    ComputeDag::new(&[a], &[c]).expect("dag")
}

#[test]
fn an_input_also_read_directly_has_no_rewrite_and_asking_is_a_typed_error() {
    let dag = two_readers();
    let partial = steps(r#"[{"kind":"cache_read","stage":"A","readers":["B"],"layout":[1,0]}]"#);
    assert!(plan_layout_rewrites(&dag, &partial).is_empty());
    match rewrite_layouts(&dag, &partial, &["A"]) {
        Err(e @ DeployError::NoLayoutRewrite { .. }) => {
            let message = e.to_string();
            assert!(
                message.contains("'A'") && message.contains("C"),
                "{message}"
            );
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("A is read directly by C"),
    }
    // No copy at all: also no rewrite.
    match rewrite_layouts(&dag, &[], &["A"]) {
        Err(DeployError::NoLayoutRewrite { reason, .. }) => {
            assert!(reason.contains("no cache_read"), "{reason}")
        }
        other => panic!("expected NoLayoutRewrite, got {:?}", other.err()),
    }
    // Not an input at all.
    match rewrite_layouts(&dag, &partial, &["B"]) {
        Err(e @ DeployError::NotAnInput { .. }) => {
            assert!(e.to_string().contains("'B' is not an input"), "{e}")
        }
        other => panic!("expected NotAnInput, got {:?}", other.err()),
    }
    // Both readers through the copy: rewritten, and still the same function.
    let all = steps(r#"[{"kind":"cache_read","stage":"A","readers":["B","C"],"layout":[1,0]}]"#);
    assert_eq!(plan_layout_rewrites(&dag, &all).len(), 1);
    check_rewrite("two readers through one copy", &dag, &all, &["A"]);
}

/// Deploys the tensorized dense schedule into `dir/schedules`.
fn deployed(dir: &Path) -> PathBuf {
    let mut db = TuningDb::open(&dir.join("tuning.db")).expect("db");
    let task = Task::from_registry("dense", DENSE).expect("task");
    let steps = tensorized_dense();
    let fast = ok_result(1e-5, 1.8e9);
    let batch: Vec<(&[Step], &MeasureResult)> = vec![(&steps, &fast)];
    db.record_batch(&task, host_device(), &batch)
        .expect("recorded");
    let out = dir.join("schedules");
    let options = DeployOptions {
        out: out.clone(),
        ..DeployOptions::default()
    };
    deploy::deploy(&db, host_device(), &options).expect("deployed");
    out
}

#[test]
fn the_library_loads_the_prepacked_kernel_and_verify_checks_it() {
    let dir = Scratch::new("layout-library");
    let out = deployed(&dir);
    let folder = device_dir(&out, &host_device().key());
    let index = Index::read(&folder.join(INDEX_FILE)).expect("index");
    let artifact = Artifact::read(&folder.join(&index.artifacts[0].file)).expect("artifact");
    assert_eq!(
        artifact.layout_rewrites,
        vec![LayoutRewrite {
            input: "weight".into(),
            layout: vec![1, 0],
        }]
    );

    let dag = dense();
    let library = Library::open(&out).expect("library");
    let prepacked = library
        .kernel_with_constants(&dag, &["weight"])
        .expect("loads");
    assert!(matches!(prepacked.source, KernelSource::Tuned { .. }));
    assert_eq!(prepacked.rewrites, artifact.layout_rewrites);
    assert!(prepacked.not_rewritten.is_empty());
    let inputs = random_inputs(&dag, 7);
    let want = reference(&dag, &inputs);
    let packed = prepacked.pack_constants(&inputs).expect("packs");
    assert_eq!(packed[1].shape(), &[24, 40]);
    for run in 0..2 {
        let got = prepacked.kernel.run_host(&packed).expect("runs");
        assert_close(&format!("run {run}"), &got, &want, 24);
    }
    // The plain kernel is another entry with the original ABI.
    let plain = library.kernel(&dag).expect("plain");
    assert!(plain.kernel.run_host(&packed).is_err(), "another ABI");
    assert_close(
        "plain",
        &plain.kernel.run_host(&inputs).expect("runs"),
        &want,
        24,
    );
    assert!(prepacked.kernel.run_host(&inputs).is_err(), "packed ABI");
    assert_eq!(library.compiled(), 2);
    // Cached: the same kernel again.
    let again = library
        .kernel_with_constants(&dag, &["weight"])
        .expect("again");
    assert!(std::rc::Rc::ptr_eq(&again.kernel, &prepacked.kernel));

    // `data` is read directly: the plain kernel, and why.
    let data = library
        .kernel_with_constants(&dag, &["data"])
        .expect("loads");
    assert!(data.rewrites.is_empty());
    assert_eq!(data.not_rewritten.len(), 1);
    assert!(std::rc::Rc::ptr_eq(&data.kernel, &plain.kernel));
    assert_eq!(data.pack_constants(&inputs).expect("no-op"), inputs);
    // Not an input: an error.
    match library.kernel_with_constants(&dag, &["bias"]) {
        Err(DeployError::NotAnInput { name, .. }) => assert_eq!(name, "bias"),
        other => panic!("expected NotAnInput, got {:?}", other.err()),
    }
    // Another shape falls back to the default schedule: nothing rewritten.
    let other = build("dense", &[("M", 8), ("N", 40), ("K", 24)]);
    let fallback = library
        .kernel_with_constants(&other, &["weight"])
        .expect("falls back");
    assert!(matches!(fallback.source, KernelSource::Fallback(_)));
    assert!(fallback.rewrites.is_empty() && fallback.not_rewritten.len() == 1);

    let verified = tessera_command(&["deploy", "--verify"])
        .arg(&out)
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&verified.stdout);
    assert!(
        verified.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&verified.stderr)
    );
    assert!(
        stdout.contains("also with weight laid out ahead of time"),
        "{stdout}"
    );
}

#[test]
fn a_wrong_layout_rewrite_in_an_artifact_fails_verification() {
    let dir = Scratch::new("layout-verify-bad");
    let out = deployed(&dir);
    let folder = device_dir(&out, &host_device().key());
    let index = Index::read(&folder.join(INDEX_FILE)).expect("index");
    let path = folder.join(&index.artifacts[0].file);
    let mut artifact = Artifact::read(&path).expect("artifact");
    artifact.layout_rewrites = vec![LayoutRewrite {
        input: "data".into(),
        layout: vec![1, 0],
    }];
    let json = serde_json::to_string_pretty(&artifact).expect("json");
    std::fs::write(&path, json).expect("written");
    let verified = tessera_command(&["deploy", "--verify"])
        .arg(&out)
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&verified.stdout);
    assert_eq!(verified.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("laid out ahead of time fails"), "{stdout}");
}
