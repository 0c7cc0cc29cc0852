//! Packet-level simulation: what a driver whose fabric is simulated (the `mock` driver of crate
//! `fabric-mock`) answers about packets, from its own installed tables, LIDs and link states.
//! The daemon's Trace and VerifyReachability RPCs use it through [`PacketSimulator`], so they
//! do not depend on the simulator's crate.

use fabric_topology::{fmt_guid, Guid, Lid, PortNum};

/// Packet-level questions a simulated fabric answers from its own state (installed LFT bytes,
/// LIDs, physical link state), never from the daemon's data structures.
pub trait PacketSimulator: Send + Sync {
    /// Follows a packet from end port `src_port_guid` to `dlid` through the installed LFTs over
    /// live links: the switches crossed, ending at the switch that delivers the packet to the
    /// end port owning `dlid` or consumes it (a switch's own LID).
    fn trace(&self, src_port_guid: Guid, dlid: Lid) -> Result<Vec<Hop>, TraceError>;

    /// Traces every ordered pair of distinct live end ports that are physically connected over
    /// live links, to the destination's base LID (or escape LID when `use_escape`).
    ///
    /// CPU-bound and synchronous: call it from a blocking context (`spawn_blocking`).
    fn verify_all_pairs(&self, use_escape: bool) -> ReachReport;

    /// Floods one multicast packet sent by end port `src_port_guid` to `mlid` through the
    /// installed multicast forwarding tables over live links (a switch forwards a copy out of
    /// every port of the MLID's mask except the one it arrived by): every end port that
    /// received a copy, with the number of copies, in end-node order. A copy that would
    /// circulate (more switch hops than the fabric has switches) is an error. Default:
    /// unsupported (a simulator without multicast tables).
    fn flood_multicast(&self, src_port_guid: Guid, mlid: Lid) -> Result<McastDelivery, TraceError> {
        let _ = (src_port_guid, mlid);
        Err(TraceError::Unsupported("multicast"))
    }

    /// Adds `delta` to the counters of `port` (saturating as the hardware does), so that a
    /// drill can raise error counters that the port-health monitor then reads through
    /// [`crate::SouthboundDriver::read_port_counters`]. Default: unsupported.
    fn add_port_errors(&self, port: crate::CounterPort, delta: &crate::PortCounters) -> Result<(), TraceError> {
        let _ = (port, delta);
        Err(TraceError::Unsupported("port counters"))
    }
}

/// What one multicast packet reached ([`PacketSimulator::flood_multicast`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct McastDelivery {
    /// End ports that received copies (port GUID, copies), the sender excluded unless a copy
    /// came back to it.
    pub received: Vec<(Guid, u32)>,
    /// Switches the packet crossed (copies counted once per switch visit).
    pub switch_visits: usize,
}

/// One switch crossed by a traced packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hop {
    /// Node GUID of the switch.
    pub switch: Guid,
    /// Port the packet entered by (0 when it starts at the switch itself).
    pub in_port: PortNum,
    /// Port the LFT sent it out of (0 when the switch itself is the destination).
    pub out_port: PortNum,
}

/// Why a packet does not reach the owner of its destination LID.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    #[error("unknown source end port {}", fmt_guid(*.0))]
    UnknownSource(Guid),
    #[error("source end port {} is down or not cabled", fmt_guid(*.0))]
    SourceDown(Guid),
    #[error("unknown source switch {}", fmt_guid(*.0))]
    UnknownSwitch(Guid),
    #[error("source switch {} is down", fmt_guid(*.0))]
    SwitchDown(Guid),
    #[error("switch {} has no route to LID {lid} (LFT entry 255)", fmt_guid(*switch))]
    NoRoute { switch: Guid, lid: Lid },
    #[error("forwarding loop to LID {lid} through switch {}", fmt_guid(*switch))]
    Loop { switch: Guid, lid: Lid },
    #[error("switch {} sends LID {lid} out of port {port} whose link is down", fmt_guid(*switch))]
    DeadLink { switch: Guid, port: PortNum, lid: Lid },
    #[error("switch {} sends LID {lid} out of port {port} which is not cabled", fmt_guid(*switch))]
    NotCabled { switch: Guid, port: PortNum, lid: Lid },
    #[error("switch {} sends LID {lid} out of port {port} which does not exist", fmt_guid(*switch))]
    InvalidPort { switch: Guid, port: PortNum, lid: Lid },
    #[error("switch {} port {port} delivers LID {lid} to end port {} which does not own it", fmt_guid(*switch), fmt_guid(*reached))]
    WrongEndPort {
        switch: Guid,
        port: PortNum,
        lid: Lid,
        reached: Guid,
    },
    #[error("switch {} port {port} delivers LID {lid} to end port {} which is down", fmt_guid(*switch), fmt_guid(*dest))]
    DestinationDown {
        switch: Guid,
        port: PortNum,
        lid: Lid,
        dest: Guid,
    },
    #[error("switch {} consumes LID {lid} (LFT entry 0) but does not own it", fmt_guid(*switch))]
    DeliveredToSwitch { switch: Guid, lid: Lid },
    #[error("destination end port {} has no LID", fmt_guid(*.0))]
    NoLid(Guid),
    #[error("destination end port {} has no escape LID (LMC 0)", fmt_guid(*.0))]
    NoEscapeLid(Guid),
    #[error("destination switch {} has no LID", fmt_guid(*.0))]
    NoSwitchLid(Guid),
    #[error("multicast packet to MLID {lid:#06x} circulates (through switch {})", fmt_guid(*switch))]
    McastLoop { switch: Guid, lid: Lid },
    #[error("not supported by this simulator: {0}")]
    Unsupported(&'static str),
    /// The packet reaches its destination but the two end ports share no partition: no P_Key
    /// of one matches one of the other (low 15 bits) with at least one of the two full member
    /// (two limited members do not talk), so the destination drops it.
    #[error("end ports {} and {} share no partition (no common P_Key with a full member)", fmt_guid(*src), fmt_guid(*dest))]
    NoSharedPartition { src: Guid, dest: Guid },
    /// A multicast flood was asked for a LID below the multicast range (`0xC000`).
    #[error("LID {0:#06x} is not a multicast LID (multicast LIDs start at 0xc000)")]
    NotMulticastLid(Lid),
    /// [`PacketSimulator::add_port_errors`] named a port the simulator does not have (unknown
    /// switch or end port, or no such external port); the message says which.
    #[error("no port to count errors on: {0}")]
    NoCounterPort(String),
}

/// Result of [`PacketSimulator::verify_all_pairs`] (and of the mock's check of switch LIDs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReachReport {
    /// Ordered pairs (source, destination) of distinct live end ports that are physically
    /// connected over live links, all of which were traced.
    pub pairs_checked: usize,
    /// The first [`REACH_REPORT_MAX_LISTED`] unreachable pairs in (source, destination) end-node
    /// order: source port GUID, destination port GUID, reason.
    pub unreachable: Vec<(Guid, Guid, String)>,
    /// Number of checked pairs that did not reach their destination.
    pub unreachable_count: usize,
    /// Pairs of live end ports with no live physical path between them (not checked: no routing
    /// can connect them).
    pub disconnected: usize,
}

/// How many unreachable pairs a [`ReachReport`] lists (all are counted).
pub const REACH_REPORT_MAX_LISTED: usize = 100;
