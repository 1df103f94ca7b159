//! Constant inputs laid out ahead of time: a schedule that reads a weight
//! only through one packing copy gets a kernel that takes every panel
//! already packed, and a packer that makes them once — planned, compiled,
//! loaded through the `Library` and checked by `tessera deploy --verify`.

use crate::common;

use std::path::{Path, PathBuf};

use common::{
    Scratch, assert_close, build, ok_result, random_inputs, reduction_length, reference,
    tessera_command,
};
use tessera::codegen::CodegenOptions;
use tessera::db::TuningDb;
use tessera::deploy::{
    self, Artifact, CompiledWithConstants, DeployError, DeployOptions, INDEX_FILE, Index,
    KernelSource, LayoutRewrite, Library, compile_with_constants, device_dir, pack_inputs,
    plan_layout_rewrites,
};
use tessera::measure::{MeasureResult, Task};
use tessera::runtime::host_device;
use tessera::schedule::{Step, steps_from_json};
use tessera::te::{self, ComputeDag, DType};

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

/// `steps` on `dag` compiled with `constants` laid out ahead of time.
fn with_constants(dag: &ComputeDag, steps: &[Step], constants: &[&str]) -> CompiledWithConstants {
    compile_with_constants(dag, steps, constants, &CodegenOptions::default())
        .unwrap_or_else(|e| panic!("compiles: {e}"))
}

/// Lays `constants` out ahead of time (all of them must be), runs the
/// kernel on the packed inputs against the reference.
fn check_constants(label: &str, dag: &ComputeDag, steps: &[Step], constants: &[&str]) {
    let compiled = with_constants(dag, steps, constants);
    assert!(
        compiled.not_laid_out.is_empty(),
        "{label}: {:?}",
        compiled.not_laid_out
    );
    let mut packed: Vec<&str> = compiled.packers.iter().map(|p| p.input()).collect();
    packed.sort_unstable();
    let mut asked = constants.to_vec();
    asked.sort_unstable();
    assert_eq!(packed, asked, "{label}");
    let inputs = random_inputs(dag, 3);
    let names: Vec<String> = dag.inputs().iter().map(|t| t.name().to_string()).collect();
    let packed = pack_inputs(&compiled.packers, &names, &inputs).expect("packs");
    let got = compiled.kernel.run_host(&packed).expect("runs");
    assert_close(label, &got, &reference(dag, &inputs), reduction_length(dag));
}

#[test]
fn a_transposing_pack_of_the_weight_is_planned_and_made_once_per_panel() {
    let dag = dense();
    let steps = tensorized_dense();
    assert_eq!(
        plan_layout_rewrites(&dag, &steps),
        vec![LayoutRewrite {
            input: "weight".into(),
            layout: vec![1, 0],
        }]
    );
    let compiled = with_constants(&dag, &steps, &["weight"]);
    assert_eq!(compiled.packers.len(), 1);
    // Ten column panels of 24 × 4: the whole weight, transposed per panel.
    let weight = &random_inputs(&dag, 1)[1];
    let packed = compiled.packers[0].pack(weight).expect("packs");
    assert_eq!(packed.shape(), &[10 * 24 * 4]);
    let (w, p) = (weight.as_f32().expect("f32"), packed.as_f32().expect("f32"));
    // weight is [N=40, K=24]; panel j holds rows 4j..4j+4 as [k, n].
    assert_eq!(p[(2 * 24 + 5) * 4 + 3], w[(2 * 4 + 3) * 24 + 5]);
    // A packer checks the tensor it is given.
    match compiled.packers[0].pack(&random_inputs(&dag, 1)[0]) {
        Err(e @ DeployError::Pack { .. }) => assert!(e.to_string().contains("'weight'"), "{e}"),
        other => panic!(
            "expected a Pack error, got {:?}",
            other.map(|t| t.shape().to_vec())
        ),
    }
    check_constants("tensorized dense", &dag, &steps, &["weight"]);
}

#[test]
fn a_plain_identity_copy_of_an_input_is_made_ahead_of_time_too() {
    let dag = dense();
    let steps = copied_data_dense();
    assert_eq!(
        plan_layout_rewrites(&dag, &steps),
        vec![LayoutRewrite {
            input: "data".into(),
            layout: vec![0, 1],
        }]
    );
    check_constants("identity copy of data", &dag, &steps, &["data"]);
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
    check_constants("both inputs", &dag, &both, &["weight", "data"]);
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
fn an_input_also_read_directly_is_not_laid_out_and_says_why() {
    let dag = two_readers();
    let partial = steps(r#"[{"kind":"cache_read","stage":"A","readers":["B"],"layout":[1,0]}]"#);
    assert!(plan_layout_rewrites(&dag, &partial).is_empty());
    let compiled = with_constants(&dag, &partial, &["A"]);
    assert!(compiled.packers.is_empty());
    let (input, reason) = &compiled.not_laid_out[0];
    assert_eq!(input, "A");
    assert!(
        reason.contains("reads it directly in 1 statement"),
        "{reason}"
    );
    // No copy at all (dense reads its weight in place): nothing to lay out.
    let compiled = with_constants(&dense(), &[], &["weight"]);
    assert!(
        compiled.not_laid_out[0].1.contains("makes no copy"),
        "{:?}",
        compiled.not_laid_out
    );
    // Not an input at all.
    match compile_with_constants(&dag, &partial, &["B"], &CodegenOptions::default()) {
        Err(e @ DeployError::NotAnInput { .. }) => {
            assert!(e.to_string().contains("'B' is not an input"), "{e}")
        }
        other => panic!("expected NotAnInput, got {:?}", other.err()),
    }
    // Both readers through the copy: laid out, and still the same function.
    let all = steps(r#"[{"kind":"cache_read","stage":"A","readers":["B","C"],"layout":[1,0]}]"#);
    assert_eq!(plan_layout_rewrites(&dag, &all).len(), 1);
    check_constants("two readers through one copy", &dag, &all, &["A"]);
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
    assert_eq!(prepacked.packed_inputs(), vec!["weight"]);
    assert!(prepacked.not_rewritten.is_empty());
    let inputs = random_inputs(&dag, 7);
    let want = reference(&dag, &inputs);
    let packed = prepacked.pack_constants(&inputs).expect("packs");
    assert_eq!(packed[1].shape(), &[24 * 40]);
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
    assert!(!data.is_rewritten());
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
    assert!(!fallback.is_rewritten() && fallback.not_rewritten.len() == 1);

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
