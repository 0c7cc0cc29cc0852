//! The multicast data plane of the simulated fabric ([`MockFabric::flood_multicast`]) and its
//! partition check of unicast traces, both from the mock's own installed tables (MFT bytes,
//! P_Key tables) and physical state, never from the daemon's structures.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use fabric_southbound::{McastDelivery, TraceError, MFT_PORTS_PER_POSITION, MLID_BASE};
use fabric_topology::{EndPortId, Guid, Lid, Remote};

use crate::tables::{effective_pkeys, mft_mask, mft_positions, pkeys_match};
use crate::{read, MockFabric};

impl MockFabric {
    /// Floods one multicast packet sent by end port `src_port_guid` to `mlid` through the
    /// installed multicast forwarding tables over live links.
    ///
    /// The packet enters the switch the source hangs on by the source's port; every switch
    /// forwards one copy out of each port set in the MLID's mask, except the port the copy
    /// arrived by (port 0, the switch itself, consumes its copy and is not reported). A copy
    /// sent to a live end port over a live link is received; a copy sent over a dead link, into
    /// a dead switch or end port, or out of an uncabled port is dropped. MLIDs never written (or
    /// beyond [`MockConfig::mcast_fdb_cap`](crate::MockConfig::mcast_fdb_cap)) have an empty
    /// mask. All switch tables are read-locked for the flood, so it sees one consistent set.
    ///
    /// Errors: unknown or dead source ([`TraceError::UnknownSource`], [`TraceError::SourceDown`]),
    /// `mlid` below `0xC000` ([`TraceError::NotMulticastLid`]), and [`TraceError::McastLoop`]
    /// when the flood makes more switch visits than the fabric has switch ports (Σ (ports + 1)):
    /// a copy circulates (or the tables multiply copies as no tree does).
    pub fn flood_multicast(&self, src_port_guid: Guid, mlid: Lid) -> Result<McastDelivery, TraceError> {
        if mlid < MLID_BASE {
            return Err(TraceError::NotMulticastLid(mlid));
        }
        let topo = &self.topo;
        let src = topo
            .end_port_by_guid(src_port_guid)
            .ok_or(TraceError::UnknownSource(src_port_guid))?;
        let Some((first, in_port)) = topo.end_port(src).attach else {
            return Err(TraceError::SourceDown(src_port_guid));
        };
        let up = |a: &std::sync::atomic::AtomicBool| a.load(Ordering::SeqCst);
        if !(up(&self.end_port_up[src.idx()])
            && up(&self.switch_up[first.idx()])
            && up(&self.port_up[self.port_idx(first, in_port)]))
        {
            return Err(TraceError::SourceDown(src_port_guid));
        }
        let guards: Vec<_> = self.cells.iter().map(read).collect();
        let budget: usize = topo.switches().iter().map(|s| s.nports as usize + 1).sum();
        let mut copies = vec![0u32; topo.num_end_ports()];
        let mut queue = VecDeque::from([(first, in_port)]);
        let mut visits = 0usize;
        while let Some((sw, in_port)) = queue.pop_front() {
            let s = topo.switch(sw);
            visits += 1;
            if visits > budget {
                return Err(TraceError::McastLoop {
                    switch: s.guid,
                    lid: mlid,
                });
            }
            for pos in 0..mft_positions(s.nports) {
                let mask = mft_mask(&guards[sw.idx()], s.nports, mlid, pos);
                for bit in (0..MFT_PORTS_PER_POSITION).filter(|b| mask & (1 << b) != 0) {
                    let p = pos * MFT_PORTS_PER_POSITION + bit;
                    if p == 0 || p == in_port as usize || p > s.nports as usize {
                        continue;
                    }
                    if !up(&self.port_up[self.port_offset[sw.idx()] + p]) {
                        continue;
                    }
                    match s.ports[p].remote {
                        Remote::None => {}
                        Remote::EndPort(ep) => {
                            if up(&self.end_port_up[ep.idx()]) {
                                copies[ep.idx()] += 1;
                            }
                        }
                        Remote::Switch { sw: next, port } => {
                            if up(&self.switch_up[next.idx()]) {
                                queue.push_back((next, port));
                            }
                        }
                    }
                }
            }
        }
        Ok(McastDelivery {
            received: copies
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| (topo.end_port(EndPortId(i as u32)).port_guid, c))
                .collect(),
            switch_visits: visits,
        })
    }

    /// Whether end ports `src` and `dst` share a partition by their installed P_Key tables
    /// (never written = `0xFFFF`, so ports without tables always talk).
    pub(crate) fn check_partition(&self, src: EndPortId, dst: EndPortId) -> Result<(), TraceError> {
        let (a, b) = (self.end_port_pkeys(src), self.end_port_pkeys(dst));
        if (a.is_empty() && b.is_empty()) || pkeys_match(&effective_pkeys(&a), &effective_pkeys(&b)) {
            return Ok(());
        }
        Err(TraceError::NoSharedPartition {
            src: self.topo.end_port(src).port_guid,
            dest: self.topo.end_port(dst).port_guid,
        })
    }
}
