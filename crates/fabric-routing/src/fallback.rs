//! Never install an invalid routing silently: [`check_and_repair`] checks a routed snapshot
//! (every connected pair of live end ports, base LIDs — every layer offset with LMC ≥ 2 — and
//! escape LIDs) in `O(switches × LIDs)` with
//! [`check::destination_check`], and when the base engine left destinations unreachable from
//! sources that are connected to them, re-routes those destinations with Up*/Down*, splices
//! their entries (every switch, those LIDs) into the tables and checks again.
//!
//! Up*/Down* over a BFS spanning tree reaches every pair of a connected component, but its
//! routes are up*-down* for the BFS orientation, not for the ranking the base engine used: a
//! mix of the two can close a cycle in the channel-dependency graph of the base LIDs (which
//! share one VL). The mixed base routing is therefore checked with [`check::cdg_acyclic`]; when
//! it is cyclic every base LID is routed by Up*/Down* (deadlock-free on one VL), and the
//! report says so. The escape LIDs are always Up*/Down* and are never touched here.
//!
//! Switch LIDs (the management traffic to the switches' port 0: `ibroute`, `smpquery`,
//! performance counters) are checked too when the fabric is not a fat-tree
//! ([`fabric_ranking::fat_tree_shape`]: a fat-tree engine forced onto a Slim Fly routes its switch
//! LIDs along a ranking that means nothing there): when the engine leaves a live end port unable
//! to reach a switch of its component, every switch LID is re-routed by Up*/Down* the same way,
//! and a routing whose switch LIDs stay unreachable is not valid. On a fat-tree the switch LIDs
//! follow up*/down* paths of the ranking by construction; after faults some switches are then
//! reachable only through a down-up turn (a leaf that lost its up-link to plane `j` cannot reach
//! the plane-`j` switches of other pods), which no up*/down* routing (OpenSM's included) serves:
//! that is not counted here.

use std::time::Instant;

use fabric_topology::{fmt_guid, Fabric, Lid, SwitchId};
use rayon::prelude::*;

use crate::check::{self, DestinationCheck, FailingDestination};
use crate::engine::{check_lfts, validate_context, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::groups::NodeGroups;
use crate::lft::Lfts;
use crate::route::{route_all_grouped, EngineKind, RoutedFabric};
use crate::updown::UpDown;

/// How many failing destinations a [`RoutingCheck`] keeps as examples.
pub const EXAMPLES: usize = 5;

/// What replaced the engine's entries.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Fallback {
    /// Nothing: the engine's routing was valid.
    #[default]
    None,
    /// The failing destinations' entries were re-routed by Up*/Down* on every switch.
    Spliced,
    /// The splice made the base channel dependencies cyclic: every base LID (end ports and
    /// switches) is routed by Up*/Down*.
    AllBase,
}

impl Fallback {
    /// Short name for logs and metrics: `none`, `updown-spliced`, `updown-all`.
    pub fn name(self) -> &'static str {
        match self {
            Fallback::None => "none",
            Fallback::Spliced => "updown-spliced",
            Fallback::AllBase => "updown-all",
        }
    }
}

/// Result of [`check_and_repair`]: what the engine got wrong, what replaced it, and the
/// validity of the routing that is left in the tables.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoutingCheck {
    /// Engine of the base LIDs (as given by the caller).
    pub engine: String,
    /// The tables as repaired: no connected pair of live end ports is unreachable, over the
    /// base LIDs and (LMC 1) the escape LIDs.
    pub valid: bool,
    /// Destination end ports the engine left unreachable from some connected source (destination
    /// LIDs: each layer offset counts with LMC ≥ 2).
    pub engine_failed_destinations: u64,
    /// Connected (source, destination) pairs the engine left unreachable (base LIDs).
    pub engine_unreachable_pairs: u64,
    /// A few of the engine's failing destinations (at most [`EXAMPLES`]).
    pub examples: Vec<FailingDestination>,
    /// What replaced the engine's entries.
    pub fallback: Fallback,
    /// Destination end ports whose base entries come from the fallback (0 when none; every
    /// routed end port with [`Fallback::AllBase`]).
    pub fallback_destinations: u64,
    /// Unreachable connected pairs over the base LIDs after the fallback.
    pub unreachable_pairs: u64,
    /// Unreachable connected pairs over the escape LIDs (never repaired: they are Up*/Down*).
    pub escape_unreachable_pairs: u64,
    /// Whether the switch LIDs were checked (the fabric is not a fat-tree; see the module
    /// documentation).
    pub switch_lids_checked: bool,
    /// Connected (live end port, switch) pairs whose switch LID the engine left unreachable
    /// (0 when not checked).
    pub engine_switch_unreachable_pairs: u64,
    /// Connected (live end port, switch) pairs whose switch LID is unreachable after the
    /// fallback.
    pub switch_unreachable_pairs: u64,
    /// Pairs of live end ports with no path at all in the live fabric (different components):
    /// not routable, so not counted as invalid.
    pub disconnected_pairs: u64,
    /// Connected components holding live end ports.
    pub components: usize,
    /// Time of the first check (base + escape), milliseconds.
    pub check_ms: f64,
    /// Time of the fallback (Up*/Down* routing, splice, CDG check, re-check), milliseconds.
    pub fallback_ms: f64,
    /// Why the routing is not the engine's own, or why it is still invalid; empty when the
    /// engine's routing was valid.
    pub reason: String,
}

/// Routes a snapshot like [`route_all_grouped`], then [`check_and_repair`]s the tables.
pub fn route_all_checked(
    ctx: &RoutingContext<'_>,
    kind: EngineKind,
    groups: Option<&NodeGroups>,
) -> Result<(RoutedFabric, RoutingCheck), RoutingError> {
    let mut routed = route_all_grouped(ctx, kind, groups)?;
    let name = match (kind, groups) {
        (EngineKind::Dmodc, Some(_)) => "grouped dmodc".to_string(),
        (EngineKind::Dmodk, Some(_)) => "grouped dmodk".to_string(),
        _ => kind.to_string(),
    };
    let check = check_and_repair(ctx, &name, &mut routed.lfts)?;
    Ok((routed, check))
}

/// Checks `lfts` (routed for `ctx` with the base engine `engine`) and repairs the base LIDs
/// (see the module documentation). The escape LIDs are checked, never changed.
pub fn check_and_repair(ctx: &RoutingContext<'_>, engine: &str, lfts: &mut Lfts) -> Result<RoutingCheck, RoutingError> {
    validate_context(ctx)?;
    check_lfts(ctx, lfts)?;
    let (fabric, lids) = (ctx.fabric, ctx.lids);
    let t = Instant::now();
    // On a fat-tree the switch LIDs' verdict is not counted (module documentation): they are
    // not checked at all.
    let switch_lids_checked = !fabric_ranking::fat_tree_shape(fabric, ctx.ranking).fat_tree;
    let (base, escape) =
        check::destination_check_both_ranked_opt(fabric, lids, lfts, &ctx.ranking.level, switch_lids_checked);
    let check_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut r = RoutingCheck {
        engine: engine.to_string(),
        engine_failed_destinations: base.failing.len() as u64,
        engine_unreachable_pairs: base.unreachable_pairs,
        examples: base.failing.iter().take(EXAMPLES).cloned().collect(),
        unreachable_pairs: base.unreachable_pairs,
        escape_unreachable_pairs: escape.unreachable_pairs,
        switch_lids_checked,
        engine_switch_unreachable_pairs: base.switch_unreachable_pairs,
        switch_unreachable_pairs: base.switch_unreachable_pairs,
        disconnected_pairs: base.disconnected_pairs,
        components: base.components,
        check_ms,
        ..RoutingCheck::default()
    };
    let mut reasons = Vec::new();
    if !base.valid() || base.switch_unreachable_pairs > 0 {
        let t = Instant::now();
        let after = repair_base(ctx, &base, lfts, &mut r)?;
        r.unreachable_pairs = after.unreachable_pairs;
        if switch_lids_checked {
            r.switch_unreachable_pairs = after.switch_unreachable_pairs;
        }
        r.fallback_ms = t.elapsed().as_secs_f64() * 1e3;
        let examples: Vec<String> = r.examples.iter().map(|d| describe(fabric, d)).collect();
        let mut text = String::new();
        if !base.valid() {
            text = format!(
                "{engine} left {} destinations unreachable from connected sources ({} pairs, e.g. {})",
                r.engine_failed_destinations,
                r.engine_unreachable_pairs,
                examples.join(", ")
            );
        }
        match r.fallback {
            Fallback::Spliced if !base.valid() => text.push_str(&format!(
                "; their base LIDs are routed by Up*/Down* on every switch ({} destinations)",
                r.fallback_destinations
            )),
            Fallback::Spliced => {}
            Fallback::AllBase if text.is_empty() => text.push_str(
                "re-routing the switch LIDs by Up*/Down* made the base channel dependencies cyclic, so every base LID is routed by Up*/Down*",
            ),
            Fallback::AllBase => text.push_str(
                "; re-routing them by Up*/Down* made the base channel dependencies cyclic, so every base LID is routed by Up*/Down*",
            ),
            Fallback::None => {}
        }
        if base.switch_unreachable_pairs > 0 {
            if !text.is_empty() {
                text.push_str("; ");
            }
            text.push_str(&format!(
                "{engine} left switch LIDs unreachable ({} end port-to-switch pairs); every switch LID is routed by \
                 Up*/Down*",
                r.engine_switch_unreachable_pairs
            ));
        }
        if !after.valid() {
            text.push_str(&format!(
                "; Up*/Down* cannot reach {} pairs either: no valid fallback, the routing stays invalid",
                after.unreachable_pairs
            ));
        }
        if r.switch_unreachable_pairs > 0 {
            text.push_str(&format!(
                "; {} end port-to-switch pairs stay unreachable: the switch LIDs are not valid",
                after.switch_unreachable_pairs
            ));
        }
        reasons.push(text);
    }
    if !escape.valid() {
        reasons.push(format!(
            "the escape LIDs (Up*/Down*) leave {} connected pairs unreachable (e.g. {}): no fallback",
            escape.unreachable_pairs,
            escape
                .failing
                .iter()
                .take(EXAMPLES)
                .map(|d| describe(fabric, d))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    r.valid = r.unreachable_pairs == 0 && r.escape_unreachable_pairs == 0 && r.switch_unreachable_pairs == 0;
    r.reason = reasons.join("; ");
    Ok(r)
}

/// "LID 7 ('node7' port 0x…, 18 sources)".
fn describe(fabric: &Fabric, d: &FailingDestination) -> String {
    let e = fabric.end_port(d.end_port);
    format!(
        "LID {} ('{}' port {}, {} sources)",
        d.lid,
        e.desc,
        fmt_guid(e.port_guid),
        d.unreachable_sources
    )
}

/// Splices Up*/Down* entries for the failing base destinations (all base LIDs when the splice
/// is cyclic); returns the check of the repaired base LIDs and fills `r.fallback*`.
fn repair_base(
    ctx: &RoutingContext<'_>,
    base: &DestinationCheck,
    lfts: &mut Lfts,
    r: &mut RoutingCheck,
) -> Result<DestinationCheck, RoutingError> {
    let (fabric, lids) = (ctx.fabric, ctx.lids);
    let mut updown = Lfts::new(fabric.num_switches(), lids.top());
    UpDown { random_seed: None }.route(ctx, LidSet::Base, &mut updown)?;
    // Every layer offset (LMC ≥ 2) may fail: Up*/Down* repairs each with its offset-0 route.
    crate::route::repeat_layer_offsets(lids, &mut updown);
    let mut failing: Vec<Lid> = base
        .failing
        .iter()
        .map(|d| d.lid)
        .filter(|&l| l != 0 && lfts.covers(l))
        .collect();
    r.fallback_destinations = failing.len() as u64;
    if base.switch_unreachable_pairs > 0 {
        failing.extend(
            fabric
                .switch_ids()
                .map(|s| lids.switch_lid(s))
                .filter(|&l| l != 0 && lfts.covers(l)),
        );
        failing.sort_unstable();
        failing.dedup();
    }
    splice(lfts, &updown, &failing);
    r.fallback = Fallback::Spliced;
    if !check::cdg_acyclic(fabric, lids, lfts, LidSet::Base) {
        let mut all: Vec<Lid> = crate::vl::base_lids(fabric, lids);
        all.retain(|&l| lfts.covers(l));
        splice(lfts, &updown, &all);
        r.fallback = Fallback::AllBase;
        r.fallback_destinations = fabric
            .end_port_ids()
            .filter(|&e| fabric.end_port_live(e) && lids.base_lid(e) != 0)
            .count() as u64;
    }
    Ok(check::destination_check(fabric, lids, lfts, LidSet::Base))
}

/// Copies the entries of `lids` from `from` into `into`, on every switch (one rayon task per
/// row).
fn splice(into: &mut Lfts, from: &Lfts, lids: &[Lid]) {
    into.par_rows_mut().enumerate().for_each(|(s, row)| {
        let src = from.row(SwitchId(s as u32));
        for &l in lids {
            row[l as usize] = src[l as usize];
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;
    use fabric_topology::{Fabric, FabricEvent, Remote};

    /// Takes every up-link of leaf `leaf` down except the one to spine `keep` (by index among
    /// its port groups, ordered by remote GUID).
    fn keep_one_uplink(f: &Fabric, leaf: SwitchId, keep: usize) -> Vec<FabricEvent> {
        let guid = f.switch(leaf).guid;
        let mut ev = Vec::new();
        for (i, g) in f.port_groups(leaf).iter().enumerate() {
            if i != keep {
                for &p in &g.ports {
                    ev.push(FabricEvent::LinkDown { switch: guid, port: p });
                }
            }
        }
        ev
    }

    /// Two leaves of a 2-level tree that share no spine: still connected (through a third leaf),
    /// but not up-down connected, so Dmodc cannot route between them.
    fn split_leaves() -> Routable {
        let t = pgft(&[2, 4], &[1, 3], &[1, 1]);
        let f = &t.fabric;
        let leaves: Vec<SwitchId> = f.switch_ids().filter(|&s| f.is_leaf(s)).collect();
        let mut ev = keep_one_uplink(f, leaves[0], 0);
        ev.extend(keep_one_uplink(f, leaves[1], 1));
        Routable::new(f.apply(&ev).unwrap())
    }

    #[test]
    fn valid_routing_is_left_alone() {
        let x = Routable::new(pgft(&[2, 4], &[1, 3], &[1, 1]).fabric);
        let ctx = x.ctx();
        let mut routed = crate::route_all(&ctx, EngineKind::Dmodc).unwrap();
        let before = routed.lfts.clone();
        let c = check_and_repair(&ctx, "dmodc", &mut routed.lfts).unwrap();
        assert!(c.valid && c.reason.is_empty(), "{c:?}");
        assert_eq!(c.fallback, Fallback::None);
        assert_eq!((c.engine_failed_destinations, c.fallback_destinations), (0, 0));
        assert_eq!(routed.lfts, before);
    }

    #[test]
    fn destination_check_counts_what_pair_walks_count() {
        let x = split_leaves();
        let (f, lids, ctx) = (&x.fabric, &x.lids, x.ctx());
        let routed = crate::route_all(&ctx, EngineKind::Dmodc).unwrap();
        for set in [LidSet::Base, LidSet::Escape] {
            let d = check::destination_check(f, lids, &routed.lfts, set);
            // Brute force: walk every ordered pair of live end ports.
            let live: Vec<_> = f.end_port_ids().filter(|&e| f.end_port_live(e)).collect();
            let mut per_dest = std::collections::BTreeMap::new();
            let mut hops = Vec::new();
            for &dst in &live {
                for &src in &live {
                    if src == dst {
                        continue;
                    }
                    let lid = lids.base_lid(dst) + set.offset(lids);
                    let ok = matches!(check::trace(f, &routed.lfts, src, lid, &mut hops), Ok(check::TraceEnd::EndPort(x)) if x == dst);
                    if !ok {
                        *per_dest.entry(lid).or_insert(0u64) += 1;
                    }
                }
            }
            let got: std::collections::BTreeMap<Lid, u64> =
                d.failing.iter().map(|x| (x.lid, x.unreachable_sources)).collect();
            assert_eq!(got, per_dest, "{set:?}");
            assert_eq!(d.unreachable_pairs, per_dest.values().sum::<u64>());
            if set == LidSet::Base {
                // The two leaves' nodes (2 each) cannot reach each other: 2 × 2 × 2 pairs.
                assert_eq!(d.unreachable_pairs, 8, "{d:?}");
                assert_eq!(d.failing.len(), 4);
            } else {
                assert!(d.valid(), "escape LIDs are Up*/Down*: {d:?}");
            }
        }
    }

    #[test]
    fn dmodc_holes_are_filled_by_updown_and_the_result_is_valid_and_deadlock_free() {
        let x = split_leaves();
        let (f, lids, ctx) = (&x.fabric, &x.lids, x.ctx());
        let (routed, c) = route_all_checked(&ctx, EngineKind::Dmodc, None).unwrap();
        assert!(c.valid, "{c:?}");
        assert_eq!(c.engine, "dmodc");
        assert_eq!(c.engine_failed_destinations, 4);
        assert_eq!(c.engine_unreachable_pairs, 8);
        assert_eq!((c.unreachable_pairs, c.escape_unreachable_pairs), (0, 0));
        assert_ne!(c.fallback, Fallback::None);
        assert!(c.fallback_destinations >= 4);
        assert!(c.reason.starts_with("dmodc left 4 destinations"), "{}", c.reason);
        assert!(c.reason.contains("Up*/Down*"), "{}", c.reason);
        assert_eq!(c.examples.len(), 4);
        let v = check::validity(f, lids, &routed.lfts);
        assert!(v.valid, "{v:?}");
        assert!(check::cdg_acyclic(f, lids, &routed.lfts, LidSet::Base));
        assert!(check::cdg_acyclic(f, lids, &routed.lfts, LidSet::Escape));
        // The escape LIDs are exactly Up*/Down*'s.
        let plain = crate::route_all(&ctx, EngineKind::Dmodc).unwrap();
        for e in f.end_port_ids() {
            for s in f.switch_ids() {
                let l = lids.base_lid(e) + 1;
                assert_eq!(routed.lfts.get(s, l), plain.lfts.get(s, l));
            }
        }
    }

    #[test]
    fn a_spliced_routing_keeps_the_engine_entries_of_the_other_destinations() {
        // Cut one leaf from every spine but one and make a hole by hand in a valid routing: only
        // that destination is re-routed, and the result stays acyclic (Spliced, not AllBase).
        let x = Routable::new(pgft(&[2, 4], &[1, 3], &[1, 1]).fabric);
        let (f, lids, ctx) = (&x.fabric, &x.lids, x.ctx());
        let good = crate::route_all(&ctx, EngineKind::Dmodc).unwrap().lfts;
        let mut broken = good.clone();
        let victim = fabric_topology::EndPortId(0);
        let lid = lids.base_lid(victim);
        let (leaf, _) = f.end_port(victim).attach.unwrap();
        // A spine with no route to the victim: sources arriving there are lost.
        let spine = f.port_groups(leaf)[0].remote;
        broken.set(spine, lid, crate::NO_ROUTE);
        let c = check_and_repair(&ctx, "dmodc", &mut broken).unwrap();
        assert!(c.valid, "{c:?}");
        assert_eq!(c.engine_failed_destinations, 1);
        assert_eq!(c.examples[0].end_port, victim);
        assert_eq!(c.fallback, Fallback::Spliced);
        assert_eq!(c.fallback_destinations, 1);
        for e in f.end_port_ids().filter(|&e| e != victim) {
            for s in f.switch_ids() {
                let l = lids.base_lid(e);
                assert_eq!(broken.get(s, l), good.get(s, l), "other destinations keep Dmodc");
            }
        }
        assert!(matches!(
            f.switch(spine).ports[broken.get(spine, lid) as usize].remote,
            Remote::Switch { .. }
        ));
    }

    #[test]
    fn tables_of_another_fabric_are_an_error_not_a_panic() {
        let x = split_leaves();
        let (f, lids, ctx) = (&x.fabric, &x.lids, x.ctx());
        let mut small = Lfts::new(f.num_switches() - 1, lids.top());
        assert!(matches!(
            check_and_repair(&ctx, "dmodc", &mut small),
            Err(RoutingError::LftTooSmall { .. })
        ));
    }

    #[test]
    fn disconnected_pairs_are_not_invalid() {
        // Cut a leaf off completely: its nodes are disconnected, not unreachable.
        let t = pgft(&[2, 4], &[1, 3], &[1, 1]);
        let f = &t.fabric;
        let leaf = f.switch_ids().find(|&s| f.is_leaf(s)).unwrap();
        let guid = f.switch(leaf).guid;
        let ev: Vec<_> = f
            .port_groups(leaf)
            .iter()
            .flat_map(|g| g.ports.clone())
            .map(|p| FabricEvent::LinkDown { switch: guid, port: p })
            .collect();
        let x = Routable::new(f.apply(&ev).unwrap());
        let ctx = x.ctx();
        let (_, c) = route_all_checked(&ctx, EngineKind::Dmodc, None).unwrap();
        assert!(c.valid, "{c:?}");
        assert_eq!(c.fallback, Fallback::None);
        // 2 nodes cut off, 6 others: 2 × 6 × 2 directions.
        assert_eq!(c.disconnected_pairs, 24);
        assert_eq!(c.components, 2);
    }

    #[test]
    fn a_broken_switch_lid_is_repaired_and_reported() {
        // A valid Up*/Down* routing of a Slim Fly with one switch LID broken by hand on every
        // other switch: end-port routes are fine, so only the switch check can see it.
        let f = fabric_topology::gen::generate_str("SLIMFLY(5;4)", None).unwrap();
        let mut x = Routable::new(f);
        // The daemon's ranking (its diagnostics say the fabric is not a fat-tree).
        x.ranking = fabric_ranking::rank(&x.fabric, &fabric_ranking::RankOptions::default());
        let (f, lids, ctx) = (&x.fabric, &x.lids, x.ctx());
        let good = crate::route_all(&ctx, EngineKind::UpDown).unwrap().lfts;
        let victim = SwitchId(7);
        let lid = lids.switch_lid(victim);
        let mut broken = good.clone();
        for s in f.switch_ids().filter(|&s| s != victim) {
            broken.set(s, lid, crate::NO_ROUTE);
        }
        let before = check::destination_check(f, lids, &broken, LidSet::Base);
        assert!(before.valid() && before.switch_unreachable_pairs > 0, "{before:?}");
        let c = check_and_repair(&ctx, "updown", &mut broken).unwrap();
        assert!(c.valid && c.switch_lids_checked, "{c:?}");
        assert_eq!(c.engine_switch_unreachable_pairs, before.switch_unreachable_pairs);
        assert_eq!(c.switch_unreachable_pairs, 0);
        assert_eq!((c.engine_failed_destinations, c.fallback_destinations), (0, 0));
        assert_ne!(c.fallback, Fallback::None);
        assert!(c.reason.contains("switch LIDs unreachable"), "{}", c.reason);
        let after = check::destination_check(f, lids, &broken, LidSet::Base);
        assert_eq!(after.switch_unreachable_pairs, 0, "{after:?}");
        // End-port entries are untouched.
        for e in f.end_port_ids() {
            for s in f.switch_ids() {
                assert_eq!(broken.get(s, lids.base_lid(e)), good.get(s, lids.base_lid(e)));
            }
        }
    }

    #[test]
    fn on_a_fat_tree_switch_lids_needing_a_down_up_turn_are_not_counted() {
        let x = Routable::new(pgft(&[2, 4], &[1, 3], &[1, 1]).fabric);
        let ctx = x.ctx();
        let mut routed = crate::route_all(&ctx, EngineKind::Dmodc).unwrap();
        let spine = x.fabric.switch_ids().find(|&s| !x.fabric.is_leaf(s)).unwrap();
        let leaf = x.fabric.switch_ids().find(|&s| x.fabric.is_leaf(s)).unwrap();
        routed.lfts.set(leaf, x.lids.switch_lid(spine), crate::NO_ROUTE);
        let before = routed.lfts.clone();
        let c = check_and_repair(&ctx, "dmodc", &mut routed.lfts).unwrap();
        assert!(c.valid && !c.switch_lids_checked, "{c:?}");
        assert_eq!((c.engine_switch_unreachable_pairs, c.fallback), (0, Fallback::None));
        assert_eq!(routed.lfts, before);
    }

    #[test]
    fn dmodc_forced_on_a_slim_fly_leaves_no_switch_lid_unreachable() {
        // Dmodc on a graph that is not a fat-tree (the ibsim finding: 2 450 of 2 500
        // switch-to-switch-LID walks failed with end-port LIDs valid).
        let f = fabric_topology::gen::generate_str("SLIMFLY(5;4)", None).unwrap();
        let mut x = Routable::new(f);
        // The daemon's ranking (its diagnostics say the fabric is not a fat-tree).
        x.ranking = fabric_ranking::rank(&x.fabric, &fabric_ranking::RankOptions::default());
        let (f, lids, ctx) = (&x.fabric, &x.lids, x.ctx());
        let (routed, c) = route_all_checked(&ctx, EngineKind::Dmodc, None).unwrap();
        let d = check::destination_check(f, lids, &routed.lfts, LidSet::Base);
        assert!(
            c.engine_switch_unreachable_pairs > 0,
            "the case this test is about: {c:?}"
        );
        assert_eq!(d.switch_unreachable_pairs, c.switch_unreachable_pairs, "{c:?}");
        assert!(c.valid, "{c:?}");
        assert!(d.valid() && d.switch_unreachable_pairs == 0, "{d:?}");
        assert!(check::cdg_acyclic(f, lids, &routed.lfts, LidSet::Base));
    }
}
