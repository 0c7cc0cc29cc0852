//! Where a generation's `compute_ms` went in time, as the scheduler saw it: the computing
//! thread's time on a CPU (its CPU clock, `CLOCK_THREAD_CPUTIME_ID`) and its time runnable but
//! waiting in a run queue (Linux `/proc/thread-self/schedstat`, second field, nanoseconds;
//! counted when the wait ends, so exact for a thread that is running — the first field, the
//! time on a CPU, is only brought up to date at scheduler ticks and is not used), read by
//! [`super::compute`] at the start and the end of its span (two reads of a small /proc file).
//!
//! `compute_ms` is wall-clock time: on a loaded machine (a simulator, a poller and other
//! processes on two cores) the thread can be preempted for several scheduler slices in the
//! middle of a stage, which shows here as run-queue time, not as work (issue 19: one-off
//! 10–30 ms `compute_ms` of a ~2 ms computation, at a different stage each time). What is left
//! (`compute_ms − cpu_ms − runqueue_ms`) is time the thread slept: waiting for work the pool's
//! other threads took (theirs is not counted here) or for page faults served from disk.

/// The computing thread's share of a computation (milliseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ThreadTimes {
    /// On a CPU.
    pub cpu_ms: f64,
    /// Runnable, waiting for a CPU.
    pub runqueue_ms: f64,
}

/// A reading of the calling thread's counters (`None` where the kernel has no schedstat).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    cpu_ns: u64,
    runqueue_ns: u64,
}

/// The second field of a schedstat line: time waiting in a run queue (ns).
fn parse_runqueue_ns(text: &str) -> Option<u64> {
    let mut f = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    f.next()??;
    f.next()?
}

/// The calling thread's CPU clock (ns).
fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    (t.tv_sec.max(0) as u64) * 1_000_000_000 + t.tv_nsec.max(0) as u64
}

/// The calling thread's counters now.
pub fn sample() -> Option<Sample> {
    let runqueue_ns = parse_runqueue_ns(&std::fs::read_to_string("/proc/thread-self/schedstat").ok()?)?;
    Some(Sample {
        cpu_ns: thread_cpu_ns(),
        runqueue_ns,
    })
}

impl Sample {
    /// What the calling thread (the one that took `self`) spent since `self`.
    pub fn elapsed(self) -> Option<ThreadTimes> {
        let now = sample()?;
        Some(ThreadTimes {
            cpu_ms: now.cpu_ns.saturating_sub(self.cpu_ns) as f64 / 1e6,
            runqueue_ms: now.runqueue_ns.saturating_sub(self.runqueue_ns) as f64 / 1e6,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_line() {
        assert_eq!(parse_runqueue_ns("209862 2850441 2\n"), Some(2_850_441));
        assert_eq!(parse_runqueue_ns(""), None);
        assert_eq!(parse_runqueue_ns("12"), None);
        assert_eq!(parse_runqueue_ns("x 1 2"), None);
        assert_eq!(parse_runqueue_ns("1 y 2"), None);
    }

    #[test]
    fn the_thread_s_cpu_time_counts_its_work() {
        // Linux (the daemon's only platform) has the file; the counters only grow.
        let s = sample().expect("/proc/thread-self/schedstat");
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        let t = s.elapsed().expect("schedstat");
        // The CPU clock counts the loop at once (the schedstat CPU field lags by up to a tick
        // and read 0 here; not used).
        assert!(t.cpu_ms > 0.0 && t.runqueue_ms >= 0.0, "{t:?} {x}");
    }
}
