//! `balanced[:V]`: load-balanced routing of any topology, deadlock-free within a budget of `V`
//! virtual lanes (issue #19). Nue-like (Domke, Hoefler, Matsuoka, "Routing on the Dependency
//! Graph: A New Approach to Deadlock-Free High-Performance Routing", HPDC 2016): the routes of
//! each VL are chosen *inside* that VL's channel-dependency graph, so no cycle is ever created
//! and no cycle breaking is needed afterwards; our own simplified implementation.
//!
//! 1. **VLs.** The destinations (end-port base LIDs and switch LIDs, [`crate::vl::base_lids`])
//!    are split over `V` VLs by destination switch, contiguous blocks of leaves ([`VlPlan`], a
//!    function of the fabric and the LID plan alone).
//! 2. **CDGs.** Per VL a channel-dependency graph over the directed live switch-to-switch
//!    channels, kept acyclic by an incremental topological order (Pearce–Kelly, [`cdg`]), the
//!    dependencies reference-counted (one reference per switch whose route induces it).
//! 3. **Escape.** A BFS spanning forest (from the lowest live switch of each component): the
//!    turns of its up-then-down tree paths are put in every VL's CDG first (acyclic: up channels
//!    by decreasing depth, then down channels by increasing depth).
//! 4. **Trees.** Per destination (on switch `t`), a tree grown from `t` outwards, Dijkstra-like
//!    over candidate channels keyed by (hops, path load): a switch `u` takes channel `u → v`
//!    towards the already-routed `v` only if the dependency `(u → v) → (v → next(v))` keeps the
//!    VL's CDG acyclic; the first legal candidate popped wins, so a minimal-hop candidate is
//!    always preferred, then the least loaded path (load = source end ports routed across a
//!    channel so far, as DFSSSP's weights), and a longer path is taken only when no shorter
//!    candidate is legal. If a switch of the component is left without any legal candidate,
//!    the destination's dependencies are withdrawn and the whole destination is routed on the
//!    escape tree (always legal: its turns are in every CDG).
//! 5. **Rip-up and reroute.** [`REROUTE_ROUNDS`] rounds over every destination: its loads and
//!    dependencies are removed and it is routed again against the others' loads; the state of
//!    least (max channel load, total load) is kept (every state is consistent with its CDGs).
//!
//! Sequential and deterministic (no hashing, no randomness; the thread count is irrelevant).
//! The installed layering ([`crate::vl_layering`]) puts every route on its destination's VL
//! ([`layering`]) and checks each layer's CDG on the installed tables; if the validity repair
//! changed routes so that a layer is cyclic, it falls back to DFSSSP's cycle breaking.

pub(crate) mod cdg;
mod kernel;
mod plan;
#[cfg(test)]
mod tests;

pub use kernel::REROUTE_ROUNDS;
pub use plan::{VlPlan, NO_VL};

use fabric_topology::{Fabric, SwitchId};

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::lft::{Lfts, NO_ROUTE};
use crate::lid::LidPlan;
use crate::sssp::Channels;
use crate::vl::{self, VlError, VlLayering};

/// Default VL budget of `balanced` without `:V`: the base layers of 8 data VLs with one kept
/// for the escape LIDs (fabricctl's default `--max-vls 8`).
pub const BALANCED_DEFAULT_VLS: u8 = 7;

/// Highest VL budget of `balanced:V`.
pub const BALANCED_MAX_VLS: u8 = 8;

/// The balanced engine with a budget of `vls` VLs (see the module documentation).
#[derive(Copy, Clone, Debug)]
pub struct Balanced {
    /// VL budget (1..=[`BALANCED_MAX_VLS`]).
    pub vls: u8,
}

/// Statistics of one balanced routing.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BalancedStats {
    /// Destinations routed.
    pub destinations: usize,
    /// Destinations that had to be routed on the escape tree.
    pub escaped: usize,
    /// Routes (switch, destination) longer than a minimal-hop path.
    pub longer: usize,
    /// Highest all-to-all load of a switch-to-switch channel.
    pub max_load: u64,
}

impl Balanced {
    /// Routes the base LIDs and returns the routing's statistics.
    pub fn route_stats(&self, ctx: &RoutingContext<'_>, lfts: &mut Lfts) -> Result<BalancedStats, RoutingError> {
        check_route_args(ctx, LidSet::Base, lfts)?;
        let f = ctx.fabric;
        let plan = VlPlan::new(f, ctx.lids, self.vls);
        let r = kernel::route(f, &plan);
        write_next_hops(f, ctx.lids, &plan, &r.next, &r.ch, lfts);
        Ok(BalancedStats {
            destinations: plan.len(),
            escaped: r.escaped,
            longer: kernel::longer_than_minimal(f, &plan, &r),
            max_load: r.max_load,
        })
    }
}

impl RoutingEngine for Balanced {
    fn name(&self) -> &'static str {
        "balanced"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        if set == LidSet::Escape {
            return Err(RoutingError::Unsupported {
                engine: "balanced",
                reason: "it routes the base LIDs; the escape LIDs are Up*/Down*'s".to_string(),
            });
        }
        self.route_stats(ctx, lfts).map(|_| ())
    }
}

/// The layering of tables routed by `balanced:V`: every route (switch, destination LID of
/// [`vl::base_lids`]) on its destination's VL ([`VlPlan`]). `Ok(Some)` when every layer's
/// CDG is acyclic on these tables ([`vl::cdg_acyclic_per_layer`]); `Ok(None)` when a layer is
/// cyclic (the validity repair changed routes) — the caller then falls back to DFSSSP's cycle
/// breaking.
pub fn layering(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, vls: u8) -> Result<Option<VlLayering>, VlError> {
    let plan = VlPlan::new(fabric, lids, vls);
    let dl = vl::base_lids(fabric, lids);
    let (ns, row_len) = (fabric.num_switches(), lfts.row_len());
    if lfts.num_switches() < ns {
        return Err(VlError::TablesTooSmall {
            have_switches: lfts.num_switches(),
            have_lids: row_len,
            switches: ns,
            lid: 0,
        });
    }
    if let Some(&l) = dl.iter().find(|&&l| l as usize >= row_len) {
        return Err(VlError::TablesTooSmall {
            have_switches: lfts.num_switches(),
            have_lids: row_len,
            switches: ns,
            lid: l,
        });
    }
    let mut layer = vec![0u8; ns * row_len];
    let mut per = vec![0u64; usize::from(plan.vls)];
    for &l in &dl {
        let v = plan.vl_of(l);
        if v == NO_VL {
            continue;
        }
        for s in fabric.switch_ids().filter(|&s| fabric.switch(s).up) {
            let p = lfts.get(s, l);
            if p != 0 && p != NO_ROUTE {
                layer[s.idx() * row_len + l as usize] = v;
                per[usize::from(v)] += 1;
            }
        }
    }
    let used = per.iter().rposition(|&n| n > 0).map_or(0, |i| i + 1);
    per.truncate(used);
    let l = VlLayering {
        num_layers: used as u8,
        needed: used as u8,
        num_tables: 1,
        num_switches: ns,
        row_len,
        layer,
        routes_per_layer: per,
    };
    let ok = vl::cdg_acyclic_per_layer(fabric, &[lfts], &dl, &l);
    Ok(ok.iter().all(|&x| x).then_some(l))
}

/// Writes a per-destination next-hop matrix (`next[d * switches + s]`: the channel switch `s`
/// takes towards destination `d` of `plan`, `u32::MAX` for none) into `lfts` for the base LIDs
/// (and switch LIDs), and "no route" for the LIDs `plan` does not route (dead switches, end
/// ports without a live attachment). Shared by `balanced` and `mu-sssp`.
pub(crate) fn write_next_hops(f: &Fabric, lids: &LidPlan, plan: &VlPlan, next: &[u32], ch: &Channels, lfts: &mut Lfts) {
    let ns = f.num_switches();
    for (d, dest) in plan.dests.iter().enumerate() {
        let next = &next[d * ns..(d + 1) * ns];
        let t = dest.switch as usize;
        for (s, &nx) in next.iter().enumerate() {
            let port = if s == t {
                dest.port
            } else {
                match nx {
                    u32::MAX => NO_ROUTE,
                    x => ch.port[x as usize],
                }
            };
            lfts.set(SwitchId(s as u32), dest.lid, port);
            if dest.switch_lid != 0 {
                lfts.set(SwitchId(s as u32), dest.switch_lid, if s == t { 0 } else { port });
            }
        }
    }
    for l in vl::base_lids(f, lids) {
        if plan.vl_of(l) == NO_VL {
            for s in f.switch_ids() {
                lfts.set(s, l, NO_ROUTE);
            }
        }
    }
}
