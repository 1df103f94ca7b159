//! Parallel loops: compiled code calls [`tessera_parallel_for`] with an
//! outlined loop body; the iterations are split into contiguous chunks, one
//! per thread: the calling thread runs the first, the workers of a pool the
//! others. Nested parallel loops are compiled serially.
//!
//! The pool's workers spin for a while after each loop before they sleep,
//! as ONNX Runtime's and TVM's thread pools do: a model runs one kernel
//! after another, each forking once or more, and waking a sleeping thread
//! (a futex, and on a virtual machine an idle virtual CPU) costs tens of
//! microseconds each time — measured 50–70 µs per fork on the 2-core Xeon
//! VM with a pool whose workers sleep at once, against a few with spinning
//! workers. A caller that finds the pool busy (another thread's loop) runs
//! its loop serially.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, TryLockError};
use std::time::{Duration, Instant};

/// An outlined loop body: runs iterations `begin..end` with the kernel's
/// buffer pointers and the captured loop values.
pub type LoopBody = extern "C" fn(ptrs: *const *mut u8, values: *const i64, begin: i64, end: i64);

static THREADS: AtomicUsize = AtomicUsize::new(0);

/// How long a worker waits for the next loop, spinning, before it sleeps.
const SPIN: Duration = Duration::from_millis(2);

/// Threads parallel loops use (default: the machine's available parallelism).
pub fn num_threads() -> usize {
    match THREADS.load(Ordering::Relaxed) {
        0 => {
            // Asked once: the query reads the affinity mask and cgroup limits.
            static AVAILABLE: OnceLock<usize> = OnceLock::new();
            *AVAILABLE.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        }
        n => n,
    }
}

/// Sets the number of threads parallel loops use (at least 1).
pub fn set_num_threads(n: usize) {
    THREADS.store(n.max(1), Ordering::Relaxed);
}

/// The loop being run: what every worker reads after the epoch moves.
#[derive(Default)]
struct Job {
    body: AtomicUsize,
    ptrs: AtomicUsize,
    values: AtomicUsize,
    extent: AtomicI64,
    chunk: AtomicI64,
}

/// `workers` threads, each running chunk `index` (1-based; the caller runs
/// chunk 0) of every loop published under a new epoch.
struct Pool {
    job: Job,
    /// Moves by one per loop; workers wait for it to move.
    epoch: AtomicU64,
    /// Workers that have not finished the current loop.
    pending: AtomicUsize,
    /// Workers asleep (or about to be) on `wake`.
    sleepers: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
    /// Held by the thread whose loop the pool runs.
    busy: Mutex<()>,
    workers: usize,
}

impl Pool {
    fn start(workers: usize) -> Option<Arc<Pool>> {
        let pool = Arc::new(Pool {
            job: Job::default(),
            epoch: AtomicU64::new(0),
            pending: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
            busy: Mutex::new(()),
            workers,
        });
        for index in 1..=workers {
            let shared = pool.clone();
            std::thread::Builder::new()
                .name(format!("tessera-worker-{index}"))
                .spawn(move || shared.work(index))
                .ok()?;
        }
        Some(pool)
    }

    /// A worker's life: wait for a loop, run its chunk, say so.
    fn work(&self, index: usize) {
        let mut seen = 0;
        loop {
            seen = self.next_epoch(seen);
            let extent = self.job.extent.load(Ordering::Relaxed);
            let chunk = self.job.chunk.load(Ordering::Relaxed);
            let begin = index as i64 * chunk;
            let end = (begin + chunk).min(extent);
            if begin < end {
                // SAFETY: published by `run` as a valid `LoopBody` with its
                // tables, which the caller keeps alive until `pending` is 0.
                let body: LoopBody =
                    unsafe { std::mem::transmute(self.job.body.load(Ordering::Relaxed)) };
                body(
                    self.job.ptrs.load(Ordering::Relaxed) as *const *mut u8,
                    self.job.values.load(Ordering::Relaxed) as *const i64,
                    begin,
                    end,
                );
            }
            self.pending.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Waits, spinning then sleeping, until the epoch moves past `seen`.
    fn next_epoch(&self, seen: u64) -> u64 {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let epoch = self.epoch.load(Ordering::Acquire);
            if epoch != seen {
                return epoch;
            }
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) && start.elapsed() > SPIN {
                break;
            }
        }
        let Ok(mut guard) = self.sleep.lock() else {
            return self.epoch.load(Ordering::Acquire);
        };
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while self.epoch.load(Ordering::SeqCst) == seen {
            guard = match self.wake.wait(guard) {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        self.epoch.load(Ordering::Acquire)
    }

    /// Runs `body` over `0..extent` in `workers + 1` chunks; `false` (nothing
    /// run) when another thread's loop holds the pool.
    fn run(&self, body: LoopBody, ptrs: *const *mut u8, values: *const i64, extent: i64) -> bool {
        let _busy = match self.busy.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::WouldBlock) => return false,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        };
        let chunk = (extent + self.workers as i64) / (self.workers as i64 + 1);
        self.job.body.store(body as usize, Ordering::Relaxed);
        self.job.ptrs.store(ptrs as usize, Ordering::Relaxed);
        self.job.values.store(values as usize, Ordering::Relaxed);
        self.job.extent.store(extent, Ordering::Relaxed);
        self.job.chunk.store(chunk, Ordering::Relaxed);
        self.pending.store(self.workers, Ordering::Relaxed);
        self.epoch.fetch_add(1, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            drop(self.sleep.lock());
            self.wake.notify_all();
        }
        body(ptrs, values, 0, chunk.min(extent));
        while self.pending.load(Ordering::Acquire) != 0 {
            std::hint::spin_loop();
        }
        true
    }
}

/// The pool of `workers` threads, started on first use.
fn pool(workers: usize) -> Option<Arc<Pool>> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<Pool>>>> = OnceLock::new();
    let pools = POOLS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut pools = pools.lock().ok()?;
    if let Some(p) = pools.get(&workers) {
        return Some(p.clone());
    }
    let p = Pool::start(workers)?;
    pools.insert(workers, p.clone());
    Some(p)
}

/// Runs `body` over `0..extent`, split into one contiguous chunk per thread.
///
/// # Safety
/// Called by compiled code: `body` must be an outlined loop body and `ptrs`,
/// `values` valid for its whole run.
pub unsafe extern "C" fn tessera_parallel_for(
    body: LoopBody,
    ptrs: *const *mut u8,
    values: *const i64,
    extent: i64,
) {
    // SAFETY: as promised by the caller.
    unsafe { parallel_for_on(num_threads(), body, ptrs, values, extent) }
}

/// [`tessera_parallel_for`] on `threads` threads.
///
/// # Safety
/// As [`tessera_parallel_for`].
unsafe fn parallel_for_on(
    threads: usize,
    body: LoopBody,
    ptrs: *const *mut u8,
    values: *const i64,
    extent: i64,
) {
    let threads = (threads as i64).min(extent).max(1);
    if threads == 1 {
        return body(ptrs, values, 0, extent);
    }
    let ran = pool(threads as usize - 1).is_some_and(|p| p.run(body, ptrs, values, extent));
    if !ran {
        body(ptrs, values, 0, extent);
    }
}

extern "C" fn empty_body(_: *const *mut u8, _: *const i64, _: i64, _: i64) {}

/// The fork cost of a parallel loop: the median wall time, over `runs`
/// runs, of a loop of `threads` chunks with an empty body on `threads`
/// threads — waking the pool's workers and joining them, the fixed price
/// every parallel loop pays before its work gains anything.
pub fn fork_cost(threads: usize, runs: usize) -> std::time::Duration {
    let mut times: Vec<std::time::Duration> = (0..runs.max(1))
        .map(|_| {
            let start = std::time::Instant::now();
            // SAFETY: the empty body touches neither table.
            unsafe {
                parallel_for_on(
                    threads,
                    empty_body,
                    std::ptr::null(),
                    std::ptr::null(),
                    threads as i64,
                )
            };
            start.elapsed()
        })
        .collect();
    times.sort_unstable();
    times[times.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adds 1 to `counts[i]` for every iteration `i` (ptrs[0] is `counts`).
    extern "C" fn count_visits(ptrs: *const *mut u8, _: *const i64, begin: i64, end: i64) {
        // SAFETY: the tests pass one table entry, a live `AtomicU32` slice
        // of at least `end` elements.
        let counts = unsafe { *ptrs } as *const std::sync::atomic::AtomicU32;
        for i in begin..end {
            // SAFETY: as above.
            unsafe { &*counts.add(i as usize) }.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Runs `count_visits` over `0..extent` on `threads` and checks that
    /// every iteration ran exactly once.
    fn visits_each_once(threads: usize, extent: i64) {
        let counts: Vec<std::sync::atomic::AtomicU32> = (0..extent.max(0))
            .map(|_| std::sync::atomic::AtomicU32::new(0))
            .collect();
        let table = [counts.as_ptr() as *mut u8];
        // SAFETY: the body and its table as `count_visits` requires.
        unsafe {
            parallel_for_on(
                threads,
                count_visits,
                table.as_ptr(),
                std::ptr::null(),
                extent,
            )
        };
        for (i, c) in counts.iter().enumerate() {
            assert_eq!(
                c.load(Ordering::Relaxed),
                1,
                "{threads} threads, extent {extent}: {i}"
            );
        }
    }

    #[test]
    fn every_iteration_runs_once_whatever_the_extent_and_threads() {
        for threads in 1..=4 {
            for extent in [0, 1, 2, 3, 5, 7, 64, 1001] {
                visits_each_once(threads, extent);
            }
        }
    }

    #[test]
    fn workers_asleep_after_a_long_pause_wake_for_the_next_loop() {
        let pool = Pool::start(2).expect("pool");
        let counts: Vec<std::sync::atomic::AtomicU32> = (0..30)
            .map(|_| std::sync::atomic::AtomicU32::new(0))
            .collect();
        let table = [counts.as_ptr() as *mut u8];
        for round in 1..=2 {
            if round == 2 {
                // Both stop spinning and sleep (allow for a loaded machine).
                let start = Instant::now();
                while pool.sleepers.load(Ordering::SeqCst) < 2 {
                    assert!(start.elapsed() < Duration::from_secs(10), "never slept");
                    std::thread::sleep(SPIN);
                }
            }
            // Sleeping workers must wake for their chunks, or this hangs.
            assert!(pool.run(count_visits, table.as_ptr(), std::ptr::null(), 30));
            for c in &counts {
                assert_eq!(c.load(Ordering::Relaxed), round);
            }
        }
    }

    #[test]
    fn loops_from_several_threads_at_once_all_complete() {
        let callers: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    for extent in 0..200 {
                        visits_each_once(3, extent);
                    }
                })
            })
            .collect();
        for caller in callers {
            caller.join().expect("a caller panicked");
        }
    }
}
