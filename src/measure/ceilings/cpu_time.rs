//! The CPU time of the calling thread: what the ceilings' loops are timed
//! by, so that time the thread spent preempted (a busy, shared machine)
//! does not count against the hardware. Linux (64-bit) reads
//! `CLOCK_THREAD_CPUTIME_ID`; elsewhere the wall clock stands in.

use std::time::Instant;

/// A stopwatch of the calling thread's running time.
pub struct ThreadStopwatch {
    wall: Instant,
    cpu: Option<f64>,
}

impl ThreadStopwatch {
    /// Starts now.
    pub fn start() -> ThreadStopwatch {
        ThreadStopwatch {
            cpu: thread_cpu_seconds(),
            wall: Instant::now(),
        }
    }

    /// Seconds the thread ran since [`start`](Self::start) (never more than
    /// the wall time since then).
    pub fn seconds(&self) -> f64 {
        let wall = self.wall.elapsed().as_secs_f64();
        match (self.cpu, thread_cpu_seconds()) {
            (Some(start), Some(now)) if now > start => (now - start).min(wall),
            _ => wall,
        }
    }
}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn thread_cpu_seconds() -> Option<f64> {
    /// `struct timespec` of 64-bit Linux.
    #[repr(C)]
    struct Timespec {
        seconds: i64,
        nanoseconds: i64,
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    unsafe extern "C" {
        fn clock_gettime(clock: i32, time: *mut Timespec) -> i32;
    }
    let mut time = Timespec {
        seconds: 0,
        nanoseconds: 0,
    };
    // SAFETY: `time` is a valid, writable `struct timespec`.
    let status = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut time) };
    (status == 0).then_some(time.seconds as f64 + time.nanoseconds as f64 * 1e-9)
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn thread_cpu_seconds() -> Option<f64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_time_counts_work_and_not_sleep() {
        let watch = ThreadStopwatch::start();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let slept = watch.seconds();
        let watch = ThreadStopwatch::start();
        let mut x = 1u64;
        let begin = Instant::now();
        while begin.elapsed().as_millis() < 30 {
            x = std::hint::black_box(x.wrapping_mul(3));
        }
        let worked = watch.seconds();
        assert!(worked > 0.0 && worked <= begin.elapsed().as_secs_f64() + 1e-3);
        if cfg!(all(target_os = "linux", target_pointer_width = "64")) {
            assert!(slept < 0.01, "a sleeping thread does not run: {slept}");
        } else {
            eprintln!("skipped the sleep check: the wall clock stands in here");
        }
    }
}
