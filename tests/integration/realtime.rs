//! The checks that need the real clock, apart from the rest: the timing
//! protocol is repeatable and proportional to work on real kernels, and the
//! CI job flags a schedule that measures slower than its baseline. Their
//! thresholds hold on a quiet machine, not beside other tests, so they are
//! ignored in the ordinary run and `.ci/run`'s last step runs them alone:
//! `cargo test --test integration realtime:: -- --ignored --test-threads 1`.
//! (The protocol's arithmetic is tested on a fake clock in
//! `tessera::measure::timing`; the job's regression logic on a recorded
//! speed in `ci_job`.)

use crate::ci_job::{hand_tiled_baseline, report, stderr, stdout, suite, tune_one_trial};
use crate::common::Scratch;

use tessera::measure::{Task, Timing, TimingOptions, time_runs};
use tessera::runtime::NdBuffer;

/// Times the default matmul kernel with `k` as its reduction length.
fn time_matmul(k: usize, options: &TimingOptions) -> Timing {
    let task = Task::from_registry("matmul", &format!("M=48,N=48,K={k}")).expect("task");
    let (kernel, _) =
        tessera::measure::build(task.dag(), &[], &Default::default()).expect("builds");
    let mut buffers: Vec<NdBuffer> = task
        .inputs()
        .iter()
        .map(|t| NdBuffer::from_host(t).expect("allocates"))
        .collect();
    buffers.push(NdBuffer::zeros(&[48, 48], tessera::te::DType::F32).expect("allocates"));
    let mut refs: Vec<&mut NdBuffer> = buffers.iter_mut().collect();
    time_runs(options, || kernel.run(&mut refs).expect("runs"), || {})
}

#[test]
#[ignore = "real-time: run by .ci/run's timing step"]
fn the_timing_protocol_is_repeatable_and_proportional_to_work() {
    let options = TimingOptions {
        warmup: 1,
        number: 1,
        repeat: 5,
        min_repeat_ms: 20.0,
        flush_cache: false,
    };
    let single: Vec<_> = (0..3).map(|_| time_matmul(256, &options)).collect();
    let double = time_matmul(512, &options);
    for t in single.iter().chain([&double]) {
        assert_eq!(t.costs.len(), 5);
        // min_repeat_ms honoured: every repeat ran at least 20 ms.
        assert!(
            t.costs.iter().all(|c| c * t.number as f64 >= 0.020),
            "{t:?}"
        );
    }
    let medians: Vec<f64> = single.iter().map(|t| t.median()).collect();
    let spread = (medians.iter().copied().fold(0.0, f64::max)
        - medians.iter().copied().fold(f64::INFINITY, f64::min))
        / medians[1];
    let ratio = double.median() / medians[1];
    println!(
        "medians of the same kernel: {:?} ms, relative spread {:.1}%; within-run spreads {:?}; twice the work takes {ratio:.2}x",
        medians.iter().map(|m| m * 1e3).collect::<Vec<_>>(),
        spread * 100.0,
        single
            .iter()
            .map(|t| format!("{:.1}%", t.relative_spread() * 100.0))
            .collect::<Vec<_>>(),
    );
    // Loose enough for a shared 2-core machine; a protocol that timed the
    // wrong thing would be far outside.
    assert!(spread < 0.5, "medians {medians:?}");
    assert!(
        (1.4..2.8).contains(&ratio),
        "2x the work took {ratio}x the time"
    );
}

/// The baseline is the hand-tiled matmul 64³; the job's only candidate is
/// a schedule several times slower (strided, unvectorized stores). Both are
/// measured by the job, so the verdict rests on real timings.
#[test]
#[ignore = "real-time: run by .ci/run's timing step"]
fn a_measured_slowdown_fails_the_ci_job() {
    let dir = Scratch::new("realtime-ci-regression");
    let suite = suite(&dir, &[("matmul", "matmul", "M=64,N=64,K=64")]);
    let baseline = hand_tiled_baseline(&dir);
    let out = dir.join("strict");
    let strict = tune_one_trial(&suite, &out, &baseline, &[]);
    let r = report(&out);
    let w = &r["workloads"][0];
    println!(
        "the slow schedule against the hand-tiled baseline: {}",
        w["comparison"]
    );
    assert_eq!(strict.status.code(), Some(3), "{}", stderr(&strict));
    assert!(stdout(&strict).contains("REGRESSED"), "{}", stdout(&strict));
    assert_eq!(w["regressed"], true, "{w}");
    assert_eq!(w["comparison"]["kind"], "measured", "{w}");
    assert!(
        w["comparison"]["ratio"].as_f64().expect("ratio") < 0.9,
        "{w}"
    );
}
