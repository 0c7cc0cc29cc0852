//! The tables that ride along a generation besides the LFTs: the multicast forwarding tables
//! (one tree per group the SA holds) and the P_Key tables (the partitions in force). What the
//! switches and ports hold as far as the daemon knows, what must be written whole again, and
//! what the driver cannot program at all (said in status, never retried).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fabric_routing::mcast::McastRouting;
use fabric_southbound::PkeyPort;
use fabric_topology::{fmt_guid, Guid};

use super::internal::Internal;
use super::tasks::Task;
use super::EventLoop;
use crate::compute::Computed;
use crate::pkeys::PkeyState;
use crate::upload::{SideOutcome, SideWrites};

/// The side tables' live state (one value in the loop).
#[derive(Debug, Default)]
pub(super) struct SideTables {
    /// The multicast routing whose MFTs the switches hold (as far as the daemon knows).
    pub installed_mcast: Arc<McastRouting>,
    /// Switches (dense id) whose whole MFT is written by the next generation.
    pub mft_resync: BTreeSet<u32>,
    /// The P_Key tables the ports hold (as far as the daemon knows).
    pub installed_pkeys: Arc<PkeyState>,
    /// Ports whose whole P_Key table is written by the next generation.
    pub pkey_resync: BTreeSet<PkeyPort>,
    /// The driver does not program MFTs (its error): multicast is not forwarded.
    pub mft_unsupported: Option<String>,
    /// The driver does not program P_Key tables (its error): partitions are not enforced.
    pub pkey_unsupported: Option<String>,
    /// Switches whose MFT of the committed generation is not written, with the error.
    pub mft_pending: BTreeMap<Guid, String>,
    /// Ports whose P_Key table of the committed generation is not written, with the error.
    pub pkey_pending: BTreeMap<PkeyPort, String>,
    /// The partitions last handed to the SA.
    pub sa_partitions: Option<Arc<fabric_partitions::PartitionTables>>,
    /// The partitions and P_Key tables of the last committed generation and what they were
    /// resolved from (reused while that does not change).
    pub resolved: Option<(
        crate::compute::PartitionsKey,
        Arc<fabric_partitions::PartitionTables>,
        Arc<PkeyState>,
    )>,
    /// The driver's configuration warnings last logged.
    pub config_warnings: Vec<String>,
    /// What routing saw of the SA's groups in the last computation ([`routing_view`]).
    pub routed_groups: Vec<(u16, Vec<(Guid, bool)>)>,
    /// The hand-over to the SA running, and the partitions to hand over after it.
    pub sa_task: Option<Task>,
    pub sa_pending: Option<Arc<fabric_partitions::PartitionTables>>,
}

impl SideTables {
    /// Every table is written again by the next generation (an update aborted after its base
    /// stage started, a forced resync).
    pub fn resync_all(&mut self, switches: usize) {
        self.mft_resync.extend(0..switches as u32);
        self.pkey_resync.extend(self.installed_pkeys.keys().copied());
        self.installed_pkeys = Arc::new(PkeyState::new());
    }

    /// Why the MFTs of the committed generation are not all on the switches (the driver could
    /// program them but some switch did not take them), if so.
    pub fn mft_not_programmed(&self) -> Option<String> {
        let (g, e) = self.mft_pending.iter().next()?;
        Some(format!(
            "multicast forwarding tables not programmed on {} switch{} (first {}: {e})",
            self.mft_pending.len(),
            if self.mft_pending.len() == 1 { "" } else { "es" },
            fmt_guid(*g)
        ))
    }

    /// Why the P_Key tables of the committed generation are not all on the ports, if so.
    pub fn pkey_not_programmed(&self) -> Option<String> {
        let (p, e) = self.pkey_pending.iter().next()?;
        Some(format!(
            "P_Key tables not programmed on {} port{} (first {}: {e})",
            self.pkey_pending.len(),
            if self.pkey_pending.len() == 1 { "" } else { "s" },
            port_name(*p)
        ))
    }

    /// The lines that keep the daemon from being ready: tables the driver could program but
    /// did not take.
    pub fn not_programmed(&self) -> Vec<String> {
        self.mft_not_programmed()
            .into_iter()
            .chain(self.pkey_not_programmed())
            .collect()
    }
}

/// What routing sees of the SA's groups: per group with members, its MLID and its members
/// with whether they receive.
pub(super) fn routing_view(groups: &[fabric_sa::McGroup]) -> Vec<(u16, Vec<(Guid, bool)>)> {
    groups
        .iter()
        .filter(|g| !g.members.is_empty())
        .map(|g| {
            let members = g
                .members
                .iter()
                .map(|m| (m.port_guid, m.join_state & crate::mcast::RECEIVING_JOIN_STATES != 0))
                .collect();
            (g.mlid, members)
        })
        .collect()
}

/// `0x... ` (end port) or `0x...[port]` (switch port).
pub fn port_name(p: PkeyPort) -> String {
    match p {
        PkeyPort::EndPort(g) => format!("end port {}", fmt_guid(g)),
        PkeyPort::SwitchPort(g, n) => format!("switch {}[{n}]", fmt_guid(g)),
    }
}

impl EventLoop {
    /// The side writes of a generation, without the kinds the driver cannot program.
    pub(super) fn side_writes(&self, w: &SideWrites) -> SideWrites {
        SideWrites {
            mft: if self.side.mft_unsupported.is_some() {
                Vec::new()
            } else {
                w.mft.clone()
            },
            pkey: if self.side.pkey_unsupported.is_some() {
                Vec::new()
            } else {
                w.pkey.clone()
            },
        }
    }

    /// Folds the side tables of a committed generation into the live state: what was written
    /// is installed, what failed or was skipped is written whole by the next generation.
    pub(super) fn fold_side(&mut self, c: &Computed, o: &SideOutcome) {
        let s = &mut self.side;
        if let Some(e) = &o.mft_unsupported {
            if s.mft_unsupported.is_none() {
                tracing::error!(
                    driver = self.driver_name,
                    error = %e,
                    "multicast forwarding tables cannot be programmed by this driver: multicast groups are not forwarded"
                );
            }
            s.mft_unsupported = Some(e.clone());
        }
        if let Some(e) = &o.pkey_unsupported {
            if s.pkey_unsupported.is_none() {
                tracing::warn!(
                    driver = self.driver_name,
                    error = %e,
                    "P_Key tables cannot be programmed by this driver: partitions are answered by the SA but not enforced by the ports"
                );
            }
            s.pkey_unsupported = Some(e.clone());
        }
        // MFTs: switches written whole or by diff hold the new tables; the failed ones and the
        // dead ones are rewritten whole later.
        s.installed_mcast = c.mcast.clone();
        s.mft_resync.retain(|sw| !c.mft_resync_covered.contains(sw));
        s.mft_resync.extend(c.mft_skipped.iter().copied());
        s.mft_pending.clear();
        if s.mft_unsupported.is_none() {
            for g in &o.mft_failed {
                if let Some(id) = c.physical.switch_by_guid(*g) {
                    s.mft_resync.insert(id.0);
                }
                let e = o.mft_error.clone().unwrap_or_default();
                s.mft_pending.insert(*g, e);
            }
        }
        // P_Keys: likewise per port.
        let skipped: Vec<PkeyPort> = c.pkey_skipped.clone();
        s.installed_pkeys = crate::pkeys::fold_written_shared(&s.installed_pkeys, &c.pkeys, &o.pkey_failed, &skipped);
        s.pkey_resync.retain(|p| !c.pkey_resync_covered.contains(p));
        s.pkey_resync.extend(skipped);
        s.pkey_pending.clear();
        if s.pkey_unsupported.is_none() {
            for p in &o.pkey_failed {
                s.pkey_resync.insert(*p);
                s.pkey_pending.insert(*p, o.pkey_error.clone().unwrap_or_default());
            }
        }
        if !s.mft_pending.is_empty() || !s.pkey_pending.is_empty() {
            let why = s.not_programmed().join("; ");
            tracing::error!("{why}; retrying");
            self.schedule
                .retry_later(tokio::time::Instant::now(), &self.settings.update);
        }
        s.resolved = Some((c.partitions_key.clone(), c.partitions.clone(), c.pkeys.clone()));
        // The SA answers PathRecords and joins with the partitions now in force (and creates
        // the IPoIB groups of new partitions) once they changed.
        if self.side.sa_partitions.as_deref() != Some(&*c.partitions) {
            for issue in c.partitions.issues() {
                tracing::warn!("partitions: {issue}");
            }
            self.side.sa_partitions = Some(c.partitions.clone());
            self.hand_partitions_to_sa(c.partitions.clone());
        }
    }

    /// Hands the partitions to the SA on a blocking thread (the SA saves its registry when the
    /// IPoIB groups change: an fsync, never on the loop), one hand-over at a time, in order.
    fn hand_partitions_to_sa(&mut self, partitions: Arc<fabric_partitions::PartitionTables>) {
        let Some(sa) = self.io.sa_service.clone() else {
            return;
        };
        if self.side.sa_task.is_some() {
            self.side.sa_pending = Some(partitions);
            return;
        }
        self.side.sa_task = Some(self.tasks.spawn_blocking(move || {
            sa.set_partitions(Arc::new(crate::partitions::sa_partitions(&partitions)));
            Internal::PartitionsHanded
        }));
    }

    /// The SA took the partitions: the next ones, if any, follow.
    pub(super) fn on_partitions_handed(&mut self) {
        self.side.sa_task = None;
        if let Some(p) = self.side.sa_pending.take() {
            self.hand_partitions_to_sa(p);
        }
    }

    /// Logs the driver's configuration warnings that are new since the last poll (an oob
    /// agent that refuses the management key, or has no VL for the escape traffic).
    pub(super) fn poll_configuration_warnings(&mut self) {
        let now = self.io.driver.configuration_warnings();
        for w in now.iter().filter(|w| !self.side.config_warnings.contains(w)) {
            tracing::warn!(driver = self.driver_name, "{w}");
        }
        self.side.config_warnings = now;
    }

    /// The installed generation's partitions and P_Key tables when the next computation would
    /// resolve the same ones (same partitions, manager port and enforcement).
    pub(super) fn reusable_partitions(&self) -> Option<(Arc<fabric_partitions::PartitionTables>, Arc<PkeyState>)> {
        let (key, partitions, pkeys) = self.side.resolved.as_ref()?;
        let s = &self.settings.partitions;
        let same = *key.config == *s.config
            && key.enforce_switch_ports == s.enforce_switch_ports
            && key.sm_port == self.io.driver.sm_port_guid();
        same.then(|| (partitions.clone(), pkeys.clone()))
    }

    /// The SA's multicast groups changed (a join, a leave, a group removed): a generation
    /// routes them (coalesced like any other change) when what routing sees of them changed
    /// (members and whether they receive; a group created without members, or a change of
    /// its parameters, changes no table).
    pub(super) fn on_mcast_changed(&mut self) {
        if !self.settings.multicast || self.shutting_down.is_some() {
            return;
        }
        let Some(sa) = &self.io.sa_service else {
            return;
        };
        let routed = routing_view(&sa.mcast_groups());
        if routed == self.side.routed_groups {
            return;
        }
        tracing::debug!("multicast groups changed");
        // Coalesced like any change: a burst of joins (IPoIB interfaces coming up) becomes
        // one generation.
        self.note_change(false);
        self.maybe_start();
    }
}
