//! SSSP: balanced shortest-path routing (Hoefler, Schneider, Lumsdaine, "Optimized routing for
//! large-scale InfiniBand networks", HOTI 2009 — the thesis' ref. [41], compared with Dmodc in
//! §4.3 and §5.2; OpenSM's `sssp` engine, the routing half of `dfsssp`).
//!
//! Destinations are routed one after the other (leaves by decreasing number of end ports, then
//! GUID; end ports in port order). For each destination end port every switch takes the path of
//! minimal `(hops, Σ load)`, where the load of a directed switch-to-switch channel is the number
//! of routes (source end ports) already routed across it; then every channel of the new routes
//! is charged with the number of source end ports whose route crosses it, so that the next
//! destinations avoid the loaded channels. Destination-based: one output port per (switch,
//! destination LID). The kernel is [`route_paths`] (see [`paths`] for the exact weights and
//! their relation to OpenSM's `P²`-initialised Dijkstra).
//!
//! **Two forms.** Plain SSSP ([`PathSet::Shortest`]) takes any minimal-hop path of any topology;
//! on a degraded fat-tree such a path may turn up after going down, so its channel-dependency
//! graph may be cyclic on one VL: it is the input of DFSSSP, which layers the routes onto
//! virtual lanes. The [`Sssp`] engine (`sssp`) is the up*/down*-legal form
//! ([`PathSet::UpDown`]): the same balancing restricted, like Dmodc's fill, to the paths that go
//! up then down (a switch with a downward path to the destination leaf forwards only down), so it
//! is deadlock-free on one VL. On a fat-tree, intact or degraded, every minimal path is of that
//! kind wherever an up-down path exists; the restriction only removes the down→up shortcuts.
//!
//! **Directions.** The ranking's levels when, in every connected component, every pair of live
//! leaves has an up-down path for them (fat-trees, intact or degraded while up-down connected);
//! otherwise (a fabric the ranking cannot orient into a fat-tree, or a degraded one that lost
//! up-down connectivity) the BFS directions of Up*/Down* (thesis Alg. 10, [`bfs_levels`]), which
//! route every connected pair of any topology. [`updown_frame`] makes that choice; RandSP
//! shares it.
//!
//! Switch LIDs are routed along up-down paths of the same directions ([`crate::swlid`]).
//!
//! [`bfs_levels`]: crate::updown::bfs_levels

mod paths;
#[cfg(test)]
mod tests;

#[allow(unused_imports)]
pub(crate) use paths::{route_paths, Balanced, Channels, PathSet};

use fabric_topology::{Fabric, SwitchId};

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::lft::{Lfts, NO_ROUTE};
use crate::prep::{self, Costs, Oriented, INF};
use crate::swlid;
use crate::updown::bfs_levels;

/// The SSSP engine: balanced shortest paths, up*/down*-legal (see the module documentation).
#[derive(Copy, Clone, Debug, Default)]
pub struct Sssp;

impl RoutingEngine for Sssp {
    fn name(&self) -> &'static str {
        "sssp"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        let f = ctx.fabric;
        let frame = updown_frame(f, &ctx.ranking.level);
        write_paths(
            ctx,
            set,
            PathSet::UpDown {
                o: &frame.o,
                costs: &frame.costs,
            },
            lfts,
        );
        if set == LidSet::Base {
            swlid::fill_switch_lids(f, ctx.lids, &frame.o, lfts);
        }
        Ok(())
    }
}

/// Writes the end-port entries of `set` from [`route_paths`] over `paths` (every switch's next
/// hop per destination end port) and [`NO_ROUTE`] for the end ports it leaves unrouted; shared
/// by [`Sssp`] and DFSSSP ([`crate::dfsssp`]).
pub(crate) fn write_paths(ctx: &RoutingContext<'_>, set: LidSet, paths: PathSet<'_>, lfts: &mut Lfts) {
    let f = ctx.fabric;
    let off = set.offset(ctx.lids);
    let mut routed = vec![false; f.num_end_ports()];
    route_paths(f, paths, |ep, next| {
        let base = ctx.lids.base_lid(ep);
        if base == 0 {
            return;
        }
        routed[ep.idx()] = true;
        for (s, &port) in next.iter().enumerate() {
            lfts.set(SwitchId(s as u32), base + off, port);
        }
    });
    for ep in f.end_port_ids().filter(|ep| !routed[ep.idx()]) {
        let base = ctx.lids.base_lid(ep);
        if base != 0 {
            for s in f.switch_ids() {
                lfts.set(s, base + off, NO_ROUTE);
            }
        }
    }
}

/// Link directions for the up*/down*-legal engines (SSSP, RandSP), with the orientation and
/// costs they induce.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct UpDownFrame {
    /// Level per switch (`None`: not used).
    pub level: Vec<Option<u32>>,
    pub o: Oriented,
    pub costs: Costs,
    /// Whether the levels are the ranking's (else BFS levels, Alg. 10).
    pub from_ranking: bool,
}

/// The ranking's levels `ranking` when they make every pair of live leaves of a connected
/// component up-down connected (and rank every live leaf); otherwise BFS levels (Alg. 10).
pub(crate) fn updown_frame(fabric: &Fabric, ranking: &[Option<u32>]) -> UpDownFrame {
    // A live leaf without a level (a fabric the ranking cannot orient, as every direct
    // topology): BFS levels, without orienting the ranking first.
    if !unranked_live_leaf(fabric, ranking) {
        let o = Oriented::new(fabric, ranking);
        let costs = prep::costs(&o);
        if updown_connected(fabric, ranking, &o, &costs) {
            return UpDownFrame {
                level: ranking.to_vec(),
                o,
                costs,
                from_ranking: true,
            };
        }
    }
    let level = bfs_levels(fabric);
    let o = Oriented::new(fabric, &level);
    let costs = prep::costs(&o);
    UpDownFrame {
        level,
        o,
        costs,
        from_ranking: false,
    }
}

/// Whether every live leaf is oriented and every pair of live leaves in one connected component
/// of the live switch graph has a finite up-down cost.
fn updown_connected(fabric: &Fabric, level: &[Option<u32>], o: &Oriented, c: &Costs) -> bool {
    if unranked_live_leaf(fabric, level) {
        return false;
    }
    let comp = components(fabric);
    let leaf_comp: Vec<u32> = o.leaves.iter().map(|&p| comp[o.order[p as usize].idx()]).collect();
    o.leaves.iter().enumerate().all(|(i, &p)| {
        let row = c.full_row(p as usize);
        row.iter()
            .zip(&leaf_comp)
            .all(|(&v, &cj)| v != INF || cj != leaf_comp[i])
    })
}

/// Whether a live leaf has no level.
fn unranked_live_leaf(fabric: &Fabric, level: &[Option<u32>]) -> bool {
    fabric
        .switch_ids()
        .any(|s| fabric.switch(s).up && fabric.is_leaf(s) && level.get(s.idx()).copied().flatten().is_none())
}

/// Connected component id of every live switch (`u32::MAX` for dead ones).
fn components(fabric: &Fabric) -> Vec<u32> {
    let mut comp = vec![u32::MAX; fabric.num_switches()];
    let mut stack = Vec::new();
    let mut next = 0;
    for s in fabric.switch_ids().filter(|&s| fabric.switch(s).up) {
        if comp[s.idx()] != u32::MAX {
            continue;
        }
        comp[s.idx()] = next;
        stack.push(s);
        while let Some(a) = stack.pop() {
            for g in fabric.port_groups(a) {
                if comp[g.remote.idx()] == u32::MAX {
                    comp[g.remote.idx()] = next;
                    stack.push(g.remote);
                }
            }
        }
        next += 1;
    }
    comp
}
