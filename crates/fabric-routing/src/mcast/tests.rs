//! Unit tests on small hand-made fat-trees (see [`crate::testutil`]).

use fabric_topology::{EndPortId, Fabric, FabricEvent, SwitchId};

use super::*;
use crate::testutil::*;
use crate::EngineKind;

fn group(mlid: Lid, receivers: &[u32], senders: &[u32]) -> McastGroup {
    McastGroup {
        mlid,
        receivers: receivers.iter().map(|&e| EndPortId(e)).collect(),
        senders: senders.iter().map(|&e| EndPortId(e)).collect(),
    }
}

fn leaf_of(f: &Fabric, e: u32) -> SwitchId {
    f.end_port(EndPortId(e)).attach.unwrap().0
}

/// Flood from `src` reaches exactly `want` (each once).
fn assert_flood(f: &Fabric, m: &Mfts, src: u32, mlid: Lid, want: &[u32]) {
    let got = flood(f, m, EndPortId(src), mlid).unwrap();
    let mut want: Vec<(EndPortId, u32)> = want.iter().filter(|&&e| e != src).map(|&e| (EndPortId(e), 1)).collect();
    want.sort();
    assert_eq!(got, want, "flood from {src} to {mlid:#x}");
}

/// Tree shape: one link per non-root switch, from child up to parent, live, reaching the root.
fn assert_tree(f: &Fabric, r: &fabric_ranking::Ranking, t: &McastTree) {
    let root = t.root.unwrap();
    assert_eq!(t.links.len() + 1, t.switches.len());
    for l in &t.links {
        assert_ne!(l.child, root);
        assert!(t.switches.binary_search(&l.child).is_ok() && t.switches.binary_search(&l.parent).is_ok());
        assert_eq!(
            f.switch_link_live(l.child, l.child_port),
            Some((l.parent, l.parent_port))
        );
        assert!(
            r.level[l.parent.idx()] > r.level[l.child.idx()],
            "link {l:?} does not go up"
        );
    }
    for &s in &t.switches {
        let mut cur = s;
        for _ in 0..t.switches.len() {
            if cur == root {
                break;
            }
            cur = t.links.iter().find(|l| l.child == cur).unwrap().parent;
        }
        assert_eq!(cur, root);
    }
}

#[test]
fn a_group_across_pods_is_a_tree_rooted_at_a_top_switch() {
    // PGFT(3;2,2,3;1,2,2;1,2,1): 12 nodes, 6 leaves (2 per pod), 6 level-1, 4 top switches.
    let t = pgft(&[2, 2, 3], &[1, 2, 2], &[1, 2, 1]);
    let f = &t.fabric;
    let r = ranking(f);
    let g = group(0xC005, &[0, 3, 5, 11], &[7]);
    let out = route_multicast(f, &r, &[g]);
    assert!(out.rejected.is_empty());
    let tree = out.tree(0xC005).unwrap();
    assert!(tree.unreachable.is_empty());
    let root = tree.root.unwrap();
    assert_eq!(r.level[root.idx()], Some(2));
    assert_tree(f, &r, tree);
    for e in [0, 3, 5, 11, 7] {
        assert!(tree.switches.contains(&leaf_of(f, e)));
    }
    // Receivers' port bits set, the sender's not.
    for e in [0u32, 3, 5, 11] {
        let (leaf, port) = f.end_port(EndPortId(e)).attach.unwrap();
        assert!(has_port(&out.mfts.mask(leaf, 0xC005), port));
    }
    let (l7, p7) = f.end_port(EndPortId(7)).attach.unwrap();
    assert!(!has_port(&out.mfts.mask(l7, 0xC005), p7));
    // Switches outside the tree have no entry.
    for s in f.switch_ids().filter(|s| !tree.switches.contains(s)) {
        assert_eq!(out.mfts.mask(s, 0xC005), [0; 4]);
    }
    for src in [0, 3, 5, 11, 7] {
        assert_flood(f, &out.mfts, src, 0xC005, &[0, 3, 5, 11]);
    }
    let (_, lids, lfts) = routed(f, EngineKind::Dmodc, 0);
    assert!(mcast_deadlock_free(f, &lfts, &lids, &out.mfts));
}

#[test]
fn single_receiver_and_single_leaf_groups_use_no_uplink() {
    let t = pgft(&[2, 2, 3], &[1, 2, 2], &[1, 2, 1]);
    let f = &t.fabric;
    let r = ranking(f);
    // Nodes 0 and 1 share a leaf.
    assert_eq!(leaf_of(f, 0), leaf_of(f, 1));
    let out = route_multicast(f, &r, &[group(0xC000, &[4], &[]), group(0xC001, &[0], &[1])]);
    let t0 = out.tree(0xC000).unwrap();
    assert_eq!(t0.root, Some(leaf_of(f, 4)));
    assert!(t0.links.is_empty());
    let (leaf, port) = f.end_port(EndPortId(4)).attach.unwrap();
    let want = {
        let mut m = [0; 4];
        m[port as usize / 64] |= 1 << (port % 64);
        m
    };
    assert_eq!(out.mfts.mask(leaf, 0xC000), want);
    assert_eq!(out.mfts.ports(leaf, 0xC000).collect::<Vec<_>>(), vec![port]);
    let t1 = out.tree(0xC001).unwrap();
    assert_eq!(t1.switches, vec![leaf_of(f, 0)]);
    assert_flood(f, &out.mfts, 1, 0xC001, &[0]);
    assert_flood(f, &out.mfts, 0, 0xC001, &[]);
}

#[test]
fn roots_are_balanced_over_the_top_switches() {
    let t = pgft(&[2, 2, 3], &[1, 2, 2], &[1, 2, 1]);
    let f = &t.fabric;
    let r = ranking(f);
    let tops: Vec<SwitchId> = f.switch_ids().filter(|s| r.level[s.idx()] == Some(2)).collect();
    assert_eq!(tops.len(), 4);
    // 10 groups spanning two pods (nodes 0 and 4+): every top switch roots 2 or 3.
    let groups: Vec<McastGroup> = (0..10).map(|i| group(0xC100 + 3 * i, &[0, 4 + i % 8], &[])).collect();
    let out = route_multicast(f, &r, &groups);
    for &top in &tops {
        let n = out.trees.iter().filter(|t| t.root == Some(top)).count();
        assert!(n == 2 || n == 3, "top {top:?} roots {n} groups");
    }
}

#[test]
fn a_disconnected_leaf_is_reported_and_the_rest_is_routed() {
    let t = pgft(&[2, 2, 3], &[1, 2, 2], &[1, 2, 1]);
    let leaf = leaf_of(&t.fabric, 0);
    let sw = t.fabric.switch(leaf);
    let downs: Vec<FabricEvent> = sw
        .external_ports()
        .filter(|(_, p)| matches!(p.remote, fabric_topology::Remote::Switch { .. }))
        .map(|(pn, _)| FabricEvent::LinkDown {
            switch: sw.guid,
            port: pn,
        })
        .collect();
    let f = t.fabric.apply(&downs).unwrap();
    let r = ranking(&f);
    let out = route_multicast(&f, &r, &[group(0xC010, &[0, 5, 9], &[1])]);
    let tree = out.tree(0xC010).unwrap();
    assert_eq!(tree.unreachable, vec![EndPortId(0), EndPortId(1)]);
    assert!(tree.root.is_some());
    assert_flood(&f, &out.mfts, 5, 0xC010, &[5, 9]);
    assert_flood(&f, &out.mfts, 9, 0xC010, &[5, 9]);
    // A dead member is unreachable too.
    let f2 = f
        .apply(&[FabricEvent::EndPortDown(f.end_port(EndPortId(9)).port_guid)])
        .unwrap();
    let out2 = route_multicast(&f2, &ranking(&f2), &[group(0xC010, &[5, 9], &[])]);
    assert_eq!(out2.trees[0].unreachable, vec![EndPortId(9)]);
}

#[test]
fn bad_groups_are_rejected_not_routed() {
    let t = pgft(&[2, 2, 3], &[1, 2, 2], &[1, 2, 1]);
    let f = &t.fabric;
    let out = route_multicast(
        f,
        &ranking(f),
        &[
            group(0xBFFF, &[0], &[]),
            group(0xFFFF, &[0], &[]),
            group(0xC002, &[0, 99], &[]),
            group(0xC001, &[0, 4], &[]),
            group(0xC001, &[2], &[]),
        ],
    );
    assert_eq!(out.trees.len(), 1);
    assert_eq!(out.trees[0].mlid, 0xC001);
    assert!(out.trees[0].switches.contains(&leaf_of(f, 4)));
    assert_eq!(out.mfts.num_slots(), 2);
    let want = vec![
        McastInputError::MlidOutOfRange { mlid: 0xBFFF },
        McastInputError::MlidOutOfRange { mlid: 0xFFFF },
        McastInputError::UnknownEndPort {
            mlid: 0xC002,
            end_port: EndPortId(99),
            end_ports: 12,
        },
        McastInputError::DuplicateMlid { mlid: 0xC001 },
    ];
    assert_eq!(out.rejected, want);
}

#[test]
fn mft_blocks_follow_the_wire_layout() {
    let t = pgft(&[2, 2, 3], &[1, 2, 2], &[1, 2, 1]);
    let f = &t.fabric;
    let sw = SwitchId(0);
    let nports = f.switch(sw).nports;
    let npos = num_positions(nports);
    assert_eq!(npos as usize, (nports as usize + 1).div_ceil(16));
    let mut m = Mfts::new(f.num_switches(), 0x40);
    // MLID 0xC021 = block 1, entry 1; port 3 = position 0 bit 3.
    let mut mask = [0; 4];
    mask[0] |= 1 << 3;
    assert!(m.set_mask(sw, 0xC021, mask));
    assert!(!m.set_mask(sw, 0xC040, mask));
    let d = mft_diff(&Mfts::default(), &m, f);
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].switch, d[0].block, d[0].position), (sw, 1, 0));
    let mut e = [0u16; 32];
    e[1] = 1 << 3;
    assert_eq!(d[0].entries, e);
    // Going away: the zeroing write, against a smaller (empty) table.
    let z = mft_diff(&m, &Mfts::new(f.num_switches(), 0), f);
    assert_eq!(z.len(), 1);
    assert_eq!(z[0].entries, [0; 32]);
    assert!(mft_diff(&m, &m.clone(), f).is_empty());
    // A full resync: every block and position of the switch.
    let all = m.switch_blocks(f, sw);
    assert_eq!(all.len(), 2 * npos as usize);
    assert_eq!(all.iter().filter(|b| b.entries != [0; 32]).count(), 1);
    assert_eq!(
        m.all_blocks(f).len(),
        f.switch_ids()
            .map(|s| 2 * num_positions(f.switch(s).nports) as usize)
            .sum::<usize>()
    );
}

#[test]
fn a_down_up_multicast_loop_is_caught_by_flood_and_the_cdg() {
    // 2 leaves × 2 spines: masks that bounce copies l0 → s0 → l1 → s1 → l0.
    let t = pgft(&[1, 2], &[1, 2], &[1, 1]);
    let f = &t.fabric;
    let (_, lids, lfts) = routed(f, EngineKind::Dmodc, 0);
    let (l0, l1, s0, s1) = (SwitchId(0), SwitchId(1), SwitchId(2), SwitchId(3));
    let port = |a: SwitchId, b: SwitchId| f.port_groups(a).iter().find(|g| g.remote == b).unwrap().ports[0];
    let mut m = Mfts::new(f.num_switches(), 1);
    let mut set = |s: SwitchId, ports: &[u8]| {
        let mut mask = [0; 4];
        for &p in ports {
            mask[p as usize / 64] |= 1 << (p % 64);
        }
        m.set_mask(s, 0xC000, mask);
    };
    set(l0, &[port(l0, s0)]);
    set(s0, &[port(s0, l1)]);
    set(l1, &[port(l1, s1)]);
    set(s1, &[port(s1, l0)]);
    assert!(matches!(
        flood(f, &m, EndPortId(0), 0xC000),
        Err(FloodError::Loop { .. })
    ));
    assert!(!mcast_deadlock_free(f, &lfts, &lids, &m));
    // The routed tree of the same group is fine.
    let out = route_multicast(f, &ranking(f), &[group(0xC000, &[0, 1], &[])]);
    assert!(mcast_deadlock_free(f, &lfts, &lids, &out.mfts));
    assert_flood(f, &out.mfts, 0, 0xC000, &[1]);
    assert!(matches!(
        flood(f, &out.mfts, EndPortId(0), 0x10),
        Err(FloodError::NotMulticast { .. })
    ));
}

#[test]
fn a_pod_cut_from_the_tops_roots_its_groups_lower_and_reports_the_rest() {
    // Pod 0 (nodes 0..4, leaves 0 and 1) loses every uplink of its middle switches.
    let t = pgft(&[2, 2, 3], &[1, 2, 2], &[1, 2, 1]);
    let f0 = &t.fabric;
    let r0 = ranking(f0);
    let pod0: Vec<SwitchId> = vec![leaf_of(f0, 0), leaf_of(f0, 2)];
    assert_ne!(pod0[0], pod0[1]);
    let middles: Vec<SwitchId> = f0.port_groups(pod0[0]).iter().map(|g| g.remote).collect();
    let mut cut = Vec::new();
    for &m in &middles {
        for g in f0.port_groups(m) {
            if r0.level[g.remote.idx()] > r0.level[m.idx()] {
                cut.extend(g.ports.iter().map(|&p| FabricEvent::LinkDown {
                    switch: f0.switch(m).guid,
                    port: p,
                }));
            }
        }
    }
    let f = f0.apply(&cut).unwrap();
    let r = ranking(&f);
    let out = route_multicast(&f, &r, &[group(0xC000, &[0, 2], &[]), group(0xC001, &[0, 4, 8], &[])]);
    // Both pod-0 leaves: rooted at a pod-0 middle switch, the highest level reaching both.
    let a = out.tree(0xC000).unwrap();
    assert!(middles.contains(&a.root.unwrap()), "{a:?}");
    assert!(a.unreachable.is_empty());
    assert_tree(&f, &r, a);
    assert_flood(&f, &out.mfts, 0, 0xC000, &[0, 2]);
    // Across pods: no switch reaches all; the root reaches two of three, node 0 is reported.
    let b = out.tree(0xC001).unwrap();
    assert_eq!(b.unreachable, vec![EndPortId(0)]);
    assert_tree(&f, &r, b);
    assert_flood(&f, &out.mfts, 4, 0xC001, &[4, 8]);
}

#[test]
fn groups_spread_over_parallel_cables_and_top_switches() {
    // Leaf-to-middle links are doubled (p2 = 2): over many groups, both cables of a leaf's
    // link to its parent carry trees.
    let t = pgft(&[2, 2, 3], &[1, 2, 2], &[1, 2, 1]);
    let f = &t.fabric;
    let r = ranking(f);
    let groups: Vec<McastGroup> = (0..32).map(|i| group(0xC000 + i, &[0, 11], &[])).collect();
    let out = route_multicast(f, &r, &groups);
    let mut used = std::collections::BTreeSet::new();
    for tr in &out.trees {
        assert_tree(f, &r, tr);
        let l = tr.links.iter().find(|l| l.child == leaf_of(f, 0)).unwrap();
        used.insert((l.parent, l.child_port));
    }
    // Two middle switches above the leaf, two cables each.
    assert_eq!(used.len(), 4, "{used:?}");
}
