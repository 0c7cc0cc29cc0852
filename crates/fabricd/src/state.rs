//! What the event loop publishes for readers (gRPC handlers, Prometheus, `systemctl status`):
//! an immutable [`Published`] snapshot swapped atomically through `arc-swap`, and the
//! [`Notice`]s broadcast to `WatchEvents` subscribers.
//!
//! **Architecture invariant:** the event loop is the only writer; readers never lock.

use std::sync::Arc;
use std::time::Instant;

use fabric_ranking::Ranking;
use fabric_routing::{Lfts, LidPlan};
use fabric_topology::{Fabric, FabricEvent};

use crate::persist::Jobs;

/// Step of a routing update: the phases of the update protocol (`fabric-update`). With direct
/// upload a generation goes `Prepare → Update → Commit`.
pub use fabric_update::Phase;

/// Timings of one reroute, measured from the first change it covers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RerouteTimings {
    pub generation: u64,
    /// First change seen → routing computed.
    pub routed_ms: f64,
    /// First change seen → LFTs uploaded and generation committed.
    pub committed_ms: f64,
    /// First change seen → computation started.
    pub coalesce_ms: f64,
    pub compute_ms: f64,
    pub upload_ms: f64,
    pub blocks_written: u64,
    pub retries: u64,
    /// Changes coalesced into the generation.
    pub faults: u32,
    pub committed_at_unix_ms: i64,
    /// Management packets the driver had sent when the generation was committed (umad: SMPs
    /// since start; 0 for drivers without them).
    pub driver_smps_sent: u64,
}

/// One installed routing generation.
#[derive(Debug)]
pub struct Generation {
    /// Routing generation number: 1 = the first ever committed with this state directory;
    /// numbering continues across restarts (`generation.json`, see `crate::persist`).
    pub number: u64,
    /// The topology routed: the physical fabric with virtual faults applied.
    pub fabric: Arc<Fabric>,
    pub ranking: Arc<Ranking>,
    pub lids: Arc<LidPlan>,
    /// The LFTs of this generation (what is installed when the upload succeeded).
    pub lfts: Arc<Lfts>,
    /// Engine name of the base LIDs.
    pub engine: String,
    /// Routing time (base + escape LIDs), ms.
    pub route_ms: f64,
    pub timings: RerouteTimings,
    /// Links / switches / nodes excluded by virtual faults: (switch GUID, port) of links.
    pub excluded_links: Arc<std::collections::HashSet<(u64, u8)>>,
    /// Number of virtual faults in force.
    pub virtual_faults: usize,
    /// Validity of the installed tables and the fallback the engine's routing needed.
    pub routing_check: Arc<fabric_routing::RoutingCheck>,
}

/// The snapshot readers see.
#[derive(Clone, Debug)]
pub struct Published {
    /// The cabling as discovered (GUIDs, names, ports); used to validate requests.
    pub cabling: Arc<Fabric>,
    /// Current generation; `None` before the first one is installed.
    pub current: Option<Arc<Generation>>,
    pub phase: Phase,
    /// Generation being prepared or uploaded when `phase != Idle` (after a restart, the first
    /// one continues the previous run's numbering).
    pub phase_generation: u64,
    /// Changes queued for the next generation.
    pub pending_faults: usize,
    /// Error of the last generation that failed (empty after a success).
    pub last_error: String,
    pub discarded_generations: u64,
    pub jobs: Arc<Jobs>,
    pub engine: String,
    /// `[routing] job_aware` in force.
    pub job_aware: bool,
    pub driver: &'static str,
    pub lmc: u8,
    pub started: Instant,
    /// Virtual faults in force (including those not yet routed).
    pub virtual_faults: usize,
    /// Five-phase update subscribers connected.
    pub subscribers: usize,
    /// `name (phase)` of the subscribers that missed a deadline in the last generation.
    pub missed_acks: Vec<String>,
    /// Restarts from Prepare of the generation being installed (or of the last one), each
    /// `attempt N: reason` (the fault that broke the routing being installed).
    pub update_restarts: Vec<String>,
}

impl Published {
    /// The generation installed by this process; 0 before its first commit.
    pub fn generation(&self) -> u64 {
        self.current.as_ref().map_or(0, |g| g.number)
    }
}

/// A notice for `WatchEvents` subscribers.
#[derive(Clone, Debug, PartialEq)]
pub enum Notice {
    /// A topology change was accepted (physical: seen by the driver; else a virtual fault).
    TopologyChange {
        event: FabricEvent,
        physical: bool,
    },
    /// The phase of the update changed: `generation` is the one being prepared or installed,
    /// or, for `Idle`, the installed one (0 before the first commit of this process).
    PhaseChanged {
        generation: u64,
        phase: Phase,
    },
    GenerationCommitted {
        generation: u64,
        timings: RerouteTimings,
    },
    /// Subscribers missed an Unpath or Repath deadline (`name (phase)`).
    AcksMissed {
        generation: u64,
        subscribers: Vec<String>,
    },
    /// The five-phase update gave a generation up (strict policy, failed escape upload); the
    /// previous routing stays installed.
    UpdateAborted {
        generation: u64,
        reason: String,
    },
    /// A fault broke the routing being installed: the generation restarts from Prepare with the
    /// new topology (`attempt` counts the restarts; `reason` names the GUID and port).
    UpdateRestarted {
        generation: u64,
        attempt: u32,
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_names_are_lower_case_and_distinct() {
        let names: std::collections::HashSet<_> = Phase::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(names.len(), 6);
        assert_eq!(Phase::default().name(), "idle");
        assert!(Phase::ALL
            .iter()
            .all(|p| p.name().chars().all(|c| c.is_ascii_lowercase())));
    }
}
