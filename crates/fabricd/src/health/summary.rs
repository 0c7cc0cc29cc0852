//! Counts of the whole fabric (an ibdiagnet-like summary; `fabricctl health report`).

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
    pub fn of(fabric: &Fabric, ports: &[PortHealth], flap_count: u32) -> FabricSummary {
        let switches_up = fabric.switches().iter().filter(|s| s.up).count() as u64;
        let (links, live) = fabric.count_links();
        let end_ports_up = fabric.end_port_ids().filter(|&e| fabric.end_port_live(e)).count() as u64;
        let count = |f: &dyn Fn(&PortHealth) -> bool| ports.iter().filter(|p| f(p)).count() as u64;
        FabricSummary {
            switches_up,
            switches_down: fabric.num_switches() as u64 - switches_up,
            links_up: live as u64,
            links_down: (links - live) as u64,
            end_ports_up,
            end_ports_down: fabric.num_end_ports() as u64 - end_ports_up,
            ports_read: count(&|p| !p.counters.is_empty() && p.read_error.is_empty()),
            ports_unreadable: count(&|p| !p.read_error.is_empty()),
            ports_with_errors: count(&|p| p.max_error_rate > 0.0),
            warning_ports: count(&|p| p.state == PortState::Warning),
            isolated_ports: count(&|p| p.state == PortState::Isolated),
            flapping_ports: count(&|p| p.flaps >= flap_count),
        }
    }
}
