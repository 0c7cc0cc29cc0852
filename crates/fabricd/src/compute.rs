//! The CPU-heavy part of a generation, run on the routing rayon pool (never on a tokio worker):
//! apply the pending physical changes and the virtual faults, rank, assign (keep) LIDs, route,
//! check every connected pair and repair what the engine left unreachable (always:
//! [`fabric_routing::route_all_checked`], linear in the tables), optionally check deadlock
//! freedom, and select the LFT blocks to upload (diff against the installed tables).
//!
//! [`compute`] is a pure function of its [`ComputeInput`]; the event loop sends it to the pool
//! and gets the [`Computed`] result back over a oneshot channel.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use fabric_partitions::{PartitionConfig, PartitionTables};
use fabric_ranking::{rank, RankOptions, Ranking};
use fabric_routing::incremental::{route_checked_incremental, RoutePath, RoutingState};
use fabric_routing::mcast::McastRouting;
use fabric_routing::{assign_lids, check, EngineKind, Guid2Lid, LftBlockDiff, Lfts, LidPlan, NodeGroups, RoutingCheck};
use fabric_southbound::PkeyPort;
use fabric_topology::{Fabric, FabricEvent, Lid};

use crate::pkeys::PkeyState;
use crate::upload::SideWrites;

#[cfg(test)]
#[path = "compute/detect_tests.rs"]
mod detect_tests;
#[cfg(test)]
#[path = "compute/full_tests.rs"]
mod full_tests;
pub mod sched;
mod select;
pub mod vl;

pub use select::{select, select_known, PortUse, PortsWanted, Selected};
pub use vl::{VlInstall, VlRefusal};

/// Everything one computation reads.
#[derive(Clone, Debug)]
pub struct ComputeInput {
    /// Job number (stale results are recognised by it).
    pub job: u64,
    /// The physical fabric before `physical_events`.
    pub physical: Arc<Fabric>,
    /// Physical changes seen since `physical` (already validated against it).
    pub physical_events: Vec<FabricEvent>,
    /// Virtual faults in force (down events), applied on top of the physical state.
    pub exclusions: Vec<FabricEvent>,
    /// LID assignments to keep.
    pub previous_lids: Arc<Guid2Lid>,
    /// LID plan of the installed generation (to detect a change).
    pub installed_lids: Option<Arc<LidPlan>>,
    /// `installed_lids` was assigned for the same GUIDs from `previous_lids` and may be reused
    /// as is (the cabling did not change since).
    pub lids_reusable: bool,
    pub lmc: u8,
    pub max_lid: Lid,
    pub engine: EngineKind,
    /// Job-aware routing: the port GUIDs of every job (jobs in order; a port in several jobs
    /// counts for the first, ports no longer in the fabric are skipped); `None` = plain routing.
    pub job_groups: Option<Arc<Vec<Vec<fabric_topology::Guid>>>>,
    pub rank_options: Arc<RankOptions>,
    /// Also check deadlock freedom (the channel-dependency graphs of both LID sets) of the
    /// result ([`Computed::validation`]). The validity check runs always.
    pub validate: bool,
    /// What the switches hold (as far as the daemon knows).
    pub installed: Arc<Lfts>,
    /// Blocks to write even if they equal `installed` (failed or skipped earlier).
    pub dirty: Arc<BTreeSet<(u32, u32)>>,
    /// Switches whose whole table must be written (first sync, switch came back up).
    pub resync: Arc<BTreeSet<u32>>,
    /// Build [`Computed::ports_in_use`] (needed by the five-phase update only; empty when false).
    pub ports_in_use: bool,
    /// The [`PortUse`] of exactly `installed` (the generation that computed it), when known:
    /// the rows a generation leaves unchanged take their port set from it instead of a scan.
    pub installed_ports_in_use: Option<Arc<PortUse>>,
    /// Multicast groups to route (the SA's, members by port GUID); `None`: multicast is off.
    pub mcast_groups: Option<Arc<Vec<fabric_sa::McGroup>>>,
    /// The multicast routing whose tables the switches hold (as far as the daemon knows).
    pub installed_mcast: Arc<McastRouting>,
    /// Switches whose whole MFT must be written.
    pub mft_resync: Arc<BTreeSet<u32>>,
    /// The partitions in force.
    pub partitions: Arc<PartitionConfig>,
    /// The partitions of the installed generation: a P_Key keeps its table index (IPoIB child
    /// interfaces and QPs name P_Keys by index), as OpenSM keeps them.
    pub previous_partitions: Option<Arc<PartitionTables>>,
    /// Also program the switch ports facing end ports (partition enforcement).
    pub enforce_switch_ports: bool,
    /// The manager's own port ([`fabric_southbound::SouthboundDriver::sm_port_guid`]): `SELF`
    /// in the partitions file, a full member of the default partition.
    pub sm_port: Option<fabric_topology::Guid>,
    /// The P_Key tables the ports hold (as far as the daemon knows).
    pub installed_pkeys: Arc<PkeyState>,
    /// The resolved partitions and P_Key tables of the installed generation, when they were
    /// computed from the same partitions, manager port and enforcement: they depend on nothing
    /// else (the model keeps every port, live or not, and its cabling), so a fault does not
    /// pay for resolving them again.
    pub reuse_partitions: Option<(Arc<PartitionTables>, Arc<PkeyState>)>,
    /// Ports whose whole P_Key table must be written.
    pub pkey_resync: Arc<BTreeSet<PkeyPort>>,
    /// The routing state of a previous generation: the routing is re-computed incrementally
    /// from it when it allows ([`fabric_routing::incremental`]; the result is the same as a
    /// full routing).
    pub previous_routing: Option<Arc<RoutingState>>,
    /// The data VLs every live port can operate ([`fabric_southbound::SouthboundDriver::
    /// data_vl_capacity`]; `None`: unknown): an engine that needs a VL layering is refused
    /// beyond it ([`vl`]).
    pub data_vl_capacity: Option<u8>,
    /// `[routing] topology = "auto"`: when the fabric about to be routed ranks as no fat-tree
    /// ([`fabric_ranking::fat_tree_shape`] of this computation's own snapshot and ranking) and
    /// `engine` is not topology-agnostic, its base LIDs are routed by Up*/Down* instead
    /// ([`crate::topology_mode`]). Decided here, after the ranking stage, so the snapshot and
    /// the ranking are built once per generation.
    pub detect_topology: bool,
    /// A full recomputation (a forced reroute, like OpenSM's heavy re-sweep): nothing
    /// computed for an earlier generation is taken over — the LID plan is assigned again (from
    /// the recorded GUID-to-LID assignments, so the same LIDs), the partitions and P_Key
    /// tables are resolved again, the routing is computed in full (no incremental state) and
    /// the ports in use are scanned; `lids_reusable`, `reuse_partitions`, `previous_routing`
    /// and `installed_ports_in_use` are ignored. What still comes from the installed
    /// generation says what the switches hold (the diff) or keeps identities (LIDs, P_Key
    /// indices), as in any generation.
    pub full: bool,
}

impl ComputeInput {
    /// A first computation of `physical` with `exclusions` down (tests and benches): Dmodc,
    /// LMC 1, no LIDs before, nothing installed, no validation, the ports the routing uses
    /// recorded.
    pub fn from_scratch(physical: Arc<Fabric>, exclusions: Vec<FabricEvent>) -> Self {
        ComputeInput {
            job: 0,
            physical,
            physical_events: vec![],
            exclusions,
            previous_lids: Arc::new(Guid2Lid::new()),
            installed_lids: None,
            lids_reusable: false,
            lmc: 1,
            max_lid: 0xBFFF,
            engine: EngineKind::Dmodc,
            job_groups: None,
            rank_options: Arc::new(RankOptions::default()),
            validate: false,
            installed: Arc::new(Lfts::new(0, 0)),
            dirty: Arc::new(BTreeSet::new()),
            resync: Arc::new(BTreeSet::new()),
            ports_in_use: true,
            installed_ports_in_use: None,
            mcast_groups: Some(Arc::new(Vec::new())),
            installed_mcast: Arc::new(McastRouting::default()),
            mft_resync: Arc::new(BTreeSet::new()),
            partitions: Arc::new(PartitionConfig::default_opensm()),
            previous_partitions: None,
            enforce_switch_ports: true,
            sm_port: None,
            installed_pkeys: Arc::new(PkeyState::new()),
            reuse_partitions: None,
            pkey_resync: Arc::new(BTreeSet::new()),
            previous_routing: None,
            data_vl_capacity: None,
            detect_topology: false,
            full: false,
        }
    }
}

/// What the resolved partitions and P_Key tables of a generation depend on.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionsKey {
    pub config: Arc<PartitionConfig>,
    pub sm_port: Option<fabric_topology::Guid>,
    pub enforce_switch_ports: bool,
}

/// Result of the optional checks (`[routing] validate`) of a new generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validation {
    /// Same as [`RoutingCheck::valid`] (after the fallback).
    pub valid: bool,
    /// Unreachable connected pairs over base and escape LIDs (after the fallback).
    pub unreachable_pairs: u64,
    /// The channel-dependency graphs of the base and of the escape LIDs are acyclic.
    pub deadlock_free: bool,
}

/// A computed generation, ready to upload.
#[derive(Clone, Debug)]
pub struct Computed {
    pub job: u64,
    /// The physical fabric with `physical_events` applied.
    pub physical: Arc<Fabric>,
    /// The routed topology (physical + virtual faults).
    pub fabric: Arc<Fabric>,
    pub ranking: Arc<Ranking>,
    pub lids: Arc<LidPlan>,
    /// The LID plan differs from the installed one: configure LIDs before the LFTs.
    pub lids_changed: bool,
    /// LID assignments to persist (with vanished GUIDs kept reserved).
    pub guid2lid: Arc<Guid2Lid>,
    pub lfts: Arc<Lfts>,
    /// Blocks to upload, switch-major.
    pub writes: Vec<LftBlockDiff>,
    /// Blocks that differ but belong to switches that are physically down (not written; they
    /// stay dirty).
    pub skipped: Vec<(u32, u32)>,
    pub route_ms: f64,
    pub compute_ms: f64,
    /// Where `compute_ms` went (milliseconds per stage).
    pub stages: StageTimes,
    /// How the routing was computed: incrementally from [`ComputeInput::previous_routing`] or
    /// in full (and why).
    pub route_path: RoutePath,
    /// The state the next generation can be routed from (Dmodc without node groups).
    pub routing_state: Option<Arc<RoutingState>>,
    pub validation: Option<Validation>,
    /// The always-on validity check of `lfts` and the fallback it needed (the tables above are
    /// the repaired ones).
    pub routing_check: Arc<RoutingCheck>,
    /// The ports some LFT entry of `lfts` forwards through (base, escape and switch LIDs): a
    /// fault on one of them during the five-phase update breaks the routing being installed.
    /// Empty unless [`ComputeInput::ports_in_use`] was set.
    pub ports_in_use: Arc<PortUse>,
    /// The multicast trees and forwarding tables of the generation (empty when multicast is
    /// off).
    pub mcast: Arc<McastRouting>,
    /// The partitions resolved against the routed fabric.
    pub partitions: Arc<PartitionTables>,
    /// The P_Key table of every port the generation programs.
    pub pkeys: Arc<PkeyState>,
    /// MFT and P_Key blocks to upload with the LFT blocks.
    pub side: SideWrites,
    /// Switches (dense id) whose MFT changed but that are physically down (not written; their
    /// whole MFT is written when they are back).
    pub mft_skipped: Vec<u32>,
    /// Ports whose P_Key table changed but cannot be reached now (written when they are back).
    pub pkey_skipped: Vec<PkeyPort>,
    /// What [`Computed::partitions`] and [`Computed::pkeys`] were computed from.
    pub partitions_key: PartitionsKey,
    /// The switches whose whole MFT this generation writes ([`ComputeInput::mft_resync`]).
    pub mft_resync_covered: Arc<BTreeSet<u32>>,
    /// The ports whose whole P_Key table this generation writes.
    pub pkey_resync_covered: Arc<BTreeSet<PkeyPort>>,
    /// The VL layering the engine needs (DFSSSP): its SL-to-VL plan, programmed before the
    /// base tables go in, and the per-path SLs the SA reports once installed; `None` for
    /// engines deadlock-free on one VL.
    pub vl: Option<Arc<VlInstall>>,
    /// The computing thread's CPU and run-queue time within `compute_ms` ([`sched`]; `None`
    /// where the kernel has no counters). Not part of the result: two computations of the same
    /// input differ here only.
    pub thread: Option<sched::ThreadTimes>,
    /// Computed as a full recomputation ([`ComputeInput::full`]).
    pub full: bool,
}

/// Time of each stage of [`compute`] (milliseconds; together `compute_ms` up to rounding).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTimes {
    /// Applying the physical changes and the virtual faults.
    pub topology: f64,
    /// Ranking.
    pub ranking: f64,
    /// LID plan.
    pub lids: f64,
    /// Routing of the base and escape LIDs, validity check and repair.
    pub route: f64,
    /// VL layering and per-path SLs.
    pub vl: f64,
    /// Optional deadlock check (`validate`).
    pub validate: f64,
    /// LFT diff (and the ports in use).
    pub select: f64,
    /// Multicast routing and MFT diff.
    pub mcast: f64,
    /// Partitions and P_Key diff.
    pub partitions: f64,
}

/// Errors that prevent a generation from being computed.
#[derive(Debug, thiserror::Error)]
pub enum ComputeError {
    #[error("cannot apply topology changes: {0}")]
    Topology(#[from] fabric_topology::TopologyError),
    #[error("LID assignment failed: {0}")]
    Lids(#[from] fabric_routing::LidError),
    #[error("routing failed: {0}")]
    Routing(#[from] fabric_routing::RoutingError),
    #[error("generation refused: {0}")]
    Vl(#[from] VlRefusal),
    #[error("the routing computation panicked (this is a bug; the installed routing is kept)")]
    Panicked,
}

/// Computes one generation (see the module documentation).
pub fn compute(input: ComputeInput) -> Result<Computed, ComputeError> {
    let t0 = Instant::now();
    let sched0 = sched::sample();
    let mut stages = StageTimes::default();
    let mut lap = Instant::now();
    let mut stage = |slot: &mut f64| {
        let now = Instant::now();
        *slot = (now - lap).as_secs_f64() * 1e3;
        lap = now;
    };
    let physical = if input.physical_events.is_empty() {
        input.physical.clone()
    } else {
        Arc::new(input.physical.apply(&input.physical_events)?)
    };
    let fabric = if input.exclusions.is_empty() {
        physical.clone()
    } else {
        Arc::new(physical.apply(&input.exclusions)?)
    };
    stage(&mut stages.topology);
    let ranking = rank(&fabric, &input.rank_options);
    let engine = if input.detect_topology
        && !input.engine.is_topology_agnostic()
        && !fabric_ranking::fat_tree_shape(&fabric, &ranking).fat_tree
    {
        EngineKind::UpDown
    } else {
        input.engine
    };
    stage(&mut stages.ranking);
    // LIDs belong to GUIDs, not to states: with the same GUIDs and the same recorded
    // assignment, the installed plan is what assign_lids would return.
    let (lids, guid2lid) = match &input.installed_lids {
        // (The record is shared, not copied: the loop sees it is the one it holds.)
        Some(plan) if input.lids_reusable && !input.full => (LidPlan::clone(plan), input.previous_lids.clone()),
        _ => {
            let lids = assign_lids(&fabric, &input.previous_lids, input.lmc, input.max_lid)?;
            let g = Guid2Lid::from_plan_keeping(&fabric, &lids, &input.previous_lids);
            (lids, Arc::new(g))
        }
    };
    let lids_changed = input.installed_lids.as_deref() != Some(&lids);
    stage(&mut stages.lids);
    let groups = input.job_groups.as_ref().map(|jobs| {
        let sets: Vec<Vec<fabric_topology::EndPortId>> = jobs
            .iter()
            .map(|ports| ports.iter().filter_map(|&g| fabric.end_port_by_guid(g)).collect())
            .collect();
        NodeGroups::from_sets(fabric.num_end_ports(), &sets)
    });
    let routed = route_checked_incremental(
        &fabric,
        &ranking,
        &lids,
        engine,
        groups.as_ref(),
        input.previous_routing.as_deref().filter(|_| !input.full),
    )?;
    tracing::debug!(
        job = input.job,
        route_path = %routed.path.name(),
        route_ms = routed.base_ms + routed.escape_ms,
        stages = ?match &routed.path {
            fabric_routing::incremental::RoutePath::Incremental(s) => Some((&s.times, s.copied_rows)),
            fabric_routing::incremental::RoutePath::Full(_) => None,
        },
        "routed"
    );
    // Rows the incremental routing did not re-fill equal the previous generation's: when those
    // are exactly the installed tables, `select` need not compare them.
    let known_same: Option<Vec<bool>> = match (&input.previous_routing, &routed.touched) {
        (Some(p), Some(t)) if !input.full && Arc::ptr_eq(p.lfts(), &input.installed) => {
            Some(t.iter().map(|&x| !x).collect())
        }
        _ => None,
    };
    let routing_check = routed.check;
    let lfts = routed.lfts;
    stage(&mut stages.route);
    // On the repaired tables, the ones installed: refused before anything is selected.
    let vl = vl::layer(engine, &fabric, &lids, &lfts, input.data_vl_capacity)?.map(Arc::new);
    stage(&mut stages.vl);
    let validation = input.validate.then(|| Validation {
        valid: routing_check.valid,
        unreachable_pairs: routing_check.unreachable_pairs + routing_check.escape_unreachable_pairs,
        deadlock_free: check::deadlock_free(&fabric, &ranking, &lids, &lfts),
    });
    stage(&mut stages.validate);
    let wanted = match (input.ports_in_use, &input.installed_ports_in_use) {
        (false, _) => PortsWanted::No,
        (true, Some(u)) if !input.full => PortsWanted::Reuse(u),
        (true, _) => PortsWanted::Scan,
    };
    let Selected {
        writes,
        skipped,
        ports_in_use,
    } = select_known(
        &physical,
        &input.installed,
        &lfts,
        &input.dirty,
        &input.resync,
        wanted,
        known_same.as_deref(),
    );
    let ports_in_use = Arc::new(ports_in_use);
    stage(&mut stages.select);
    let mcast = match &input.mcast_groups {
        Some(groups) => crate::mcast::route(&fabric, &ranking, groups),
        None => McastRouting::default(),
    };
    let (mft, mft_skipped) =
        crate::mcast::select_mft_writes(&physical, &input.installed_mcast.mfts, &mcast.mfts, &input.mft_resync);
    stage(&mut stages.mcast);
    let (partitions, pkeys) = match input.reuse_partitions.as_ref().filter(|_| !input.full) {
        Some((p, k)) => (p.clone(), k.clone()),
        None => {
            let p = fabric_partitions::resolve_with(
                &input.partitions,
                &fabric,
                input.sm_port,
                &fabric_partitions::ResolveOptions::default(),
                input.previous_partitions.as_deref(),
            );
            let k = crate::pkeys::target(&p, &fabric, input.enforce_switch_ports);
            (Arc::new(p), Arc::new(k))
        }
    };
    // The installed tables are this target itself (reused partitions, every write of the
    // generation that made them went through): only the resync ports can have blocks to write.
    let (pkey, pkey_skipped) = if Arc::ptr_eq(&pkeys, &input.installed_pkeys) {
        crate::pkeys::select_resync_writes(&physical, &pkeys, &input.pkey_resync)
    } else {
        crate::pkeys::select_pkey_writes(&physical, &input.installed_pkeys, &pkeys, &input.pkey_resync)
    };
    stage(&mut stages.partitions);
    let thread = sched0.and_then(sched::Sample::elapsed);
    let compute_ms = t0.elapsed().as_secs_f64() * 1e3;
    tracing::debug!(job = input.job, compute_ms, ?stages, "computed");
    Ok(Computed {
        job: input.job,
        physical,
        fabric,
        ranking: Arc::new(ranking),
        lids: Arc::new(lids),
        lids_changed,
        guid2lid,
        lfts,
        writes,
        skipped,
        route_ms: routed.base_ms + routed.escape_ms,
        route_path: routed.path,
        routing_state: routed.state.map(Arc::new),
        compute_ms,
        stages,
        validation,
        routing_check: Arc::new(routing_check),
        ports_in_use,
        mcast: Arc::new(mcast),
        partitions,
        pkeys,
        partitions_key: PartitionsKey {
            config: input.partitions.clone(),
            sm_port: input.sm_port,
            enforce_switch_ports: input.enforce_switch_ports,
        },
        side: SideWrites { mft, pkey },
        mft_skipped,
        pkey_skipped,
        mft_resync_covered: input.mft_resync.clone(),
        pkey_resync_covered: input.pkey_resync.clone(),
        vl,
        thread,
        full: input.full,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_topology::{FabricBuilder, NodeType, SwitchId};

    /// Two leaves and two spines, one node per leaf (a fat-tree).
    pub(super) fn tiny() -> Fabric {
        let mut b = FabricBuilder::new();
        let l0 = b.add_switch(0x10, "leaf0", 8).unwrap();
        let l1 = b.add_switch(0x11, "leaf1", 8).unwrap();
        let s0 = b.add_switch(0x20, "spine0", 8).unwrap();
        let s1 = b.add_switch(0x21, "spine1", 8).unwrap();
        b.connect_switches(l0, 5, s0, 1).unwrap();
        b.connect_switches(l0, 6, s1, 1).unwrap();
        b.connect_switches(l1, 5, s0, 2).unwrap();
        b.connect_switches(l1, 6, s1, 2).unwrap();
        let e0 = b.add_end_port(0x101, 0x100, "n0", 1, 1, NodeType::Compute).unwrap();
        let e1 = b.add_end_port(0x111, 0x110, "n1", 1, 1, NodeType::Compute).unwrap();
        b.connect_end_port(e0, l0, 1).unwrap();
        b.connect_end_port(e1, l1, 1).unwrap();
        b.build()
    }

    fn input(f: Fabric) -> ComputeInput {
        ComputeInput {
            job: 1,
            validate: true,
            ..ComputeInput::from_scratch(Arc::new(f), vec![])
        }
    }

    #[test]
    fn first_generation_writes_every_routed_block_and_is_valid() {
        let c = compute(input(tiny())).unwrap();
        assert_eq!(
            c.validation,
            Some(Validation {
                valid: true,
                unreachable_pairs: 0,
                deadlock_free: true,
            })
        );
        assert!(c.routing_check.valid && c.routing_check.reason.is_empty());
        assert!(c.lids_changed);
        // 2 end ports x 2 LIDs + 4 switch LIDs fit in block 0 of each of the 4 switches.
        assert_eq!(c.writes.len(), 4);
        assert!(c.skipped.is_empty());
        assert_eq!(c.guid2lid.len(), 6);
    }

    #[test]
    fn second_generation_writes_only_changed_blocks_and_excludes_virtual_faults() {
        let first = compute(input(tiny())).unwrap();
        let mut inp = input(tiny());
        inp.installed = first.lfts.clone();
        inp.installed_lids = Some(first.lids.clone());
        inp.previous_lids = first.guid2lid.clone();
        let same = compute(inp.clone()).unwrap();
        assert!(same.writes.is_empty());
        assert!(!same.lids_changed);
        inp.lids_reusable = true;
        let reused = compute(inp.clone()).unwrap();
        assert_eq!(reused.lids, same.lids, "a reused plan equals a fresh assignment");
        assert_eq!(reused.guid2lid, same.guid2lid);
        // Excluding leaf0's link to spine0 changes the leaves' and spine0's tables.
        inp.exclusions = vec![FabricEvent::LinkDown { switch: 0x10, port: 5 }];
        let c = compute(inp.clone()).unwrap();
        let expected = first.lfts.diff(&c.lfts);
        assert!(!expected.is_empty());
        assert_eq!(c.writes, expected);
        assert_eq!(
            c.physical.count_links(),
            (4, 4),
            "virtual faults do not touch the physical view"
        );
        assert_eq!(c.fabric.count_links(), (4, 3));
        // A dirty block is written although equal; a resync switch is written whole.
        inp.exclusions.clear();
        inp.dirty = Arc::new([(1, 0)].into_iter().collect());
        inp.resync = Arc::new([3].into_iter().collect());
        let c = compute(inp).unwrap();
        let got: Vec<(u32, u32)> = c.writes.iter().map(|w| (w.switch.0, w.block)).collect();
        assert_eq!(got, vec![(1, 0), (3, 0)]);
    }

    /// Three leaves, two spines, one node per leaf.
    fn three_leaves() -> Fabric {
        let mut b = FabricBuilder::new();
        let l: Vec<_> = (0..3)
            .map(|i| b.add_switch(0x10 + i, format!("leaf{i}"), 8).unwrap())
            .collect();
        let s0 = b.add_switch(0x20, "spine0", 8).unwrap();
        let s1 = b.add_switch(0x21, "spine1", 8).unwrap();
        for (i, &leaf) in l.iter().enumerate() {
            b.connect_switches(leaf, 5, s0, 1 + i as u8).unwrap();
            b.connect_switches(leaf, 6, s1, 1 + i as u8).unwrap();
            let e = b
                .add_end_port(
                    0x101 + 0x10 * i as u64,
                    0x100 + 0x10 * i as u64,
                    format!("n{i}"),
                    1,
                    1,
                    NodeType::Compute,
                )
                .unwrap();
            b.connect_end_port(e, leaf, 1).unwrap();
        }
        b.build()
    }

    #[test]
    fn a_generation_the_engine_leaves_invalid_is_repaired_and_says_so() {
        // leaf0 keeps only spine0, leaf1 only spine1: connected through leaf2, not up-down.
        let mut inp = input(three_leaves());
        inp.exclusions = vec![
            FabricEvent::LinkDown { switch: 0x10, port: 6 },
            FabricEvent::LinkDown { switch: 0x11, port: 5 },
        ];
        let c = compute(inp).unwrap();
        let rc = &c.routing_check;
        assert!(rc.valid, "{rc:?}");
        assert_eq!(rc.engine, "dmodc");
        // n0 and n1 cannot reach each other under Dmodc: 2 destinations, 2 pairs.
        assert_eq!((rc.engine_failed_destinations, rc.engine_unreachable_pairs), (2, 2));
        assert_ne!(rc.fallback, fabric_routing::Fallback::None);
        assert!(rc.reason.contains("dmodc left 2 destinations"), "{}", rc.reason);
        let v = check::validity(&c.fabric, &c.lids, &c.lfts);
        assert!(v.valid, "{v:?}");
        assert_eq!(
            c.validation.as_ref().map(|v| (v.valid, v.deadlock_free)),
            Some((true, true))
        );
        // What is uploaded is the repaired routing.
        let mut installed = Lfts::new(c.lfts.num_switches(), c.lids.top());
        installed.apply(&c.writes);
        assert_eq!(installed, *c.lfts);
    }

    #[test]
    fn physically_dead_switch_blocks_are_skipped() {
        let first = compute(input(tiny())).unwrap();
        let mut inp = input(tiny());
        inp.installed = first.lfts.clone();
        inp.physical_events = vec![FabricEvent::SwitchDown(0x21)];
        let c = compute(inp).unwrap();
        assert!(!c.physical.switch(SwitchId(3)).up);
        assert!(c.writes.iter().all(|w| w.switch != SwitchId(3)));
        assert_eq!(c.skipped, vec![(3, 0)]);
    }

    #[test]
    fn ports_in_use_are_those_some_entry_forwards_through() {
        let c = compute(input(tiny())).unwrap();
        let f = &c.fabric;
        for s in f.switch_ids() {
            for port in 0..=255u8 {
                let used = (1..=c.lfts.row_len().saturating_sub(1) as Lid).any(|lid| c.lfts.get(s, lid) == port);
                let expect = used && port != 0 && port != fabric_routing::NO_ROUTE;
                assert_eq!(c.ports_in_use.in_use(s, port), expect, "switch {} port {port}", s.0);
            }
        }
        // Leaf0 reaches node n0 on port 1 and the spines on 5 and 6; nothing uses port 2.
        assert!(c.ports_in_use.in_use(SwitchId(0), 1));
        assert!(c.ports_in_use.in_use(SwitchId(0), 5));
        assert!(c.ports_in_use.in_use(SwitchId(0), 6));
        assert!(!c.ports_in_use.in_use(SwitchId(0), 2));
        assert!(!c.ports_in_use.in_use(SwitchId(9), 1), "unknown switch");
        // With leaf0's link to spine0 excluded, no entry of either end forwards through it.
        let mut inp = input(tiny());
        inp.exclusions = vec![FabricEvent::LinkDown { switch: 0x10, port: 5 }];
        let c = compute(inp).unwrap();
        assert!(!c.ports_in_use.in_use(SwitchId(0), 5));
        assert!(!c.ports_in_use.in_use(SwitchId(2), 1));
        assert!(c.ports_in_use.in_use(SwitchId(0), 6));
        // Not asked for: empty.
        let mut inp = input(tiny());
        inp.ports_in_use = false;
        let c = compute(inp).unwrap();
        assert_eq!(*c.ports_in_use, PortUse::default());
    }

    #[test]
    fn bad_exclusion_is_an_error_not_a_panic() {
        let mut inp = input(tiny());
        inp.exclusions = vec![FabricEvent::LinkDown { switch: 0x99, port: 1 }];
        let e = compute(inp).unwrap_err();
        assert!(e.to_string().contains("unknown switch GUID 0x0000000000000099"), "{e}");
    }
}
