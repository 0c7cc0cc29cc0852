//! Port-health metrics: the fabric's state, the ports' error rates (bounded label cardinality:
//! a total per counter and only the worst ports per counter) and the isolations.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// A port's error rate (one label set of `fabricd_health_port_error_rate`).
#[derive(Clone, Debug, PartialEq)]
pub struct PortRate {
    /// `0x...[5]` or an end port GUID.
    pub port: String,
    /// `switch name [port]` or the end port's name.
    pub name: String,
    pub counter: &'static str,
    /// Per second.
    pub rate: f64,
}

/// What the health monitor publishes after every poll (and every committed generation).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HealthGauges {
    /// (up, down) of the routed fabric.
    pub switches: (u64, u64),
    pub links: (u64, u64),
    pub end_ports: (u64, u64),
    pub isolated: u64,
    pub warning: u64,
    pub flapping: u64,
    /// Per error counter: the sum of the ports' rates, per second.
    pub totals: Vec<(&'static str, f64)>,
    /// The worst ports per counter (at most `metrics_top_ports` each, nonzero rates only).
    pub worst: Vec<PortRate>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CounterLabels {
    counter: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PortLabels {
    port: String,
    name: String,
    counter: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Default)]
pub(super) struct HealthMetrics {
    switches: Family<StateLabels, Gauge>,
    links: Family<StateLabels, Gauge>,
    end_ports: Family<StateLabels, Gauge>,
    isolated: Gauge,
    warning: Gauge,
    flapping: Gauge,
    isolations: Counter,
    totals: Family<CounterLabels, FloatGauge>,
    worst: Family<PortLabels, FloatGauge>,
}

impl HealthMetrics {
    pub(super) fn register(r: &mut Registry) -> HealthMetrics {
        let m = HealthMetrics::default();
        r.register(
            "fabric_switches",
            "Switches of the routed fabric, by state (up, down)",
            m.switches.clone(),
        );
        r.register(
            "fabric_links",
            "Switch-to-switch links of the routed fabric, by state (up, down; isolated links are down)",
            m.links.clone(),
        );
        r.register(
            "fabric_end_ports",
            "End ports of the routed fabric, by state (up, down)",
            m.end_ports.clone(),
        );
        r.register(
            "health_isolated_links",
            "Links isolated by the port-health policy (virtual link-downs until fabricctl health clear)",
            m.isolated.clone(),
        );
        r.register(
            "health_warning_ports",
            "Ports over an error-rate threshold or flapping and not isolated (reported), or with a saturated counter",
            m.warning.clone(),
        );
        r.register(
            "health_flapping_ports",
            "Ports whose link went down at least [health] flap_count times within flap_window_s",
            m.flapping.clone(),
        );
        r.register(
            "health_isolations",
            "Links isolated by the port-health policy since the start",
            m.isolations.clone(),
        );
        r.register(
            "health_error_rate",
            "Sum over every port of the error rate of one counter, per second",
            m.totals.clone(),
        );
        r.register(
            "health_port_error_rate",
            "Error rate of one counter of one port, per second: only the [health] metrics_top_ports worst ports per counter with a nonzero rate",
            m.worst.clone(),
        );
        m
    }

    pub(super) fn set(&self, g: &HealthGauges) {
        let by_state = |f: &Family<StateLabels, Gauge>, (up, down): (u64, u64)| {
            for (s, n) in [("up", up), ("down", down)] {
                f.get_or_create(&StateLabels { state: s.into() }).set(n as i64);
            }
        };
        by_state(&self.switches, g.switches);
        by_state(&self.links, g.links);
        by_state(&self.end_ports, g.end_ports);
        self.isolated.set(g.isolated as i64);
        self.warning.set(g.warning as i64);
        self.flapping.set(g.flapping as i64);
        for &(c, v) in &g.totals {
            self.totals.get_or_create(&CounterLabels { counter: c.into() }).set(v);
        }
        // The set of worst ports changes: only the current ones are exported.
        self.worst.clear();
        for p in &g.worst {
            self.worst
                .get_or_create(&PortLabels {
                    port: p.port.clone(),
                    name: p.name.clone(),
                    counter: p.counter.into(),
                })
                .set(p.rate);
        }
    }

    pub(super) fn isolated_one(&self) {
        self.isolations.inc();
    }
}
