//! Link flaps: the link-down events of each port within a sliding window (pure: the caller
//! gives `now`).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use fabric_southbound::CounterPort;

/// Most link-down instants kept per port (older ones are forgotten first).
const MAX_KEPT: usize = 10_000;

/// Link-down events per port.
#[derive(Clone, Debug, Default)]
pub struct Flaps {
    downs: BTreeMap<CounterPort, VecDeque<Instant>>,
}

impl Flaps {
    /// The link of `port` went down at `now`.
    pub fn record_down(&mut self, port: CounterPort, now: Instant) {
        let q = self.downs.entry(port).or_default();
        q.push_back(now);
        if q.len() > MAX_KEPT {
            q.pop_front();
        }
    }

    /// Forgets the events older than `window` before `now` (and ports left without any).
    pub fn prune(&mut self, now: Instant, window: Duration) {
        for q in self.downs.values_mut() {
            while q.front().is_some_and(|&t| now.saturating_duration_since(t) > window) {
                q.pop_front();
            }
        }
        self.downs.retain(|_, q| !q.is_empty());
    }

    /// Link-down events of `port` within `window` before `now`.
    pub fn count(&self, port: &CounterPort, now: Instant, window: Duration) -> u32 {
        self.downs.get(port).map_or(0, |q| {
            q.iter()
                .filter(|&&t| now.saturating_duration_since(t) <= window)
                .count() as u32
        })
    }

    /// The ports with at least one event kept.
    pub fn ports(&self) -> impl Iterator<Item = &CounterPort> {
        self.downs.keys()
    }

    /// Forgets the events of `port` (cleared by the operator).
    pub fn clear(&mut self, port: &CounterPort) {
        self.downs.remove(port);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downs_are_counted_within_the_window_only() {
        let p = CounterPort::Switch { switch: 1, port: 3 };
        let q = CounterPort::EndPort(9);
        let w = Duration::from_secs(60);
        let t0 = Instant::now();
        let mut f = Flaps::default();
        for s in [0, 10, 20, 70] {
            f.record_down(p, t0 + Duration::from_secs(s));
        }
        f.record_down(q, t0);
        assert_eq!(f.count(&p, t0 + Duration::from_secs(70), w), 3);
        assert_eq!(f.count(&p, t0 + Duration::from_secs(200), w), 0);
        f.prune(t0 + Duration::from_secs(75), w);
        assert_eq!(f.ports().count(), 1, "q's only event left the window");
        f.clear(&p);
        assert_eq!(f.count(&p, t0 + Duration::from_secs(70), w), 0);
    }
}
