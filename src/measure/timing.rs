//! The timing protocol, as in TVM/Ansor's time evaluator: `warmup` untimed
//! runs; then `repeat` repeats of `number` back-to-back runs each, where
//! `number` is raised until one repeat lasts at least `min_repeat_ms` (so
//! short kernels are not timed at the clock's resolution); the cost of a
//! repeat is its mean time per run. With a [`CacheFlush`] other than
//! `Off`, buffers are evicted from the CPU caches before every timed run and
//! the clock stops while they are: each run is timed cold, and a repeat is
//! still long enough to read on the clock.

use std::cell::Cell;
use std::time::{Duration, Instant};

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
    /// Which inputs each timed run finds evicted from the caches.
    pub flush: CacheFlush,
}

/// Which inputs a timed run finds evicted from the CPU caches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheFlush {
    /// None: each run finds what the previous one left in the caches.
    #[default]
    Off,
    /// The task's constant weights, as a model's weights come from memory
    /// when the model runs (the activations were just written by the
    /// previous task and stay warm); the other inputs stay warm. A task
    /// without constants is timed warm.
    Weights,
    /// Every input.
    Inputs,
}

impl Default for TimingOptions {
    /// One warm-up run, three repeats of at least 50 ms each, warm caches.
    fn default() -> Self {
        TimingOptions {
            warmup: 1,
            number: 1,
            repeat: 3,
            min_repeat_ms: 50.0,
            flush: CacheFlush::Off,
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

/// The median of `values`: the upper of the two middle values for an even
/// count (NaN when empty).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Most times `number` is raised while calibrating; each try at least
/// doubles it, so this covers a factor of 2^20.
const MAX_CALIBRATION_TRIES: usize = 20;

/// Where the timing protocol reads the time: [`MonotonicClock`] in
/// production; a test injects a clock that its `run` closure advances
/// (such as [`ManualClock`]) to check the protocol without real time.
pub trait Clock {
    /// The time since a fixed origin of this clock; it never decreases.
    fn now(&self) -> Duration;
}

/// The real clock: [`Instant`], from when the clock was made.
#[derive(Clone, Copy, Debug)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        MonotonicClock {
            origin: Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A clock that moves only when told to: the code under test advances it
/// by the time each piece of work is meant to take.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: Cell<Duration>,
}

impl ManualClock {
    /// A clock at its origin.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock `by` forward.
    pub fn advance(&self, by: Duration) {
        self.now.set(self.now.get() + by);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        self.now.get()
    }
}

/// Times `run` with the protocol of the module docs on the real clock;
/// `flush` evicts the inputs of `options.flush` from the caches and is
/// called, off the clock, before each timed run unless that is `Off`.
pub fn time_runs(options: &TimingOptions, run: impl FnMut(), flush: impl FnMut()) -> Timing {
    time_runs_on(&MonotonicClock::new(), options, run, flush)
}

/// [`time_runs`] reading the time from `clock`.
pub fn time_runs_on(
    clock: &impl Clock,
    options: &TimingOptions,
    mut run: impl FnMut(),
    mut flush: impl FnMut(),
) -> Timing {
    for _ in 0..options.warmup {
        run();
    }
    let mut timed = |number: usize| {
        if options.flush == CacheFlush::Off {
            let start = clock.now();
            for _ in 0..number {
                run();
            }
            return clock.now().saturating_sub(start).as_secs_f64();
        }
        let mut elapsed = Duration::ZERO;
        for _ in 0..number {
            flush();
            let start = clock.now();
            run();
            elapsed += clock.now().saturating_sub(start);
        }
        elapsed.as_secs_f64()
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

    /// What the fake kernel saw, in order.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Event {
        Run,
        Flush,
    }

    /// Times a fake kernel on a [`ManualClock`]: its `n`-th run (from 0,
    /// warm-ups included) takes `micros(n)` µs of the clock. Returns the
    /// timing and every run and flush in order.
    fn fake_timing(options: &TimingOptions, micros: impl Fn(usize) -> u64) -> (Timing, Vec<Event>) {
        let clock = ManualClock::new();
        let events = std::cell::RefCell::new(Vec::new());
        let mut runs = 0;
        let timing = time_runs_on(
            &clock,
            options,
            || {
                clock.advance(Duration::from_micros(micros(runs)));
                runs += 1;
                events.borrow_mut().push(Event::Run);
            },
            || {
                // Evicting takes long; none of it may reach a cost.
                clock.advance(Duration::from_millis(7));
                events.borrow_mut().push(Event::Flush);
            },
        );
        (timing, events.into_inner())
    }

    /// `number` runs, each after a flush when flushing, `repeats` times.
    fn repeats(flush: bool, number: usize, repeats: usize) -> Vec<Event> {
        let one: &[Event] = if flush {
            &[Event::Flush, Event::Run]
        } else {
            &[Event::Run]
        };
        one.repeat(number * repeats)
    }

    fn assert_costs(timing: &Timing, seconds: &[f64]) {
        assert_eq!(timing.costs.len(), seconds.len(), "{timing:?}");
        for (got, want) in timing.costs.iter().zip(seconds) {
            assert!(
                (got - want).abs() <= 1e-12 * want,
                "{timing:?}, want {seconds:?}"
            );
        }
    }

    #[test]
    fn warm_up_runs_come_first_and_are_not_timed() {
        let options = TimingOptions {
            warmup: 3,
            number: 1,
            repeat: 4,
            min_repeat_ms: 0.5,
            flush: CacheFlush::Off,
        };
        // The warm-ups take a second each (a cold first call); timed runs 1 ms.
        let (timing, events) = fake_timing(&options, |n| if n < 3 { 1_000_000 } else { 1000 });
        assert_eq!(timing.number, 1);
        assert_costs(&timing, &[1e-3; 4]);
        assert_eq!(events, repeats(false, 1, 3 + 4));
    }

    #[test]
    fn a_flushed_run_is_timed_without_its_flush() {
        let options = TimingOptions {
            warmup: 1,
            number: 2,
            repeat: 3,
            min_repeat_ms: 0.0,
            flush: CacheFlush::Weights,
        };
        let (timing, events) = fake_timing(&options, |_| 300);
        assert_eq!(timing.number, 2);
        assert_costs(&timing, &[300e-6; 3]);
        let mut expected = repeats(false, 1, 1);
        expected.extend(repeats(true, 2, 3));
        assert_eq!(events, expected);
    }

    #[test]
    fn number_is_raised_until_a_repeat_lasts_min_repeat_ms() {
        let options = TimingOptions {
            warmup: 2,
            number: 1,
            repeat: 4,
            min_repeat_ms: 5.0,
            flush: CacheFlush::Inputs,
        };
        let (timing, events) = fake_timing(&options, |_| 200);
        // One run lasts 0.2 ms, short of 5 ms: number becomes
        // ⌈1 × 5 ms × 1.1 / 0.2 ms⌉ = 28 (5.6 ms), and every repeat runs 28.
        assert_eq!(timing.number, 28);
        assert_costs(&timing, &[200e-6; 4]);
        let mut expected = repeats(false, 1, 2);
        expected.extend(repeats(true, 1, 1));
        expected.extend(repeats(true, 28, 4));
        assert_eq!(events, expected);
    }

    #[test]
    fn a_repeat_cut_short_by_a_faster_machine_raises_number_again() {
        let options = TimingOptions {
            warmup: 0,
            number: 1,
            repeat: 3,
            min_repeat_ms: 5.0,
            flush: CacheFlush::Off,
        };
        // 2 ms per run while calibrating (a busy machine), 0.4 ms after.
        let (timing, events) = fake_timing(&options, |n| if n < 4 { 2000 } else { 400 });
        // Calibration: 1 run (2 ms), then ⌈5.5 / 2⌉ = 3 runs (6 ms, kept).
        // The next repeat of 3 lasts 1.2 ms: number becomes ⌈3 × 5.5 / 1.2⌉
        // = 14 and the series restarts, the calibration's 2 ms dropped.
        assert_eq!(timing.number, 14);
        assert_costs(&timing, &[400e-6; 3]);
        assert_eq!(events.len(), 1 + 3 + 3 + 14 * 3);
    }

    #[test]
    fn the_median_is_the_middle_repeat_not_the_mean() {
        let options = TimingOptions {
            warmup: 0,
            number: 1,
            repeat: 5,
            min_repeat_ms: 0.0,
            flush: CacheFlush::Off,
        };
        let millis = [3, 1, 2, 10, 4];
        let (timing, events) = fake_timing(&options, |n| millis[n] * 1000);
        assert_eq!(events, repeats(false, 1, 5));
        assert_costs(&timing, &[3e-3, 1e-3, 2e-3, 10e-3, 4e-3]);
        // The mean would be 4 ms: one slow repeat must not move the cost.
        assert_eq!(timing.median(), 3e-3);
        assert_eq!(timing.min(), 1e-3);
        assert!((timing.relative_spread() - 3.0).abs() < 1e-12, "{timing:?}");
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 3.0, "the upper middle");
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn at_least_one_repeat_and_one_run() {
        let options = TimingOptions {
            warmup: 0,
            number: 0,
            repeat: 0,
            min_repeat_ms: 0.0,
            flush: CacheFlush::Off,
        };
        let mut runs = 0;
        let timing = time_runs(&options, || runs += 1, || {});
        assert_eq!((timing.costs.len(), timing.number, runs), (1, 1, 1));
        assert_eq!(timing.median(), timing.min());
    }

    /// The real clock: only lower bounds, which a sleep guarantees however
    /// busy the machine (the protocol's arithmetic is checked above).
    #[test]
    fn the_real_clock_sees_at_least_the_time_slept() {
        let options = TimingOptions {
            warmup: 0,
            number: 1,
            repeat: 2,
            min_repeat_ms: 2.0,
            flush: CacheFlush::Off,
        };
        let timing = time_runs(
            &options,
            || std::thread::sleep(Duration::from_micros(200)),
            || {},
        );
        assert_eq!(timing.costs.len(), 2);
        assert!(timing.costs.iter().all(|&c| c >= 200e-6), "{timing:?}");
        assert!(
            timing
                .costs
                .iter()
                .all(|c| c * timing.number as f64 >= 2e-3),
            "{timing:?}"
        );
    }
}
