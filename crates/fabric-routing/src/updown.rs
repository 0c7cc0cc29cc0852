//! Up*/Down* over a BFS spanning tree (thesis §5.1.3): link directions from a breadth-first
//! search started at a leaf (Alg. 10), costs, downcosts and dividers for those directions
//! (Alg. 6), then BFS-Dmodc (Alg. 12) or BFS-Random (Alg. 11) selection.
//!
//! Directions: a link is *up* towards the BFS root (smaller depth); links between switches of
//! equal depth are not used ("only strictly oriented links"). Any route that goes up, then
//! down, is deadlock-free on one VL (no down→up turn means the channel dependencies follow a
//! strict order), on any topology — this is what makes Up*/Down* the escape routing.
//!
//! A disconnected fabric gets one BFS per connected component, so every component is routed.
//! The root of a component is its leaf with the smallest GUID (its switch with the smallest
//! GUID when it has no leaf), which keeps the root stable while that leaf lives.
//!
//! Route selection uses the same up-down guarantee as Dmodc (see [`crate::fill`]): down groups
//! with a smaller downcost when a downward path exists, otherwise up groups with a smaller cost.

use std::collections::VecDeque;

use fabric_topology::{Fabric, SwitchId};

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::fill::{fill_set, Select};
use crate::lft::Lfts;

/// The Up*/Down* engine. `random_seed: None` = BFS-Dmodc (Alg. 12), `Some(seed)` = BFS-Random
/// (Alg. 11, deterministic for a seed).
#[derive(Copy, Clone, Debug, Default)]
pub struct UpDown {
    /// `None`: Dmodc-style selection; `Some(seed)`: seeded random selection.
    pub random_seed: Option<u64>,
}

impl RoutingEngine for UpDown {
    fn name(&self) -> &'static str {
        match self.random_seed {
            None => "updown",
            Some(_) => "updown-random",
        }
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        let select = match self.random_seed {
            None => Select::Dmodc,
            Some(seed) => Select::Random { seed },
        };
        fill_set(ctx, &bfs_levels(ctx.fabric), set, select, lfts);
        Ok(())
    }
}

/// Alg. 10 per connected component of the live switches: BFS depth from the root, turned into
/// a level (`max depth − depth`, so the root is the top and "up" means towards it).
pub(crate) fn bfs_levels(fabric: &Fabric) -> Vec<Option<u32>> {
    let n = fabric.num_switches();
    let mut depth: Vec<u32> = vec![u32::MAX; n];
    let mut roots: Vec<SwitchId> = fabric.switch_ids().filter(|&s| fabric.switch(s).up).collect();
    // Leaves first, each class by GUID.
    roots.sort_by_key(|&s| (!fabric.is_leaf(s), fabric.switch(s).guid));
    let mut queue = VecDeque::new();
    let mut max_depth = 0;
    for root in roots {
        if depth[root.idx()] != u32::MAX {
            continue;
        }
        depth[root.idx()] = 0;
        queue.push_back(root);
        while let Some(s) = queue.pop_front() {
            let d = depth[s.idx()];
            max_depth = max_depth.max(d);
            for g in fabric.port_groups(s) {
                if depth[g.remote.idx()] == u32::MAX {
                    depth[g.remote.idx()] = d + 1;
                    queue.push_back(g.remote);
                }
            }
        }
    }
    depth
        .into_iter()
        .map(|d| (d != u32::MAX).then(|| max_depth - d))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check;
    use crate::testutil::*;
    use crate::{assign_lids, engine, EngineKind, Guid2Lid, LidPlan, IB_MAX_UNICAST_LID};
    use fabric_topology::{FabricBuilder, NodeType};

    fn route_set(f: &Fabric, kind: EngineKind, set: LidSet) -> (LidPlan, Lfts) {
        let r = ranking(f);
        let lids = assign_lids(f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        let mut lfts = Lfts::new(f.num_switches(), lids.top());
        engine(kind)
            .route(
                &RoutingContext {
                    fabric: f,
                    ranking: &r,
                    lids: &lids,
                },
                set,
                &mut lfts,
            )
            .unwrap();
        (lids, lfts)
    }

    /// A ring of switches with same-level links everywhere and a chord: not a fat-tree at all.
    fn ring(n: u32) -> Fabric {
        let mut b = FabricBuilder::new();
        let s: Vec<_> = (0..n)
            .map(|i| b.add_switch(0x100 + u64::from(i), format!("r{i}"), 8).unwrap())
            .collect();
        for i in 0..n as usize {
            b.connect_switches(s[i], 1, s[(i + 1) % n as usize], 2).unwrap();
        }
        b.connect_switches(s[0], 3, s[n as usize / 2], 3).unwrap();
        for (i, &sw) in s.iter().enumerate() {
            let e = b
                .add_end_port(
                    0x1000 + i as u64,
                    0x2000 + i as u64,
                    format!("n{i}"),
                    1,
                    1,
                    NodeType::Compute,
                )
                .unwrap();
            b.connect_end_port(e, sw, 5).unwrap();
        }
        b.build()
    }

    #[test]
    fn updown_is_valid_and_deadlock_free_on_any_connected_topology() {
        for f in [
            ring(7),
            ring(12),
            degrade(&pgft(&[3, 3, 4], &[1, 3, 3], &[1, 1, 1]).fabric, 25, 2, 3),
        ] {
            for kind in [EngineKind::UpDown, EngineKind::UpDownRandom { seed: 7 }] {
                for set in [LidSet::Base, LidSet::Escape] {
                    let (lids, lfts) = route_set(&f, kind, set);
                    let v = check::validity_set(&f, &lids, &lfts, set);
                    assert_eq!(v.unreachable_count, 0, "{kind} {set:?}: {v:?}");
                    assert!(check::cdg_acyclic(&f, &lids, &lfts, set), "{kind} {set:?}");
                }
            }
        }
    }

    #[test]
    fn random_selection_depends_on_the_seed_only() {
        let f = pgft(&[4, 4], &[1, 4], &[1, 2]).fabric;
        let a = route_set(&f, EngineKind::UpDownRandom { seed: 1 }, LidSet::Escape).1;
        let b = route_set(&f, EngineKind::UpDownRandom { seed: 1 }, LidSet::Escape).1;
        let c = route_set(&f, EngineKind::UpDownRandom { seed: 2 }, LidSet::Escape).1;
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn split_fabric_routes_each_component() {
        // Two disjoint 2-level trees in one fabric.
        let t = pgft(&[2, 2], &[1, 2], &[1, 1]);
        let mut f = t.fabric.clone();
        // Cut every link of the first spine and the second leaf's link to the second spine.
        let mut ev = Vec::new();
        for s in f.switch_ids() {
            for (pn, p) in f.switch(s).external_ports() {
                if let fabric_topology::Remote::Switch { sw, .. } = p.remote {
                    let (a, b) = (f.switch(s).guid, f.switch(sw).guid);
                    // leaf0-spine1 and leaf1-spine0 removed: {leaf0, spine0}, {leaf1, spine1}.
                    if (a, b) == (t.fabric.switch(SwitchId(0)).guid, t.fabric.switch(SwitchId(3)).guid)
                        || (a, b) == (t.fabric.switch(SwitchId(1)).guid, t.fabric.switch(SwitchId(2)).guid)
                    {
                        ev.push(fabric_topology::FabricEvent::LinkDown { switch: a, port: pn });
                    }
                }
            }
        }
        f = f.apply(&ev).unwrap();
        let lv = bfs_levels(&f);
        assert!(lv.iter().all(std::option::Option::is_some));
        let (lids, lfts) = route_set(&f, EngineKind::UpDown, LidSet::Escape);
        let v = check::validity_set(&f, &lids, &lfts, LidSet::Escape);
        assert_eq!(v.unreachable_count, 0);
        assert_eq!(v.components, 2);
        assert!(v.disconnected_pairs > 0);
    }
}
