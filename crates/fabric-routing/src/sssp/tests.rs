//! Unit tests of the SSSP kernel: the weight update on a hand-built fabric, the plain form on a
//! topology that is not a tree, and load conservation.

use fabric_topology::{EndPortId, Fabric, FabricBuilder, NodeType, SwitchId};

use super::*;
use crate::lft::NO_ROUTE;
use crate::testutil::*;

/// Leaves A (1 end port) and B (2 end ports), spines S0 and S1, each leaf cabled to both
/// spines (A port 5 → S0, A port 6 → S1; B likewise). Switch ids: A 0, B 1, S0 2, S1 3.
fn two_by_two() -> Fabric {
    let mut b = FabricBuilder::new();
    let a = b.add_switch(0x10, "A", 8).unwrap();
    let bb = b.add_switch(0x11, "B", 8).unwrap();
    let s0 = b.add_switch(0x20, "S0", 8).unwrap();
    let s1 = b.add_switch(0x21, "S1", 8).unwrap();
    for leaf in [a, bb] {
        b.connect_switches(leaf, 5, s0, 1 + leaf.0 as u8).unwrap();
        b.connect_switches(leaf, 6, s1, 1 + leaf.0 as u8).unwrap();
    }
    for (i, (leaf, port)) in [(a, 1u8), (bb, 1), (bb, 2)].into_iter().enumerate() {
        let e = b
            .add_end_port(
                0x100 + i as u64,
                0x200 + i as u64,
                format!("n{i}"),
                1,
                1,
                NodeType::Compute,
            )
            .unwrap();
        b.connect_end_port(e, leaf, port).unwrap();
    }
    b.build()
}

fn collect(f: &Fabric, paths: PathSet<'_>) -> (Vec<(EndPortId, Vec<u8>)>, Balanced) {
    let mut out = Vec::new();
    let bal = route_paths(f, paths, |ep, next| out.push((ep, next.to_vec())));
    (out, bal)
}

fn load_of(bal: &Balanced, s: u32, port: u8) -> u64 {
    bal.load[bal.channels.find(SwitchId(s), port).unwrap() as usize]
}

#[test]
fn weights_steer_the_second_destination_away_from_the_first() {
    let f = two_by_two();
    let frame = updown_frame(&f, &bfs_rank(&f));
    assert!(frame.from_ranking);
    for paths in [
        PathSet::Shortest,
        PathSet::UpDown {
            o: &frame.o,
            costs: &frame.costs,
        },
    ] {
        let (routes, bal) = collect(&f, paths);
        // B has more end ports: its two end ports are routed first, then A's.
        let order: Vec<u32> = routes.iter().map(|(e, _)| e.0).collect();
        assert_eq!(order, vec![1, 2, 0]);
        assert_eq!(bal.dests.iter().map(|e| e.0).collect::<Vec<_>>(), order);
        // First destination: everything at load 0, A takes its first channel (to S0).
        assert_eq!(routes[0].1[0], 5);
        // Second destination: A→S0→B carries one route, A→S1→B none: A is steered to S1.
        assert_eq!(routes[1].1[0], 6);
        // Spines go straight down to B, B delivers on the end ports' leaf ports.
        assert_eq!((routes[0].1[2], routes[0].1[3]), (2, 2));
        assert_eq!((routes[0].1[1], routes[1].1[1]), (1, 2));
        // A's end port: B's two sources take the idle channel B→S0 (tie, first channel).
        assert_eq!(routes[2].1[1], 5);
        assert_eq!(routes[2].1[0], 1);
        // Loads: one route per channel towards B, B's two sources towards A.
        assert_eq!(load_of(&bal, 0, 5), 1);
        assert_eq!(load_of(&bal, 0, 6), 1);
        assert_eq!(load_of(&bal, 2, 2), 1);
        assert_eq!(load_of(&bal, 3, 2), 1);
        assert_eq!(load_of(&bal, 1, 5), 2);
        assert_eq!(load_of(&bal, 2, 1), 2);
        assert_eq!(load_of(&bal, 1, 6), 0);
        assert_eq!(load_of(&bal, 3, 1), 0);
    }
}

/// Hop distance between every pair of live switches (BFS).
fn hops(f: &Fabric) -> Vec<Vec<u32>> {
    let n = f.num_switches();
    (0..n)
        .map(|a| {
            let mut d = vec![u32::MAX; n];
            let mut q = std::collections::VecDeque::from([SwitchId(a as u32)]);
            d[a] = 0;
            while let Some(s) = q.pop_front() {
                for g in f.port_groups(s) {
                    if d[g.remote.idx()] == u32::MAX {
                        d[g.remote.idx()] = d[s.idx()] + 1;
                        q.push_back(g.remote);
                    }
                }
            }
            d
        })
        .collect()
}

/// Walks every (source end port, destination) pair of `routes`; returns the switch-to-switch
/// hops of each path, checking that each path is minimal when `minimal` (panics on a loop).
fn walk_all(f: &Fabric, routes: &[(EndPortId, Vec<u8>)], minimal: bool) -> u64 {
    let dist = hops(f);
    let mut total = 0;
    for (d, next) in routes {
        let (dleaf, dport) = f.end_port(*d).attach.unwrap();
        for src in f.end_port_ids().filter(|&e| e != *d && f.end_port_live(e)) {
            let mut s = f.end_port(src).attach.unwrap().0;
            if dist[s.idx()][dleaf.idx()] == u32::MAX {
                assert_eq!(next[s.idx()], NO_ROUTE, "{src:?} -> {d:?} is disconnected");
                continue;
            }
            let mut n = 0;
            while s != dleaf {
                let (t, _) = f.switch_link_live(s, next[s.idx()]).expect("live channel");
                s = t;
                n += 1;
                assert!(n <= f.num_switches() as u32, "loop towards {d:?}");
            }
            assert_eq!(next[dleaf.idx()], dport);
            let src_leaf = f.end_port(src).attach.unwrap().0;
            if minimal {
                assert_eq!(n, dist[src_leaf.idx()][dleaf.idx()], "{src:?} -> {d:?}");
            }
            total += u64::from(n);
        }
    }
    total
}

#[test]
fn plain_form_routes_minimal_paths_on_any_topology() {
    for n in [5, 8, 11] {
        let f = ring(n);
        let (routes, bal) = collect(&f, PathSet::Shortest);
        assert_eq!(routes.len(), n as usize);
        let total = walk_all(&f, &routes, true);
        // Every route charged its channels exactly once.
        assert_eq!(bal.load.iter().sum::<u64>(), total);
    }
}

#[test]
fn loads_count_every_route_on_degraded_pgfts() {
    let t = pgft(&[3, 3, 4], &[1, 3, 3], &[1, 2, 1]);
    for seed in 0..4 {
        let f = degrade(&t.fabric, 8 + seed as usize * 3, (seed % 2) as usize, seed);
        let frame = updown_frame(&f, &bfs_rank(&f));
        for (paths, minimal) in [
            (PathSet::Shortest, true),
            (
                PathSet::UpDown {
                    o: &frame.o,
                    costs: &frame.costs,
                },
                false,
            ),
        ] {
            let (routes, bal) = collect(&f, paths);
            let live = f.end_port_ids().filter(|&e| f.end_port_live(e)).count();
            assert_eq!(routes.len(), live, "seed {seed}");
            let total = walk_all(&f, &routes, minimal);
            assert_eq!(bal.load.iter().sum::<u64>(), total, "seed {seed}");
            assert!(routes.iter().all(|(_, next)| next.iter().any(|&p| p != NO_ROUTE)));
        }
    }
}
