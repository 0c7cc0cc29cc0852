//! Tests of mu-sssp: validity, per-layer acyclicity of the installed layering, determinism,
//! and its all-to-all congestion against DFSSSP's (counted here from the tables, independently
//! of the engine's counters).

use std::collections::{BTreeMap, BTreeSet};

use fabric_topology::gen::{generate_str, Degrade};
use fabric_topology::Fabric;
use proptest::prelude::*;

use crate::check::{cdg_acyclic_per_layer, validity};
use crate::lid::LidPlan;
use crate::testutil::*;
use crate::vl::base_lids;
use crate::{engine, EngineKind, Lfts, NO_ROUTE};

fn gen(spec: &str, links: usize, seed: u64) -> Fabric {
    let d = Degrade {
        remove_links: links,
        remove_switches: 0,
        seed,
    };
    generate_str(spec, (links > 0).then_some(&d)).unwrap()
}

/// All-to-all `mu` walked on the tables: per directed switch port, min(distinct source end
/// ports, distinct destination end ports) of the end-port pairs whose route crosses it; max
/// over ports. Straightforward on purpose (sets per port).
fn a2a_mu(f: &Fabric, lids: &LidPlan, lfts: &Lfts) -> u64 {
    let mut ports: BTreeMap<(u32, u8), (BTreeSet<u32>, BTreeSet<u32>)> = BTreeMap::new();
    let eps: Vec<_> = f
        .end_port_ids()
        .filter_map(|e| f.end_port(e).attach.map(|(s, _)| (e, s)))
        .collect();
    for &(de, dsw) in &eps {
        let lid = lids.base_lid(de);
        for &(se, ssw) in &eps {
            if ssw == dsw {
                continue;
            }
            let mut s = ssw;
            for _ in 0..f.num_switches() {
                if s == dsw {
                    break;
                }
                let p = lfts.get(s, lid);
                assert!(p != NO_ROUTE && p != 0, "no route");
                let e = ports.entry((s.0, p)).or_default();
                e.0.insert(se.0);
                e.1.insert(de.0);
                s = match f.switch(s).ports[p as usize].remote {
                    fabric_topology::Remote::Switch { sw, .. } => sw,
                    ref other => panic!("port {p} leads to {other:?}"),
                };
            }
            assert_eq!(s, dsw, "route does not arrive");
        }
    }
    ports
        .values()
        .map(|(a, b)| a.len().min(b.len()) as u64)
        .max()
        .unwrap_or(0)
}

/// Runs `body` with `f`'s ranking and LMC-0 LIDs as a routing context.
fn with_ctx<T>(f: &Fabric, body: impl FnOnce(&crate::RoutingContext<'_>) -> T) -> T {
    let r = ranking(f);
    let lids = crate::lid::assign_lids(f, &Default::default(), 0, 0xBFFF).unwrap();
    body(&crate::RoutingContext {
        fabric: f,
        ranking: &r,
        lids: &lids,
    })
}

/// Routes `f` with `kind` (LMC `lmc`): checks validity and that the installed layering
/// (DFSSSP's cycle breaking, fewest layers) is acyclic per layer; returns (tables, LIDs,
/// layers).
fn check(f: &Fabric, kind: EngineKind, lmc: u8) -> (Lfts, LidPlan, u8) {
    let (_, lids, lfts) = routed(f, kind, lmc);
    let rep = validity(f, &lids, &lfts);
    assert!(rep.valid, "{kind} invalid: {rep:?}");
    let l = crate::vl_layering(kind, f, &lids, &lfts, 15).unwrap().unwrap();
    let ok = cdg_acyclic_per_layer(f, &[&lfts], &base_lids(f, &lids), &l);
    assert!(ok.iter().all(|&x| x), "{ok:?}");
    (lfts, lids, l.num_layers)
}

#[test]
fn mu_sssp_parses_prints_and_needs_a_layering() {
    let k: EngineKind = "mu-sssp".parse().unwrap();
    assert_eq!(k, EngineKind::MuSssp);
    assert_eq!(k.to_string(), "mu-sssp");
    assert!(k.needs_vl_layering() && k.is_topology_agnostic());
    assert_eq!(engine(k).name(), "mu-sssp");
    assert!(crate::ENGINE_NAMES.contains(&"mu-sssp"));
}

/// mu_a2a and layers of `kind` on `f` (LMC 0).
fn a2a(f: &Fabric, kind: EngineKind) -> (u64, u8) {
    let (lfts, lids, layers) = check(f, kind, 0);
    (a2a_mu(f, &lids, &lfts), layers)
}

/// On a 2-D HyperX dimension order has mu = end ports per switch (2) on one VL; DFSSSP's
/// balancing of path counts has 7 on two layers. mu-sssp must stay within two switches' end
/// ports on one layer (it measures 4; the dimension-order optimum is not reached).
#[test]
fn hyperx_all_to_all_mu_beats_dfsssp_on_one_layer() {
    let f = gen("HYPERX(4,4;2)", 0, 0);
    let (mu, layers) = a2a(&f, EngineKind::MuSssp);
    let (dmu, dlayers) = a2a(&f, EngineKind::Dfsssp);
    assert!(mu <= 4, "mu-sssp mu_a2a {mu} > 4 (dfsssp {dmu})");
    assert!(dmu > 4, "dfsssp reaches the bound too ({dmu})");
    assert_eq!(
        layers, 1,
        "mu-sssp needs {layers} layers on the HyperX (dfsssp {dlayers})"
    );
}

/// The dimension-order optimum on HYPERX(4,4;2): mu_a2a = end ports per switch (2) on one
/// layer, as OpenSM's lash (the greedy alone reached 4; the port-order candidate finds it).
#[test]
fn hyperx_all_to_all_mu_reaches_dimension_order() {
    let f = gen("HYPERX(4,4;2)", 0, 0);
    let (mu, layers) = a2a(&f, EngineKind::MuSssp);
    assert!(mu <= 2, "mu-sssp mu_a2a {mu} > 2");
    assert_eq!(layers, 1, "mu-sssp needs {layers} layers");
}

/// The first fit's layering of any valid tables: every layer acyclic, and the installed
/// layering (the fewer of first fit and DFSSSP's) never needs more layers than DFSSSP's.
fn check_first_fit(f: &Fabric, kind: EngineKind) -> (u8, u8) {
    let (_, lids, lfts) = routed(f, kind, 0);
    let ff = crate::mu::first_fit(f, &lids, &lfts, 15).unwrap();
    let dl = base_lids(f, &lids);
    let ok = cdg_acyclic_per_layer(f, &[&lfts], &dl, &ff);
    assert!(ok.iter().all(|&x| x), "first fit {ok:?}");
    let d = crate::vl::layer_base_fewest(f, &lids, &lfts, 15).unwrap();
    let m = crate::mu::layering(f, &lids, &lfts, 15).unwrap();
    assert_eq!(m.num_layers, ff.num_layers.min(d.num_layers));
    let ok = cdg_acyclic_per_layer(f, &[&lfts], &dl, &m);
    assert!(ok.iter().all(|&x| x), "kept layering {ok:?}");
    (ff.num_layers, d.num_layers)
}

/// SLIMFLY(5;4) with 2 cables cut (the 1 % file), dfsssp's tables: the first fit needs 2
/// layers where DFSSSP's cycle breaking needs 3 (OpenSM's lash: 2 on its own routes).
#[test]
fn first_fit_needs_fewer_layers_than_cycle_breaking() {
    let f = gen("SLIMFLY(5;4)", 2, 1);
    let (ff, d) = check_first_fit(&f, EngineKind::Dfsssp);
    assert!(ff < d, "first fit {ff} layers, DFSSSP's cycle breaking {d}");
}

/// Slim Fly q = 5 with 9 cables cut (the 5 % file): mu-sssp ≤ 30 with no more layers than
/// DFSSSP, which has 32.
#[test]
fn degraded_slim_fly_all_to_all_mu_beats_dfsssp() {
    let f = gen("SLIMFLY(5;4)", 9, 1);
    let (mu, layers) = a2a(&f, EngineKind::MuSssp);
    let (dmu, dlayers) = a2a(&f, EngineKind::Dfsssp);
    assert!(mu <= 30, "mu-sssp mu_a2a {mu} > 30 (dfsssp {dmu})");
    assert!(dmu > 30, "dfsssp reaches the bound too ({dmu})");
    assert!(layers <= dlayers, "mu-sssp {layers} layers, dfsssp {dlayers}");
}

/// mu_a2a and layers of mu-sssp against dfsssp on the fabrics (`cargo test -p
/// fabric-routing --lib mu_stats -- --ignored --nocapture`).
#[test]
#[ignore = "statistics printout, run by hand with --nocapture"]
fn mu_stats() {
    let which = std::env::var("MU_STATS").unwrap_or_default();
    for (spec, cuts) in [
        ("HYPERX(4,4;2)", [0, 0, 0]),
        ("SLIMFLY(5;4)", [0, 2, 9]),
        ("HYPERX(8,8;4)", [0, 4, 22]),
        ("SLIMFLY(7)", [0, 5, 27]),
        ("DRAGONFLY(3)", [0, 5, 23]),
    ] {
        if !which.is_empty() && !spec.contains(which.as_str()) {
            continue;
        }
        for links in cuts {
            let f = gen(spec, links, 1);
            with_ctx(&f, |ctx| {
                let mut lfts = Lfts::new(f.num_switches(), ctx.lids.top());
                let t = std::time::Instant::now();
                let st = crate::mu::MuSssp.route_stats(ctx, &mut lfts).unwrap();
                println!("{spec} cut {links}: {st:?} ({:.1} ms)", t.elapsed().as_secs_f64() * 1e3);
            });
            for kind in [EngineKind::MuSssp, EngineKind::Dfsssp] {
                let t = std::time::Instant::now();
                let (lfts, lids, layers) = check(&f, kind, 0);
                let ms = t.elapsed().as_secs_f64() * 1e3;
                println!(
                    "{spec} cut {links} {kind}: mu_a2a {} layers {layers} ({ms:.1} ms)",
                    a2a_mu(&f, &lids, &lfts)
                );
            }
            if links == 0 && cuts[1] == 0 {
                break;
            }
        }
    }
}

fn routed_with_threads(f: &Fabric, threads: usize) -> Vec<u8> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| routed(f, EngineKind::MuSssp, 1).2.as_bytes().to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Random regular graphs: valid, every layer of the installed layering acyclic, same bytes
    /// on 1 and 2 threads and on a second run.
    #[test]
    fn mu_sssp_on_random_regular_graphs(n in 8u32..28, k in 3u32..6, p in 1u32..4, seed in 0u64..1000) {
        let k = if (n * k) % 2 == 1 { k + 1 } else { k };
        let f = match generate_str(&format!("RRG({n},{k},{p};{seed})"), None) {
            Ok(f) => f,
            Err(_) => return Ok(()),
        };
        check(&f, EngineKind::MuSssp, 1);
        let a = routed_with_threads(&f, 1);
        prop_assert_eq!(&a, &routed_with_threads(&f, 2));
        prop_assert_eq!(&a, &routed_with_threads(&f, 1));
    }

    /// The first fit on random regular graphs, on dfsssp's and mu-sssp's tables: every layer
    /// acyclic, the kept layering the fewer.
    #[test]
    fn first_fit_on_random_regular_graphs(n in 8u32..28, k in 3u32..6, p in 1u32..4, seed in 0u64..1000) {
        let k = if (n * k) % 2 == 1 { k + 1 } else { k };
        let f = match generate_str(&format!("RRG({n},{k},{p};{seed})"), None) {
            Ok(f) => f,
            Err(_) => return Ok(()),
        };
        check_first_fit(&f, EngineKind::Dfsssp);
        check_first_fit(&f, EngineKind::MuSssp);
    }

    /// Degraded Slim Flies and HyperX (random cables removed, possibly split): valid, layers
    /// acyclic.
    #[test]
    fn mu_sssp_on_degraded_direct_fabrics(links in 0usize..30, seed in 0u64..1000, hx in any::<bool>()) {
        let f = gen(if hx { "HYPERX(4,4;2)" } else { "SLIMFLY(5;2)" }, links, seed);
        check(&f, EngineKind::MuSssp, 1);
    }
}

/// The first fit before paths were deduplicated (every route fitted on its own, longest
/// first, then in (LID, switch) order): the reference of `first_fit`'s layer per route.
fn first_fit_reference(f: &Fabric, lids: &LidPlan, lfts: &Lfts) -> Vec<u8> {
    use crate::balanced::cdg::{Cdg, Scratch, Shape};
    use crate::sssp::Channels;
    let ns = f.num_switches();
    let ch = Channels::new(f);
    let chan_of = |s: usize, p: u8| ch.of_switch(s).find(|&c| ch.port[c as usize] == p);
    let mut routes: Vec<(usize, u32, Vec<u32>)> = Vec::new();
    for d in base_lids(f, lids) {
        for s in f.switch_ids().filter(|&s| f.switch(s).up) {
            let (mut cur, mut path) = (s.idx(), Vec::new());
            while let Some(c) = chan_of(cur, lfts.get(fabric_topology::SwitchId(cur as u32), d)) {
                path.push(c);
                cur = ch.remote[c as usize] as usize;
            }
            if !path.is_empty() {
                routes.push((s.idx(), d, path));
            }
        }
    }
    let mut order: Vec<usize> = (0..routes.len()).collect();
    order.sort_by_key(|&r| std::cmp::Reverse(routes[r].2.len()));
    let shape = Shape::new(&ch, ns);
    let (mut cdgs, mut sc) = (vec![Cdg::new(&shape)], Scratch::default());
    let mut flat = vec![0u8; ns * lfts.row_len()];
    for r in order {
        let (s, d, path) = &routes[r];
        let mut l = 0;
        loop {
            let g = &mut cdgs[l];
            let added = path
                .windows(2)
                .take_while(|w| g.try_add(&shape, &mut sc, w[0], w[1]))
                .count();
            if added + 1 == path.len() {
                break;
            }
            for w in path.windows(2).take(added) {
                g.remove(&shape, w[0], w[1]);
            }
            l += 1;
            if l == cdgs.len() {
                cdgs.push(Cdg::new(&shape));
            }
        }
        flat[s * lfts.row_len() + *d as usize] = l as u8;
    }
    flat
}

/// `first_fit` (each distinct path fitted once) gives every route the layer of the
/// reference that fits every route on its own, on the tables of several engines.
#[test]
fn first_fit_equals_the_per_route_reference() {
    for (spec, links) in [("SLIMFLY(5;4)", 9), ("DRAGONFLY(3)", 5), ("HYPERX(4,4;2)", 3)] {
        let f = gen(spec, links, 1);
        for kind in [EngineKind::Dfsssp, EngineKind::MuSssp] {
            let (_, lids, lfts) = routed(&f, kind, 0);
            let ff = crate::mu::first_fit(&f, &lids, &lfts, 15).unwrap();
            let reference = first_fit_reference(&f, &lids, &lfts);
            assert_eq!(ff.layer, reference, "{spec} with {links} cut, {kind}");
            assert!(
                ff.num_layers > 1 || kind == EngineKind::MuSssp,
                "{spec}: a trivial case"
            );
        }
    }
}

/// The layering `layering` returns right after mu-sssp routed (from the engine's cache when no
/// other routing ran in between) is the one computed afresh, and `fewest_within` gives it
/// exactly when it fits.
#[test]
fn remembered_and_bounded_layerings_equal_the_fresh_one() {
    for (spec, links) in [("SLIMFLY(5;4)", 9), ("HYPERX(8,8;4)", 22)] {
        let f = gen(spec, links, 1);
        let (_, lids, lfts) = routed(&f, EngineKind::MuSssp, 0);
        let fresh = super::layering::fewest(&f, &lids, &lfts).unwrap();
        assert!(fresh.num_layers > 1, "{spec}: a trivial case");
        assert_eq!(crate::mu::layering(&f, &lids, &lfts, 8).unwrap(), fresh, "{spec}");
        for max in 1..=fresh.num_layers + 1 {
            let w = super::layering::fewest_within(&f, &lids, &lfts, max);
            if max >= fresh.num_layers {
                assert_eq!(w.as_ref(), Some(&fresh), "{spec}, at most {max} layers");
            } else {
                assert!(w.is_none(), "{spec}: {max} layers cannot suffice");
            }
        }
        // Other tables miss the remembered entry.
        let mut other = lfts.clone();
        let s = fabric_topology::SwitchId(0);
        let lid = base_lids(&f, &lids)[0];
        other.set(s, lid, if lfts.get(s, lid) == 1 { 2 } else { 1 });
        assert!(super::cache::lookup(&f, &lids, &other).is_none());
    }
}

/// The rip-up rounds are skipped on a regular fabric (complete Slim Fly) and run on the same
/// fabric with cables cut, where they lower mu (the 5 % file: 36 → 28); the kept layering is
/// the first fit's when it needs two layers (no layering needs fewer once one is cyclic).
#[test]
fn rounds_only_on_irregular_fabrics_and_two_layer_first_fit_kept() {
    let stats = |f: &Fabric| {
        let (r, lids) = (
            ranking(f),
            crate::lid::assign_lids(f, &Default::default(), 0, 0xBFFF).unwrap(),
        );
        let ctx = crate::RoutingContext {
            fabric: f,
            ranking: &r,
            lids: &lids,
        };
        let mut lfts = Lfts::new(f.num_switches(), lids.top());
        let st = crate::mu::MuSssp.route_stats(&ctx, &mut lfts).unwrap();
        (st, lids, lfts)
    };
    let complete = gen("SLIMFLY(5;4)", 0, 1);
    let (st, lids, lfts) = stats(&complete);
    assert_eq!(st.rounds_run, 0, "{st:?}");
    assert_eq!(st.layers, 2, "{st:?}");
    let ff = crate::mu::first_fit(&complete, &lids, &lfts, 15).unwrap();
    assert_eq!(super::layering::fewest(&complete, &lids, &lfts).unwrap(), ff);
    let cut = gen("SLIMFLY(5;4)", 9, 1);
    let (st, _, _) = stats(&cut);
    assert!(st.rounds_run > 0, "{st:?}");
    assert!(st.mu < st.port_order_mu, "{st:?}");
}

/// Rip-up rounds after the first re-route only the destinations on the channels at mu
/// (measured 28 Nov 2026): on SLIMFLY(5;4) with 9 cables cut they re-route fewer destinations than every
/// destination per round, and the tables still reach mu_a2a 28 (counted on the tables; lash
/// and OpenSM's dfsssp have 36 there, the rounds over every destination 28 too).
#[test]
fn later_rounds_reroute_only_destinations_on_channels_at_mu() {
    let f = gen("SLIMFLY(5;4)", 9, 1);
    let (lids, lfts, st) = with_ctx(&f, |ctx| {
        let mut lfts = Lfts::new(f.num_switches(), ctx.lids.top());
        let st = crate::mu::MuSssp.route_stats(ctx, &mut lfts).unwrap();
        (ctx.lids.clone(), lfts, st)
    });
    assert!(st.rounds_run >= 2, "{st:?}");
    assert!(
        st.rerouted >= st.destinations,
        "round 1 re-routes every destination: {st:?}"
    );
    assert!(
        st.rerouted < st.rounds_run * st.destinations,
        "every round re-routed every destination: {st:?}"
    );
    assert!(st.round > 0, "{st:?}");
    assert_eq!(a2a_mu(&f, &lids, &lfts), st.mu);
    assert!(st.mu <= 28, "{st:?}");
}

/// A first fit that needs a third layer and is told to go on (`first_fit_with`) gives the
/// layering of a first fit run afresh within the higher maximum, asking once.
#[test]
fn resumed_first_fit_equals_the_fresh_one() {
    let f = gen("DRAGONFLY(3)", 5, 1);
    let (_, lids, lfts) = routed(&f, EngineKind::MuSssp, 0);
    let fresh = crate::mu::first_fit(&f, &lids, &lfts, 15).unwrap();
    assert!(fresh.num_layers >= 3, "a trivial case: {} layers", fresh.num_layers);
    let mut asked = Vec::new();
    let resumed = super::layering::first_fit_with(&f, &lids, &lfts, 2, |cap| {
        asked.push(cap);
        15
    })
    .unwrap();
    assert_eq!(resumed, fresh);
    assert_eq!(asked, [2]);
    // Told to stop, it says how many layers it reached.
    let stopped = super::layering::first_fit_with(&f, &lids, &lfts, 2, |_| 0);
    assert!(
        matches!(
            stopped,
            Err(crate::vl::VlError::TooFewVls {
                available: 2,
                needed: 3
            })
        ),
        "{stopped:?}"
    );
}

/// The daemon's `route` (no statistics: on a regular fabric port order's counters are not
/// loaded) installs the tables `route_stats` does and leaves the same layering remembered.
#[test]
fn route_without_statistics_equals_route_stats() {
    use crate::{LidSet, RoutingEngine};
    for (spec, links) in [("SLIMFLY(5;4)", 0), ("HYPERX(4,4;2)", 0), ("SLIMFLY(5;4)", 9)] {
        let f = gen(spec, links, 1);
        with_ctx(&f, |ctx| {
            let lids = ctx.lids;
            let mut a = Lfts::new(f.num_switches(), lids.top());
            crate::mu::MuSssp.route_stats(ctx, &mut a).unwrap();
            let fresh = super::layering::fewest(&f, lids, &a).unwrap();
            let mut b = Lfts::new(f.num_switches(), lids.top());
            crate::mu::MuSssp.route(ctx, LidSet::Base, &mut b).unwrap();
            assert!(a == b, "{spec} {links}: tables differ");
            assert_eq!(crate::mu::layering(&f, lids, &b, 15).unwrap(), fresh, "{spec} {links}");
        });
    }
}

/// Port order's check that runs alongside the rounds' layering (its bound known only when a
/// second layer is needed) gives `within_by_first_fit`'s answer for every bound, on tables
/// that need one, two and three or more layers.
#[test]
fn first_fit_with_a_later_bound_equals_the_bounded_one() {
    for (spec, cut) in [("HYPERX(4,4;2)", 0), ("SLIMFLY(5;4)", 0), ("DRAGONFLY(3)", 5)] {
        let f = gen(spec, cut, 1);
        let (_, lids, lfts) = routed(&f, EngineKind::MuSssp, 0);
        for m in [0u8, 1, 2, 3, 4, 15, 200] {
            let asked = std::cell::Cell::new(0);
            let later = super::layering::within_by_first_fit_later(&f, &lids, &lfts, || {
                asked.set(asked.get() + 1);
                m
            });
            let bounded = super::layering::within_by_first_fit(&f, &lids, &lfts, m);
            assert_eq!(later, bounded, "{spec} {cut} within {m}");
            assert_eq!(asked.get(), 1, "the bound is asked once");
        }
    }
}

/// The rounds' layering and port order's check run side by side on two threads: the same
/// tables and layering as on one (a cut file where the rounds' routing is kept and one where
/// port order is).
#[test]
fn parallel_candidate_layerings_equal_the_sequential_ones() {
    for (spec, cut) in [("SLIMFLY(5;4)", 9), ("DRAGONFLY(3)", 5), ("SLIMFLY(5;4)", 2)] {
        let f = gen(spec, cut, 1);
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                with_ctx(&f, |ctx| {
                    let mut t = Lfts::new(f.num_switches(), ctx.lids.top());
                    let st = super::MuSssp.route_stats(ctx, &mut t).unwrap();
                    let l = crate::mu::layering(&f, ctx.lids, &t, 15).unwrap();
                    (t, l, st)
                })
            })
        };
        let (t1, l1, s1) = run(1);
        let (t2, l2, s2) = run(2);
        assert!(t1 == t2, "{spec} {cut}: tables differ");
        assert_eq!(l1, l2, "{spec} {cut}");
        assert_eq!(s1, s2, "{spec} {cut}");
    }
}

/// The plan, channels and port-order routing of `f` (LMC 0), as `route_counted` builds them.
fn kernel_inputs(f: &Fabric) -> (crate::balanced::VlPlan, crate::sssp::Channels, Vec<u32>) {
    let lids = crate::lid::assign_lids(f, &Default::default(), 0, 0xBFFF).unwrap();
    let plan = crate::balanced::VlPlan::new(f, &lids, 1);
    let ch = crate::sssp::Channels::new(f);
    let po = super::kernel::port_order(f, &plan, &ch);
    (plan, ch, po)
}

/// A random minimal routing in [`super::kernel::Routed::next`]'s layout: every switch takes a
/// channel to a switch one hop closer to the destination, drawn by `seed`.
fn random_minimal(f: &Fabric, plan: &crate::balanced::VlPlan, ch: &crate::sssp::Channels, seed: u64) -> Vec<u32> {
    let ns = f.num_switches();
    let none = u32::MAX;
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut next = vec![none; plan.dests.len() * ns];
    for (d, dest) in plan.dests.iter().enumerate() {
        let t = dest.switch as usize;
        let mut dist = vec![u32::MAX; ns];
        let mut q = vec![t];
        dist[t] = 0;
        let mut i = 0;
        while i < q.len() {
            let u = q[i];
            i += 1;
            for c in ch.of_switch(u) {
                let v = ch.remote[c as usize] as usize;
                if dist[v] == u32::MAX {
                    dist[v] = dist[u] + 1;
                    q.push(v);
                }
            }
        }
        for u in 0..ns {
            if u == t || dist[u] == u32::MAX {
                continue;
            }
            let closer: Vec<u32> = ch
                .of_switch(u)
                .filter(|&c| dist[ch.remote[c as usize] as usize] + 1 == dist[u])
                .collect();
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            next[d * ns + u] = closer[((x >> 33) as usize) % closer.len()];
        }
    }
    next
}

/// mu of the routing `next` as the kernel counts it (no rounds).
fn kernel_mu(f: &Fabric, plan: &crate::balanced::VlPlan, next: &[u32]) -> u64 {
    super::kernel::route(f, plan, crate::sssp::Channels::new(f), next, 4, |_| None).mu
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The forced-channel lower bound of mu is at most the mu of port order and of random
    /// minimal routings, on random regular graphs and degraded Slim Flies / HyperX.
    #[test]
    fn forced_lower_bound_is_below_every_minimal_routing(
        n in 8u32..24, k in 3u32..6, p in 1u32..4, seed in 0u64..1000, kind in 0u8..3, links in 0usize..25,
    ) {
        let k = if (n * k) % 2 == 1 { k + 1 } else { k };
        let f = match kind {
            0 => match generate_str(&format!("RRG({n},{k},{p};{seed})"), None) {
                Ok(f) => f,
                Err(_) => return Ok(()),
            },
            1 => gen("SLIMFLY(5;2)", links, seed),
            _ => gen("HYPERX(4,4;2)", links, seed),
        };
        let (plan, ch, po) = kernel_inputs(&f);
        let lb = super::kernel::forced_lower_bound(&f, &plan, &ch);
        prop_assert!(lb <= kernel_mu(&f, &plan, &po), "port order below {lb}");
        for s in 0..4 {
            let next = random_minimal(&f, &plan, &ch, seed * 8 + s);
            prop_assert!(lb <= kernel_mu(&f, &plan, &next), "random routing {s} below {lb}");
        }
    }
}

/// On a Moore graph (SLIMFLY(5;4) is Hoffman–Singleton's) every minimal path is unique: the
/// forced-channel bound is exactly mu (28), where the per-switch bound says 4.
#[test]
fn forced_lower_bound_is_exact_on_a_moore_graph() {
    let f = gen("SLIMFLY(5;4)", 0, 1);
    let (plan, ch, po) = kernel_inputs(&f);
    assert_eq!(super::kernel::forced_lower_bound(&f, &plan, &ch), 28);
    assert_eq!(kernel_mu(&f, &plan, &po), 28);
    assert_eq!(kernel_mu(&f, &plan, &random_minimal(&f, &plan, &ch, 7)), 28);
}

/// SLIMFLY(5;4) with 2 cables cut (tests/direct-compare.sh's 1 % file): port order reaches
/// the forced-channel bound (28), so no rip-up round runs (until 28 Nov 2026 two ran, and
/// their routing, also at 28, was never kept); the tables' mu_a2a is 28.
#[test]
fn rounds_skipped_when_port_order_reaches_the_forced_bound() {
    let f = gen("SLIMFLY(5;4)", 2, 1);
    let (lids, lfts, st) = with_ctx(&f, |ctx| {
        let mut lfts = Lfts::new(f.num_switches(), ctx.lids.top());
        let st = crate::mu::MuSssp.route_stats(ctx, &mut lfts).unwrap();
        (ctx.lids.clone(), lfts, st)
    });
    assert_eq!(st.rounds_run, 0, "{st:?}");
    assert_eq!(st.lower_bound, st.port_order_mu, "{st:?}");
    assert_eq!(a2a_mu(&f, &lids, &lfts), 28);
}

/// The rounds stop after the round that reaches the lower bound given to them: on
/// SLIMFLY(5;4) with 9 cables cut (port order 36, bound 28) fewer rounds run than with a
/// bound of 0, to the same mu.
#[test]
fn rounds_stop_once_they_reach_the_bound() {
    let f = gen("SLIMFLY(5;4)", 9, 1);
    let (plan, ch, po) = kernel_inputs(&f);
    let lb = super::kernel::forced_lower_bound(&f, &plan, &ch);
    let run = |floor: u64| super::kernel::route(&f, &plan, crate::sssp::Channels::new(&f), &po, 4, |_| Some(floor));
    let (bounded, unbounded) = (run(lb), run(0));
    assert_eq!(bounded.mu, lb);
    assert_eq!(unbounded.mu, lb);
    assert!(
        bounded.rounds_run < unbounded.rounds_run,
        "{} {}",
        bounded.rounds_run,
        unbounded.rounds_run
    );
}

/// Two rip-up rounds: on DRAGONFLY(3) with 5 cables cut (tests/direct-compare.sh's 1 % file)
/// port order has mu 66 and the rounds reach 59, then 57; a third round (four were allowed
/// until 28–29 Nov 2026) re-routed every destination again for fewer channels at 57, not a
/// lower mu. The tables' mu_a2a stays 57 on three layers.
#[test]
fn two_rounds_reach_the_cut_dragonfly_mu() {
    assert_eq!(crate::mu::MU_ROUNDS, 2);
    let f = gen("DRAGONFLY(3)", 5, 1);
    let (lids, lfts, st) = with_ctx(&f, |ctx| {
        let mut lfts = Lfts::new(f.num_switches(), ctx.lids.top());
        let st = crate::mu::MuSssp.route_stats(ctx, &mut lfts).unwrap();
        (ctx.lids.clone(), lfts, st)
    });
    assert_eq!(
        (st.port_order_mu, st.rounds_run, st.mu, st.layers),
        (66, 2, 57, 3),
        "{st:?}"
    );
    assert_eq!(a2a_mu(&f, &lids, &lfts), 57);
}
