//! Packet tracing through the simulated fabric: follow the installed LFT bytes hop by hop over
//! live links, and the all-pairs reachability check built on it.

use fabric_routing::NO_ROUTE;
use fabric_southbound::{Hop, TraceError};
use fabric_topology::{EndPortId, Fabric, Guid, Lid, PortNum, Remote, SwitchId};

/// LIDs installed in the simulated fabric, by the mock's dense ids (0 = no LID).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LidTable {
    pub lmc: u8,
    pub switch_lid: Vec<Lid>,
    pub end_port_base: Vec<Lid>,
}

impl LidTable {
    pub fn unassigned(num_switches: usize, num_end_ports: usize) -> Self {
        LidTable {
            lmc: 0,
            switch_lid: vec![0; num_switches],
            end_port_base: vec![0; num_end_ports],
        }
    }
    /// Whether `lid` is one of the `2^lmc` LIDs of end port `ep`.
    #[inline]
    pub fn end_port_owns(&self, ep: EndPortId, lid: Lid) -> bool {
        let base = self.end_port_base[ep.idx()];
        base != 0 && lid >= base && u64::from(lid - base) < (1u64 << self.lmc)
    }
    /// Destination LID of an end port: base, or escape (the last offset, base + `2^lmc − 1`)
    /// when `escape`.
    pub fn dlid(&self, ep: EndPortId, escape: bool, guid: Guid) -> Result<Lid, TraceError> {
        let base = self.end_port_base[ep.idx()];
        if base == 0 {
            return Err(TraceError::NoLid(guid));
        }
        if escape {
            if self.lmc == 0 {
                return Err(TraceError::NoEscapeLid(guid));
            }
            return Ok(base + (1 << self.lmc.min(7)) - 1);
        }
        Ok(base)
    }
}

/// The mutable part of the simulated fabric as seen by a walk (live or frozen).
pub(crate) trait StateView {
    /// LFT entry of `sw` for `lid` ([`NO_ROUTE`] beyond the installed table).
    fn lft(&self, sw: SwitchId, lid: Lid) -> u8;
    /// Physical state of port `port` of `sw` (the same on both ends of a cable).
    fn port_up(&self, sw: SwitchId, port: PortNum) -> bool;
    fn switch_up(&self, sw: SwitchId) -> bool;
    fn end_port_up(&self, ep: EndPortId) -> bool;
}

/// Follows the LFTs from switch `start` (entered by `in_port`) towards `dlid`, calling `on_hop`
/// for every switch crossed. Succeeds when the packet reaches the owner of `dlid`: an end port
/// owning it, or a switch whose LID it is (LFT entry 0).
///
/// The next switch depends only on the current one, so a walk that crosses more switches than
/// the fabric has is in a loop, and the switch reached at that point lies on the cycle: no
/// visited set is needed and the walk allocates nothing.
pub(crate) fn walk<V: StateView>(
    fabric: &Fabric,
    view: &V,
    lids: &LidTable,
    start: SwitchId,
    in_port: PortNum,
    dlid: Lid,
    mut on_hop: impl FnMut(Hop),
) -> Result<(), TraceError> {
    let n = fabric.num_switches();
    let mut sw = start;
    let mut in_port = in_port;
    let mut crossed = 0usize;
    loop {
        let s = fabric.switch(sw);
        if crossed == n {
            return Err(TraceError::Loop {
                switch: s.guid,
                lid: dlid,
            });
        }
        crossed += 1;
        let out = view.lft(sw, dlid);
        let hop = Hop {
            switch: s.guid,
            in_port,
            out_port: out,
        };
        if out == NO_ROUTE {
            return Err(TraceError::NoRoute {
                switch: s.guid,
                lid: dlid,
            });
        }
        if out == 0 {
            if lids.switch_lid[sw.idx()] == dlid {
                on_hop(hop);
                return Ok(());
            }
            return Err(TraceError::DeliveredToSwitch {
                switch: s.guid,
                lid: dlid,
            });
        }
        let Some(port) = s.ports.get(out as usize) else {
            return Err(TraceError::InvalidPort {
                switch: s.guid,
                port: out,
                lid: dlid,
            });
        };
        match port.remote {
            Remote::None => {
                return Err(TraceError::NotCabled {
                    switch: s.guid,
                    port: out,
                    lid: dlid,
                })
            }
            Remote::EndPort(ep) => {
                if !view.port_up(sw, out) {
                    return Err(TraceError::DeadLink {
                        switch: s.guid,
                        port: out,
                        lid: dlid,
                    });
                }
                let e = fabric.end_port(ep);
                if !lids.end_port_owns(ep, dlid) {
                    return Err(TraceError::WrongEndPort {
                        switch: s.guid,
                        port: out,
                        lid: dlid,
                        reached: e.port_guid,
                    });
                }
                if !view.end_port_up(ep) {
                    return Err(TraceError::DestinationDown {
                        switch: s.guid,
                        port: out,
                        lid: dlid,
                        dest: e.port_guid,
                    });
                }
                on_hop(hop);
                return Ok(());
            }
            Remote::Switch {
                sw: next,
                port: next_port,
            } => {
                if !view.port_up(sw, out) || !view.switch_up(next) {
                    return Err(TraceError::DeadLink {
                        switch: s.guid,
                        port: out,
                        lid: dlid,
                    });
                }
                on_hop(hop);
                sw = next;
                in_port = next_port;
            }
        }
    }
}

/// Connected components of the live switch graph (dead switches are singletons).
pub(crate) fn live_components<V: StateView>(fabric: &Fabric, view: &V) -> Vec<u32> {
    let n = fabric.num_switches();
    let mut parent: Vec<u32> = (0..n as u32).collect();
    fn find(parent: &mut [u32], mut x: u32) -> u32 {
        while parent[x as usize] != x {
            let p = parent[x as usize];
            parent[x as usize] = parent[p as usize];
            x = p;
        }
        x
    }
    for sid in fabric.switch_ids() {
        if !view.switch_up(sid) {
            continue;
        }
        for (pn, p) in fabric.switch(sid).external_ports() {
            if let Remote::Switch { sw: r, .. } = p.remote {
                if r != sid && view.switch_up(r) && view.port_up(sid, pn) {
                    let (a, b) = (find(&mut parent, sid.0), find(&mut parent, r.0));
                    if a != b {
                        parent[a.max(b) as usize] = a.min(b);
                    }
                }
            }
        }
    }
    (0..n as u32).map(|x| find(&mut parent, x)).collect()
}
