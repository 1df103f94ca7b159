//! A simple timing protocol (until the measurement module lands): one
//! warm-up run, then `repeat` repeats of `number` runs each, where `number`
//! is chosen so one repeat lasts at least `min_repeat_ms`; per-run times of
//! the repeats are reported as median and minimum.

use std::time::Instant;

/// Per-run seconds: median and minimum over the repeats.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timing {
    pub median: f64,
    pub min: f64,
}

/// Times `run` (see the module docs).
pub(crate) fn time(repeat: usize, min_repeat_ms: f64, mut run: impl FnMut()) -> Timing {
    run();
    let start = Instant::now();
    run();
    let once = start.elapsed().as_secs_f64().max(1e-9);
    let number = ((min_repeat_ms / 1e3 / once).ceil() as usize).max(1);
    let mut per_run: Vec<f64> = (0..repeat.max(1))
        .map(|_| {
            let start = Instant::now();
            for _ in 0..number {
                run();
            }
            start.elapsed().as_secs_f64() / number as f64
        })
        .collect();
    per_run.sort_by(f64::total_cmp);
    Timing {
        median: per_run[per_run.len() / 2],
        min: per_run[0],
    }
}
