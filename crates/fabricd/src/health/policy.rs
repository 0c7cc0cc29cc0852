//! The health policy (pure): which ports are over a threshold or flapping, and why.

use fabric_southbound::Counter;

use super::rates::PortTrack;
use crate::config::{HealthAction, HealthConfig};

/// The policy in force (from `[health]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// Errors per second per counter.
    pub thresholds: Vec<(Counter, f64)>,
    pub flap_count: u32,
    pub flap_window_s: u64,
    pub action: HealthAction,
    pub max_isolated: u32,
}

impl Policy {
    /// The policy of a checked configuration.
    pub fn from_config(c: &HealthConfig) -> Policy {
        Policy {
            thresholds: c.counter_thresholds(),
            flap_count: c.flap_count,
            flap_window_s: c.flap_window_s,
            action: c.action,
            max_isolated: c.max_isolated,
        }
    }
}

/// Why a port breaks the policy.
#[derive(Clone, Debug, PartialEq)]
pub struct Breach {
    /// The counter over its threshold; `None` for flapping.
    pub counter: Option<Counter>,
    /// Its rate (errors per second), or the link-downs in the window for flapping.
    pub value: f64,
    /// The threshold (errors per second), or `flap_count`.
    pub threshold: f64,
}

impl Breach {
    /// How far over the threshold (orders the breaches of a port and the ports).
    pub fn severity(&self) -> f64 {
        self.value / self.threshold
    }

    /// One line: `symbol_errors at 120.0/s over the threshold 10/s`.
    pub fn text(&self, flap_window_s: u64) -> String {
        match self.counter {
            Some(c) => format!(
                "{} at {}/s over the threshold {}/s",
                c.name(),
                round(self.value),
                round(self.threshold)
            ),
            None => format!(
                "flapping: {} link-downs within {flap_window_s} s (threshold {})",
                self.value, self.threshold
            ),
        }
    }
}

/// The worst breach of a port (highest rate over threshold; flapping counts like a counter),
/// or `None` when the port is within the policy.
pub fn evaluate(p: &Policy, track: Option<&PortTrack>, flaps: u32) -> Option<Breach> {
    let mut worst: Option<Breach> = None;
    let mut consider = |b: Breach| {
        if worst.as_ref().is_none_or(|w| b.severity() > w.severity()) {
            worst = Some(b);
        }
    };
    if let Some(t) = track {
        for &(c, threshold) in &p.thresholds {
            if let Some(rate) = t.get(c).rate {
                if rate > threshold {
                    consider(Breach {
                        counter: Some(c),
                        value: rate,
                        threshold,
                    });
                }
            }
        }
    }
    if flaps >= p.flap_count {
        consider(Breach {
            counter: None,
            value: f64::from(flaps),
            threshold: f64::from(p.flap_count),
        });
    }
    worst
}

/// A rate rounded for people: 3 significant digits, no trailing zeros.
pub fn round(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_southbound::PortCounters;
    use std::time::{Duration, Instant};

    fn policy() -> Policy {
        Policy {
            thresholds: vec![(Counter::SymbolErrors, 10.0), (Counter::RcvErrors, 5.0)],
            flap_count: 3,
            flap_window_s: 60,
            action: HealthAction::Isolate,
            max_isolated: 2,
        }
    }

    fn track(symbol: u64, rcv: u64) -> PortTrack {
        let t0 = Instant::now();
        let mut t = PortTrack::default();
        t.update(t0, PortCounters::default());
        let c = PortCounters {
            symbol_errors: symbol,
            rcv_errors: rcv,
            ..Default::default()
        };
        t.update(t0 + Duration::from_secs(1), c);
        t
    }

    #[test]
    fn the_worst_breach_relative_to_its_threshold_wins() {
        let p = policy();
        assert_eq!(evaluate(&p, Some(&track(10, 5)), 0), None, "at the threshold is within");
        let b = evaluate(&p, Some(&track(30, 20)), 0).unwrap();
        assert_eq!(b.counter, Some(Counter::RcvErrors), "20/5 beats 30/10");
        assert_eq!(b.text(60), "rcv_errors at 20/s over the threshold 5/s");
        let f = evaluate(&p, Some(&track(11, 0)), 9).unwrap();
        assert_eq!(f.counter, None, "9 flaps / 3 beats 11/10");
        assert!(f.text(60).starts_with("flapping: 9 link-downs within 60 s"));
        assert_eq!(evaluate(&p, None, 2), None);
        assert!(evaluate(&p, None, 3).is_some());
    }

    #[test]
    fn the_policy_comes_from_the_config() {
        let c = HealthConfig::default();
        let p = Policy::from_config(&c);
        assert_eq!(p.action, HealthAction::Report);
        assert!(p.thresholds.contains(&(Counter::SymbolErrors, 1.0)));
    }

    #[test]
    fn rates_are_rounded_for_people() {
        assert_eq!(round(8.024999999999999), "8.02");
        assert_eq!(round(1234.6), "1235");
        assert_eq!(round(0.1), "0.1");
        assert_eq!(round(0.0), "0");
        assert_eq!(round(50.0), "50");
    }
}
