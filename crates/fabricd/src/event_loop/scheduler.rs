//! Generation scheduling, pure: which changes are pending, when the next generation is due
//! (coalescing window, forced reroutes, retries with backoff), supersession of a running
//! computation. No clock reads: every call is given its `now` (tokio's clock in the loop, any
//! instant in the tests below).
//!
//! Changes are numbered (`change_seq`); a generation covers every change up to the number it
//! started with (`started_seq`). Waiters are answered by the first committed generation whose
//! number covers theirs.

use std::time::Duration;

use tokio::time::Instant;

use crate::config::UpdateConfig;

/// Longest backoff between retries of a failed generation.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The scheduling state of the loop.
#[derive(Debug)]
pub(crate) struct Scheduler {
    change_seq: u64,
    started_seq: u64,
    pending_faults: usize,
    first_pending: Option<Instant>,
    last_pending: Option<Instant>,
    force: bool,
    retry_at: Option<Instant>,
    retry_backoff: Duration,
    superseded_in_row: u32,
    next_job: u64,
}

/// What a running (or abandoned) generation covered, to carry into the one that replaces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Covered {
    /// The first change it covered was seen then.
    pub first_seen: Instant,
    /// Changes it covered that count as faults.
    pub faults: u32,
}

/// A generation (a computation job) to start now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Start {
    pub job: u64,
    /// Changes up to this number are included.
    pub seq: u64,
    pub covered: Covered,
}

impl Scheduler {
    /// The first generation is due at once.
    pub(crate) fn new(now: Instant) -> Self {
        Scheduler {
            change_seq: 1,
            started_seq: 0,
            pending_faults: 0,
            first_pending: Some(now),
            last_pending: Some(now),
            force: true,
            retry_at: None,
            retry_backoff: Duration::ZERO,
            superseded_in_row: 0,
            next_job: 1,
        }
    }

    /// Number of the last change seen.
    pub(crate) fn change_seq(&self) -> u64 {
        self.change_seq
    }

    /// Changes that count as faults not yet covered by a started generation.
    pub(crate) fn pending_faults(&self) -> usize {
        self.pending_faults
    }

    /// Records one change that needs a generation.
    pub(crate) fn note_change(&mut self, now: Instant, fault: bool) {
        if self.change_seq == self.started_seq {
            self.first_pending = Some(now);
        }
        self.first_pending.get_or_insert(now);
        self.last_pending = Some(now);
        self.change_seq += 1;
        if fault {
            self.pending_faults += 1;
        }
    }

    /// A reroute or reload: the pending changes are due at once (no coalescing).
    pub(crate) fn force(&mut self) {
        self.force = true;
    }

    /// When the next generation is due: the end of the coalescing window of the pending
    /// changes, or the retry of a failed one. `computing`: a computation runs (it already
    /// includes the blocks to retry; more changes supersede it at most `max_superseded` times
    /// in a row). The caller asks only when nothing installs.
    pub(crate) fn due(&self, now: Instant, computing: bool, u: &UpdateConfig) -> Option<Instant> {
        let mut d = if computing { None } else { self.retry_at };
        if self.change_seq > self.started_seq {
            if computing && self.superseded_in_row >= u.max_superseded {
                return None;
            }
            let due = if self.force {
                now
            } else {
                match (self.first_pending, self.last_pending) {
                    (Some(f), Some(l)) => (l + u.coalesce()).min(f + u.coalesce_max()),
                    _ => now,
                }
            };
            d = Some(d.map_or(due, |x| x.min(due)));
        }
        d
    }

    /// Starts a generation when one is due at `now`. `running`: what the computation in
    /// flight covers; it is superseded (the caller drops it) by the returned one, which
    /// covers its changes too.
    pub(crate) fn start_if_due(&mut self, now: Instant, running: Option<Covered>, u: &UpdateConfig) -> Option<Start> {
        if self.change_seq == self.started_seq && self.retry_at.is_none() {
            return None;
        }
        match self.due(now, running.is_some(), u) {
            Some(d) if d <= now => {}
            _ => return None,
        }
        if self.change_seq == self.started_seq {
            // A retry of a failed upload with no new change.
            self.change_seq += 1;
        }
        let first = self.first_pending.unwrap_or(now);
        let covered = match running {
            Some(old) => {
                self.superseded_in_row += 1;
                Covered {
                    first_seen: old.first_seen.min(first),
                    faults: old.faults + self.pending_faults as u32,
                }
            }
            None => Covered {
                first_seen: first,
                faults: self.pending_faults as u32,
            },
        };
        Some(self.begin(covered))
    }

    /// Starts the restarted attempt of an abandoned generation at once: its changes and every
    /// change since.
    pub(crate) fn restart(&mut self, abandoned: Covered) -> Start {
        let covered = Covered {
            first_seen: abandoned
                .first_seen
                .min(self.first_pending.unwrap_or(abandoned.first_seen)),
            faults: abandoned.faults + self.pending_faults as u32,
        };
        self.begin(covered)
    }

    fn begin(&mut self, covered: Covered) -> Start {
        let job = self.next_job;
        self.next_job += 1;
        self.started_seq = self.change_seq;
        self.pending_faults = 0;
        self.first_pending = None;
        self.last_pending = None;
        self.force = false;
        self.retry_at = None;
        Start {
            job,
            seq: self.change_seq,
            covered,
        }
    }

    /// The current computation came back (a newer one may supersede again).
    pub(crate) fn computed(&mut self) {
        self.superseded_in_row = 0;
    }

    /// A generation was given up: the changes it covered are due again (and counted), after
    /// the failure backoff.
    pub(crate) fn requeue(&mut self, now: Instant, abandoned: Covered, u: &UpdateConfig) {
        self.pending_faults += abandoned.faults as usize;
        self.first_pending = Some(
            self.first_pending
                .map_or(abandoned.first_seen, |f| f.min(abandoned.first_seen)),
        );
        self.retry_later(now, u);
    }

    /// Schedules the retry of a generation, or of its failed blocks, with exponential backoff
    /// (from `failed_generation_backoff_ms`, doubling, at most a minute).
    pub(crate) fn retry_later(&mut self, now: Instant, u: &UpdateConfig) {
        self.retry_backoff = (self.retry_backoff * 2)
            .max(Duration::from_millis(u.failed_generation_backoff_ms))
            .min(MAX_BACKOFF);
        self.retry_at = Some(now + self.retry_backoff);
    }

    /// A generation was committed complete: the next failure backs off from the start again.
    pub(crate) fn succeeded(&mut self) {
        self.retry_backoff = Duration::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(coalesce_ms: u64, coalesce_max_ms: u64) -> UpdateConfig {
        UpdateConfig {
            coalesce_ms,
            coalesce_max_ms,
            max_superseded: 2,
            failed_generation_backoff_ms: 100,
            ..UpdateConfig::default()
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A scheduler past its first generation, at `t0`.
    fn idle(t0: Instant, u: &UpdateConfig) -> Scheduler {
        let mut s = Scheduler::new(t0);
        let first = s
            .start_if_due(t0, None, u)
            .expect("the first generation is due at once");
        assert_eq!((first.job, first.seq), (1, 1));
        s.computed();
        s.succeeded();
        s
    }

    #[test]
    fn a_storm_is_coalesced_until_quiet_or_the_window_maximum() {
        let u = config(50, 200);
        let t0 = Instant::now();
        let mut s = idle(t0, &u);
        assert_eq!(s.due(t0, false, &u), None, "nothing pending");
        s.note_change(t0, true);
        assert_eq!(s.due(t0, false, &u), Some(t0 + ms(50)));
        // Changes every 40 ms keep pushing the quiet end, up to 200 ms after the first.
        for i in 1..=6 {
            s.note_change(t0 + ms(40 * i), true);
        }
        assert_eq!(s.due(t0 + ms(240), false, &u), Some(t0 + ms(200)));
        assert_eq!(s.start_if_due(t0 + ms(199), None, &u), None, "not yet due");
        let g = s.start_if_due(t0 + ms(200), None, &u).unwrap();
        assert_eq!(g.seq, 8);
        assert_eq!(
            g.covered,
            Covered {
                first_seen: t0,
                faults: 7
            }
        );
        assert_eq!(s.pending_faults(), 0);
        assert_eq!(s.due(t0 + ms(200), false, &u), None);
    }

    #[test]
    fn a_forced_reroute_is_due_at_once() {
        let u = config(1000, 5000);
        let t0 = Instant::now();
        let mut s = idle(t0, &u);
        s.note_change(t0 + ms(1), false);
        s.force();
        assert_eq!(s.due(t0 + ms(2), false, &u), Some(t0 + ms(2)));
        let g = s.start_if_due(t0 + ms(2), None, &u).unwrap();
        assert_eq!(g.covered.faults, 0, "a reroute is no fault");
    }

    #[test]
    fn newer_changes_supersede_a_computation_at_most_max_superseded_times_in_a_row() {
        let u = config(0, 0);
        let t0 = Instant::now();
        let mut s = idle(t0, &u);
        s.note_change(t0, true);
        let a = s.start_if_due(t0, None, &u).unwrap();
        s.note_change(t0 + ms(5), true);
        let b = s.start_if_due(t0 + ms(5), Some(a.covered), &u).unwrap();
        assert_eq!(
            b.covered,
            Covered {
                first_seen: t0,
                faults: 2
            },
            "covers both"
        );
        s.note_change(t0 + ms(6), true);
        let c = s.start_if_due(t0 + ms(6), Some(b.covered), &u).unwrap();
        assert_eq!((c.job, c.covered.faults), (b.job + 1, 3));
        s.note_change(t0 + ms(7), true);
        assert_eq!(
            s.due(t0 + ms(7), true, &u),
            None,
            "superseded twice in a row: let it finish"
        );
        assert_eq!(s.start_if_due(t0 + ms(7), Some(c.covered), &u), None);
        s.computed();
        assert!(
            s.start_if_due(t0 + ms(8), None, &u).is_some(),
            "the queued change follows"
        );
    }

    #[test]
    fn failures_back_off_exponentially_up_to_a_minute_and_success_resets() {
        let u = config(0, 0);
        let t0 = Instant::now();
        let mut s = idle(t0, &u);
        s.retry_later(t0, &u);
        assert_eq!(s.due(t0, false, &u), Some(t0 + ms(100)));
        assert_eq!(s.due(t0, true, &u), None, "a running computation includes the retry");
        assert_eq!(s.start_if_due(t0 + ms(99), None, &u), None);
        let r = s.start_if_due(t0 + ms(100), None, &u).unwrap();
        assert_eq!(
            (r.seq, r.covered.faults),
            (2, 0),
            "a retry uses a change number of its own"
        );
        s.retry_later(t0, &u);
        assert_eq!(s.due(t0, false, &u), Some(t0 + ms(200)));
        for _ in 0..20 {
            s.retry_later(t0, &u);
        }
        assert_eq!(s.due(t0, false, &u), Some(t0 + MAX_BACKOFF));
        s.succeeded();
        s.retry_later(t0, &u);
        assert_eq!(s.due(t0, false, &u), Some(t0 + ms(100)));
    }

    #[test]
    fn an_abandoned_generation_is_requeued_or_restarted_with_its_changes() {
        let u = config(0, 0);
        let t0 = Instant::now();
        let mut s = idle(t0, &u);
        s.note_change(t0, true);
        s.note_change(t0, true);
        let g = s.start_if_due(t0, None, &u).unwrap();
        s.note_change(t0 + ms(10), true);
        // Restart from Prepare: at once, with the new change.
        let r = s.restart(g.covered);
        assert_eq!(
            r.covered,
            Covered {
                first_seen: t0,
                faults: 3
            }
        );
        assert_eq!(s.pending_faults(), 0);
        // Abort: counted as pending again, due after the backoff.
        s.requeue(t0 + ms(20), r.covered, &u);
        assert_eq!(s.pending_faults(), 3);
        assert_eq!(s.due(t0 + ms(20), false, &u), Some(t0 + ms(120)));
        let again = s.start_if_due(t0 + ms(120), None, &u).unwrap();
        assert_eq!(
            again.covered,
            Covered {
                first_seen: t0,
                faults: 3
            }
        );
    }
}
