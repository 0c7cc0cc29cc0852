//! `[health]`: the port-health monitor (docs/port-health.md): how often port counters are
//! read, what a flapping link is, the error-rate thresholds and what crossing them does.
//! Reloadable: a `SIGHUP` applies every key at the next poll.

use std::collections::BTreeMap;

use fabric_southbound::Counter;
use serde::{Deserialize, Serialize};

/// What the monitor does with a port over a threshold or flapping.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthAction {
    /// Mark the port `warning` (logs, `fabricctl health`, Prometheus); routing is unchanged.
    #[default]
    Report,
    /// Also isolate the link: a persisted, reasoned virtual link-down that routing avoids,
    /// within the safety bounds (`max_isolated`, never a link whose loss disconnects end ports).
    Isolate,
}

/// `[health]`. Rates and thresholds are in events per second (averaged over one poll).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct HealthConfig {
    /// Read port counters and watch link flaps.
    pub enabled: bool,
    /// Seconds between two reads of every port's counters.
    pub interval_s: u64,
    /// A port flaps when its link went down `flap_count` times within `flap_window_s` seconds.
    pub flap_window_s: u64,
    /// See `flap_window_s`.
    pub flap_count: u32,
    /// Error-rate thresholds per counter name (`symbol_errors`, ...), errors per second.
    pub thresholds: BTreeMap<String, f64>,
    /// `report` or `isolate`.
    pub action: HealthAction,
    /// Most links isolated at once (a safety bound: a bad policy cannot cut the fabric).
    pub max_isolated: u32,
    /// Ports exported per counter in the per-port error-rate gauges (the worst, with a
    /// nonzero rate), bounding the label cardinality.
    pub metrics_top_ports: usize,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            enabled: true,
            interval_s: 10,
            flap_window_s: 300,
            flap_count: 5,
            thresholds: default_thresholds(),
            action: HealthAction::Report,
            max_isolated: 4,
            metrics_top_ports: 20,
        }
    }
}

/// The default thresholds (errors per second).
pub fn default_thresholds() -> BTreeMap<String, f64> {
    [
        ("symbol_errors", 1.0),
        ("link_error_recovery", 0.1),
        ("link_downed", 0.05),
        ("rcv_errors", 1.0),
        ("local_link_integrity_errors", 0.1),
        ("excessive_buffer_overrun_errors", 0.1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

impl HealthConfig {
    /// The thresholds by counter (names checked by [`HealthConfig::check`]; unknown ones skipped).
    pub fn counter_thresholds(&self) -> Vec<(Counter, f64)> {
        self.thresholds
            .iter()
            .filter_map(|(k, &v)| Counter::from_name(k).map(|c| (c, v)))
            .collect()
    }

    /// (key path, reason) for every bad value.
    pub fn check(&self) -> Vec<(String, String)> {
        let mut v = Vec::new();
        if !(1..=3600).contains(&self.interval_s) {
            v.push((
                "health.interval_s".into(),
                format!("{} is outside 1..=3600", self.interval_s),
            ));
        }
        if !(1..=86_400).contains(&self.flap_window_s) {
            v.push((
                "health.flap_window_s".into(),
                format!("{} is outside 1..=86400", self.flap_window_s),
            ));
        }
        if !(2..=10_000).contains(&self.flap_count) {
            v.push((
                "health.flap_count".into(),
                format!("{} is outside 2..=10000", self.flap_count),
            ));
        }
        if self.metrics_top_ports > 1000 {
            v.push((
                "health.metrics_top_ports".into(),
                format!("{} is above 1000 (label cardinality)", self.metrics_top_ports),
            ));
        }
        for (k, &t) in &self.thresholds {
            let key = format!("health.thresholds.{k}");
            match Counter::from_name(k) {
                None => v.push((
                    key,
                    format!(
                        "unknown counter; one of: {}",
                        Counter::ERRORS.map(Counter::name).join(", ")
                    ),
                )),
                Some(c) if !Counter::ERRORS.contains(&c) => {
                    v.push((
                        key,
                        "not an error counter (data and wait counters have no threshold)".into(),
                    ));
                }
                Some(_) if !(t.is_finite() && t > 0.0) => {
                    v.push((key, format!("{t} is not a positive number of errors per second")));
                }
                Some(_) => {}
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_and_bad_values_are_named() {
        assert!(HealthConfig::default().check().is_empty());
        let mut c = HealthConfig {
            interval_s: 0,
            flap_count: 1,
            ..HealthConfig::default()
        };
        c.thresholds.insert("nope".into(), 1.0);
        c.thresholds.insert("xmit_data".into(), 1.0);
        c.thresholds.insert("rcv_errors".into(), -1.0);
        let keys: Vec<String> = c.check().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            [
                "health.interval_s",
                "health.flap_count",
                "health.thresholds.nope",
                "health.thresholds.rcv_errors",
                "health.thresholds.xmit_data"
            ]
        );
    }

    #[test]
    fn a_bad_health_key_is_named_with_its_file_and_line() {
        let text =
            "[health]\ninterval_s = 0\naction = \"isolate\"\n\n[health.thresholds]\nsymbol_errors = 2.0\nnope = 1.0\n";
        let e = crate::config::Config::parse(text, "f.toml").unwrap_err().to_string();
        assert!(e.contains("f.toml:2: health.interval_s"), "{e}");
        assert!(e.contains("f.toml:7: health.thresholds.nope: unknown counter"), "{e}");
        let e = crate::config::Config::parse("[health]\naction = \"quarantine\"\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("f.toml:2") && e.contains("quarantine"), "{e}");
        let ok = crate::config::Config::parse("[health]\naction = \"isolate\"\nmax_isolated = 2\n", "f.toml").unwrap();
        assert_eq!(ok.health.action, HealthAction::Isolate);
    }
}
