//! Progress of a long metrics computation, for a caller that shows it (a progress bar): two
//! counters of work units, advanced by the computing threads and read by any other thread. No
//! clock, no I/O: the caller decides when and how to look.

use std::sync::atomic::{AtomicU64, Ordering};

/// Work units done out of a total, shared between the computation and its observer.
///
/// [`crate::compute_with_progress`] adds its units to `total` as it learns them (one per random
/// permutation and one per block of 64 destinations of the path scan at the start; for
/// `mu_sp`, one per block of 64 destinations per pass over the destinations plus one per
/// switch, announced once the first pass has sized the channel groups, or one per shift when
/// it walks every shift) and
/// advances `done` as they finish; `done() <= total()` at every moment.
#[derive(Debug, Default)]
pub struct Progress {
    done: AtomicU64,
    total: AtomicU64,
}

impl Progress {
    /// No work known yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Announces `units` more units of work.
    pub fn add_total(&self, units: u64) {
        self.total.fetch_add(units, Ordering::Relaxed);
    }

    /// Records `units` finished units.
    pub fn advance(&self, units: u64) {
        self.done.fetch_add(units, Ordering::Relaxed);
    }

    /// Units finished so far.
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// Units announced so far.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}
