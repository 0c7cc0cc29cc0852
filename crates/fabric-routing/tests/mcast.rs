//! Multicast acceptance tests on generated fat-trees: on randomly degraded PGFTs with random
//! member sets, every group's tree is a tree of live up links spanning every reachable
//! member's leaf, a flood from every member reaches every other receiver exactly once and
//! nothing else, unicast (Dmodc) + multicast share one VL without a CDG cycle, and the output
//! does not depend on the thread count; on complete fat-trees the roots are balanced.

mod common;

use common::*;
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use fabric_ranking::Ranking;
use fabric_routing::mcast::{has_port, mask_ports};
use fabric_routing::{
    flood, mcast_deadlock_free, mft_diff, route_multicast, McastGroup, McastRouting, McastTree, Mfts,
};
use fabric_topology::gen::{generate, PgftSpec};
use fabric_topology::{EndPortId, Fabric, FabricEvent, SwitchId};

/// Random groups: `n` groups at random distinct MLIDs, receivers of random size, a few senders
/// (possibly overlapping the receivers).
fn random_groups(f: &Fabric, n: usize, seed: u64) -> Vec<McastGroup> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let eps: Vec<EndPortId> = f.end_port_ids().collect();
    let mut mlids: Vec<u32> = (0xC000..0xC000 + 4 * n as u32 + 40).collect();
    mlids.shuffle(&mut rng);
    (0..n)
        .map(|i| {
            let size = rng.gen_range(1..=eps.len());
            let receivers: Vec<EndPortId> = eps.choose_multiple(&mut rng, size).copied().collect();
            let ns = rng.gen_range(0..=3usize);
            let senders: Vec<EndPortId> = eps.choose_multiple(&mut rng, ns).copied().collect();
            McastGroup {
                mlid: mlids[i],
                receivers,
                senders,
            }
        })
        .collect()
}

/// Switches reachable from `root` by links going down in the ranking.
fn down_closure(f: &Fabric, r: &Ranking, root: SwitchId) -> Vec<bool> {
    let mut seen = vec![false; f.num_switches()];
    let mut stack = vec![root];
    seen[root.idx()] = true;
    while let Some(s) = stack.pop() {
        for g in f.port_groups(s) {
            let t = g.remote;
            if !seen[t.idx()] && r.level[t.idx()].is_some() && r.level[t.idx()] < r.level[s.idx()] {
                seen[t.idx()] = true;
                stack.push(t);
            }
        }
    }
    seen
}

/// The checks of one routed group; `Err` names what failed.
fn check_group(f: &Fabric, r: &Ranking, m: &Mfts, g: &McastGroup, t: &McastTree) -> Result<(), String> {
    let members: Vec<EndPortId> = g.receivers.iter().chain(&g.senders).copied().collect();
    for e in &t.unreachable {
        if !members.contains(e) {
            return Err(format!("{e:?} reported unreachable but not a member"));
        }
    }
    let Some(root) = t.root else {
        // No tree: every member is reported, no table entry.
        for e in &members {
            if !t.unreachable.contains(e) {
                return Err(format!("no root but {e:?} not reported"));
            }
        }
        return f
            .switch_ids()
            .all(|s| m.mask(s, g.mlid) == [0; 4])
            .then_some(())
            .ok_or("entries without a tree".into());
    };
    // A tree: one live up link per non-root switch, every switch climbs to the root.
    if t.links.len() + 1 != t.switches.len() {
        return Err(format!("{} links for {} switches", t.links.len(), t.switches.len()));
    }
    let mut parent = vec![None; f.num_switches()];
    for l in &t.links {
        if f.switch_link_live(l.child, l.child_port) != Some((l.parent, l.parent_port)) {
            return Err(format!("link {l:?} is not live"));
        }
        if r.level[l.parent.idx()].is_none() || r.level[l.parent.idx()] <= r.level[l.child.idx()] {
            return Err(format!("link {l:?} does not go up"));
        }
        if parent[l.child.idx()].replace(l.parent).is_some() || l.child == root {
            return Err(format!("{:?} has two parents", l.child));
        }
    }
    for &s in &t.switches {
        let mut cur = s;
        let mut n = 0;
        while cur != root {
            cur = parent[cur.idx()].ok_or(format!("{cur:?} has no parent"))?;
            n += 1;
            if n > t.switches.len() {
                return Err("cycle".into());
            }
        }
    }
    // Spans every reachable member's leaf; unreachable members really are.
    let below = down_closure(f, r, root);
    // No switch reaches more live member leaves downwards than the root.
    let mut leaves: Vec<SwitchId> = members
        .iter()
        .filter(|&&e| f.end_port_live(e))
        .filter_map(|&e| f.end_port(e).attach.map(|a| a.0))
        .collect();
    leaves.sort();
    leaves.dedup();
    let covered = |b: &[bool]| leaves.iter().filter(|l| b[l.idx()]).count();
    let best = f
        .switch_ids()
        .filter(|s| r.level[s.idx()].is_some() && f.switch(*s).up)
        .map(|s| covered(&down_closure(f, r, s)))
        .max()
        .unwrap_or(0);
    if covered(&below) != best {
        return Err(format!(
            "root reaches {} member leaves, another switch {best}",
            covered(&below)
        ));
    }
    for &e in &members {
        let unreachable = t.unreachable.contains(&e);
        let leaf = f.end_port(e).attach.map(|a| a.0);
        let reachable = f.end_port_live(e) && leaf.is_some_and(|l| below[l.idx()]);
        if reachable == unreachable {
            return Err(format!(
                "{e:?}: reachable {reachable}, reported unreachable {unreachable}"
            ));
        }
        if reachable && !t.switches.contains(&leaf.unwrap_or(SwitchId(u32::MAX))) {
            return Err(format!("{e:?}'s leaf is not in the tree"));
        }
    }
    // Only tree switches have entries; no non-receiver CA bit.
    for s in f.switch_ids() {
        let mask = m.mask(s, g.mlid);
        if mask != [0; 4] && !t.switches.contains(&s) {
            return Err(format!("{s:?} has an entry outside the tree"));
        }
        for p in mask_ports(mask) {
            if let fabric_topology::Remote::EndPort(e) = f.switch(s).ports[p as usize].remote {
                if !g.receivers.contains(&e) {
                    return Err(format!("{e:?} (not a receiver) has its bit set"));
                }
            }
        }
    }
    // Flood from every reachable member: every other reachable receiver once, nothing else.
    let mut want: Vec<EndPortId> = g
        .receivers
        .iter()
        .filter(|e| !t.unreachable.contains(e))
        .copied()
        .collect();
    want.sort();
    want.dedup();
    for &src in members.iter().filter(|e| !t.unreachable.contains(e)) {
        let got = flood(f, m, src, g.mlid).map_err(|e| e.to_string())?;
        let exp: Vec<(EndPortId, u32)> = want.iter().filter(|&&e| e != src).map(|&e| (e, 1)).collect();
        if got != exp {
            return Err(format!("flood from {src:?}: {got:?}, want {exp:?}"));
        }
    }
    Ok(())
}

fn check_all(f: &Fabric, r: &Ranking, groups: &[McastGroup], out: &McastRouting) -> Result<(), String> {
    if out.trees.len() != groups.len() || !out.rejected.is_empty() {
        return Err(format!("{} trees, rejected {:?}", out.trees.len(), out.rejected));
    }
    for g in groups {
        let t = out.tree(g.mlid).ok_or(format!("no tree for {:#x}", g.mlid))?;
        check_group(f, r, &out.mfts, g, t).map_err(|e| format!("MLID {:#x}: {e}", g.mlid))?;
    }
    Ok(())
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Degraded PGFTs (links and non-leaf switches removed, a few end ports down), random groups.
    #[test]
    fn trees_flood_and_cdg_on_degraded_pgfts(
        spec_i in 0usize..3,
        links in 0usize..40,
        switches in 0usize..4,
        dead_nodes in 0usize..3,
        ngroups in 1usize..10,
        seed in any::<u64>(),
    ) {
        let s = ["PGFT(3;4,4,6;1,4,4;1,1,1)", "PGFT(3;3,3,4;1,3,2;1,2,1)", "XGFT(3;2,3,4;1,2,3)"][spec_i];
        let mut f = degraded(s, links, switches, seed);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 7);
        let down: Vec<FabricEvent> = (0..dead_nodes)
            .map(|_| FabricEvent::EndPortDown(f.end_port(EndPortId(rng.gen_range(0..f.num_end_ports() as u32))).port_guid))
            .collect();
        f = f.apply(&down).unwrap();
        let routed = route_with(&f, fabric_routing::EngineKind::Dmodc, 0);
        let groups = random_groups(&f, ngroups, seed);
        let out = route_multicast(&f, &routed.ranking, &groups);
        let ok = check_all(&f, &routed.ranking, &groups, &out);
        prop_assert!(ok.is_ok(), "{} -{} links -{} switches seed {}: {:?}", s, links, switches, seed, ok);
        prop_assert!(mcast_deadlock_free(&f, &routed.lfts, &routed.lids, &out.mfts), "{} seed {}: CDG cycle", s, seed);
        // Same bytes on 1 and 3 threads.
        let one = pool(1).install(|| route_multicast(&f, &routed.ranking, &groups));
        let three = pool(3).install(|| route_multicast(&f, &routed.ranking, &groups));
        prop_assert_eq!(&one, &out);
        prop_assert_eq!(&three, &out);
        // The diff against nothing rebuilds exactly the non-zero blocks; against itself, nothing.
        prop_assert!(mft_diff(&out.mfts, &out.mfts, &f).is_empty());
        let d = mft_diff(&Mfts::default(), &out.mfts, &f);
        let nonzero = out.mfts.all_blocks(&f).into_iter().filter(|b| b.entries != [0; 32]).collect::<Vec<_>>();
        prop_assert_eq!(d, nonzero);
    }

    /// Complete fat-trees, G >= #tops groups spanning at least two leaves: every top switch
    /// roots floor(G / tops) or ceil(G / tops) groups.
    #[test]
    fn roots_are_balanced_on_complete_fat_trees(
        spec in arb_pgft(),
        extra in 0usize..20,
        seed in any::<u64>(),
    ) {
        let f = generate(&spec).unwrap().fabric;
        let leaves: Vec<SwitchId> = f.switch_ids().filter(|&s| f.is_leaf(s)).collect();
        prop_assume!(leaves.len() >= 2);
        let r = fabric_ranking::rank(&f, &fabric_ranking::RankOptions::default());
        let top = r.level.iter().flatten().max().copied();
        let tops: Vec<SwitchId> = f.switch_ids().filter(|s| r.level[s.idx()] == top).collect();
        let n = tops.len() + extra;
        let mut groups = random_groups(&f, n, seed);
        // Make every group span two leaves.
        for (i, g) in groups.iter_mut().enumerate() {
            g.receivers.push(f.attached_end_ports(leaves[i % leaves.len()])[0]);
            g.receivers.push(f.attached_end_ports(leaves[(i + 1) % leaves.len()])[0]);
        }
        let out = route_multicast(&f, &r, &groups);
        prop_assert!(check_all(&f, &r, &groups, &out).is_ok());
        let (lo, hi) = (n / tops.len(), n.div_ceil(tops.len()));
        for &t in &tops {
            let k = out.trees.iter().filter(|x| x.root == Some(t)).count();
            prop_assert!(k >= lo && k <= hi, "{}: top {:?} roots {} of {} groups", spec, t, k, n);
        }
    }
}

/// A random complete PGFT, small enough for debug builds.
fn arb_pgft() -> impl Strategy<Value = PgftSpec> {
    (2usize..=3)
        .prop_flat_map(|h| {
            (
                proptest::collection::vec(1u32..=4, h),
                proptest::collection::vec(1u32..=3, h - 1),
                proptest::collection::vec(1u32..=2, h - 1),
            )
        })
        .prop_filter_map("valid PGFT", |(m, wu, pu)| {
            let w = std::iter::once(1).chain(wu).collect();
            let p = std::iter::once(1).chain(pu).collect();
            PgftSpec::pgft(m, w, p).ok()
        })
}

/// One all-nodes group per MLID on a complete fabric: every node gets exactly one copy of
/// every other node's packet, and groups vanishing produce zeroing writes for every entry.
#[test]
fn broadcast_groups_and_their_removal() {
    let f = fabric("PGFT(3;4,4,6;1,4,4;1,2,1)");
    let r = fabric_ranking::rank(&f, &fabric_ranking::RankOptions::default());
    let all: Vec<EndPortId> = f.end_port_ids().collect();
    let groups: Vec<McastGroup> = (0..3)
        .map(|i| McastGroup {
            mlid: 0xC000 + 40 * i,
            receivers: all.clone(),
            senders: Vec::new(),
        })
        .collect();
    let out = route_multicast(&f, &r, &groups);
    check_all(&f, &r, &groups, &out).unwrap();
    let roots: Vec<_> = out.trees.iter().map(|t| t.root.unwrap()).collect();
    assert!(
        roots[0] != roots[1] && roots[1] != roots[2] && roots[0] != roots[2],
        "{roots:?}"
    );
    let gone = route_multicast(&f, &r, &groups[..1]);
    let d = mft_diff(&out.mfts, &gone.mfts, &f);
    assert!(!d.is_empty() && d.iter().all(|b| b.entries == [0; 32] && b.block >= 1));
    // After the zeroing writes, the old tables read like the new ones.
    for s in f.switch_ids() {
        for g in &groups[1..] {
            let touched: bool = d.iter().any(|b| b.switch == s && b.block == (g.mlid - 0xC000) / 32);
            assert_eq!(out.mfts.mask(s, g.mlid) != [0; 4], touched);
        }
        let leafport = f
            .attached_end_ports(s)
            .first()
            .map(|&e| f.end_port(e).attach.unwrap().1);
        if let Some(p) = leafport {
            assert!(has_port(&gone.mfts.mask(s, 0xC000), p));
        }
    }
}
