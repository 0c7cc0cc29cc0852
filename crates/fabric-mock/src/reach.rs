//! Packet-level checks of the simulated fabric: single traces and the all-pairs reachability
//! check, from the fabric's own LFTs, LIDs and link states (also as [`PacketSimulator`]).

use std::sync::atomic::Ordering;
use std::sync::RwLockReadGuard;

use fabric_routing::NO_ROUTE;
use fabric_southbound::{
    CounterPort, Hop, McastDelivery, PacketSimulator, PortCounters, ReachReport, TraceError, REACH_REPORT_MAX_LISTED,
};
use fabric_topology::{EndPortId, Guid, Lid, PortNum, Remote, SwitchId};
use rayon::prelude::*;

use crate::trace::{live_components, walk, StateView};
use crate::{read, MockFabric, SwitchCell};

impl MockFabric {
    /// Follows a packet from end port `src_port_guid` to `dlid` through the installed LFTs over
    /// live links. Returns the switches crossed, ending at the switch that delivers the packet to
    /// the end port owning `dlid` (any of its `2^LMC` LIDs) or consumes it (a switch's own LID).
    ///
    /// A packet delivered to an end port that shares no partition with the source by their
    /// installed P_Key tables fails with [`TraceError::NoSharedPartition`] (ports whose tables
    /// were never written are in the default partition `0xFFFF`, so without P_Key writes every
    /// pair talks). The all-pairs checks ([`MockFabric::verify_all_pairs`]) check routing only.
    pub fn trace(&self, src_port_guid: Guid, dlid: Lid) -> Result<Vec<Hop>, TraceError> {
        let ep = self
            .topo
            .end_port_by_guid(src_port_guid)
            .ok_or(TraceError::UnknownSource(src_port_guid))?;
        let view = LiveView(self);
        let Some((sw, port)) = self.topo.end_port(ep).attach else {
            return Err(TraceError::SourceDown(src_port_guid));
        };
        if !(view.end_port_up(ep) && view.switch_up(sw) && view.port_up(sw, port)) {
            return Err(TraceError::SourceDown(src_port_guid));
        }
        let lids = self.lid_table();
        let mut hops = Vec::new();
        walk(&self.topo, &view, &lids, sw, port, dlid, |h| hops.push(h))?;
        // Delivered to an end port: its P_Key table must share a partition with the source's.
        let last = hops.last().filter(|h| h.out_port != 0);
        let dsw = last.and_then(|h| Some((self.topo.switch_by_guid(h.switch)?, h.out_port)));
        if let Some((dsw, out)) = dsw {
            if let Some(Remote::EndPort(dst)) = self.topo.switch(dsw).ports.get(out as usize).map(|p| p.remote) {
                self.check_partition(ep, dst)?;
            }
        }
        Ok(hops)
    }

    /// Follows a packet sent by switch `switch` itself (port 0) to `dlid`, as a management
    /// packet from that switch would go (cf. `ibtracert`).
    pub fn trace_from_switch(&self, switch: Guid, dlid: Lid) -> Result<Vec<Hop>, TraceError> {
        let sw = self
            .topo
            .switch_by_guid(switch)
            .ok_or(TraceError::UnknownSwitch(switch))?;
        let view = LiveView(self);
        if !view.switch_up(sw) {
            return Err(TraceError::SwitchDown(switch));
        }
        let lids = self.lid_table();
        let mut hops = Vec::new();
        walk(&self.topo, &view, &lids, sw, 0, dlid, |h| hops.push(h))?;
        Ok(hops)
    }

    /// Traces every ordered pair of distinct live end ports that are physically connected over
    /// live links, to the destination's base LID (or escape LID when `use_escape`), using only
    /// the simulated fabric's own LFTs, LIDs and link states.
    ///
    /// CPU-bound and synchronous: call it from a blocking context (`spawn_blocking`), not from
    /// an async task. It runs on the rayon pool, one task per ingress switch: the LFTs route by
    /// destination only, so all sources on one switch share one walk per destination. Every
    /// switch's LFT lock is held for reading during the check, so the result is that of one
    /// consistent set of tables (concurrent uploads wait).
    pub fn verify_all_pairs(&self, use_escape: bool) -> ReachReport {
        self.check_reach(Dests::EndPorts { use_escape })
    }

    /// Traces, from every live end port, the LID of every live switch physically connected to
    /// it (switch LIDs are destinations too: LID-routed management packets and tools such as
    /// `ibtracert` must reach every switch). Same method and report as
    /// [`MockFabric::verify_all_pairs`], with switch node GUIDs as destinations.
    pub fn verify_switch_lids(&self) -> ReachReport {
        self.check_reach(Dests::Switches)
    }

    fn check_reach(&self, dests: Dests) -> ReachReport {
        let guards: Vec<_> = self.cells.iter().map(read).collect();
        let view = FrozenView {
            lft: &guards,
            port_offset: &self.port_offset,
            port_up: self.port_up.iter().map(|a| a.load(Ordering::SeqCst)).collect(),
            switch_up: self.switch_up.iter().map(|a| a.load(Ordering::SeqCst)).collect(),
            end_port_up: self.end_port_up.iter().map(|a| a.load(Ordering::SeqCst)).collect(),
        };
        let lids = self.lid_table();
        let topo = &self.topo;

        // Live end ports, grouped by ingress switch.
        let mut by_switch: Vec<Vec<EndPortId>> = vec![Vec::new(); topo.num_switches()];
        let mut live: Vec<(EndPortId, SwitchId)> = Vec::new();
        for ep in topo.end_port_ids() {
            if let Some((sw, port)) = topo.end_port(ep).attach {
                if view.end_port_up(ep) && view.switch_up(sw) && view.port_up(sw, port) {
                    by_switch[sw.idx()].push(ep);
                    live.push((ep, sw));
                }
            }
        }
        let targets: Vec<Target> = match dests {
            Dests::EndPorts { use_escape } => live
                .iter()
                .map(|&(ep, sw)| {
                    let guid = topo.end_port(ep).port_guid;
                    Target {
                        guid,
                        switch: sw,
                        end_port: Some(ep),
                        dlid: lids.dlid(ep, use_escape, guid),
                    }
                })
                .collect(),
            Dests::Switches => topo
                .switch_ids()
                .filter(|&sw| view.switch_up(sw))
                .map(|sw| {
                    let guid = topo.switch(sw).guid;
                    let dlid = match lids.switch_lid[sw.idx()] {
                        0 => Err(TraceError::NoSwitchLid(guid)),
                        lid => Ok(lid),
                    };
                    Target {
                        guid,
                        switch: sw,
                        end_port: None,
                        dlid,
                    }
                })
                .collect(),
        };
        let comp = live_components(topo, &view);
        let ingress: Vec<SwitchId> = topo.switch_ids().filter(|s| !by_switch[s.idx()].is_empty()).collect();

        #[derive(Default)]
        struct Part {
            checked: usize,
            bad: usize,
            disconnected: usize,
            /// (source, index in `targets`, why).
            listed: Vec<(EndPortId, usize, TraceError)>,
        }
        let parts: Vec<Part> = ingress
            .par_iter()
            .map(|&sw| {
                let srcs = &by_switch[sw.idx()];
                let mut part = Part::default();
                for (
                    ti,
                    Target {
                        switch: dsw,
                        end_port: dep,
                        dlid,
                        ..
                    },
                ) in targets.iter().enumerate()
                {
                    // An end port is not its own destination.
                    let n = srcs.len() - usize::from(dep.is_some() && *dsw == sw);
                    if n == 0 {
                        continue;
                    }
                    if comp[sw.idx()] != comp[dsw.idx()] {
                        part.disconnected += n;
                        continue;
                    }
                    part.checked += n;
                    let res = dlid
                        .clone()
                        .and_then(|dlid| walk(topo, &view, &lids, sw, 0, dlid, |_| {}));
                    if let Err(e) = res {
                        part.bad += n;
                        for &src in srcs.iter().filter(|&&s| Some(s) != *dep) {
                            if part.listed.len() == REACH_REPORT_MAX_LISTED {
                                break;
                            }
                            part.listed.push((src, ti, e.clone()));
                        }
                    }
                }
                part
            })
            .collect();

        let mut report = ReachReport::default();
        let mut listed = Vec::new();
        for p in parts {
            report.pairs_checked += p.checked;
            report.unreachable_count += p.bad;
            report.disconnected += p.disconnected;
            listed.extend(p.listed);
        }
        listed.sort_by_key(|(s, t, _)| (*s, *t));
        listed.truncate(REACH_REPORT_MAX_LISTED);
        report.unreachable = listed
            .into_iter()
            .map(|(s, t, e)| (topo.end_port(s).port_guid, targets[t].guid, e.to_string()))
            .collect();
        report
    }
}

/// What [`MockFabric::check_reach`] traces to.
#[derive(Clone, Copy)]
enum Dests {
    /// Every live end port's base (or escape) LID.
    EndPorts { use_escape: bool },
    /// Every live switch's LID.
    Switches,
}

/// One destination of [`MockFabric::check_reach`].
struct Target {
    /// End port GUID or switch node GUID.
    guid: Guid,
    /// The switch the end port hangs on, or the switch itself.
    switch: SwitchId,
    end_port: Option<EndPortId>,
    /// The LID traced to, or why there is none.
    dlid: Result<Lid, TraceError>,
}

/// Reads the live state, one switch lock at a time (for single traces).
struct LiveView<'a>(&'a MockFabric);

impl StateView for LiveView<'_> {
    fn lft(&self, sw: SwitchId, lid: Lid) -> u8 {
        read(&self.0.cells[sw.idx()])
            .lft
            .get(lid as usize)
            .copied()
            .unwrap_or(NO_ROUTE)
    }
    fn port_up(&self, sw: SwitchId, port: PortNum) -> bool {
        self.0.port_up[self.0.port_idx(sw, port)].load(Ordering::SeqCst)
    }
    fn switch_up(&self, sw: SwitchId) -> bool {
        self.0.switch_up[sw.idx()].load(Ordering::SeqCst)
    }
    fn end_port_up(&self, ep: EndPortId) -> bool {
        self.0.end_port_up[ep.idx()].load(Ordering::SeqCst)
    }
}

/// A frozen view: every LFT read-locked, states copied (for all-pairs checks).
struct FrozenView<'a, 'g> {
    lft: &'a [RwLockReadGuard<'g, SwitchCell>],
    port_offset: &'a [usize],
    port_up: Vec<bool>,
    switch_up: Vec<bool>,
    end_port_up: Vec<bool>,
}

impl StateView for FrozenView<'_, '_> {
    #[inline]
    fn lft(&self, sw: SwitchId, lid: Lid) -> u8 {
        self.lft[sw.idx()].lft.get(lid as usize).copied().unwrap_or(NO_ROUTE)
    }
    #[inline]
    fn port_up(&self, sw: SwitchId, port: PortNum) -> bool {
        self.port_up[self.port_offset[sw.idx()] + port as usize]
    }
    #[inline]
    fn switch_up(&self, sw: SwitchId) -> bool {
        self.switch_up[sw.idx()]
    }
    #[inline]
    fn end_port_up(&self, ep: EndPortId) -> bool {
        self.end_port_up[ep.idx()]
    }
}

/// The Trace and VerifyReachability RPCs of the daemon, answered from the simulated state.
impl PacketSimulator for MockFabric {
    fn trace(&self, src_port_guid: Guid, dlid: Lid) -> Result<Vec<Hop>, TraceError> {
        MockFabric::trace(self, src_port_guid, dlid)
    }
    fn verify_all_pairs(&self, use_escape: bool) -> ReachReport {
        MockFabric::verify_all_pairs(self, use_escape)
    }
    fn flood_multicast(&self, src_port_guid: Guid, mlid: Lid) -> Result<McastDelivery, TraceError> {
        MockFabric::flood_multicast(self, src_port_guid, mlid)
    }
    /// Adds `delta` to the port's counters ([`MockFabric::add_port_counters`]); an unknown
    /// switch, end port or port number is [`TraceError::NoCounterPort`] naming it.
    fn add_port_errors(&self, port: CounterPort, delta: &PortCounters) -> Result<(), TraceError> {
        self.add_port_counters(port, delta)
            .map(|_| ())
            .map_err(|e| TraceError::NoCounterPort(format!("{port}: {e}")))
    }
}
