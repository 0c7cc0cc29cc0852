//! The thesis' own examples: the 2-ary 3-tree `G_d` (PGFT(3;2,2,2;1,2,2;1,1,1)) with the
//! cable L1-0 ↔ L2-1 failed, routed by Ftree (Fig. 1.7b, §1.4.1) and Ftree2 (Fig. 5.2, §5.1.2).
//! The figures themselves are drawings; the facts the text states about them are checked:
//!
//! * Fig. 1.7b: the routes to node 2 go through top switch L3-0; for destination 3 the up port
//!   of L1-1 towards L2-0 is taken (secondary, the other one cannot reach every source);
//!   3 of the first four destinations go from L1-2 and L1-3 up to L2-2.
//! * Fig. 5.2: with Ftree2, 2 of them go up to L2-2 and 2 to L2-3.
//! * μ_{G_d}(A2A(Ftree2)) = 2. The thesis also states μ_{G_d}(A2A(Ftree)) = 3; this Ftree gives
//!   2, and so does every run of a reference Alg. 1 whatever the pseudo-code leaves open; 3 needs
//!   ascents that ignore the usage counters (module `reference_alg1` below).

use fabric_topology::{EndPortId, Fabric, FabricEvent, SwitchId};

use crate::check::{trace, TraceEnd};
use crate::testutil::*;
use crate::{EngineKind, Lfts, LidPlan};

/// Test-PGFT switch ids: level-major, PGFT index order inside a level.
fn sw(level: u32, idx: u32) -> SwitchId {
    SwitchId((level - 1) * 4 + idx)
}

/// G_d: the 2-ary 3-tree without the cable L1-0 ↔ L2-1.
fn g_d() -> Fabric {
    let t = pgft(&[2, 2, 2], &[1, 2, 2], &[1, 1, 1]);
    let f = t.fabric;
    let (l10, l21) = (sw(1, 0), sw(2, 1));
    let port = f.port_groups(l10).iter().find(|g| g.remote == l21).unwrap().ports[0];
    f.apply(&[FabricEvent::LinkDown {
        switch: f.switch(l10).guid,
        port,
    }])
    .unwrap()
}

fn path(f: &Fabric, lids: &LidPlan, lfts: &Lfts, s: u32, d: u32) -> Vec<SwitchId> {
    let mut hops = Vec::new();
    let end = trace(f, lfts, EndPortId(s), lids.base_lid(EndPortId(d)), &mut hops);
    assert_eq!(end, Ok(TraceEnd::EndPort(EndPortId(d))), "{s} -> {d}");
    hops.iter().map(|h| h.0).collect()
}

/// μ(A2A): per switch-to-switch channel, min(#sources, #destinations) of the all-to-all
/// routes crossing it (thesis §2.3); the maximum over channels.
fn mu_a2a(f: &Fabric, lids: &LidPlan, lfts: &Lfts) -> usize {
    let n = f.num_end_ports() as u32;
    let mut src = std::collections::HashMap::<(SwitchId, u8), (u64, u64)>::new();
    let mut hops = Vec::new();
    for s in 0..n {
        for d in 0..n {
            if s == d {
                continue;
            }
            let end = trace(f, lfts, EndPortId(s), lids.base_lid(EndPortId(d)), &mut hops);
            assert_eq!(end, Ok(TraceEnd::EndPort(EndPortId(d))));
            for &(x, port) in &hops[..hops.len() - 1] {
                let e = src.entry((x, port)).or_default();
                e.0 |= 1 << s;
                e.1 |= 1 << d;
            }
        }
    }
    src.values()
        .map(|&(a, b)| a.count_ones().min(b.count_ones()) as usize)
        .max()
        .unwrap_or(0)
}

/// Which of the first four destinations leave `leaf`'s nodes through `via`.
fn first_four_via(f: &Fabric, lids: &LidPlan, lfts: &Lfts, leaf: u32, via: SwitchId) -> Vec<u32> {
    (0..4)
        .filter(|&d| {
            let s = leaf * 2;
            path(f, lids, lfts, s, d)[1] == via && path(f, lids, lfts, s + 1, d)[1] == via
        })
        .collect()
}

#[test]
fn ftree_on_g_d_matches_fig_1_7b() {
    let f = g_d();
    let (_, lids, lfts) = routed(&f, EngineKind::Ftree, 0);
    // Routes to node 2 (on L1-1) from the other half go through L3-0.
    for s in 4..8 {
        assert!(path(&f, &lids, &lfts, s, 2).contains(&sw(3, 0)), "{s} -> 2");
    }
    // Destination 3: L1-0 (whose only up link goes to L2-0) reaches it through L2-0, which
    // sends it straight down to L1-1.
    assert_eq!(path(&f, &lids, &lfts, 0, 3), vec![sw(1, 0), sw(2, 0), sw(1, 1)]);
    // Three of the first four destinations go from L1-2 and L1-3 up to L2-2, one to L2-3.
    for leaf in [2, 3] {
        assert_eq!(
            first_four_via(&f, &lids, &lfts, leaf, sw(2, 2)),
            vec![0, 1, 2],
            "L1-{leaf}"
        );
        assert_eq!(first_four_via(&f, &lids, &lfts, leaf, sw(2, 3)), vec![3], "L1-{leaf}");
    }
    // The thesis states μ(A2A(Ftree)) = 3 on G_d; this traversal gives 2 (see the module
    // documentation of `traverse`): Ftree2 must not be worse, and is checked at 2 below.
    let (_, lids2, lfts2) = routed(&f, EngineKind::Ftree2, 0);
    assert!(mu_a2a(&f, &lids2, &lfts2) <= mu_a2a(&f, &lids, &lfts));
}

#[test]
fn ftree2_on_g_d_matches_fig_5_2() {
    let f = g_d();
    let (_, lids, lfts) = routed(&f, EngineKind::Ftree2, 0);
    for leaf in [2, 3] {
        assert_eq!(
            first_four_via(&f, &lids, &lfts, leaf, sw(2, 2)),
            vec![0, 1],
            "L1-{leaf}"
        );
        assert_eq!(
            first_four_via(&f, &lids, &lfts, leaf, sw(2, 3)),
            vec![2, 3],
            "L1-{leaf}"
        );
    }
    assert_eq!(mu_a2a(&f, &lids, &lfts), 2);
}

/// In a complete PGFT Ftree computes the primary routes only (thesis §1.4.2): the traversal
/// stops once every leaf is reached, so some upper switches keep no entry for a node.
#[test]
fn ftree_computes_primary_routes_only_on_a_complete_pgft() {
    let t = pgft(&[2, 2, 2], &[1, 2, 2], &[1, 1, 1]);
    let (_, lids, lfts) = routed(&t.fabric, EngineKind::Ftree, 0);
    let lid0 = lids.base_lid(EndPortId(0));
    let unset = (0..12)
        .filter(|&i| lfts.get(SwitchId(i), lid0) == crate::NO_ROUTE)
        .count();
    // Reached: L1-0..3, L2-0 (above L1-0), one top switch and L2-2 below it: 7 of 12.
    assert_eq!(unset, 5);
}

/// Thesis §5.1.2 states μ_{G_d}(A2A(Ftree)) = 3; fabricd's Ftree gives 2. A reference Alg. 1
/// on G_d, independent of the engine (next hops per (switch, destination), no LFTs), run with
/// every source of freedom the pseudo-code leaves open drawn at random: the destination order,
/// the order of equally used up ports, the order of down groups, and whether the usage counter
/// counts every ascent or only the primary one (l. 15). With the up ports taken in ascending
/// order of usage (l. 10) every run gives 2; when the ascents ignore the usage counters, runs
/// that also draw exactly the routes of Fig. 1.7b (destinations 0–3) reach 3, always on a
/// top-level link (2–3 ↔ 3), the imbalance the thesis' remark on Fig. 1.7b points at ("moving
/// routes to node 2 through L3-3 instead of L3-0 would have resulted in equal usage of top level
/// links"). So the thesis' 3 is not what Alg. 1's usage rule produces on G_d: its figure's routes
/// to destinations 4–7 (not drawn) must come from an ascent order that the counters did not
/// balance. fabricd's Ftree follows Alg. 1 and keeps 2.
mod reference_alg1 {
    use super::*;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};

    /// Next hop toward a destination: a switch, or the destination node itself.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    enum Hop {
        Switch(SwitchId),
        Node,
    }

    struct Run<'a> {
        f: &'a Fabric,
        rng: rand_chacha::ChaCha8Rng,
        respect_usage: bool,
        count_every_ascent: bool,
        usage: std::collections::HashMap<(SwitchId, SwitchId), u32>,
        col: Vec<Option<Hop>>,
        delta: usize,
        leaf: SwitchId,
    }

    fn level(s: SwitchId) -> u32 {
        s.0 / 4 + 1
    }

    fn neighbours(f: &Fabric, s: SwitchId, up: bool) -> Vec<SwitchId> {
        f.port_groups(s)
            .iter()
            .map(|g| g.remote)
            .filter(|&r| (level(r) > level(s)) == up)
            .collect()
    }

    impl Run<'_> {
        fn descend(&mut self, s: SwitchId) {
            if level(s) == 1 {
                self.delta -= 1;
            }
            if self.delta == 0 {
                return;
            }
            let mut downs = neighbours(self.f, s, false);
            downs.shuffle(&mut self.rng);
            for b in downs {
                // Never descend into a switch above the destination's leaf (Ascend routes it).
                let above = level(b) == 2 && neighbours(self.f, b, false).contains(&self.leaf);
                if self.col[b.idx()].is_none() && !above {
                    self.col[b.idx()] = Some(Hop::Switch(s));
                    self.descend(b);
                    if self.delta == 0 {
                        break;
                    }
                }
            }
        }

        fn ascend(&mut self, s: SwitchId) {
            let mut ups = neighbours(self.f, s, true);
            ups.shuffle(&mut self.rng);
            if self.respect_usage {
                ups.sort_by_key(|&a| self.usage.get(&(s, a)).copied().unwrap_or(0));
            }
            for (k, a) in ups.into_iter().enumerate() {
                if self.col[a.idx()].is_some() {
                    continue;
                }
                self.col[a.idx()] = Some(Hop::Switch(s));
                if k == 0 || self.count_every_ascent {
                    *self.usage.entry((s, a)).or_default() += 1;
                }
                self.descend(a);
                self.ascend(a);
                if self.delta == 0 {
                    break;
                }
            }
        }
    }

    /// Next hops `[switch][destination]` of one run (`None`: unreached once Δ was 0).
    fn alg1(f: &Fabric, seed: u64, respect_usage: bool) -> Vec<Vec<Option<Hop>>> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let count_every_ascent = rng.gen::<bool>();
        let mut order: Vec<u32> = (0..8).collect();
        order.shuffle(&mut rng);
        let mut run = Run {
            f,
            rng,
            respect_usage,
            count_every_ascent,
            usage: Default::default(),
            col: Vec::new(),
            delta: 0,
            leaf: SwitchId(0),
        };
        let mut next = vec![vec![None; 8]; f.num_switches()];
        for d in order {
            run.leaf = SwitchId(d / 2);
            run.col = vec![None; f.num_switches()];
            run.col[run.leaf.idx()] = Some(Hop::Node);
            run.delta = 4;
            run.descend(run.leaf);
            run.ascend(run.leaf);
            for (s, c) in run.col.iter().enumerate() {
                next[s][d as usize] = *c;
            }
        }
        next
    }

    fn route(next: &[Vec<Option<Hop>>], s: u32, d: u32) -> Vec<SwitchId> {
        let mut at = SwitchId(s / 2);
        let mut path = vec![at];
        while let Hop::Switch(n) = next[at.idx()][d as usize].expect("every source leaf is reached") {
            at = n;
            path.push(at);
            assert!(path.len() < 8, "loop {s} -> {d}");
        }
        path
    }

    /// μ(A2A) and the switch-to-switch channels reaching it.
    fn mu(next: &[Vec<Option<Hop>>]) -> (usize, Vec<(SwitchId, SwitchId)>) {
        let mut by: std::collections::HashMap<(SwitchId, SwitchId), (u64, u64)> = Default::default();
        for s in 0..8 {
            for d in 0..8 {
                if s != d {
                    for w in route(next, s, d).windows(2) {
                        let e = by.entry((w[0], w[1])).or_default();
                        e.0 |= 1 << s;
                        e.1 |= 1 << d;
                    }
                }
            }
        }
        let m = |&(a, b): &(u64, u64)| a.count_ones().min(b.count_ones()) as usize;
        let max = by.values().map(m).max().unwrap_or(0);
        let at = by.iter().filter(|(_, v)| m(v) == max).map(|(k, _)| *k).collect();
        (max, at)
    }

    /// The facts of Fig. 1.7b (destinations 0–3), as in `ftree_on_g_d_matches_fig_1_7b`.
    fn fig_1_7b(next: &[Vec<Option<Hop>>]) -> bool {
        (4..8).all(|s| route(next, s, 2).contains(&sw(3, 0)))
            && route(next, 0, 3) == vec![sw(1, 0), sw(2, 0), sw(1, 1)]
            && [2u32, 3].iter().all(|&leaf| {
                (0..4).all(|d| {
                    let via = if d < 3 { sw(2, 2) } else { sw(2, 3) };
                    route(next, 2 * leaf, d)[1] == via && route(next, 2 * leaf + 1, d)[1] == via
                })
            })
    }

    #[test]
    fn alg1_gives_a2a_2_on_g_d_whatever_the_pseudo_code_leaves_open() {
        let f = g_d();
        let mut fig = 0;
        for seed in 0..400 {
            let next = alg1(&f, seed, true);
            assert_eq!(mu(&next).0, 2, "seed {seed}");
            fig += usize::from(fig_1_7b(&next));
        }
        // Some of these runs draw Fig. 1.7b exactly, and fabricd's Ftree is one of them.
        assert!(fig > 0);
        let (_, lids, lfts) = routed(&f, EngineKind::Ftree, 0);
        assert_eq!(super::mu_a2a(&f, &lids, &lfts), 2);
    }

    #[test]
    fn the_thesis_a2a_3_needs_ascents_that_ignore_the_usage_counters() {
        let f = g_d();
        let mut threes = 0;
        for seed in 0..3000 {
            let next = alg1(&f, seed, false);
            let (m, at) = mu(&next);
            assert!(m >= 2, "seed {seed}");
            if m == 3 && fig_1_7b(&next) {
                threes += 1;
                assert!(
                    at.iter().all(|&(a, b)| level(a).max(level(b)) == 3),
                    "seed {seed}: {at:?}"
                );
            }
        }
        assert!(threes > 0, "no run with Fig. 1.7b's routes reaches μ = 3");
    }
}
