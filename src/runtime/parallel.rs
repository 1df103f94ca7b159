//! Parallel loops: compiled code calls [`tessera_parallel_for`] with an
//! outlined loop body; the iterations are split into contiguous chunks, one
//! per thread: the calling thread runs the first, the workers of a rayon
//! pool the others. Nested parallel loops are compiled serially.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::ThreadPool;

/// An outlined loop body: runs iterations `begin..end` with the kernel's
/// buffer pointers and the captured loop values.
pub type LoopBody = extern "C" fn(ptrs: *const *mut u8, values: *const i64, begin: i64, end: i64);

static THREADS: AtomicUsize = AtomicUsize::new(0);

/// Threads parallel loops use (default: the machine's available parallelism).
pub fn num_threads() -> usize {
    match THREADS.load(Ordering::Relaxed) {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// Sets the number of threads parallel loops use (at least 1).
pub fn set_num_threads(n: usize) {
    THREADS.store(n.max(1), Ordering::Relaxed);
}

fn pool(threads: usize) -> Option<Arc<ThreadPool>> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<ThreadPool>>>> = OnceLock::new();
    let pools = POOLS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut pools = pools.lock().ok()?;
    if let Some(p) = pools.get(&threads) {
        return Some(p.clone());
    }
    let built = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("tessera-worker-{i}"))
        .build()
        .ok()?;
    let p = Arc::new(built);
    pools.insert(threads, p.clone());
    Some(p)
}

/// Raw pointers handed to worker threads; the caller blocks until they finish.
#[derive(Clone, Copy)]
struct Shared {
    ptrs: usize,
    values: usize,
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
    let serial = || body(ptrs, values, 0, extent);
    if threads == 1 {
        return serial();
    }
    // The calling thread runs the first chunk itself: a fork wakes
    // `threads - 1` workers, not `threads`, and the caller never sleeps
    // while a worker does its share.
    let Some(pool) = pool(threads as usize - 1) else {
        return serial();
    };
    let shared = Shared {
        ptrs: ptrs as usize,
        values: values as usize,
    };
    let chunk = (extent + threads - 1) / threads;
    pool.in_place_scope(|scope| {
        for t in 1..threads {
            let (begin, end) = (t * chunk, ((t + 1) * chunk).min(extent));
            if begin >= end {
                continue;
            }
            scope.spawn(move |_| {
                let s = shared;
                body(s.ptrs as *const *mut u8, s.values as *const i64, begin, end)
            });
        }
        body(ptrs, values, 0, chunk.min(extent));
    });
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
