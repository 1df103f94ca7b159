//! `deploy::verify` and `tessera deploy --verify`: every deployed artifact
//! replayed, compiled, run in a measurement worker and checked against the
//! reference; each broken one reported with its own reason while the good
//! ones still pass.

use crate::common;

use std::path::{Path, PathBuf};

use common::{
    Scratch, ok_result, other_device, split_steps, tessera, tessera_command, tiled_steps,
};
use tessera::db::TuningDb;
use tessera::deploy::{
    self, Artifact, DeployError, DeployOptions, INDEX_FILE, Index, InjectedWrongAnswer,
    LayoutRewrite, VerifiedArtifact, VerifyOutcome, VerifyReport, WRONG_ANSWER_ENV, WrongAnswer,
    device_dir,
};
use tessera::measure::{MeasureOptions, MeasureResult, Measurer, Task, TimingOptions, tolerance};
use tessera::runtime::host_device;
use tessera::schedule::{Step, steps_from_json};

/// The good artifact (tiled), and three that get broken in the tests.
const GOOD: &str = "M=32,N=32,K=32";
const BAD_STEPS: &str = "M=32,N=16,K=32";
const STALE: &str = "M=16,N=32,K=32";
const CORRUPT: &str = "M=16,N=16,K=16";

fn readable(shape: &str) -> String {
    Task::from_registry("matmul", shape)
        .expect("task")
        .key()
        .readable
        .clone()
}

/// Deploys matmul at `shapes` (the first with the tiled schedule, the rest
/// with a split) from a fresh database into `dir/schedules`; returns the
/// schedules root.
fn deployed(dir: &Path, shapes: &[&str]) -> PathBuf {
    let mut db = TuningDb::open(&dir.join("tuning.db")).expect("db");
    let fast = ok_result(1e-5, 1.8e9);
    for (n, shape) in shapes.iter().enumerate() {
        let task = Task::from_registry("matmul", shape).expect("task");
        let steps = if n == 0 {
            tiled_steps()
        } else {
            split_steps(4)
        };
        let batch: Vec<(&[Step], &MeasureResult)> = vec![(&steps, &fast)];
        db.record_batch(&task, host_device(), &batch)
            .expect("recorded");
    }
    let out = dir.join("schedules");
    let options = DeployOptions {
        out: out.clone(),
        ..DeployOptions::default()
    };
    let report = deploy::deploy(&db, host_device(), &options).expect("deployed");
    assert_eq!(report.workloads.len(), shapes.len());
    out
}

fn measurer() -> Measurer {
    Measurer::new(MeasureOptions {
        workers: 1,
        kernel_threads: 2,
        timing: TimingOptions {
            repeat: 1,
            min_repeat_ms: 1.0,
            ..TimingOptions::default()
        },
        worker_program: Some(PathBuf::from(env!("CARGO_BIN_EXE_tessera"))),
        ..MeasureOptions::default()
    })
    .expect("measurer")
}

fn host_dir(out: &Path) -> PathBuf {
    device_dir(out, &host_device().key())
}

/// The artifact file of matmul at `shape` in this host's folder.
fn artifact_file(out: &Path, shape: &str) -> PathBuf {
    let index = Index::read(&host_dir(out).join(INDEX_FILE)).expect("index");
    let entry = index
        .artifacts
        .iter()
        .find(|e| e.readable == readable(shape))
        .expect("indexed");
    host_dir(out).join(&entry.file)
}

fn find<'a>(report: &'a VerifyReport, readable: &str) -> &'a VerifiedArtifact {
    report
        .artifacts
        .iter()
        .find(|a| a.readable == readable)
        .unwrap_or_else(|| panic!("{readable} not in {report:#?}"))
}

fn reason(report: &VerifyReport, readable: &str) -> String {
    match &find(report, readable).outcome {
        VerifyOutcome::Failed(reason) => reason.clone(),
        passed => panic!("{readable} should fail, got {passed:?}"),
    }
}

fn assert_passed(artifact: &VerifiedArtifact) {
    match artifact.outcome {
        VerifyOutcome::Passed {
            gflops,
            recorded_gflops,
            ..
        } => {
            assert!(gflops > 0.0 && gflops.is_finite(), "{artifact:?}");
            let recorded = Artifact::read(&artifact.file).expect("artifact").gflops;
            assert_eq!(recorded_gflops, recorded);
        }
        VerifyOutcome::Failed(ref reason) => {
            panic!("{} should pass: {reason}", artifact.readable)
        }
    }
}

/// Breaks the artifacts of a deployed folder, one way each (see the constants).
fn break_artifacts(out: &Path) {
    // Steps that no longer replay.
    let file = artifact_file(out, BAD_STEPS);
    let mut artifact = Artifact::read(&file).expect("artifact");
    artifact.steps =
        steps_from_json(r#"[{"kind":"split","stage":"C","iter":"no_such_loop","factors":[4]}]"#)
            .expect("steps");
    std::fs::write(&file, serde_json::to_string(&artifact).expect("json")).expect("write");
    // Tuned for another definition: key changed in the artifact and its
    // index entry alike, so only the rebuilt DAG's key tells.
    let file = artifact_file(out, STALE);
    let old_key = "0".repeat(64);
    let mut artifact = Artifact::read(&file).expect("artifact");
    artifact.workload.key = old_key.clone();
    std::fs::write(&file, serde_json::to_string(&artifact).expect("json")).expect("write");
    let index_path = host_dir(out).join(INDEX_FILE);
    let mut index = Index::read(&index_path).expect("index");
    let stale = readable(STALE);
    for entry in &mut index.artifacts {
        if entry.readable == stale {
            entry.workload_key = old_key.clone();
        }
    }
    std::fs::write(&index_path, serde_json::to_string(&index).expect("json")).expect("write");
    // Not JSON at all.
    std::fs::write(artifact_file(out, CORRUPT), "{\"schema\": 1, \"steps\": [").expect("write");
    // A file the index does not list.
    let good = Artifact::read(&artifact_file(out, GOOD)).expect("artifact");
    std::fs::write(
        host_dir(out).join("extra.json"),
        serde_json::to_string(&good).expect("json"),
    )
    .expect("write");
}

#[test]
fn a_freshly_deployed_folder_verifies() {
    let dir = Scratch::new("deploy-verify-fresh");
    let out = deployed(&dir, &[GOOD, BAD_STEPS]);
    // The aot/ folder of a device folder and a stray aot/ at the root are
    // not device folders.
    std::fs::create_dir_all(host_dir(&out).join("aot")).expect("aot");
    std::fs::write(host_dir(&out).join("aot").join("x.h"), "/* */").expect("write");
    std::fs::create_dir_all(out.join("aot")).expect("aot");
    std::fs::write(out.join("aot").join("stray.json"), "{}").expect("write");
    let mut measurer = measurer();
    let report = deploy::verify(&out, None, &mut measurer).expect("verified");
    assert_eq!(report.artifacts.len(), 2, "{report:#?}");
    assert!(report.failures().is_empty(), "{report:#?}");
    for artifact in &report.artifacts {
        assert_passed(artifact);
        assert_eq!(artifact.device_dir, host_dir(&out));
        assert!(artifact.file.is_file());
    }
    let mut names: Vec<_> = report
        .artifacts
        .iter()
        .map(|a| a.readable.clone())
        .collect();
    names.sort();
    assert_eq!(
        report
            .artifacts
            .iter()
            .map(|a| a.readable.clone())
            .collect::<Vec<_>>(),
        names,
        "sorted by readable form"
    );
    // Only this device's folder, or another device's (which has none).
    let only = deploy::verify(&out, Some(&host_device().key()), &mut measurer).expect("verified");
    assert_eq!(only.artifacts.len(), 2);
    assert!(only.failures().is_empty());
    let other = deploy::verify(&out, Some(&other_device().key()), &mut measurer).expect("ok");
    assert!(other.artifacts.is_empty());
    // One device folder passed as the root verifies too.
    let folder = deploy::verify(&host_dir(&out), None, &mut measurer).expect("verified");
    assert_eq!(folder.artifacts.len(), 2);
    // Not a schedules folder at all.
    match deploy::verify(&dir.join("missing"), None, &mut measurer) {
        Err(DeployError::NoLibrary(path)) => assert_eq!(path, dir.join("missing")),
        other => panic!("expected NoLibrary, got {other:?}"),
    }
}

#[test]
fn each_broken_artifact_fails_with_its_own_reason_and_the_good_one_passes() {
    let dir = Scratch::new("deploy-verify-broken");
    let out = deployed(&dir, &[GOOD, BAD_STEPS, STALE, CORRUPT]);
    break_artifacts(&out);
    // A folder of artifacts without an index is not silently skipped.
    let orphan = out.join("orphan-device");
    std::fs::create_dir_all(&orphan).expect("dir");
    std::fs::copy(artifact_file(&out, GOOD), orphan.join("a.json")).expect("copy");
    // A folder without any json is not a device folder.
    std::fs::create_dir_all(out.join("notes")).expect("dir");
    let report = deploy::verify(&out, None, &mut measurer()).expect("verified");
    assert_eq!(report.artifacts.len(), 6, "{report:#?}");
    assert_passed(find(&report, &readable(GOOD)));
    let why = reason(&report, &readable(BAD_STEPS));
    assert!(
        why.contains("does not replay") && why.contains("no_such_loop"),
        "{why}"
    );
    let why = reason(&report, &readable(STALE));
    assert!(
        why.starts_with("stale: the operator changed since it was tuned"),
        "{why}"
    );
    assert!(why.contains("tune and deploy again"), "{why}");
    let why = reason(&report, &readable(CORRUPT));
    assert!(why.contains("not a tessera artifact"), "{why}");
    let extra = find(&report, "extra.json");
    assert_eq!(extra.file, host_dir(&out).join("extra.json"));
    let VerifyOutcome::Failed(why) = &extra.outcome else {
        panic!("extra.json should fail");
    };
    assert!(why.contains("not in index.json"), "{why}");
    let missing_index = report
        .artifacts
        .iter()
        .find(|a| a.device_dir == orphan)
        .expect("the orphan folder is reported");
    let VerifyOutcome::Failed(why) = &missing_index.outcome else {
        panic!("a folder without index.json should fail");
    };
    assert!(why.contains("no index.json"), "{why}");
    assert_eq!(report.failures().len(), 5);
    // Sorted by device folder, then readable form.
    let keys: Vec<_> = report
        .artifacts
        .iter()
        .map(|a| (a.device_dir.clone(), a.readable.clone()))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
}

/// Deploys the good artifact alone into `dir/schedules`, then rewrites it
/// with `edit` applied; returns the schedules root.
fn deployed_good_edited(dir: &Path, edit: impl FnOnce(&mut Artifact)) -> PathBuf {
    let out = deployed(dir, &[GOOD]);
    let file = artifact_file(&out, GOOD);
    let mut artifact = Artifact::read(&file).expect("artifact");
    edit(&mut artifact);
    std::fs::write(&file, serde_json::to_string(&artifact).expect("json")).expect("write");
    out
}

#[test]
fn an_artifact_whose_key_is_not_its_index_entrys_fails() {
    let dir = Scratch::new("deploy-verify-key");
    let out = deployed_good_edited(&dir, |artifact| artifact.workload.key = "f".repeat(64));
    let report = deploy::verify(&out, None, &mut measurer()).expect("verified");
    let why = reason(&report, &readable(GOOD));
    assert!(why.contains("not of its index entry"), "{why}");
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_cli_verifies_a_good_folder_and_fails_a_bad_one() {
    let dir = Scratch::new("deploy-verify-cli");
    let out = deployed(&dir, &[GOOD]);
    let out_arg = out.to_string_lossy().into_owned();
    let run = tessera(&["deploy", "--verify", &out_arg]);
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}{}", text(&run.stderr));
    assert!(
        stdout.contains(&format!("ok    {}", readable(GOOD))),
        "{stdout}"
    );
    assert!(stdout.contains("GFLOP/s (recorded"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "verified 1 artifacts in {out_arg}: 1 passed, 0 failed"
        )),
        "{stdout}"
    );

    let dir = Scratch::new("deploy-verify-cli-bad");
    let out = deployed(&dir, &[GOOD, BAD_STEPS, STALE, CORRUPT]);
    break_artifacts(&out);
    let out_arg = out.to_string_lossy().into_owned();
    let run = tessera(&["deploy", "--verify", &out_arg]);
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(3), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("FAIL  {}", readable(CORRUPT))),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("ok    {}", readable(GOOD))),
        "{stdout}"
    );
    assert!(stdout.contains("5 artifacts"), "{stdout}");
    assert!(
        stderr.contains("4 of 5 artifacts failed verification"),
        "{stderr}"
    );

    let run = tessera(&["deploy", "--verify", &out_arg, "--json"]);
    assert_eq!(run.status.code(), Some(3), "{}", text(&run.stderr));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
    assert_eq!(report["passed"], 1);
    assert_eq!(report["failed"], 4);
    assert_eq!(report["dir"], out_arg.as_str());
    let rows = report["artifacts"].as_array().expect("artifacts");
    assert_eq!(rows.len(), 5);
    for row in rows {
        for key in ["device_dir", "workload", "file", "passed", "gflops"] {
            assert!(row.get(key).is_some(), "{key} in {row}");
        }
        if row["passed"] == true {
            assert_eq!(row["workload"], readable(GOOD).as_str());
            assert!(row["gflops"].as_f64().is_some_and(|g| g > 0.0), "{row}");
            assert!(row["recorded_gflops"].is_number(), "{row}");
            assert!(row["reason"].is_null(), "{row}");
        } else {
            assert!(
                row["reason"].as_str().is_some_and(|r| !r.is_empty()),
                "{row}"
            );
            assert!(row["gflops"].is_null(), "{row}");
        }
    }
}

#[test]
fn the_cli_verify_json_of_a_good_folder_parses() {
    let dir = Scratch::new("deploy-verify-cli-json");
    let out = deployed(&dir, &[GOOD]);
    let run = tessera(&["deploy", "--verify", &out.to_string_lossy(), "--json"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
    assert_eq!(report["passed"], 1);
    assert_eq!(report["failed"], 0);
    assert_eq!(report["artifacts"][0]["passed"], true);
}

#[test]
fn the_cli_verify_of_nothing_is_not_found_and_with_deploy_options_a_usage_error() {
    let dir = Scratch::new("deploy-verify-cli-empty");
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).expect("dir");
    let run = tessera(&["deploy", "--verify", &empty.to_string_lossy()]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    assert!(text(&run.stderr).contains("no artifacts in"));
    let run = tessera(&["deploy", "--verify", &dir.join("missing").to_string_lossy()]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    assert!(text(&run.stderr).contains("no schedules folder"));
    for extra in [
        &["--force"][..],
        &["--aot"],
        &["--workload", "matmul"],
        &["--db", "x.db"],
    ] {
        let mut args = vec!["deploy", "--verify", "schedules"];
        args.extend_from_slice(extra);
        let run = tessera(&args);
        assert_eq!(run.status.code(), Some(2), "{extra:?}");
        assert!(
            text(&run.stderr).contains("cannot be used with"),
            "{extra:?}"
        );
    }
}

/// The relative error a numeric-mismatch reason reports: the number after
/// "relative error " (the reason must be one).
fn reported_error(why: &str) -> f64 {
    let after = why
        .split_once("relative error ")
        .unwrap_or_else(|| panic!("not a numeric mismatch: {why}"))
        .1;
    let number = after.split_whitespace().next().expect("a number");
    number
        .parse()
        .unwrap_or_else(|_| panic!("'{number}' in {why}"))
}

/// The tolerance `deploy --verify` checks matmul at `shape` against, as the
/// reason prints it.
fn printed_tolerance(shape: &str) -> String {
    let task = Task::from_registry("matmul", shape).expect("task");
    format!("> tolerance {:.1e})", tolerance(&task))
}

fn wrong(shape: &str, kind: WrongAnswer) -> InjectedWrongAnswer {
    InjectedWrongAnswer {
        workload: readable(shape),
        kind,
    }
}

#[test]
fn a_plain_kernel_that_answers_wrong_fails_with_the_element_and_the_tolerance() {
    let dir = Scratch::new("deploy-verify-wrong-plain");
    let out = deployed(&dir, &[GOOD, BAD_STEPS]);
    let faults = [wrong(BAD_STEPS, WrongAnswer::Plain)];
    let report = deploy::verify_with(&out, None, &mut measurer(), &faults).expect("verified");
    assert_passed(find(&report, &readable(GOOD)));
    let why = reason(&report, &readable(BAD_STEPS));
    assert!(
        why.starts_with("wrong_result: output 0 at [0, 0] is "),
        "{why}"
    );
    assert!(why.contains(", expected "), "{why}");
    assert!(why.contains(&printed_tolerance(BAD_STEPS)), "{why}");
    assert!(why.ends_with("; tune and deploy again"), "{why}");
    // The top exponent bit flipped: off by about 1 or by orders of magnitude.
    assert!(reported_error(&why) >= 0.5, "{why}");
    assert_eq!(report.failures().len(), 1);
}

#[test]
fn a_prepacked_kernel_off_by_more_than_the_tolerance_fails_and_by_less_passes() {
    let dir = Scratch::new("deploy-verify-wrong-prepacked");
    let out = deployed(&dir, &[GOOD]);
    let file = artifact_file(&out, GOOD);
    // The tiled schedule reads B only through its copy B.local: verify
    // also checks the kernel that takes B laid out ahead of time.
    let artifact = Artifact::read(&file).expect("artifact");
    assert_eq!(
        artifact.layout_rewrites,
        [LayoutRewrite {
            input: "B".into(),
            layout: vec![0, 1],
        }]
    );
    let task = Task::from_registry("matmul", GOOD).expect("task");
    let tol = tolerance(&task);
    let verify = |relative_error: f64| {
        let faults = [wrong(GOOD, WrongAnswer::Prepacked { relative_error })];
        deploy::verify_with(&out, None, &mut measurer(), &faults).expect("verified")
    };
    for factor in [1.5, -1.5] {
        let report = verify(factor * tol);
        let why = reason(&report, &readable(GOOD));
        assert!(
            why.starts_with(
                "the kernel with B laid out ahead of time fails: wrong result: output 0 at [0, 0] is "
            ),
            "{why}"
        );
        assert!(why.contains(&printed_tolerance(GOOD)), "{why}");
        // The element moved by 1.5 tolerances; the kernel's own rounding
        // error is far below one.
        let error = reported_error(&why);
        assert!((1.3 * tol..1.7 * tol).contains(&error), "{error} vs {tol}");
    }
    for factor in [0.5, -0.5] {
        let report = verify(factor * tol);
        let verified = find(&report, &readable(GOOD));
        assert_passed(verified);
        assert!(
            matches!(&verified.outcome, VerifyOutcome::Passed { prepacked, .. } if prepacked == &["B"]),
            "{verified:?}"
        );
    }
}

#[test]
fn a_corrupt_layout_permutation_is_caught_before_it_could_read_data_in_the_wrong_order() {
    // B of matmul 32×32×32 is square: packed as [1, 0] it has the shape of
    // [0, 1], so only the check against the schedule's plan (not a shape)
    // stops a kernel from reading B transposed.
    let dir = Scratch::new("deploy-verify-bad-permutation");
    let out = deployed_good_edited(&dir, |artifact| {
        artifact.layout_rewrites[0].layout = vec![1, 0];
    });
    let report = deploy::verify(&out, None, &mut measurer()).expect("verified");
    let why = reason(&report, &readable(GOOD));
    assert!(
        why.starts_with(
            "the kernel with B laid out ahead of time fails: the artifact lists layout rewrites"
        ),
        "{why}"
    );
}

#[test]
fn the_cli_fails_a_kernel_that_answers_wrong_with_exit_3_and_says_where() {
    let dir = Scratch::new("deploy-verify-cli-wrong");
    let out = deployed(&dir, &[GOOD, BAD_STEPS]);
    let out_arg = out.to_string_lossy().into_owned();
    let hook = format!(
        "plain:{};prepacked=1:{}",
        readable(BAD_STEPS),
        readable(GOOD)
    );
    let run = tessera_command(&["deploy", "--verify", &out_arg])
        .env(WRONG_ANSWER_ENV, &hook)
        .output()
        .expect("runs");
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(3), "{stdout}{stderr}");
    for (shape, what) in [
        (BAD_STEPS, "wrong_result: output 0 at [0, 0] is "),
        (
            GOOD,
            "the kernel with B laid out ahead of time fails: wrong result: output 0 at [0, 0] is ",
        ),
    ] {
        let line = format!("FAIL  {}  {what}", readable(shape));
        assert!(stdout.contains(&line), "{line} in {stdout}");
    }
    assert!(stdout.contains(&printed_tolerance(GOOD)), "{stdout}");
    assert!(
        stderr.contains("2 of 2 artifacts failed verification"),
        "{stderr}"
    );
    // Without the hook the same folder verifies.
    let run = tessera(&["deploy", "--verify", &out_arg]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stdout));
    // A hook that says nothing usable is a usage error, not a silent pass.
    for bad in ["plain", "sideways:x", "prepacked=much:x"] {
        let run = tessera_command(&["deploy", "--verify", &out_arg])
            .env(WRONG_ANSWER_ENV, bad)
            .output()
            .expect("runs");
        assert_eq!(run.status.code(), Some(2), "{bad}");
        assert!(
            text(&run.stderr).contains(&format!("{WRONG_ANSWER_ENV}={bad} is not")),
            "{}",
            text(&run.stderr)
        );
    }
}

/// The first sketch of a strided convolution whose name has every one of
/// `parts`, filled at random with `seed`: its steps.
fn conv_sketch_steps(task: &Task, parts: &[&str], seed: u64) -> Vec<Step> {
    use rand::SeedableRng;
    let target = tessera::runtime::Target::from_env();
    let sketch = tessera::search::generate_sketches(task.dag(), &target)
        .into_iter()
        .find(|s| parts.iter().all(|p| s.name.contains(p)))
        .unwrap_or_else(|| panic!("no sketch with {parts:?}"));
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let decisions = tessera::search::random_decisions(&sketch, &mut rng);
    tessera::search::materialize(task.dag(), &sketch, &decisions)
        .unwrap_or_else(|e| panic!("{}: {e}", sketch.name))
        .steps()
        .to_vec()
}

#[test]
fn convolution_layouts_verify_with_their_weights_laid_out_ahead_of_time() {
    if tessera::runtime::Target::from_env().kernels().is_empty() {
        println!("skipped: this host runs no micro-kernel");
        return;
    }
    let dir = Scratch::new("deploy-verify-conv-layouts");
    let mut db = TuningDb::open(&dir.join("tuning.db")).expect("db");
    let fast = ok_result(1e-5, 1.8e9);
    // Stride 2: the input gathered into a panel per n block; more output
    // channels than columns: accumulated channel-innermost, the input in an
    // A panel, the weight transposed (laid out ahead of time when deployed).
    let cases = [
        (
            "N=1,C=6,H=13,W=11,K=5,R=3,S=3,stride=2,pad=1,dilation=1",
            &["+pack_panel(pad)"][..],
        ),
        (
            "N=1,C=5,H=12,W=10,K=16,R=1,S=1,stride=2,pad=0,dilation=1",
            &[
                "+transposed_accumulator",
                "+a_panel",
                "+pack_transposed(weight)",
            ][..],
        ),
    ];
    let mut tasks = Vec::new();
    for (n, (shape, parts)) in cases.iter().enumerate() {
        let task = Task::from_registry("conv2d", shape).expect("task");
        let steps = conv_sketch_steps(&task, parts, n as u64);
        let batch: Vec<(&[Step], &MeasureResult)> = vec![(&steps, &fast)];
        db.record_batch(&task, host_device(), &batch)
            .expect("recorded");
        tasks.push(task);
    }
    let out = dir.join("schedules");
    let options = DeployOptions {
        out: out.clone(),
        ..DeployOptions::default()
    };
    deploy::deploy(&db, host_device(), &options).expect("deployed");
    let transposed = Artifact::read(
        &host_dir(&out).join(
            &Index::read(&host_dir(&out).join(INDEX_FILE))
                .expect("index")
                .artifacts
                .iter()
                .find(|e| e.readable == tasks[1].key().readable)
                .expect("indexed")
                .file,
        ),
    )
    .expect("artifact");
    assert_eq!(
        transposed.layout_rewrites,
        vec![LayoutRewrite {
            input: "weight".into(),
            layout: vec![1, 2, 3, 0],
        }]
    );
    let report = deploy::verify(&out, None, &mut measurer()).expect("verified");
    assert_eq!(report.artifacts.len(), 2, "{report:#?}");
    for artifact in &report.artifacts {
        assert_passed(artifact);
    }
    let prepacked = find(&report, &tasks[1].key().readable);
    assert!(
        matches!(&prepacked.outcome, VerifyOutcome::Passed { prepacked, .. } if prepacked == &["weight".to_string()]),
        "{prepacked:?}"
    );
}
