//! Tests of the balanced engine: the incremental cycle check, validity, per-VL acyclicity,
//! the VL budget, determinism, and the daemon's layering.

use fabric_topology::gen::{generate_str, Degrade};
use fabric_topology::Fabric;
use proptest::prelude::*;

use super::cdg::{Cdg, Scratch, Shape};
use super::{layering, VlPlan, NO_VL};
use crate::check::{cdg_acyclic, cdg_acyclic_per_layer, validity};
use crate::layered::graphs::torus;
use crate::sssp::Channels;
use crate::testutil::*;
use crate::vl::base_lids;
use crate::{engine, EngineKind, LidSet};

fn gen(spec: &str, links: usize, seed: u64) -> Fabric {
    let d = Degrade {
        remove_links: links,
        remove_switches: 0,
        seed,
    };
    generate_str(spec, (links > 0).then_some(&d)).unwrap()
}

/// A ring of `n` switches without chord: channel `2i` = `i → i+1`, `2i+1` = `i → i−1`.
fn ring_shape(n: u32) -> (Fabric, Channels, Shape) {
    let f = ring(n);
    let ch = Channels::new(&f);
    let sh = Shape::new(&ch, f.num_switches());
    (f, ch, sh)
}

/// The channel of `ch` from switch `a` to switch `b`.
fn chan(ch: &Channels, a: usize, b: u32) -> u32 {
    ch.of_switch(a).find(|&x| ch.remote[x as usize] == b).unwrap()
}

#[test]
fn incremental_cdg_refuses_exactly_the_cycle_closing_edge() {
    let (f, ch, sh) = ring_shape(6);
    let n = f.num_switches() as u32;
    let mut g = Cdg::new(&sh);
    let mut sc = Scratch::default();
    // Clockwise dependencies (i → i+1) → (i+1 → i+2) around the ring: the last one closes it.
    let cw: Vec<u32> = (0..n).map(|i| chan(&ch, i as usize, (i + 1) % n)).collect();
    for i in 0..n as usize - 1 {
        assert!(g.try_add(&sh, &mut sc, cw[i], cw[i + 1]), "edge {i}");
        assert!(g.order_ok(&sh));
    }
    assert!(!g.try_add(&sh, &mut sc, cw[n as usize - 1], cw[0]), "closes the ring");
    assert!(!g.has(&sh, cw[n as usize - 1], cw[0]));
    assert!(g.order_ok(&sh));
    // A second reference, then removing one keeps the edge; removing both drops it and the
    // closing edge becomes legal.
    assert!(g.try_add(&sh, &mut sc, cw[2], cw[3]));
    g.remove(&sh, cw[2], cw[3]);
    assert!(g.has(&sh, cw[2], cw[3]));
    assert!(!g.try_add(&sh, &mut sc, cw[n as usize - 1], cw[0]));
    g.remove(&sh, cw[2], cw[3]);
    assert!(g.try_add(&sh, &mut sc, cw[n as usize - 1], cw[0]));
    assert!(g.order_ok(&sh));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random insertions and removals on a torus's channels: the graph stays acyclic (checked
    /// by Kahn on the present edges), the order stays topological, and an insertion is refused
    /// exactly when the edge would close a cycle.
    #[test]
    fn incremental_cdg_matches_a_full_cycle_check(ops in prop::collection::vec((any::<u32>(), any::<u32>(), any::<bool>()), 1..300), reversed in any::<bool>()) {
        let f = torus(4, 3);
        let ch = Channels::new(&f);
        let sh = Shape::new(&ch, f.num_switches());
        // From the identity order or (`Cdg::with_order`) its reverse.
        let mut g = if reversed {
            Cdg::with_order(&sh, &(0..ch.len() as u32).rev().collect::<Vec<_>>())
        } else {
            Cdg::new(&sh)
        };
        prop_assert!(g.order_ok(&sh));
        let mut sc = Scratch::default();
        let mut present: Vec<(u32, u32)> = Vec::new();
        let nchan = ch.len() as u32;
        for (a, b, add) in ops {
            let x = a % nchan;
            let h = ch.remote[x as usize] as usize;
            let outs: Vec<u32> = ch.of_switch(h).collect();
            let y = outs[b as usize % outs.len()];
            if add {
                let mut with = present.clone();
                with.push((x, y));
                with.sort_unstable();
                with.dedup();
                let legal = crate::deadlock::edges_acyclic(ch.len(), &with);
                prop_assert_eq!(g.try_add(&sh, &mut sc, x, y), legal);
                if legal {
                    present.push((x, y));
                }
            } else if let Some(i) = present.iter().position(|&e| e == (x, y)) {
                present.swap_remove(i);
                g.remove(&sh, x, y);
            }
            prop_assert!(g.order_ok(&sh));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// `Shape::forward_order` is an order of every channel in which every edge of an acyclic
    /// edge set points forward (a graph started from it adds them without a search), and of a
    /// cyclic one at least every edge outside a cycle.
    #[test]
    fn forward_order_points_acyclic_edges_forward(picks in prop::collection::vec((any::<u32>(), any::<u32>()), 0..120)) {
        let f = torus(4, 3);
        let ch = Channels::new(&f);
        let sh = Shape::new(&ch, f.num_switches());
        let nchan = ch.len() as u32;
        let mut edges: Vec<(u32, u32)> = Vec::new();
        let mut present = vec![false; sh.num_slots()];
        for (a, b) in picks {
            let x = a % nchan;
            let outs: Vec<u32> = ch.of_switch(ch.remote[x as usize] as usize).collect();
            let y = outs[b as usize % outs.len()];
            present[sh.slot(x, y)] = true;
            edges.push((x, y));
        }
        edges.sort_unstable();
        edges.dedup();
        let order = sh.forward_order(&present);
        let mut pos = vec![u32::MAX; ch.len()];
        for (p, &a) in order.iter().enumerate() {
            prop_assert_eq!(pos[a as usize], u32::MAX, "channel {} twice", a);
            pos[a as usize] = p as u32;
        }
        prop_assert_eq!(order.len(), ch.len());
        // Whether `y` reaches `x` over the edges (then `x → y` lies on a cycle).
        let reaches = |y: u32, x: u32| {
            let (mut seen, mut stack) = (vec![false; ch.len()], vec![y]);
            while let Some(a) = stack.pop() {
                if a == x {
                    return true;
                }
                for &(p, q) in &edges {
                    if p == a && !seen[q as usize] {
                        seen[q as usize] = true;
                        stack.push(q);
                    }
                }
            }
            false
        };
        for &(x, y) in &edges {
            if pos[x as usize] > pos[y as usize] {
                prop_assert!(reaches(y, x), "{} → {} backward but on no cycle", x, y);
            }
        }
        if crate::deadlock::edges_acyclic(ch.len(), &edges) {
            let mut g = Cdg::with_order(&sh, &order);
            let mut sc = Scratch::default();
            for &(x, y) in &edges {
                prop_assert!(g.try_add(&sh, &mut sc, x, y));
            }
            prop_assert!(g.order_ok(&sh));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// `Shape::components` gives the strongly connected components (two channels share one
    /// exactly when each reaches the other, checked by brute force), each contiguous in its
    /// order, with [`Shape::forward_order`]'s relative order inside a component (its edges
    /// closing no cycle point forward). The first fit adds only edges inside a component
    /// to its layers: this is what makes that the same layering.
    #[test]
    fn components_are_the_strongly_connected_ones(picks in prop::collection::vec((any::<u32>(), any::<u32>()), 0..120)) {
        let f = torus(4, 3);
        let ch = Channels::new(&f);
        let sh = Shape::new(&ch, f.num_switches());
        let n = ch.len();
        let mut present = vec![false; sh.num_slots()];
        let mut edges: Vec<(u32, u32)> = Vec::new();
        for (a, b) in picks {
            let x = a % n as u32;
            let outs: Vec<u32> = ch.of_switch(ch.remote[x as usize] as usize).collect();
            let y = outs[b as usize % outs.len()];
            present[sh.slot(x, y)] = true;
            edges.push((x, y));
        }
        let (order, comp) = sh.components(&present);
        let mut reach = vec![vec![false; n]; n];
        for (s, row) in reach.iter_mut().enumerate() {
            let mut stack = vec![s as u32];
            row[s] = true;
            while let Some(a) = stack.pop() {
                for &(p, q) in &edges {
                    if p == a && !row[q as usize] {
                        row[q as usize] = true;
                        stack.push(q);
                    }
                }
            }
        }
        for a in 0..n {
            for b in 0..n {
                prop_assert_eq!(comp[a] == comp[b], reach[a][b] && reach[b][a], "channels {} and {}", a, b);
            }
        }
        prop_assert_eq!(order.len(), n);
        let mut pos = vec![u32::MAX; n];
        for (p, &a) in order.iter().enumerate() {
            prop_assert_eq!(pos[a as usize], u32::MAX, "channel {} twice", a);
            pos[a as usize] = p as u32;
        }
        // Contiguous: a component, once left, never comes back.
        let mut done = std::collections::HashSet::new();
        for w in order.windows(2) {
            let (c, d) = (comp[w[0] as usize], comp[w[1] as usize]);
            if c != d {
                prop_assert!(done.insert(c), "component {} split", c);
                prop_assert!(!done.contains(&d), "component {} split", d);
            }
        }
        let fwd = sh.forward_order(&present);
        let mut fpos = vec![0u32; n];
        for (p, &a) in fwd.iter().enumerate() {
            fpos[a as usize] = p as u32;
        }
        for a in 0..n {
            for b in 0..n {
                if comp[a] == comp[b] {
                    prop_assert_eq!(pos[a] < pos[b], fpos[a] < fpos[b]);
                }
            }
        }
    }
}

/// Routes `f` with `balanced:V` (LMC `lmc`) and checks validity, the per-VL CDGs on the
/// engine's assignment, the VL budget and the daemon's layering; returns the tables.
fn check_balanced(f: &Fabric, v: u8, lmc: u8) -> crate::Lfts {
    let kind = EngineKind::Balanced { vls: v };
    let (_, lids, lfts) = routed(f, kind, lmc);
    let rep = validity(f, &lids, &lfts);
    assert!(rep.valid, "balanced:{v} invalid: {rep:?}");
    let l = layering(f, &lids, &lfts, v).unwrap().expect("every VL acyclic");
    assert!(l.num_layers <= v, "{} layers > {v}", l.num_layers);
    let dl = base_lids(f, &lids);
    let ok = cdg_acyclic_per_layer(f, &[&lfts], &dl, &l);
    assert!(ok.iter().all(|&x| x), "{ok:?}");
    // The daemon's layering is the engine's assignment.
    let d = crate::vl_layering(kind, f, &lids, &lfts, 15).unwrap().unwrap();
    assert_eq!(d, l);
    let plan = VlPlan::new(f, &lids, v);
    for &lid in &dl {
        for s in f.switch_ids() {
            let p = lfts.get(s, lid);
            if p != 0 && p != crate::NO_ROUTE {
                assert_eq!(d.layer_of(0, s, lid), plan.vl_of(lid));
                assert_ne!(plan.vl_of(lid), NO_VL);
            }
        }
    }
    if lmc >= 1 {
        assert!(cdg_acyclic(f, &lids, &lfts, LidSet::Escape));
    }
    lfts
}

#[test]
fn one_vl_is_deadlock_free_on_one_vl() {
    for f in [gen("SLIMFLY(5;4)", 0, 0), gen("SLIMFLY(5;4)", 9, 1), torus(5, 4)] {
        let (_, lids, lfts) = routed(&f, EngineKind::Balanced { vls: 1 }, 0);
        assert!(validity(&f, &lids, &lfts).valid);
        // The plain one-VL CDG check of every base route.
        assert!(cdg_acyclic(&f, &lids, &lfts, LidSet::Base));
        check_balanced(&f, 1, 0);
    }
}

#[test]
fn balanced_routes_slim_flies_dragonflies_and_hyperx_within_the_budget() {
    for spec in ["SLIMFLY(5;4)", "DRAGONFLY(2)", "HYPERX(4,4;2)"] {
        for v in [1, 2, 3] {
            check_balanced(&gen(spec, 0, 0), v, 0);
        }
    }
    check_balanced(&gen("SLIMFLY(5;4)", 9, 3), 2, 1);
    check_balanced(&gen("SLIMFLY(5;4)", 0, 0), 2, 2);
}

#[test]
fn balanced_parses_prints_and_needs_a_layering() {
    let k: EngineKind = "balanced:3".parse().unwrap();
    assert_eq!(k, EngineKind::Balanced { vls: 3 });
    assert_eq!(k.to_string(), "balanced:3");
    assert_eq!(
        "balanced".parse::<EngineKind>().unwrap(),
        EngineKind::Balanced {
            vls: super::BALANCED_DEFAULT_VLS
        }
    );
    for bad in ["balanced:0", "balanced:9", "balanced:x", "balanced:", "balancedx"] {
        assert!(bad.parse::<EngineKind>().is_err(), "{bad}");
    }
    assert!(k.needs_vl_layering() && k.is_topology_agnostic());
    assert_eq!(engine(k).name(), "balanced");
    // Too few data VLs for the layers used: the error says how many.
    let f = gen("SLIMFLY(5;4)", 0, 0);
    let (_, lids, lfts) = routed(&f, k, 1);
    match crate::vl_layering(k, &f, &lids, &lfts, 3) {
        Err(crate::vl::VlError::TooFewVls {
            available: 2,
            needed: 3,
        }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_repaired_cyclic_layer_falls_back_to_dfsssp_cycle_breaking() {
    // Tables routed by another engine (DFSSSP's plain shortest paths on a torus, cyclic on one
    // VL): the balanced assignment of one VL is cyclic, so the layering is DFSSSP's.
    let f = torus(5, 4);
    let (_, lids, lfts) = routed(&f, EngineKind::Dfsssp, 0);
    assert_eq!(layering(&f, &lids, &lfts, 1).unwrap(), None);
    let k = EngineKind::Balanced { vls: 1 };
    let l = crate::vl_layering(k, &f, &lids, &lfts, 15).unwrap().unwrap();
    assert!(l.num_layers >= 2);
    let ok = cdg_acyclic_per_layer(&f, &[&lfts], &base_lids(&f, &lids), &l);
    assert!(ok.iter().all(|&x| x));
}

fn routed_with_threads(f: &Fabric, v: u8, threads: usize) -> Vec<u8> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| routed(f, EngineKind::Balanced { vls: v }, 1).2.as_bytes().to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Random regular graphs: valid, every VL acyclic, ≤ V layers, same bytes on 1 and 2
    /// threads.
    #[test]
    fn balanced_on_random_regular_graphs(n in 8u32..24, k in 3u32..6, seed in 0u64..1000, v in 1u8..4) {
        let k = if (n * k) % 2 == 1 { k + 1 } else { k };
        let f = match generate_str(&format!("RRG({n},{k},2;{seed})"), None) {
            Ok(f) => f,
            Err(_) => return Ok(()),
        };
        check_balanced(&f, v, 0);
        prop_assert_eq!(routed_with_threads(&f, v, 1), routed_with_threads(&f, v, 2));
    }

    /// Degraded Slim Flies (random cables removed, possibly split): valid, every VL acyclic,
    /// ≤ V layers, deterministic.
    #[test]
    fn balanced_on_degraded_slim_flies(links in 0usize..30, seed in 0u64..1000, v in 1u8..4) {
        let f = gen("SLIMFLY(5;2)", links, seed);
        check_balanced(&f, v, 1);
        prop_assert_eq!(routed_with_threads(&f, v, 1), routed_with_threads(&f, v, 2));
    }
}

/// Statistics on the paper-size fabrics (`cargo test -p fabric-routing balanced_stats --
/// --ignored --nocapture`).
#[test]
#[ignore = "statistics printout, run by hand with --nocapture"]
fn balanced_stats() {
    for spec in ["SLIMFLY(5;4)", "SLIMFLY(7)", "DRAGONFLY(2)", "HYPERX(4,4;2)"] {
        let f = gen(spec, 0, 0);
        for v in [1u8, 2, 3, 8] {
            let r = Routable::new(f.clone());
            let lids = crate::lid::LidPlan {
                lmc: 0,
                ..r.lids.clone()
            };
            let ctx = crate::RoutingContext {
                fabric: &f,
                ranking: &r.ranking,
                lids: &lids,
            };
            let mut lfts = crate::Lfts::new(f.num_switches(), lids.top());
            let t = std::time::Instant::now();
            let st = super::Balanced { vls: v }.route_stats(&ctx, &mut lfts).unwrap();
            println!("{spec} V={v}: {st:?} {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
        }
    }
}
