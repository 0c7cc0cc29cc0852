//! Direct topologies (issue #19): Slim Fly (MMS graphs, Slim Fly paper Appendix A), Dragonfly,
//! 2-D HyperX and random regular graphs — closed-form counts, regularity, diameter,
//! connectivity, ports, GUIDs, names, degradation and errors, all through `generate_str`.

use std::collections::{BTreeSet, VecDeque};

use fabric_topology::gen::{
    degrade_direct, generate_direct, generate_str, Degrade, DirectSpec, NODE_GUID_BASE, SWITCH_GUID_BASE,
};
use fabric_topology::{Fabric, Remote, SwitchId};
use proptest::prelude::*;

/// Switch neighbours (with multiplicity) of every switch.
fn adjacency(f: &Fabric) -> Vec<Vec<usize>> {
    f.switches()
        .iter()
        .map(|s| {
            s.external_ports()
                .filter_map(|(_, p)| match p.remote {
                    Remote::Switch { sw, .. } => Some(sw.idx()),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// Eccentricities by BFS: `None` if the switch graph is disconnected, else the diameter.
fn diameter(f: &Fabric) -> Option<usize> {
    let adj = adjacency(f);
    let n = adj.len();
    let mut diam = 0;
    for s in 0..n {
        let mut dist = vec![usize::MAX; n];
        dist[s] = 0;
        let mut queue = VecDeque::from([s]);
        while let Some(v) = queue.pop_front() {
            for &w in &adj[v] {
                if dist[w] == usize::MAX {
                    dist[w] = dist[v] + 1;
                    queue.push_back(w);
                }
            }
        }
        diam = diam.max(*dist.iter().max()?);
        if dist.contains(&usize::MAX) {
            return None;
        }
    }
    Some(diam)
}

/// Every switch has `ports` ports, `hosts` end nodes on ports `1..=hosts`, `radix` inter-switch
/// cables on the others, every port cabled, every cable symmetric; no self-loop.
fn assert_regular(f: &Fabric, hosts: usize, radix: usize) {
    for (i, s) in f.switches().iter().enumerate() {
        assert_eq!(s.nports as usize, hosts + radix, "{}", s.desc);
        for (pn, p) in s.external_ports() {
            match p.remote {
                Remote::EndPort(ep) => {
                    assert!((pn as usize) <= hosts, "{} port {pn}", s.desc);
                    assert_eq!(f.end_port(ep).attach, Some((SwitchId(i as u32), pn)));
                }
                Remote::Switch { sw, port } => {
                    assert!((pn as usize) > hosts);
                    assert_ne!(sw.idx(), i, "self-loop on {}", s.desc);
                    assert_eq!(
                        f.switch(sw).ports[port as usize].remote,
                        Remote::Switch {
                            sw: SwitchId(i as u32),
                            port: pn
                        }
                    );
                }
                ref r => panic!("{} port {pn} not cabled: {r:?}", s.desc),
            }
        }
    }
}

fn check_closed_forms(spec: &str, switches: usize, hosts: usize, radix: usize, diam: usize) -> Fabric {
    let f = generate_str(spec, None).unwrap_or_else(|e| panic!("{spec}: {e}"));
    let parsed: DirectSpec = spec.parse().unwrap();
    assert_eq!(f.num_switches(), switches, "{spec}");
    assert_eq!(parsed.num_switches() as usize, switches, "{spec}");
    assert_eq!(parsed.network_radix() as usize, radix, "{spec}");
    assert_eq!(f.num_end_ports(), switches * hosts, "{spec}");
    assert_eq!(f.count_links(), (switches * radix / 2, switches * radix / 2), "{spec}");
    assert_eq!(parsed.num_cables() as usize, switches * radix / 2, "{spec}");
    assert_regular(&f, hosts, radix);
    assert_eq!(diameter(&f), Some(diam), "{spec}: diameter");
    // Deterministic.
    assert_eq!(generate_str(spec, None).unwrap(), f);
    f
}

#[test]
fn slim_fly_mms_closed_forms() {
    // 2q² switches, k' = (3q − δ)/2, p = ⌈k'/2⌉ by default, diameter 2 (Slim Fly paper App. A.1).
    for (q, delta) in [
        (3i64, -1i64),
        (4, 0),
        (5, 1),
        (7, -1),
        (8, 0),
        (9, 1),
        (11, -1),
        (13, 1),
    ] {
        let k = ((3 * q - delta) / 2) as usize;
        let p = k.div_ceil(2);
        let qs = q as usize;
        check_closed_forms(&format!("SLIMFLY({q})"), 2 * qs * qs, p, k, 2);
    }
}

#[test]
fn the_papers_deployed_slim_fly() {
    // §3.1–3.2, App. A: q = 5, 50 switches, k' = 7, p = 4, 200 endpoints, 11-port switches: the
    // Hoffman–Singleton graph (7-regular, 50 vertices, diameter 2, girth 5).
    let f = check_closed_forms("SLIMFLY(5;4)", 50, 4, 7, 2);
    assert_eq!(f.num_end_ports(), 200);
    assert_eq!(f.count_links().0, 175);
    assert!(f.switches().iter().all(|s| s.nports == 11));
    assert_eq!(generate_str("SLIMFLY(5)", None).unwrap(), f);
    // Girth 5: no triangle and no 4-cycle (any two switches share at most one neighbour and
    // adjacent ones none) — the Moore-graph property.
    let adj = adjacency(&f);
    for a in 0..50 {
        for b in a + 1..50 {
            let na: BTreeSet<usize> = adj[a].iter().copied().collect();
            let common = adj[b].iter().filter(|x| na.contains(x)).count();
            let adjacent = na.contains(&b);
            assert_eq!(common, usize::from(!adjacent), "switches {a}, {b}");
        }
    }
    // App. A.4: 5 racks (x), each with 10 switches; rack groups of one subgraph are not cabled to
    // each other, and every group is cabled to every group of the other subgraph.
    for s in f.switches() {
        let d: Vec<u32> = s.desc["SLIMFLY S(".len()..s.desc.len() - 1]
            .split(',')
            .map(|x| x.parse().unwrap())
            .collect();
        let mut racks_other = BTreeSet::new();
        for (_, p) in s.external_ports() {
            if let Remote::Switch { sw, .. } = p.remote {
                let o = &f.switch(sw).desc;
                let od: Vec<u32> = o["SLIMFLY S(".len()..o.len() - 1]
                    .split(',')
                    .map(|x| x.parse().unwrap())
                    .collect();
                if od[0] == d[0] {
                    assert_eq!(od[1], d[1], "{} ~ {o}: groups of one subgraph are not cabled", s.desc);
                } else {
                    racks_other.insert(od[1]);
                }
            }
        }
        assert_eq!(racks_other.len(), 5, "{}", s.desc);
    }
    // Eq. 3 and the port toward rack m (§3.3): (0,x,y) port p + |X| + 1 + m goes to (1,m,y − m·x).
    let s = f.find_switch("SLIMFLY S(0,2,1)").unwrap();
    let want = f.find_switch("SLIMFLY S(1,3,0)").unwrap(); // 1 − 3·2 = −5 = 0 mod 5
    match f.switch(s).ports[4 + 2 + 1 + 3].remote {
        Remote::Switch { sw, port } => {
            assert_eq!(sw, want);
            assert_eq!(port, 4 + 2 + 1 + 2); // toward rack x = 2
        }
        r => panic!("{r:?}"),
    }
    // Eq. 1 with X = {1, 4} (ξ = 2): (0,2,1) ~ (0,2,2) and (0,2,0).
    let names: Vec<&str> = [5u8, 6]
        .iter()
        .map(|&pn| match f.switch(s).ports[pn as usize].remote {
            Remote::Switch { sw, .. } => f.switch(sw).desc.as_str(),
            _ => "",
        })
        .collect();
    assert_eq!(names, ["SLIMFLY S(0,2,2)", "SLIMFLY S(0,2,0)"]);
    // GUIDs and names.
    assert_eq!(f.switch(s).guid, SWITCH_GUID_BASE | 0x41 << 32 | 11);
    let ep = f.attached_end_ports(s)[3];
    assert_eq!(f.end_port(ep).desc, "n(3,0,2,1)");
    assert_eq!(f.end_port(ep).node_guid, NODE_GUID_BASE | (11 * 4 + 3) << 8);
    assert_eq!(f.end_port(ep).port_guid, f.end_port(ep).node_guid + 1);
}

#[test]
fn slim_fly_of_q7_and_explicit_concentration() {
    let f = check_closed_forms("SLIMFLY(7;2)", 98, 2, 11, 2);
    assert!(f.switches().iter().all(|s| s.nports == 13));
}

#[test]
fn dragonfly_closed_forms() {
    // Balanced a = 2p = 2h, g = a·h + 1: a·g switches, radix a − 1 + h, diameter 3.
    for h in 1..=4usize {
        let (a, p, g) = (2 * h, h, 2 * h * h + 1);
        check_closed_forms(&format!("DRAGONFLY({h})"), a * g, p, a - 1 + h, 3);
    }
    // Fewer groups with several global cables per group pair: still diameter 3.
    let f = check_closed_forms("DRAGONFLY(4,2,2;5)", 20, 2, 5, 3);
    // Absolute arrangement: every pair of groups has a·h/(g − 1) = 2 global cables.
    let group = |sw: SwitchId| {
        f.switch(sw).desc["DRAGONFLY S(".len()..]
            .split(',')
            .next()
            .unwrap()
            .to_string()
    };
    let mut pairs = std::collections::BTreeMap::new();
    for i in f.switch_ids() {
        for (pn, p) in f.switch(i).external_ports() {
            if let Remote::Switch { sw, .. } = p.remote {
                if group(i) != group(sw) {
                    assert!(pn >= 2 + 4, "global cable on a local port");
                    *pairs.entry((group(i), group(sw))).or_insert(0) += 1;
                }
            }
        }
    }
    assert_eq!(pairs.len(), 20);
    assert!(pairs.values().all(|&c| c == 2), "{pairs:?}");
    // Absolute rule, DRAGONFLY(1) = (2,1,1;3): group 0 router 0 global → group 1, router 1 → group 2.
    let f = generate_str("DRAGONFLY(1)", None).unwrap();
    let s = f.find_switch("DRAGONFLY S(0,1)").unwrap();
    match f.switch(s).ports[1 + 1 + 1].remote {
        Remote::Switch { sw, .. } => assert_eq!(f.switch(sw).desc, "DRAGONFLY S(2,0)"),
        r => panic!("{r:?}"),
    }
}

#[test]
fn hyperx_closed_forms() {
    check_closed_forms("HYPERX(4,4;2)", 16, 2, 6, 2);
    check_closed_forms("HYPERX(5,3;3)", 15, 3, 6, 2);
    // Link multiplicity: K parallel cables per pair.
    let f = check_closed_forms("HYPERX(3,4;2;2,1)", 12, 2, 7, 2);
    let s = f.find_switch("HYPERX S(0,0)").unwrap();
    let peers: Vec<String> = f
        .switch(s)
        .external_ports()
        .filter_map(|(_, p)| match p.remote {
            Remote::Switch { sw, .. } => Some(f.switch(sw).desc.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        peers,
        [
            "HYPERX S(1,0)",
            "HYPERX S(1,0)",
            "HYPERX S(2,0)",
            "HYPERX S(2,0)",
            "HYPERX S(0,1)",
            "HYPERX S(0,2)",
            "HYPERX S(0,3)"
        ]
    );
}

#[test]
fn bad_notations_are_clear_errors() {
    for (spec, want) in [
        ("SLIMFLY(6)", "q = 6 is not a prime power"),
        ("SLIMFLY(10)", "is not a prime power"),
        (
            "SLIMFLY(121)",
            "switches need 272 ports (91 end-node + 181 network), at most 254 are supported",
        ),
        ("HYPERX(100,100;60)", "switches need 258 ports"),
        ("DRAGONFLY(4,2,2;4)", "g − 1 = 3 must divide a·h = 8"),
        ("RRG(7,3,1;0)", "must be even"),
        (
            "TORUS(4,4)",
            "unknown topology kind 'TORUS', expected PGFT, XGFT, KARY, QFT, RLFT, SLIMFLY, DRAGONFLY, HYPERX or RRG",
        ),
    ] {
        let e = generate_str(spec, None).unwrap_err().to_string();
        assert!(e.contains(want), "{spec}: {e}");
    }
    // The largest Slim Fly under the 254-port limit with the paper's p: q = 113 (k' = 169, p = 85).
    let s: DirectSpec = "SLIMFLY(113)".parse().unwrap();
    assert_eq!(
        (s.network_radix(), s.hosts_per_switch(), s.switch_ports()),
        (169, 85, 254)
    );
    assert_eq!(s.num_switches(), 2 * 113 * 113);
}

#[test]
fn degradation_removes_cables_and_switches_with_their_nodes() {
    let full = generate_str("SLIMFLY(5)", None).unwrap();
    let d = Degrade {
        remove_links: 9,
        remove_switches: 2,
        seed: 3,
    };
    let deg = generate_str("SLIMFLY(5)", Some(&d)).unwrap();
    assert_eq!(deg, degrade_direct(&full, &d).unwrap());
    assert_eq!(deg.num_switches(), 48);
    assert_eq!(deg.num_end_ports(), 48 * 4);
    // 175 − 2·7 (both removed switches' cables, unless they were adjacent) − 9.
    let removed: Vec<_> = full
        .switches()
        .iter()
        .filter(|s| deg.switch_by_guid(s.guid).is_none())
        .map(|s| full.switch_by_guid(s.guid).unwrap())
        .collect();
    assert_eq!(removed.len(), 2);
    let between = adjacency(&full)[removed[0].idx()]
        .iter()
        .filter(|&&x| x == removed[1].idx())
        .count();
    assert_eq!(deg.count_links().0, 175 - 14 + between - 9);
    // Every end node of a removed switch is gone, every other one kept.
    for s in &removed {
        for &ep in full.attached_end_ports(*s) {
            assert!(deg.end_port_by_guid(full.end_port(ep).port_guid).is_none());
        }
    }
    // Cables only: every switch and node kept.
    let d = Degrade {
        remove_links: 5,
        remove_switches: 0,
        seed: 1,
    };
    for spec in ["DRAGONFLY(2)", "HYPERX(4,4;2)", "RRG(20,4,2;9)"] {
        let full = generate_str(spec, None).unwrap();
        let deg = generate_str(spec, Some(&d)).unwrap();
        assert_eq!(
            (deg.num_switches(), deg.num_end_ports()),
            (full.num_switches(), full.num_end_ports())
        );
        assert_eq!(deg.count_links().0, full.count_links().0 - 5, "{spec}");
    }
    let too_many = Degrade {
        remove_links: 0,
        remove_switches: 51,
        seed: 0,
    };
    assert!(generate_str("SLIMFLY(5)", Some(&too_many))
        .unwrap_err()
        .to_string()
        .contains("cannot remove 51"));
}

#[test]
fn generate_direct_matches_generate_str() {
    let s = DirectSpec::slimfly(7).unwrap();
    assert_eq!(s.to_string(), "SLIMFLY(7;6)");
    assert_eq!(generate_direct(&s).unwrap(), generate_str("SLIMFLY(7)", None).unwrap());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random regular graphs: connected, simple, k-regular, n·k/2 cables, deterministic for a
    /// seed, and the seed matters.
    #[test]
    fn random_regular_graphs(n in 4u32..60, k in 2u32..9, p in 1u32..4, seed in any::<u64>()) {
        let k = k.min(n - 1);
        let n = if n * k % 2 == 1 { n + 1 } else { n };
        let spec = format!("RRG({n},{k},{p};{seed})");
        let f = generate_str(&spec, None).unwrap();
        prop_assert_eq!(f.num_switches(), n as usize);
        prop_assert_eq!(f.num_end_ports(), (n * p) as usize);
        prop_assert_eq!(f.count_links().0, (n * k / 2) as usize);
        assert_regular(&f, p as usize, k as usize);
        prop_assert!(diameter(&f).is_some(), "{} is disconnected", spec);
        for a in adjacency(&f) {
            let set: BTreeSet<usize> = a.iter().copied().collect();
            prop_assert_eq!(set.len(), a.len(), "parallel cables in {}", spec);
        }
        prop_assert_eq!(&generate_str(&spec, None).unwrap(), &f);
    }
}

#[test]
fn rrg_seed_changes_the_graph() {
    let a = generate_str("RRG(30,4,1;1)", None).unwrap();
    let b = generate_str("RRG(30,4,1;2)", None).unwrap();
    assert_ne!(adjacency(&a), adjacency(&b));
}
