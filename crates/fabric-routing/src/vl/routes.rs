//! The routes of a set of tables as dependency lists: each route's CDG edges (consecutive
//! switch-to-switch channels), the edges' endpoints, and for each edge the routes inducing it.

use fabric_topology::{Fabric, Lid, SwitchId};

use super::VlError;
use crate::lft::{Lfts, NO_ROUTE};

/// Dense ids of the directed live switch-to-switch channels, as `(switch × 256 + port)` lookups.
/// The channels of a switch have consecutive ids (in port order).
pub(super) struct ChannelMap {
    /// Channel id of (switch, port), or `u32::MAX`.
    pub chan: Vec<u32>,
    /// Remote switch of (switch, port) when it is a channel.
    pub remote: Vec<u32>,
    pub nchan: usize,
    /// First channel of each switch (`num_switches + 1` entries).
    pub first: Vec<u32>,
    /// Most channels of one switch.
    pub max_degree: usize,
}

impl ChannelMap {
    pub fn new(fabric: &Fabric) -> Self {
        let ns = fabric.num_switches();
        let mut chan = vec![u32::MAX; ns * 256];
        let mut remote = vec![u32::MAX; ns * 256];
        let mut first = Vec::with_capacity(ns + 1);
        let mut max_degree = 0;
        let mut n = 0u32;
        for s in fabric.switch_ids() {
            first.push(n);
            for p in 1..=fabric.switch(s).nports {
                if let Some((t, _)) = fabric.switch_link_live(s, p) {
                    chan[s.idx() * 256 + p as usize] = n;
                    remote[s.idx() * 256 + p as usize] = t.0;
                    n += 1;
                }
            }
            max_degree = max_degree.max((n - first[s.idx()]) as usize);
        }
        first.push(n);
        ChannelMap {
            chan,
            remote,
            nchan: n as usize,
            first,
            max_degree,
        }
    }

    /// Walks the route of `lfts` from `s` to `lid`, calling `f` with each channel taken; `Err`
    /// when it is longer than the number of switches (a loop).
    pub fn walk(&self, lfts: &Lfts, s: u32, lid: Lid, mut f: impl FnMut(u32)) -> Result<(), VlError> {
        let ns = lfts.num_switches();
        let mut cur = s;
        let mut hops = 0;
        loop {
            let p = lfts.get(SwitchId(cur), lid);
            if p == 0 || p == NO_ROUTE {
                return Ok(());
            }
            let k = cur as usize * 256 + p as usize;
            let c = self.chan[k];
            if c == u32::MAX {
                return Ok(());
            }
            f(c);
            hops += 1;
            if hops > ns {
                return Err(VlError::Loop { switch: s, lid });
            }
            cur = self.remote[k];
        }
    }
}

/// One route: table, source switch, destination LID.
#[derive(Copy, Clone, Debug)]
pub(super) struct Route {
    pub table: u32,
    pub src: u32,
    pub lid: Lid,
}

/// The routes and their CDG edges.
pub(super) struct Routes {
    pub num_switches: usize,
    pub row_len: usize,
    pub routes: Vec<Route>,
    /// Sources a route carries: end ports attached to its switch, + the switch itself.
    pub weight: Vec<u32>,
    /// Route `i`'s edges: `dep[dstart[i]..dstart[i + 1]]`.
    pub dstart: Vec<u32>,
    pub dep: Vec<u32>,
    /// Number of channels (CDG nodes).
    pub nchan: usize,
    /// Edge `e` goes from channel `efrom[e]` to channel `eto[e]`.
    pub efrom: Vec<u32>,
    pub eto: Vec<u32>,
    /// Routes inducing edge `e`: `eroutes[estart[e]..estart[e + 1]]`.
    pub estart: Vec<u32>,
    pub eroutes: Vec<u32>,
}

impl Routes {
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    pub fn deps(&self, r: usize) -> &[u32] {
        &self.dep[self.dstart[r] as usize..self.dstart[r + 1] as usize]
    }

    pub fn routes_of(&self, e: usize) -> &[u32] {
        &self.eroutes[self.estart[e] as usize..self.estart[e + 1] as usize]
    }

    /// Every route of `tables` from a live switch towards a LID of `dlids` that leaves the
    /// switch (deliveries and holes are not routes), in (table, LID, switch) order.
    pub fn collect(fabric: &Fabric, tables: &[&Lfts], dlids: &[Lid]) -> Result<Self, VlError> {
        let ns = fabric.num_switches();
        let row_len = tables.first().map_or(0, |t| t.row_len());
        for t in tables {
            if t.row_len() != row_len || t.num_switches() != tables[0].num_switches() {
                return Err(VlError::ShapeMismatch);
            }
            if t.num_switches() < ns {
                return Err(VlError::TablesTooSmall {
                    have_switches: t.num_switches(),
                    have_lids: row_len,
                    switches: ns,
                    lid: 0,
                });
            }
        }
        if let Some(&l) = dlids.iter().find(|&&l| l as usize >= row_len) {
            return Err(VlError::TablesTooSmall {
                have_switches: tables.first().map_or(0, |t| t.num_switches()),
                have_lids: row_len,
                switches: ns,
                lid: l,
            });
        }
        let cm = ChannelMap::new(fabric);
        let live: Vec<u32> = fabric
            .switch_ids()
            .filter(|&s| fabric.switch(s).up)
            .map(|s| s.0)
            .collect();
        let own: Vec<u32> = fabric
            .switch_ids()
            .map(|s| fabric.attached_end_ports(s).len() as u32 + 1)
            .collect();
        let mut out = Routes {
            num_switches: ns,
            row_len,
            routes: Vec::new(),
            weight: Vec::new(),
            dstart: vec![0],
            dep: Vec::new(),
            nchan: cm.nchan,
            efrom: Vec::new(),
            eto: Vec::new(),
            estart: Vec::new(),
            eroutes: Vec::new(),
        };
        // Edge ids: a dense table (channel × successor slot), the slot of successor `b` of
        // channel `a` being `b`'s rank among the channels of `a`'s remote switch.
        let deg = cm.max_degree.max(1);
        let mut etab = vec![u32::MAX; cm.nchan * deg];
        // Per destination: each live switch's first channel towards it (`u32::MAX`: delivered
        // or not a switch-to-switch port) and the switch it leads to, read from the tables
        // once; the routes then follow these arrays.
        let mut first = vec![u32::MAX; ns];
        let mut next = vec![u32::MAX; ns];
        let nroutes = tables.len() * dlids.len() * live.len();
        out.routes.reserve(nroutes);
        out.weight.reserve(nroutes);
        out.dstart.reserve(nroutes);
        for (ti, t) in tables.iter().enumerate() {
            for &d in dlids {
                for &s in &live {
                    let p = t.get(SwitchId(s), d);
                    let (c, n) = if p == 0 || p == NO_ROUTE {
                        (u32::MAX, u32::MAX)
                    } else {
                        let k = s as usize * 256 + p as usize;
                        (cm.chan[k], cm.remote[k])
                    };
                    first[s as usize] = c;
                    next[s as usize] = n;
                }
                for &s in &live {
                    let p = t.get(SwitchId(s), d);
                    if p == 0 || p == NO_ROUTE {
                        continue;
                    }
                    out.routes.push(Route {
                        table: ti as u32,
                        src: s,
                        lid: d,
                    });
                    out.weight.push(own[s as usize]);
                    // The route's channels: a, then b = first[next] while it is a channel.
                    let mut a = first[s as usize];
                    if a != u32::MAX {
                        let mut u = next[s as usize];
                        let mut hops = 1;
                        loop {
                            let b = first[u as usize];
                            if b == u32::MAX {
                                break;
                            }
                            hops += 1;
                            if hops > ns {
                                return Err(VlError::Loop { switch: s, lid: d });
                            }
                            let slot = a as usize * deg + (b - cm.first[u as usize]) as usize;
                            let mut e = etab[slot];
                            if e == u32::MAX {
                                e = out.efrom.len() as u32;
                                out.efrom.push(a);
                                out.eto.push(b);
                                etab[slot] = e;
                            }
                            out.dep.push(e);
                            a = b;
                            u = next[u as usize];
                        }
                    }
                    out.dstart.push(out.dep.len() as u32);
                }
            }
        }
        // Edge → routes (CSR, routes in order).
        let ne = out.efrom.len();
        let mut start = vec![0u32; ne + 1];
        for &e in &out.dep {
            start[e as usize + 1] += 1;
        }
        for i in 0..ne {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut er = vec![0u32; out.dep.len()];
        for r in 0..out.routes.len() {
            for k in out.dstart[r]..out.dstart[r + 1] {
                let e = out.dep[k as usize] as usize;
                er[fill[e] as usize] = r as u32;
                fill[e] += 1;
            }
        }
        out.estart = start;
        out.eroutes = er;
        Ok(out)
    }
}
