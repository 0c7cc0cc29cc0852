//! Up*/Down* (`updown`, the escape routing) picks minimal paths among the up*/down*-legal ones
//! (issue #16): on the real JANUS dump, on degraded PGFTs and on random connected graphs, no
//! route turns up after going down, and no pair that has a legal minimal path (a path of the
//! graph distance with no down→up turn) is routed on a longer one.
//!
//! Everything is recomputed here independently of the engine: the link orientation from its
//! definition (BFS depth from the root leaf, equal depth broken by GUID, up = towards the
//! smaller (depth, GUID)), graph distances by plain BFS, shortest legal paths by BFS over
//! (switch, phase) states, and the routes by walking the installed tables.

use std::collections::VecDeque;

use proptest::prelude::*;

use fabric_ranking::{rank, RankOptions};
use fabric_routing::check::{self, TraceEnd};
use fabric_routing::{
    assign_lids, route_all, trace, EngineKind, Guid2Lid, Lfts, LidPlan, LidSet, RoutingContext, IB_MAX_UNICAST_LID,
};
use fabric_topology::gen::{degrade, generate, Degrade};
use fabric_topology::{Fabric, FabricBuilder, NodeType, SwitchId};

const INF: u32 = u32::MAX;

/// BFS depths from `seeds` (one multi-source search), then from the Alg. 10 root (leaf with
/// the smallest GUID, else switch with the smallest GUID) of every component not reached.
fn depths(f: &Fabric, seeds: &[SwitchId]) -> Vec<u32> {
    let mut depth = vec![INF; f.num_switches()];
    let bfs = |seeds: &[SwitchId], depth: &mut Vec<u32>| {
        let mut q = VecDeque::new();
        for &r in seeds {
            if depth[r.idx()] == INF {
                depth[r.idx()] = 0;
                q.push_back(r);
            }
        }
        while let Some(s) = q.pop_front() {
            for g in f.port_groups(s) {
                if depth[g.remote.idx()] == INF {
                    depth[g.remote.idx()] = depth[s.idx()] + 1;
                    q.push_back(g.remote);
                }
            }
        }
    };
    bfs(seeds, &mut depth);
    let mut roots: Vec<SwitchId> = f.switch_ids().filter(|&s| f.switch(s).up).collect();
    roots.sort_by_key(|&s| (!f.is_leaf(s), f.switch(s).guid));
    for r in roots {
        bfs(&[r], &mut depth);
    }
    depth
}

/// The orientation key of every live switch: (BFS depth, GUID); a link is up from the larger
/// key to the smaller. The roots: the non-leaf switches with one hop-count bar over 90 % of
/// their component's end ports and no other over 5 %, that bar being the component's lowest
/// among such switches; if that leaves some leaf without a legal path to a leaf of its
/// component, single Alg. 10 roots instead.
fn orientation(f: &Fabric) -> Vec<Option<(u32, u64)>> {
    let leaves: Vec<SwitchId> = f.switch_ids().filter(|&s| f.switch(s).up && f.is_leaf(s)).collect();
    let plain: Vec<Vec<u32>> = f.switch_ids().map(|s| distances_plain(f, s)).collect();
    let mut cand: Vec<Option<(u32, SwitchId)>> = vec![None; f.num_switches()];
    for s in f.switch_ids().filter(|&s| f.switch(s).up && !f.is_leaf(s)) {
        let mut hist = std::collections::BTreeMap::new();
        let mut total = 0usize;
        let mut comp = None;
        for &l in &leaves {
            let d = plain[s.idx()][l.idx()];
            if d != INF {
                let k = f.attached_end_ports(l).len();
                *hist.entry(d).or_insert(0usize) += k;
                total += k;
                comp = comp.or(Some(l));
            }
        }
        let big: Vec<u32> = hist
            .iter()
            .filter(|(_, &h)| h * 100 > total * 90)
            .map(|(&d, _)| d)
            .collect();
        let mid = hist.values().filter(|&&h| h * 100 > total * 5).count();
        if total > 0 && big.len() == 1 && mid == 1 {
            cand[s.idx()] = Some((big[0], comp.unwrap()));
        }
    }
    let roots: Vec<SwitchId> = f
        .switch_ids()
        .filter(|&s| match cand[s.idx()] {
            Some((bar, comp)) => cand.iter().flatten().all(|&(b, c)| c != comp || b >= bar),
            None => false,
        })
        .collect();
    let key_of = |depth: &[u32]| -> Vec<Option<(u32, u64)>> {
        f.switch_ids()
            .map(|s| (depth[s.idx()] != INF).then(|| (depth[s.idx()], f.switch(s).guid)))
            .collect()
    };
    let multi = key_of(&depths(f, &roots));
    if roots.len() > 1 {
        for &s in &leaves {
            let (_, legal) = distances(f, &multi, s);
            if leaves
                .iter()
                .any(|&l| plain[s.idx()][l.idx()] != INF && legal[l.idx()] == INF)
            {
                return key_of(&depths(f, &[]));
            }
        }
    }
    multi
}

fn distances_plain(f: &Fabric, src: SwitchId) -> Vec<u32> {
    let mut plain = vec![INF; f.num_switches()];
    plain[src.idx()] = 0;
    let mut q = VecDeque::from([src]);
    while let Some(s) = q.pop_front() {
        for g in f.port_groups(s) {
            if plain[g.remote.idx()] == INF {
                plain[g.remote.idx()] = plain[s.idx()] + 1;
                q.push_back(g.remote);
            }
        }
    }
    plain
}

fn is_up(key: &[Option<(u32, u64)>], a: SwitchId, b: SwitchId) -> bool {
    key[b.idx()] < key[a.idx()]
}

/// Hop counts from `src` to every switch: plain (any path) and legal (no down→up turn), the
/// latter by BFS over (switch, phase): phase 0 = only up hops so far, phase 1 = went down.
fn distances(f: &Fabric, key: &[Option<(u32, u64)>], src: SwitchId) -> (Vec<u32>, Vec<u32>) {
    let n = f.num_switches();
    let plain = distances_plain(f, src);
    let mut st = vec![INF; 2 * n];
    st[2 * src.idx()] = 0;
    let mut q = VecDeque::from([(src, 0usize)]);
    while let Some((s, ph)) = q.pop_front() {
        let d = st[2 * s.idx() + ph];
        for g in f.port_groups(s) {
            let up = is_up(key, s, g.remote);
            if ph == 1 && up {
                continue;
            }
            let nph = usize::from(!up);
            let i = 2 * g.remote.idx() + nph;
            if st[i] == INF {
                st[i] = d + 1;
                q.push_back((g.remote, nph));
            }
        }
    }
    let legal = (0..n).map(|s| st[2 * s].min(st[2 * s + 1])).collect();
    (plain, legal)
}

/// What the walks through the tables found.
#[derive(Debug, Default, PartialEq, Eq)]
struct Census {
    /// (source leaf, destination LID) pairs walked.
    pairs: u64,
    /// Walks that did not reach their end port.
    unreachable: u64,
    /// Routes with a down→up turn.
    illegal: u64,
    /// Routes longer than the graph distance (whether or not a legal path of that length exists).
    nonminimal: u64,
    /// Routes longer than the graph distance although a legal path of the graph distance exists.
    nonminimal_with_legal_minimal: u64,
    /// Routes longer than the shortest legal path.
    longer_than_legal: u64,
}

/// Walks every (leaf with end ports, destination end port on another leaf) pair for the LIDs
/// `base + offset` of `set`'s routing.
fn census(f: &Fabric, lids: &LidPlan, lfts: &Lfts, offset: u32) -> Census {
    let key = orientation(f);
    let mut c = Census::default();
    let mut hops = Vec::new();
    let leaves: Vec<SwitchId> = f.switch_ids().filter(|&s| f.switch(s).up && f.is_leaf(s)).collect();
    for &src_leaf in &leaves {
        let src = f.attached_end_ports(src_leaf)[0];
        let (plain, legal) = distances(f, &key, src_leaf);
        for dst in f.end_port_ids().filter(|&e| f.end_port_live(e)) {
            let (dst_leaf, _) = f.end_port(dst).attach.unwrap();
            if dst_leaf == src_leaf || plain[dst_leaf.idx()] == INF {
                continue;
            }
            c.pairs += 1;
            match trace(f, lfts, src, lids.base_lid(dst) + offset, &mut hops) {
                Ok(TraceEnd::EndPort(e)) if e == dst => {}
                _ => {
                    c.unreachable += 1;
                    continue;
                }
            }
            // Switch-to-switch hops: every hop but the last (the leaf port).
            let len = hops.len() as u32 - 1;
            let mut went_down = false;
            for w in hops.windows(2) {
                let (a, b) = (w[0].0, w[1].0);
                if is_up(&key, a, b) {
                    if went_down {
                        c.illegal += 1;
                        break;
                    }
                } else {
                    went_down = true;
                }
            }
            let (p, l) = (plain[dst_leaf.idx()], legal[dst_leaf.idx()]);
            if len > p {
                c.nonminimal += 1;
                if l == p {
                    c.nonminimal_with_legal_minimal += 1;
                }
            }
            if len > l {
                c.longer_than_legal += 1;
            }
        }
    }
    c
}

/// Routes `f` with Up*/Down* for the base LIDs (LMC 1: the escape LIDs by Up*/Down* too) and
/// checks both sets: every pair reached, no illegal turn, no non-minimal pair that has a legal
/// minimal path, the escape set's channel dependencies acyclic. Returns the base set's census.
fn check_updown(name: &str, f: &Fabric) -> Census {
    let ranking = rank(f, &RankOptions::default());
    let lids = assign_lids(f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
    let ctx = RoutingContext {
        fabric: f,
        ranking: &ranking,
        lids: &lids,
    };
    let lfts = route_all(&ctx, EngineKind::UpDown).unwrap().lfts;
    let base = census(f, &lids, &lfts, 0);
    let escape = census(f, &lids, &lfts, 1);
    eprintln!("{name}: base {base:?}");
    for (set, c) in [("base", &base), ("escape", &escape)] {
        assert_eq!(c.unreachable, 0, "{name} {set}: {c:?}");
        assert_eq!(c.illegal, 0, "{name} {set}: {c:?}");
        assert_eq!(c.nonminimal_with_legal_minimal, 0, "{name} {set}: {c:?}");
    }
    // Base and escape LIDs of a destination are routed alike (same engine, same selection).
    assert_eq!(base, escape, "{name}");
    assert!(check::cdg_acyclic(f, &lids, &lfts, LidSet::Escape), "{name}");
    assert!(check::cdg_acyclic(f, &lids, &lfts, LidSet::Base), "{name}");
    let v = check::validity(f, &lids, &lfts);
    assert_eq!(v.escape_unreachable_count, 0, "{name}: {v:?}");
    base
}

#[test]
fn janus_updown_is_minimal_among_legal_paths() {
    let f = fabric_topology::ibnet::parse(
        include_str!("../../fabric-topology/tests/data/real/mlunacek-qdr-3xIS5600-214sw.ibnet"),
        "janus",
    )
    .unwrap()
    .fabric;
    let c = check_updown("janus", &f);
    eprintln!("janus updown: {c:?}");
    assert!(c.pairs > 100_000, "{c:?}");
}

#[test]
fn complete_and_degraded_pgfts_are_routed_minimally() {
    for (spec, links, switches, seed) in [
        ("PGFT(3;4,4,6;1,4,4;1,1,1)", 0usize, 0usize, 0u64),
        ("PGFT(3;4,4,6;1,4,4;1,1,1)", 20, 2, 1),
        ("PGFT(3;3,3,4;1,3,2;1,2,1)", 12, 1, 2),
        ("PGFT(2;8,16;1,8;1,2)", 10, 0, 3),
    ] {
        let f = generate(&spec.parse().unwrap()).unwrap().fabric;
        let f = degrade(
            &f,
            &Degrade {
                remove_links: links,
                remove_switches: switches,
                seed,
            },
        )
        .unwrap();
        let c = check_updown(spec, &f);
        if links == 0 && switches == 0 {
            // A complete fat-tree: every pair on a shortest path.
            assert_eq!(c.nonminimal, 0, "{spec}: {c:?}");
        }
    }
}

/// A random connected switch graph: a random spanning tree plus extra random cables (any
/// levels, parallel cables), end ports on random switches.
fn random_fabric(n: usize, extra: usize, eps: usize, seed: u64) -> Fabric {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut b = FabricBuilder::new();
    let sws: Vec<_> = (0..n)
        .map(|i| {
            b.add_switch(0x100 + rng.gen_range(0..1u64 << 20) * 64 + i as u64, "sw", 24)
                .unwrap()
        })
        .collect();
    let mut next = vec![1u8; n];
    let mut cable = |b: &mut FabricBuilder, x: usize, y: usize| {
        if x != y && next[x] <= 20 && next[y] <= 20 {
            b.connect_switches(sws[x], next[x], sws[y], next[y]).unwrap();
            next[x] += 1;
            next[y] += 1;
        }
    };
    for i in 1..n {
        let j = rng.gen_range(0..i);
        cable(&mut b, i, j);
    }
    for _ in 0..extra {
        let (x, y) = (rng.gen_range(0..n), rng.gen_range(0..n));
        cable(&mut b, x, y);
    }
    for e in 0..eps {
        let s = rng.gen_range(0..n);
        let ep = b
            .add_end_port(0x9000 + e as u64, 0x8000 + e as u64, "n", 1, 1, NodeType::Compute)
            .unwrap();
        b.connect_end_port(ep, sws[s], 21 + (e % 4) as u8).ok();
    }
    b.build()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_graphs_are_routed_minimally_among_legal_paths(
        n in 2usize..30,
        extra in 0usize..40,
        eps in 2usize..40,
        seed in any::<u64>(),
    ) {
        let f = random_fabric(n, extra, eps, seed);
        check_updown("random", &f);
    }

    #[test]
    fn random_degraded_pgfts_are_routed_minimally_and_deterministically(
        links in 0usize..25,
        switches in 0usize..4,
        seed in any::<u64>(),
    ) {
        let f = generate(&"PGFT(3;4,3,4;1,3,2;1,1,2)".parse().unwrap()).unwrap().fabric;
        let f = degrade(&f, &Degrade { remove_links: links, remove_switches: switches, seed }).unwrap();
        check_updown("pgft", &f);
        let lids = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        let ranking = rank(&f, &RankOptions::default());
        let ctx = RoutingContext { fabric: &f, ranking: &ranking, lids: &lids };
        let a = route_all(&ctx, EngineKind::UpDown).unwrap().lfts;
        let b = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap()
            .install(|| route_all(&ctx, EngineKind::UpDown).unwrap().lfts);
        prop_assert_eq!(a, b);
    }
}
