//! Counts of the whole fabric (an ibdiagnet-like summary; `fabricctl health report`).

use std::sync::Arc;

use fabric_topology::Fabric;

use super::{PortHealth, PortState};

/// Counts of the routed fabric and of the ports' health.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FabricSummary {
    pub switches_up: u64,
    pub switches_down: u64,
    /// Switch-to-switch cables (each parallel cable counted), live or not (isolated links are
    /// down: routing does not use them).
    pub links_up: u64,
    pub links_down: u64,
    pub end_ports_up: u64,
    pub end_ports_down: u64,
    /// Ports whose counters were read at the last poll, and those whose read failed.
    pub ports_read: u64,
    pub ports_unreadable: u64,
    /// Ports with a nonzero error rate.
    pub ports_with_errors: u64,
    pub warning_ports: u64,
    pub isolated_ports: u64,
    /// Ports with link-downs within the flap window at or above `flap_count`.
    pub flapping_ports: u64,
}

impl FabricSummary {
    /// The counts of `fabric` (the routed one) and of `ports`.
    pub fn of(fabric: &Fabric, ports: &[Arc<PortHealth>], flap_count: u32) -> FabricSummary {
        let switches_up = fabric.switches().iter().filter(|s| s.up).count() as u64;
        let (links, live) = fabric.count_links();
        let end_ports_up = fabric.end_port_ids().filter(|&e| fabric.end_port_live(e)).count() as u64;
        let mut s = FabricSummary {
            switches_up,
            switches_down: fabric.num_switches() as u64 - switches_up,
            links_up: live as u64,
            links_down: (links - live) as u64,
            end_ports_up,
            end_ports_down: fabric.num_end_ports() as u64 - end_ports_up,
            ..FabricSummary::default()
        };
        // One pass over the ports (~280 000 on the 34 992-node fabric).
        for p in ports {
            s.ports_read += u64::from(!p.counters.is_empty() && p.read_error.is_empty());
            s.ports_unreadable += u64::from(!p.read_error.is_empty());
            s.ports_with_errors += u64::from(p.max_error_rate > 0.0);
            s.warning_ports += u64::from(p.state == PortState::Warning);
            s.isolated_ports += u64::from(p.state == PortState::Isolated);
            s.flapping_ports += u64::from(p.flaps >= flap_count);
        }
        s
    }
}
