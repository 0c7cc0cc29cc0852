//! The SSSP kernel ([`route_paths`]): balanced shortest paths, one destination after the
//! other, on any topology ([`PathSet::Shortest`]) or restricted to the up*/down*-legal paths of
//! an orientation ([`PathSet::UpDown`]).
//!
//! Per destination end port `d` (on leaf `λ`): every switch `s` picks the output channel
//! minimising `(hops, Σ load)` over its path to `λ`, where `load` of a directed switch-to-switch
//! channel is the number of routes (source end ports) already routed across it; then every
//! channel on the new routes gets the number of source end ports whose route to `d` crosses it.
//! This is OpenSM's `sssp` (Hoefler, Schneider, Lumsdaine, "Optimized routing for large-scale
//! InfiniBand networks", HOTI 2009; thesis ref. [41]): Dijkstra from the destination over link
//! weights initialised to `P²` (`P` = number of LIDs) so that hop count dominates, each weight
//! increased after every destination by the number of LIDs of the switches whose route crosses
//! the link. Here hop count dominates strictly (the key is the pair, not `P² · hops + load`),
//! which is the same choice whenever no path's load sum reaches `P²`.
//!
//! Because hop count dominates, the Dijkstra of one destination is a dynamic programme over the
//! DAG of "closer" channels (a channel whose remote end is one hop nearer to `λ`), visited in
//! order of distance: no heap is needed. The DAG depends only on the leaf, so it is built once
//! per leaf and reused for each of its end ports; the choice and the load update are still made
//! per end port (sharing a tree per leaf would change the balancing). Flat arrays, buffers
//! reused across destinations, no allocation per destination.

use fabric_topology::{EndPortId, Fabric, PortNum, SwitchId};

use crate::lft::NO_ROUTE;
use crate::prep::{Costs, Oriented, INF, NONE};

/// Which paths [`route_paths`] may use.
// The plain form, the loads and the channel lookup are for DFSSSP (issue #19), which layers
// the plain routes onto virtual lanes; today only the tests use them.
#[derive(Copy, Clone)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum PathSet<'a> {
    /// Every minimal-hop path of the live switch graph, on any topology. A destination-based
    /// routing on these paths may have a cyclic channel-dependency graph on one VL (a down→up
    /// turn on a degraded fat-tree, any cycle of a torus): the deadlock-free form layers these
    /// routes onto virtual lanes (DFSSSP).
    Shortest,
    /// The up*/down*-legal paths of an orientation (ranking levels, or BFS levels of Alg. 10)
    /// with the selection rule of Dmodc's fill (see [`crate::fill`]): a switch with a downward
    /// path to the leaf forwards only down, to a down neighbour with a smaller downcost;
    /// otherwise only up, to an up neighbour with a smaller cost. No route turns up after going
    /// down, so the routing is deadlock-free on one VL. Destinations: end ports of oriented
    /// leaves.
    UpDown { o: &'a Oriented, costs: &'a Costs },
}

/// Directed live switch-to-switch channels with dense ids. The channels of switch `s` are
/// `start[s]..start[s + 1]`, in port-group order (remote GUID), then port order.
pub(crate) struct Channels {
    pub start: Vec<u32>,
    /// Local port of each channel.
    pub port: Vec<PortNum>,
    /// Remote switch (index) of each channel.
    pub remote: Vec<u32>,
    /// Per switch: index in `gfirst` of its first port group.
    gstart: Vec<u32>,
    /// Per (switch, port group): the group's first channel.
    gfirst: Vec<u32>,
}

impl Channels {
    /// The channels of every live port group of `fabric`.
    pub fn new(fabric: &Fabric) -> Self {
        let ns = fabric.num_switches();
        let mut c = Channels {
            start: Vec::with_capacity(ns + 1),
            port: Vec::new(),
            remote: Vec::new(),
            gstart: Vec::with_capacity(ns + 1),
            gfirst: Vec::new(),
        };
        for s in fabric.switch_ids() {
            c.start.push(c.port.len() as u32);
            c.gstart.push(c.gfirst.len() as u32);
            for g in fabric.port_groups(s) {
                c.gfirst.push(c.port.len() as u32);
                for &p in &g.ports {
                    c.port.push(p);
                    c.remote.push(g.remote.0);
                }
            }
        }
        c.start.push(c.port.len() as u32);
        c.gstart.push(c.gfirst.len() as u32);
        c
    }

    /// Number of channels.
    pub fn len(&self) -> usize {
        self.port.len()
    }

    /// Channels of switch `s` (index).
    pub fn of_switch(&self, s: usize) -> std::ops::Range<u32> {
        self.start[s]..self.start[s + 1]
    }

    /// Channels of port group `g` (index in `Fabric::port_groups`) of switch `s`.
    fn of_group(&self, s: usize, g: usize) -> std::ops::Range<u32> {
        let gi = self.gstart[s] as usize + g;
        let end = if gi + 1 < self.gstart[s + 1] as usize {
            self.gfirst[gi + 1]
        } else {
            self.start[s + 1]
        };
        self.gfirst[gi]..end
    }

    /// Hop distances from switch `root` over the live channels (links are bidirectional, so
    /// they are the distances to it too): `hop[s]`, `u32::MAX` where unreached; `queue` is
    /// left holding the reached switches in BFS order, `root` first.
    pub fn hops_from(&self, root: usize, hop: &mut [u32], queue: &mut Vec<u32>) {
        hop.fill(u32::MAX);
        queue.clear();
        hop[root] = 0;
        queue.push(root as u32);
        let mut head = 0;
        while head < queue.len() {
            let s = queue[head] as usize;
            head += 1;
            for c in self.of_switch(s) {
                let t = self.remote[c as usize] as usize;
                if hop[t] == u32::MAX {
                    hop[t] = hop[s] + 1;
                    queue.push(t as u32);
                }
            }
        }
    }

    /// The channel of switch `s` on local port `port`, if it is a live switch-to-switch port.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn find(&self, s: SwitchId, port: PortNum) -> Option<u32> {
        self.of_switch(s.idx()).find(|&c| self.port[c as usize] == port)
    }
}

/// What [`route_paths`] leaves behind: the channels and their loads.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct Balanced {
    pub channels: Channels,
    /// Per channel: number of (source end port, destination end port) routes crossing it.
    pub load: Vec<u64>,
    /// Destinations routed, in routing order.
    pub dests: Vec<EndPortId>,
}

/// The candidate DAG of one destination leaf: switches in an order where every candidate's
/// remote end comes first (the leaf itself excluded), and each switch's candidate channels as
/// `(remote switch, channel)`.
#[derive(Default)]
struct Dag {
    order: Vec<u32>,
    cstart: Vec<u32>,
    cands: Vec<(u32, u32)>,
}

impl Dag {
    fn clear(&mut self) {
        self.order.clear();
        self.cstart.clear();
        self.cands.clear();
    }
    fn finish(&mut self) {
        self.cstart.push(self.cands.len() as u32);
    }
}

/// Hop count dominates the load sum: one hop weighs `2^48` (a load sum, at most the
/// number of pairs times the hops, stays far below it; 2^15 hops fit above it).
const HOP: u64 = 1 << 48;

/// Routes every destination end port in turn (leaves by decreasing number of live end ports,
/// then GUID; end ports in port order, as OpenSM orders its destinations), calling
/// `sink(d, next)` with `next[s]` = output port of switch `s` towards `d` (the end port's leaf
/// port on its leaf, [`NO_ROUTE`] where `s` has no path). Sequential by nature: each
/// destination sees the loads of the previous ones.
pub(crate) fn route_paths(
    fabric: &Fabric,
    paths: PathSet<'_>,
    mut sink: impl FnMut(EndPortId, &[PortNum]),
) -> Balanced {
    let ns = fabric.num_switches();
    let ch = Channels::new(fabric);
    let mut load = vec![0u64; ch.len()];
    // Destination leaves (switch index), with their dense leaf index for the up-down form.
    let mut leaves: Vec<(u32, u32)> = match paths {
        PathSet::Shortest => fabric
            .switch_ids()
            .filter(|&s| fabric.switch(s).up && fabric.is_leaf(s))
            .map(|s| (s.0, NONE))
            .collect(),
        PathSet::UpDown { o, .. } => o
            .leaves
            .iter()
            .enumerate()
            .map(|(li, &p)| (o.order[p as usize].0, li as u32))
            .collect(),
    };
    leaves.sort_by_key(|&(s, _)| {
        let sw = SwitchId(s);
        (
            std::cmp::Reverse(fabric.attached_end_ports(sw).len()),
            fabric.switch(sw).guid,
        )
    });
    // Sources per switch: its live end ports.
    let own: Vec<u64> = fabric
        .switch_ids()
        .map(|s| fabric.attached_end_ports(s).len() as u64)
        .collect();
    let mut dag = Dag::default();
    let mut key = vec![u64::MAX; ns];
    let mut choice = vec![u32::MAX; ns];
    let mut flow = vec![0u64; ns];
    let mut next = vec![NO_ROUTE; ns];
    let mut hop = vec![0u32; ns];
    let mut scratch: Vec<u32> = Vec::new();
    let mut dests = Vec::new();
    for &(leaf, li) in &leaves {
        match paths {
            PathSet::Shortest => shortest_dag(&ch, leaf, &mut hop, &mut scratch, &mut dag),
            PathSet::UpDown { o, costs } => updown_dag(&ch, o, costs, li, &mut scratch, &mut dag),
        }
        next.fill(NO_ROUTE);
        let lw = leaf as usize;
        for &ep in fabric.attached_end_ports(SwitchId(leaf)) {
            // Minimal (hops, load) per switch, in DAG order.
            key[lw] = 0;
            for (i, &s) in dag.order.iter().enumerate() {
                let mut best = u64::MAX;
                let mut bc = u32::MAX;
                for &(t, c) in &dag.cands[dag.cstart[i] as usize..dag.cstart[i + 1] as usize] {
                    let v = key[t as usize] + load[c as usize] + HOP;
                    if v < best {
                        best = v;
                        bc = c;
                    }
                }
                key[s as usize] = best;
                choice[s as usize] = bc;
                next[s as usize] = ch.port.get(bc as usize).copied().unwrap_or(NO_ROUTE);
            }
            next[lw] = fabric.end_port(ep).attach.map_or(NO_ROUTE, |(_, p)| p);
            // Load update: sources flow down the new tree, farthest switches first.
            for &s in dag.order.iter().rev() {
                let s = s as usize;
                let f = flow[s] + own[s];
                flow[s] = 0;
                if f > 0 && choice[s] != u32::MAX {
                    let c = choice[s] as usize;
                    load[c] += f;
                    flow[ch.remote[c] as usize] += f;
                }
            }
            flow[lw] = 0;
            sink(ep, &next);
            dests.push(ep);
        }
    }
    Balanced {
        channels: ch,
        load,
        dests,
    }
}

/// DAG of minimal-hop paths to `leaf` in the live switch graph (BFS from the leaf; a switch's
/// candidates are its channels towards switches one hop nearer). `hop` is scratch.
fn shortest_dag(ch: &Channels, leaf: u32, hop: &mut [u32], queue: &mut Vec<u32>, dag: &mut Dag) {
    dag.clear();
    ch.hops_from(leaf as usize, hop, queue);
    for &s in &queue[1..] {
        let s = s as usize;
        dag.order.push(s as u32);
        dag.cstart.push(dag.cands.len() as u32);
        for c in ch.of_switch(s) {
            let t = ch.remote[c as usize];
            if hop[t as usize] + 1 == hop[s] {
                dag.cands.push((t, c));
            }
        }
    }
    dag.finish();
}

/// DAG of the up*/down*-legal paths to leaf `li` with Dmodc's fill rule: switches with a
/// downward path first (by downcost), then the others (by cost); a down-phase switch's
/// candidates are its down groups with a smaller downcost, an up-phase switch's its up groups
/// with a smaller cost. `buf` is scratch.
fn updown_dag(ch: &Channels, o: &Oriented, c: &Costs, li: u32, buf: &mut Vec<u32>, dag: &mut Dag) {
    dag.clear();
    let nl = c.nleaves;
    let li = li as usize;
    let lp = o.leaves[li] as usize;
    let down = |p: usize| c.down[p * nl + li];
    let full = |p: usize| c.full[p * nl + li];
    // Sort key: phase (down first), then cost, then position.
    buf.clear();
    buf.extend((0..o.len() as u32).filter(|&p| p as usize != lp && full(p as usize) != INF));
    buf.sort_by_key(|&p| {
        let p = p as usize;
        if down(p) != INF {
            (0u8, down(p), p)
        } else {
            (1u8, full(p), p)
        }
    });
    for &p in buf.iter() {
        let p = p as usize;
        let s = o.order[p].idx();
        dag.order.push(s as u32);
        dag.cstart.push(dag.cands.len() as u32);
        if down(p) != INF {
            for nb in o.downs(p) {
                if down(nb.pos as usize) < down(p) {
                    let t = o.order[nb.pos as usize].0;
                    dag.cands.extend(ch.of_group(s, nb.group as usize).map(|c| (t, c)));
                }
            }
        } else {
            for nb in o.ups(p) {
                if full(nb.pos as usize) < full(p) {
                    let t = o.order[nb.pos as usize].0;
                    dag.cands.extend(ch.of_group(s, nb.group as usize).map(|c| (t, c)));
                }
            }
        }
    }
    dag.finish();
}
