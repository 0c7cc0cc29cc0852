//! Port counters: the error and traffic counters of a port (InfiniBand PortCounters, IBA
//! 16.1.3.5, and PortCountersExtended, 16.1.4.11; the oob agents' `ReadPortCounters`), as the
//! daemon's port-health monitor reads them through [`crate::SouthboundDriver::read_port_counters`].
//!
//! Values are the absolute counts the port holds. InfiniBand's PortCounters fields are narrow
//! (8, 16 or 32 bits) and saturate at their maximum instead of wrapping; [`PortCounters::width`]
//! gives each field's width so that a reader can tell a saturated counter (the rate is unknown
//! from then on) from a counter that was reset (the value went down: the new value is the
//! delta since the reset).

use fabric_topology::{fmt_guid, Guid, PortNum};

/// A port whose counters are read: a switch port, or an end port by its port GUID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CounterPort {
    /// Port `port` (1..=N) of the switch with node GUID `switch`.
    Switch { switch: Guid, port: PortNum },
    /// The end port (CA port) with this port GUID.
    EndPort(Guid),
}

impl std::fmt::Display for CounterPort {
    /// `0x0002c90000000001[5]` for a switch port, `0x0002c90000001234` for an end port.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CounterPort::Switch { switch, port } => write!(f, "{}[{port}]", fmt_guid(*switch)),
            CounterPort::EndPort(g) => write!(f, "{}", fmt_guid(*g)),
        }
    }
}

/// One counter of [`PortCounters`], for widths, names and per-counter policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Counter {
    SymbolErrors,
    LinkErrorRecovery,
    LinkDowned,
    RcvErrors,
    RcvRemotePhysicalErrors,
    RcvSwitchRelayErrors,
    XmitDiscards,
    XmitConstraintErrors,
    RcvConstraintErrors,
    LocalLinkIntegrityErrors,
    ExcessiveBufferOverrunErrors,
    Vl15Dropped,
    XmitWait,
    XmitData,
    RcvData,
    XmitPackets,
    RcvPackets,
}

impl Counter {
    /// Every counter, in [`PortCounters`] field order.
    pub const ALL: [Counter; 17] = [
        Counter::SymbolErrors,
        Counter::LinkErrorRecovery,
        Counter::LinkDowned,
        Counter::RcvErrors,
        Counter::RcvRemotePhysicalErrors,
        Counter::RcvSwitchRelayErrors,
        Counter::XmitDiscards,
        Counter::XmitConstraintErrors,
        Counter::RcvConstraintErrors,
        Counter::LocalLinkIntegrityErrors,
        Counter::ExcessiveBufferOverrunErrors,
        Counter::Vl15Dropped,
        Counter::XmitWait,
        Counter::XmitData,
        Counter::RcvData,
        Counter::XmitPackets,
        Counter::RcvPackets,
    ];

    /// The error counters (what a health policy thresholds), in field order.
    pub const ERRORS: [Counter; 12] = [
        Counter::SymbolErrors,
        Counter::LinkErrorRecovery,
        Counter::LinkDowned,
        Counter::RcvErrors,
        Counter::RcvRemotePhysicalErrors,
        Counter::RcvSwitchRelayErrors,
        Counter::XmitDiscards,
        Counter::XmitConstraintErrors,
        Counter::RcvConstraintErrors,
        Counter::LocalLinkIntegrityErrors,
        Counter::ExcessiveBufferOverrunErrors,
        Counter::Vl15Dropped,
    ];

    /// The name used in config, JSON and Prometheus labels (`symbol_errors`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Counter::SymbolErrors => "symbol_errors",
            Counter::LinkErrorRecovery => "link_error_recovery",
            Counter::LinkDowned => "link_downed",
            Counter::RcvErrors => "rcv_errors",
            Counter::RcvRemotePhysicalErrors => "rcv_remote_physical_errors",
            Counter::RcvSwitchRelayErrors => "rcv_switch_relay_errors",
            Counter::XmitDiscards => "xmit_discards",
            Counter::XmitConstraintErrors => "xmit_constraint_errors",
            Counter::RcvConstraintErrors => "rcv_constraint_errors",
            Counter::LocalLinkIntegrityErrors => "local_link_integrity_errors",
            Counter::ExcessiveBufferOverrunErrors => "excessive_buffer_overrun_errors",
            Counter::Vl15Dropped => "vl15_dropped",
            Counter::XmitWait => "xmit_wait",
            Counter::XmitData => "xmit_data",
            Counter::RcvData => "rcv_data",
            Counter::XmitPackets => "xmit_packets",
            Counter::RcvPackets => "rcv_packets",
        }
    }

    /// The counter named `name` (see [`Counter::name`]).
    pub fn from_name(name: &str) -> Option<Counter> {
        Counter::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Width in bits of the InfiniBand field this counter is read from: PortCounters for the
    /// error counters (they saturate at `2^width - 1`), PortCountersExtended (64 bits) for the
    /// data and packet counters. Drivers whose counters are wider report 64 through their own
    /// values never reaching the maximum; a reader only needs this to recognise saturation.
    pub fn width(self) -> u32 {
        match self {
            // IBA 16.1.3.5 (libibmad `IB_PC_ERR_PHYSRCV_F`, `IB_PC_ERR_SWITCH_REL_F`: 16 bits).
            Counter::SymbolErrors
            | Counter::RcvErrors
            | Counter::RcvRemotePhysicalErrors
            | Counter::RcvSwitchRelayErrors
            | Counter::XmitDiscards
            | Counter::Vl15Dropped => 16,
            Counter::LinkErrorRecovery
            | Counter::LinkDowned
            | Counter::XmitConstraintErrors
            | Counter::RcvConstraintErrors => 8,
            Counter::LocalLinkIntegrityErrors | Counter::ExcessiveBufferOverrunErrors => 4,
            Counter::XmitWait => 32,
            Counter::XmitData | Counter::RcvData | Counter::XmitPackets | Counter::RcvPackets => 64,
        }
    }

    /// The value at which the field saturates (`2^width - 1`).
    pub fn max(self) -> u64 {
        match self.width() {
            64 => u64::MAX,
            w => (1u64 << w) - 1,
        }
    }
}

/// The counters of one port. Data counters count 32-bit words (IBA: octets / 4), as the
/// hardware does; packet counters count packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PortCounters {
    pub symbol_errors: u64,
    pub link_error_recovery: u64,
    pub link_downed: u64,
    pub rcv_errors: u64,
    pub rcv_remote_physical_errors: u64,
    pub rcv_switch_relay_errors: u64,
    pub xmit_discards: u64,
    pub xmit_constraint_errors: u64,
    pub rcv_constraint_errors: u64,
    pub local_link_integrity_errors: u64,
    pub excessive_buffer_overrun_errors: u64,
    pub vl15_dropped: u64,
    pub xmit_wait: u64,
    pub xmit_data: u64,
    pub rcv_data: u64,
    pub xmit_packets: u64,
    pub rcv_packets: u64,
}

impl PortCounters {
    /// The value of one counter.
    pub fn get(&self, c: Counter) -> u64 {
        match c {
            Counter::SymbolErrors => self.symbol_errors,
            Counter::LinkErrorRecovery => self.link_error_recovery,
            Counter::LinkDowned => self.link_downed,
            Counter::RcvErrors => self.rcv_errors,
            Counter::RcvRemotePhysicalErrors => self.rcv_remote_physical_errors,
            Counter::RcvSwitchRelayErrors => self.rcv_switch_relay_errors,
            Counter::XmitDiscards => self.xmit_discards,
            Counter::XmitConstraintErrors => self.xmit_constraint_errors,
            Counter::RcvConstraintErrors => self.rcv_constraint_errors,
            Counter::LocalLinkIntegrityErrors => self.local_link_integrity_errors,
            Counter::ExcessiveBufferOverrunErrors => self.excessive_buffer_overrun_errors,
            Counter::Vl15Dropped => self.vl15_dropped,
            Counter::XmitWait => self.xmit_wait,
            Counter::XmitData => self.xmit_data,
            Counter::RcvData => self.rcv_data,
            Counter::XmitPackets => self.xmit_packets,
            Counter::RcvPackets => self.rcv_packets,
        }
    }

    /// A mutable reference to one counter.
    pub fn get_mut(&mut self, c: Counter) -> &mut u64 {
        match c {
            Counter::SymbolErrors => &mut self.symbol_errors,
            Counter::LinkErrorRecovery => &mut self.link_error_recovery,
            Counter::LinkDowned => &mut self.link_downed,
            Counter::RcvErrors => &mut self.rcv_errors,
            Counter::RcvRemotePhysicalErrors => &mut self.rcv_remote_physical_errors,
            Counter::RcvSwitchRelayErrors => &mut self.rcv_switch_relay_errors,
            Counter::XmitDiscards => &mut self.xmit_discards,
            Counter::XmitConstraintErrors => &mut self.xmit_constraint_errors,
            Counter::RcvConstraintErrors => &mut self.rcv_constraint_errors,
            Counter::LocalLinkIntegrityErrors => &mut self.local_link_integrity_errors,
            Counter::ExcessiveBufferOverrunErrors => &mut self.excessive_buffer_overrun_errors,
            Counter::Vl15Dropped => &mut self.vl15_dropped,
            Counter::XmitWait => &mut self.xmit_wait,
            Counter::XmitData => &mut self.xmit_data,
            Counter::RcvData => &mut self.rcv_data,
            Counter::XmitPackets => &mut self.xmit_packets,
            Counter::RcvPackets => &mut self.rcv_packets,
        }
    }

    /// Adds `delta` to every counter, saturating each at its field's maximum
    /// ([`Counter::max`]), as the hardware does (simulators use it).
    pub fn add_saturating(&mut self, delta: &PortCounters) {
        for c in Counter::ALL {
            let v = self.get_mut(c);
            *v = v.saturating_add(delta.get(c)).min(c.max());
        }
    }

    /// The sum of the error counters ([`Counter::ERRORS`]).
    pub fn error_total(&self) -> u64 {
        Counter::ERRORS
            .iter()
            .map(|&c| self.get(c))
            .fold(0u64, u64::saturating_add)
    }
}

/// The answer for one port of a [`crate::SouthboundDriver::read_port_counters`] batch.
#[derive(Debug)]
pub struct CountersReading {
    pub port: CounterPort,
    /// The counters, or why this one port could not be read (the others still are).
    pub counters: Result<PortCounters, crate::DriverError>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for c in Counter::ALL {
            assert!(seen.insert(c.name()), "duplicate name {}", c.name());
            assert_eq!(Counter::from_name(c.name()), Some(c));
        }
        assert_eq!(Counter::from_name("nope"), None);
    }

    #[test]
    fn get_and_get_mut_address_the_same_field() {
        for (i, c) in Counter::ALL.into_iter().enumerate() {
            let mut p = PortCounters::default();
            *p.get_mut(c) = i as u64 + 1;
            assert_eq!(p.get(c), i as u64 + 1);
            let others: u64 = Counter::ALL.iter().filter(|&&o| o != c).map(|&o| p.get(o)).sum();
            assert_eq!(others, 0, "{c:?} aliases another field");
        }
    }

    #[test]
    fn adding_saturates_at_the_field_width() {
        let mut p = PortCounters {
            link_downed: 250,
            symbol_errors: 10,
            ..Default::default()
        };
        let d = PortCounters {
            link_downed: 10,
            symbol_errors: 5,
            xmit_data: u64::MAX,
            ..Default::default()
        };
        p.add_saturating(&d);
        assert_eq!(p.link_downed, 255);
        assert_eq!(p.symbol_errors, 15);
        p.add_saturating(&d);
        assert_eq!(p.xmit_data, u64::MAX);
        assert_eq!(p.error_total(), 255 + 20);
    }

    #[test]
    fn ports_print_with_guid_and_port() {
        let s = CounterPort::Switch {
            switch: 0x2c9_0000_0001,
            port: 5,
        };
        assert!(s.to_string().ends_with("[5]"), "{s}");
        assert!(!CounterPort::EndPort(7).to_string().contains('['));
    }
}
