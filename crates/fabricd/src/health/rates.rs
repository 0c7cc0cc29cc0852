//! Per-port counter tracking and rates (pure: the caller gives `now`).
//!
//! A rate is the difference between two reads divided by the seconds between them. A counter
//! that went down was reset (by an operator, a reboot, a driver's clear-on-read): the new value
//! is the count since the reset. A counter at its field's maximum ([`Counter::max`]) is
//! saturated: InfiniBand's narrow counters stop there, so its rate is unknown until it is reset.

use std::time::Instant;

use fabric_southbound::{Counter, PortCounters};

/// What one counter of a port did between the last two reads.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CounterState {
    /// The value last read.
    pub value: u64,
    /// Events per second between the last two reads; `None` after the first read or when
    /// saturated.
    pub rate: Option<f64>,
    /// At its field's maximum: the rate is unknown.
    pub saturated: bool,
}

/// The counters of one port as read over time.
#[derive(Clone, Debug, Default)]
pub struct PortTrack {
    last: Option<(Instant, PortCounters)>,
    /// One entry per [`Counter::ALL`], in that order.
    states: [CounterState; Counter::ALL.len()],
    /// Resets seen (a counter went down).
    pub resets: u64,
    /// Why the last read of this port failed (cleared by a good read).
    pub error: Option<String>,
}

/// The rate of one counter from `prev` to `cur` over `dt_s` seconds, and whether it was reset
/// (`cur < prev`) or is saturated (`cur` at `max`: rate unknown).
pub fn counter_rate(prev: u64, cur: u64, max: u64, dt_s: f64) -> (Option<f64>, bool) {
    if cur >= max {
        return (None, false);
    }
    let (delta, reset) = if cur < prev { (cur, true) } else { (cur - prev, false) };
    let rate = (dt_s > 0.0).then(|| delta as f64 / dt_s);
    (rate, reset)
}

impl PortTrack {
    /// Records a read at `now`; whether what the port shows changed (its first read, a
    /// value, rate or saturation, or a read error cleared).
    pub fn update(&mut self, now: Instant, c: PortCounters) -> bool {
        let before = (self.states, self.last.is_some(), self.error.is_some());
        let dt = self
            .last
            .as_ref()
            .map(|(t, _)| now.saturating_duration_since(*t).as_secs_f64());
        let mut reset = false;
        for (i, counter) in Counter::ALL.into_iter().enumerate() {
            let cur = c.get(counter);
            let (rate, r) = match (&self.last, dt) {
                (Some((_, prev)), Some(dt)) => counter_rate(prev.get(counter), cur, counter.max(), dt),
                _ => (None, false),
            };
            reset |= r;
            self.states[i] = CounterState {
                value: cur,
                rate,
                saturated: cur >= counter.max(),
            };
        }
        if reset {
            self.resets += 1;
        }
        self.last = Some((now, c));
        self.error = None;
        before != (self.states, true, false)
    }

    /// A read of this port failed; whether its error changed.
    pub fn failed(&mut self, error: String) -> bool {
        let changed = self.error.as_ref() != Some(&error);
        self.error = Some(error);
        changed
    }

    /// The state of one counter.
    pub fn get(&self, c: Counter) -> CounterState {
        self.states[c as usize]
    }

    /// Whether the port has been read at least once.
    pub fn read(&self) -> bool {
        self.last.is_some()
    }

    /// The highest error rate (per second) among the error counters (0 when none is known).
    pub fn max_error_rate(&self) -> f64 {
        Counter::ERRORS
            .iter()
            .filter_map(|&c| self.get(c).rate)
            .fold(0.0, f64::max)
    }

    /// The error counters that are saturated.
    pub fn saturated_errors(&self) -> Vec<Counter> {
        Counter::ERRORS.into_iter().filter(|&c| self.get(c).saturated).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn with(c: Counter, v: u64) -> PortCounters {
        let mut p = PortCounters::default();
        *p.get_mut(c) = v;
        p
    }

    #[test]
    fn rates_are_per_second_from_the_difference() {
        let t0 = Instant::now();
        let mut t = PortTrack::default();
        t.update(t0, with(Counter::SymbolErrors, 10));
        assert_eq!(t.get(Counter::SymbolErrors).rate, None, "one read gives no rate");
        t.update(t0 + Duration::from_secs(2), with(Counter::SymbolErrors, 110));
        assert_eq!(t.get(Counter::SymbolErrors).rate, Some(50.0));
        assert_eq!(t.get(Counter::SymbolErrors).value, 110);
        assert_eq!(t.get(Counter::RcvErrors).rate, Some(0.0));
        assert_eq!(t.max_error_rate(), 50.0);
        assert_eq!(t.resets, 0);
    }

    #[test]
    fn a_counter_that_went_down_was_reset_and_its_new_value_is_the_delta() {
        let t0 = Instant::now();
        let mut t = PortTrack::default();
        t.update(t0, with(Counter::RcvErrors, 500));
        t.update(t0 + Duration::from_secs(4), with(Counter::RcvErrors, 8));
        assert_eq!(t.get(Counter::RcvErrors).rate, Some(2.0));
        assert_eq!(t.resets, 1);
        assert_eq!(counter_rate(500, 8, 65535, 4.0), (Some(2.0), true));
    }

    #[test]
    fn a_saturated_counter_has_no_rate_until_reset() {
        let t0 = Instant::now();
        let mut t = PortTrack::default();
        t.update(t0, with(Counter::LinkDowned, 200));
        t.update(t0 + Duration::from_secs(1), with(Counter::LinkDowned, 255));
        let s = t.get(Counter::LinkDowned);
        assert!(s.saturated);
        assert_eq!(s.rate, None);
        assert_eq!(t.saturated_errors(), vec![Counter::LinkDowned]);
        t.update(t0 + Duration::from_secs(2), with(Counter::LinkDowned, 3));
        assert!(!t.get(Counter::LinkDowned).saturated);
        assert_eq!(t.get(Counter::LinkDowned).rate, Some(3.0));
        // 64-bit counters never saturate in practice.
        assert_eq!(
            counter_rate(u64::MAX - 10, u64::MAX - 4, u64::MAX, 2.0),
            (Some(3.0), false)
        );
    }

    #[test]
    fn a_failed_read_is_kept_until_the_next_good_one() {
        let mut t = PortTrack::default();
        t.failed("timeout".into());
        assert_eq!(t.error.as_deref(), Some("timeout"));
        assert!(!t.read());
        t.update(Instant::now(), PortCounters::default());
        assert_eq!(t.error, None);
    }
}
