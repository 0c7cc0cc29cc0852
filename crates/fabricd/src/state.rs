//! What the event loop publishes for readers (gRPC handlers, Prometheus, `systemctl status`):
//! an immutable [`Published`] snapshot swapped atomically through `arc-swap`, and the
//! [`Notice`]s broadcast to `WatchEvents` subscribers.
//!
//! **Architecture invariant:** the event loop is the only writer; readers never lock.

use std::sync::Arc;
use tokio::time::Instant;

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
    /// The multicast trees and forwarding tables of this generation.
    pub mcast: Arc<fabric_routing::mcast::McastRouting>,
    /// The partitions resolved against this generation's fabric (its P_Key tables).
    pub partitions: Arc<fabric_partitions::PartitionTables>,
    /// The VL layering of an engine that needs one (DFSSSP): layers, data VLs, SL-to-VL plan
    /// and per-path SLs; `None` for routings on one data VL.
    pub vl: Option<Arc<crate::vl_plan::VlInstall>>,
    /// How the routing was computed: `incremental` or `full:<reason>`
    /// ([`fabric_routing::incremental::RoutePath::name`]).
    pub route_path: String,
    /// Computed as a full recomputation (a forced reroute: nothing of the previous generation
    /// reused, [`crate::compute::ComputeInput::full`]).
    pub full_recompute: bool,
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
    /// `[routing] topology` in force (issue #19, topology-agnostic mode).
    pub topology: crate::topology_mode::TopologySetting,
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
    /// Whether the committed generation is on the switches and its state on disk.
    pub installation: Installation,
    /// Multicast and partitions: what is in force and what the driver cannot program.
    pub side: SideStatus,
}

/// Multicast and partitions as readers see them.
#[derive(Clone, Debug, Default)]
pub struct SideStatus {
    /// `[multicast] enabled`.
    pub multicast: bool,
    /// The partitions in force and where they come from.
    pub partitions: Arc<crate::partitions::PartitionSettings>,
    /// The driver cannot program MFTs (its error): multicast is not forwarded.
    pub mft_unsupported: Option<String>,
    /// The driver cannot program P_Key tables (its error): partitions are not enforced.
    pub pkey_unsupported: Option<String>,
    /// MFTs of the committed generation some switch did not take (retried), in words.
    pub mft_pending: Option<String>,
    /// P_Key tables of the committed generation some port did not take (retried), in words.
    pub pkey_pending: Option<String>,
}

/// A switch of the routed fabric that does not hold every LFT block of the committed
/// generation (its blocks stay dirty and are retried with backoff).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnprogrammedSwitch {
    pub guid: fabric_topology::Guid,
    /// Node description, when known.
    pub name: String,
    pub blocks_pending: u64,
    pub last_error: String,
}

/// What the daemon can guarantee about the installed routing (docs/operations.md, "Failure
/// semantics"): the basis of `/ready` and of the Status fields about installation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installation {
    /// Switches that did not take their blocks of the committed generation.
    pub unprogrammed: Vec<UnprogrammedSwitch>,
    /// LFT blocks of live switches not yet written.
    pub blocks_pending: u64,
    /// Why state files cannot be written; empty while persistence works.
    pub persistence_error: String,
    /// What the driver learnt after discovery that the running fabric lacks, one line per
    /// switch (`topology incomplete: switch NAME (0x...) lists N end ports unknown since
    /// start`): not routed until fabricd is restarted.
    pub topology_incomplete: Vec<String>,
    /// Multicast forwarding tables and P_Key tables of the committed generation that the
    /// driver could program but did not take (one line per kind; retried).
    pub side_pending: Vec<String>,
    /// `None` when ready (`/ready` 200), else the one-line reason (`/ready` 503 body).
    pub not_ready: Option<String>,
}

impl Default for Installation {
    fn default() -> Self {
        Installation {
            unprogrammed: Vec::new(),
            blocks_pending: 0,
            persistence_error: String::new(),
            topology_incomplete: Vec::new(),
            side_pending: Vec::new(),
            not_ready: Some("not ready: no generation installed".into()),
        }
    }
}

/// Switches named in one line: at most this many, then `and N more`.
const NAMED_SWITCHES: usize = 5;

impl Installation {
    /// Readiness from the facts: a generation committed (`generation` > 0), no switch
    /// unprogrammed, no part of the fabric known to be missing from the routed topology
    /// (`topology_incomplete`), persistence healthy. `last_error` explains a missing generation.
    pub fn readiness(
        generation: u64,
        last_error: &str,
        unprogrammed: &[UnprogrammedSwitch],
        topology_incomplete: &[String],
        persistence_error: &str,
    ) -> Option<String> {
        let mut why = Vec::new();
        if generation == 0 {
            why.push(if last_error.is_empty() {
                "no generation installed".to_string()
            } else {
                format!("no generation installed: {last_error}")
            });
        }
        if !unprogrammed.is_empty() {
            why.push(format!(
                "{} switch{} unprogrammed: {}",
                unprogrammed.len(),
                if unprogrammed.len() == 1 { "" } else { "es" },
                name_switches(unprogrammed)
            ));
        }
        if !topology_incomplete.is_empty() {
            why.push(format!(
                "{} (restart fabricd to route them)",
                topology_incomplete.join("; ")
            ));
        }
        if !persistence_error.is_empty() {
            why.push(format!("state directory not writable: {persistence_error}"));
        }
        (!why.is_empty()).then(|| format!("not ready: {}", why.join("; ")))
    }

    /// Every table of the committed generation is on every live switch.
    pub fn tables_installed(&self, generation: u64) -> bool {
        generation > 0 && self.unprogrammed.is_empty() && self.blocks_pending == 0 && self.side_pending.is_empty()
    }

    /// The `STATUS=` line for systemd.
    pub fn status_line(&self, generation: u64) -> String {
        if generation == 0 {
            return self.not_ready.clone().unwrap_or_else(|| "starting".into());
        }
        match &self.not_ready {
            None => format!("generation {generation} installed"),
            Some(why) => format!(
                "generation {generation} committed, {}",
                why.strip_prefix("not ready: ").unwrap_or(why)
            ),
        }
    }
}

/// `name (0x...), ...` of the first switches, `and N more`.
pub fn name_switches(list: &[UnprogrammedSwitch]) -> String {
    let mut s: Vec<String> = list
        .iter()
        .take(NAMED_SWITCHES)
        .map(|u| {
            if u.name.is_empty() {
                fabric_topology::fmt_guid(u.guid)
            } else {
                format!("{} ({})", u.name, fabric_topology::fmt_guid(u.guid))
            }
        })
        .collect();
    if list.len() > NAMED_SWITCHES {
        s.push(format!("and {} more", list.len() - NAMED_SWITCHES));
    }
    s.join(", ")
}

impl Published {
    /// What a daemon publishes before its event loop runs: the discovered cabling, nothing
    /// installed, idle, started now.
    pub fn starting(cabling: Arc<Fabric>, engine: String, job_aware: bool, driver: &'static str, lmc: u8) -> Self {
        Published {
            cabling,
            current: None,
            phase: Phase::Idle,
            phase_generation: 0,
            pending_faults: 0,
            last_error: String::new(),
            discarded_generations: 0,
            jobs: Arc::new(Jobs::default()),
            engine,
            topology: crate::topology_mode::TopologySetting::Auto,
            job_aware,
            driver,
            lmc,
            started: Instant::now(),
            virtual_faults: 0,
            subscribers: 0,
            missed_acks: Vec::new(),
            update_restarts: Vec::new(),
            installation: Installation::default(),
            side: SideStatus::default(),
        }
    }

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

    #[test]
    fn readiness_names_every_reason() {
        assert_eq!(
            Installation::readiness(0, "", &[], &[], "").as_deref(),
            Some("not ready: no generation installed")
        );
        let u = UnprogrammedSwitch {
            guid: 0x10,
            name: "leaf-1".into(),
            blocks_pending: 3,
            last_error: "unreachable".into(),
        };
        let r = Installation::readiness(
            0,
            "no LFT block could be written",
            std::slice::from_ref(&u),
            &[],
            "gen.json: EROFS",
        )
        .unwrap();
        assert_eq!(
            r,
            "not ready: no generation installed: no LFT block could be written; 1 switch unprogrammed: \
             leaf-1 (0x0000000000000010); state directory not writable: gen.json: EROFS"
        );
        assert_eq!(Installation::readiness(4, "old error", &[], &[], ""), None);
        let gap = "topology incomplete: switch leaf-1 (0x0000000000000010) lists 4 end ports unknown since start";
        assert_eq!(
            Installation::readiness(4, "", &[], &[gap.to_string()], "").as_deref(),
            Some(
                "not ready: topology incomplete: switch leaf-1 (0x0000000000000010) lists 4 end ports unknown \
                 since start (restart fabricd to route them)"
            )
        );
        let many = vec![u; 7];
        let r = Installation::readiness(2, "", &many, &[], "").unwrap();
        assert!(
            r.starts_with("not ready: 7 switches unprogrammed: ") && r.ends_with("and 2 more"),
            "{r}"
        );
    }
}
