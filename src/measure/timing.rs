//! The timing protocol, as in TVM/Ansor's time evaluator: `warmup` untimed
//! runs; then `repeat` repeats of `number` back-to-back runs each, where
//! `number` is raised until one repeat lasts at least `min_repeat_ms` (so
//! short kernels are not timed at the clock's resolution); the cost of a
//! repeat is its mean time per run. With `flush_cache`, the inputs are
//! evicted from the CPU caches before each repeat (use `number = 1` and
//! `min_repeat_ms = 0` to time every run cold).

use std::time::Instant;

use serde::{Deserialize, Serialize};

/// How a kernel is timed (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimingOptions {
    /// Untimed runs before timing.
    pub warmup: usize,
    /// Runs per repeat (the lower bound; raised to reach `min_repeat_ms`).
    pub number: usize,
    /// Timed repeats; each gives one cost.
    pub repeat: usize,
    /// The shortest a repeat may last, in milliseconds.
    pub min_repeat_ms: f64,
    /// Evict the inputs from the caches before each repeat.
    pub flush_cache: bool,
}

impl Default for TimingOptions {
    /// One warm-up run, three repeats of at least 50 ms each, warm caches.
    fn default() -> Self {
        TimingOptions {
            warmup: 1,
            number: 1,
            repeat: 3,
            min_repeat_ms: 50.0,
            flush_cache: false,
        }
    }
}

/// The timings of one kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// Mean seconds per run of each repeat.
    pub costs: Vec<f64>,
    /// Runs per repeat after raising `number` to reach `min_repeat_ms`.
    pub number: usize,
}

impl Timing {
    /// The median cost (seconds per run).
    pub fn median(&self) -> f64 {
        median(&self.costs)
    }

    /// The smallest cost (seconds per run).
    pub fn min(&self) -> f64 {
        self.costs.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// `(max − min) / median` of the costs: how much the repeats disagree.
    pub fn relative_spread(&self) -> f64 {
        let max = self.costs.iter().copied().fold(0.0, f64::max);
        (max - self.min()) / self.median()
    }
}

/// The median of `values` (NaN when empty).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Most times `number` is raised while calibrating; each try at least
/// doubles it, so this covers a factor of 2^20.
const MAX_CALIBRATION_TRIES: usize = 20;

/// Times `run` with the protocol of the module docs; `flush` evicts the
/// inputs from the caches and is called before each repeat when
/// `options.flush_cache` is set.
pub fn time_runs(
    options: &TimingOptions,
    mut run: impl FnMut(),
    mut flush: impl FnMut(),
) -> Timing {
    for _ in 0..options.warmup {
        run();
    }
    let mut timed = |number: usize| {
        if options.flush_cache {
            flush();
        }
        let start = Instant::now();
        for _ in 0..number {
            run();
        }
        start.elapsed().as_secs_f64()
    };
    let min_repeat = options.min_repeat_ms.max(0.0) / 1e3;
    let mut number = options.number.max(1);
    let mut costs = Vec::with_capacity(options.repeat.max(1));
    let mut elapsed = timed(number);
    for _ in 0..MAX_CALIBRATION_TRIES {
        if elapsed >= min_repeat {
            break;
        }
        // Aim 10% past the target so a slightly faster next repeat still counts.
        let wanted = (number as f64 * min_repeat * 1.1 / elapsed.max(1e-9)).ceil();
        number = (wanted as usize).max(number * 2);
        elapsed = timed(number);
    }
    costs.push(elapsed / number as f64);
    // A repeat that falls short of min_repeat_ms (the calibration ran while
    // the machine was busier) raises `number` again and restarts the series,
    // so that every repeat reported lasted at least min_repeat_ms.
    let mut recalibrations = 0;
    while costs.len() < options.repeat.max(1) {
        let elapsed = timed(number);
        if elapsed < min_repeat && recalibrations < MAX_CALIBRATION_TRIES {
            recalibrations += 1;
            let wanted = (number as f64 * min_repeat * 1.1 / elapsed.max(1e-9)).ceil();
            number = (wanted as usize).max(number + 1);
            costs.clear();
            continue;
        }
        costs.push(elapsed / number as f64);
    }
    Timing { costs, number }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_is_raised_until_a_repeat_lasts_min_repeat_ms() {
        let mut runs = 0usize;
        let options = TimingOptions {
            warmup: 2,
            number: 1,
            repeat: 4,
            min_repeat_ms: 5.0,
            flush_cache: true,
        };
        let mut flushes = 0usize;
        let timing = time_runs(
            &options,
            || {
                runs += 1;
                std::thread::sleep(std::time::Duration::from_micros(200));
            },
            || flushes += 1,
        );
        assert_eq!(timing.costs.len(), 4);
        // A sleep of 0.2 ms lasts at least that, so 5 ms needs ≤ 25 runs
        // and more than one; the calibrated repeat lasts ≥ 5 ms.
        assert!((2..=25).contains(&timing.number), "{}", timing.number);
        assert!(timing.costs[0] * timing.number as f64 >= 5e-3);
        assert!(timing.costs.iter().all(|&c| c >= 200e-6));
        assert!(runs >= 2 + 4 * timing.number);
        assert!(flushes >= 4);
    }

    #[test]
    fn a_repeat_cut_short_by_a_faster_machine_raises_number_again() {
        let mut runs = 0usize;
        let options = TimingOptions {
            warmup: 0,
            number: 1,
            repeat: 3,
            min_repeat_ms: 5.0,
            flush_cache: false,
        };
        // Slow while calibrating (a busy machine), four times faster after.
        let timing = time_runs(
            &options,
            || {
                runs += 1;
                let micros = if runs <= 4 { 2000 } else { 500 };
                std::thread::sleep(std::time::Duration::from_micros(micros));
            },
            || {},
        );
        assert_eq!(timing.costs.len(), 3);
        assert!(
            timing
                .costs
                .iter()
                .all(|c| c * timing.number as f64 >= 5e-3),
            "{timing:?}"
        );
    }

    #[test]
    fn at_least_one_repeat_and_one_run() {
        let options = TimingOptions {
            warmup: 0,
            number: 0,
            repeat: 0,
            min_repeat_ms: 0.0,
            flush_cache: false,
        };
        let mut runs = 0;
        let timing = time_runs(&options, || runs += 1, || {});
        assert_eq!((timing.costs.len(), timing.number, runs), (1, 1, 1));
        assert_eq!(timing.median(), timing.min());
    }
}
