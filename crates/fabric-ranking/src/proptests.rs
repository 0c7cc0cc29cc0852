//! Property tests: random degraded PGFTs keep their generator levels wherever the levels are
//! determined by the live fabric.
//!
//! Which degradations may legitimately change a level (upward ranking)? A switch's rank is its
//! distance to the nearest leaf. In a (degraded) fat-tree every link joins adjacent generator
//! levels, so that distance is at least the generator level `k`, has the same parity, and equals
//! `k` exactly when a strictly descending live path reaches a switch of the leaf set (a level-0
//! switch with a live end node, or with role leaf). Switches without such a path are *not
//! grounded*: a leaf that lost all its nodes (flipped leaf), a non-leaf whose down links or whose
//! subtree's leaves are all gone; they are ranked `k + 2j`, `j ≥ 1`. The tests assert exactness for
//! grounded switches and `rank ≥ k`, same parity, for the others; live switches not connected to
//! the leaf set are unranked with a diagnostic; dead ones are `None` silently; nothing else is
//! reported (a degraded fat-tree has no inconsistent link).

use std::collections::HashMap;

use proptest::prelude::*;

use fabric_topology::gen::{self, Degrade, PgftSpec};
use fabric_topology::{Fabric, FabricEvent, Remote, SwitchId};

use crate::testfab::pgft;
use crate::{rank_report, DiagKind, RankMethod, RankOptions, Role};

/// Random PGFT parameters (h in 2..=4, small arities, up to 2 parallel links).
fn params() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<usize>)> {
    (2usize..=4).prop_flat_map(|h| {
        (
            prop::collection::vec(1usize..=4, h),
            prop::collection::vec(1usize..=3, h),
            prop::collection::vec(1usize..=2, h),
        )
            .prop_map(|(m, mut w, mut p)| {
                w[0] = 1;
                p[0] = 1;
                (m, w, p)
            })
    })
}

/// A small deterministic generator for choosing what to degrade.
struct XorShift(u64);
impl XorShift {
    fn chance(&mut self, per_mille: u32) -> bool {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % 1000) < u64::from(per_mille)
    }
}

/// Takes down random links (each cable once), switches and end ports.
fn degrade(f: &Fabric, seed: u64, links: u32, switches: u32, nodes: u32) -> Fabric {
    let mut rng = XorShift(seed | 1);
    let mut ev = Vec::new();
    for s in f.switch_ids() {
        let sw = f.switch(s);
        for (pn, port) in sw.external_ports() {
            if let Remote::Switch { sw: r, port: rp } = port.remote {
                if (s, pn) < (r, rp) && rng.chance(links) {
                    ev.push(FabricEvent::LinkDown {
                        switch: sw.guid,
                        port: pn,
                    });
                }
            }
        }
        if rng.chance(switches) {
            ev.push(FabricEvent::SwitchDown(sw.guid));
        }
    }
    for e in f.end_port_ids() {
        if rng.chance(nodes) {
            ev.push(FabricEvent::EndPortDown(f.end_port(e).port_guid));
        }
    }
    f.apply(&ev).unwrap()
}

/// Switches with a strictly monotone live path (descending if `down`, else ascending) to a
/// switch of `base`, by generator level.
fn monotone_reach(f: &Fabric, level: &[u32], base: &[bool], down: bool) -> Vec<bool> {
    let mut order: Vec<SwitchId> = f.switch_ids().collect();
    order.sort_by_key(|s| {
        if down {
            i64::from(level[s.idx()])
        } else {
            -i64::from(level[s.idx()])
        }
    });
    let mut ok = base.to_vec();
    for s in order {
        if f.switch(s).up && !ok[s.idx()] {
            ok[s.idx()] = f.port_groups(s).iter().any(|g| {
                let r = g.remote.idx();
                ok[r]
                    && if down {
                        level[r] + 1 == level[s.idx()]
                    } else {
                        level[r] == level[s.idx()] + 1
                    }
            });
        }
    }
    ok
}

/// Live switches connected to `base` through live links.
fn connected(f: &Fabric, base: &[bool]) -> Vec<bool> {
    let mut seen = base.to_vec();
    let mut queue: Vec<SwitchId> = f.switch_ids().filter(|s| base[s.idx()]).collect();
    while let Some(s) = queue.pop() {
        for g in f.port_groups(s) {
            if !seen[g.remote.idx()] {
                seen[g.remote.idx()] = true;
                queue.push(g.remote);
            }
        }
    }
    seen
}

/// Checks upward ranking of `f` against the generator levels `gen_level` (by switch id), with
/// role leaf on every generator leaf when `with_roles`.
fn check_upward(gen_level: &[u32], f: &Fabric, with_roles: bool) -> Result<(), TestCaseError> {
    let roles: HashMap<u64, Role> = if with_roles {
        f.switch_ids()
            .filter(|s| gen_level[s.idx()] == 0)
            .map(|s| (f.switch(s).guid, Role::Leaf))
            .collect()
    } else {
        HashMap::new()
    };
    let rep = rank_report(
        f,
        &RankOptions {
            roles,
            ..Default::default()
        },
    );
    let r = &rep.ranking;
    let base: Vec<bool> = f
        .switch_ids()
        .map(|s| f.switch(s).up && gen_level[s.idx()] == 0 && (with_roles || f.is_leaf(s)))
        .collect();
    let grounded = monotone_reach(f, gen_level, &base, true);
    let reached = connected(f, &base);
    let mut unranked = Vec::new();
    for s in f.switch_ids() {
        let (gen, got) = (gen_level[s.idx()], r.level[s.idx()]);
        let g = f.switch(s).guid;
        if !f.switch(s).up {
            prop_assert_eq!(got, None, "dead switch {:#x}", g);
        } else if !reached[s.idx()] {
            prop_assert_eq!(got, None, "switch {:#x} connected to no leaf", g);
            unranked.push(g);
        } else if grounded[s.idx()] {
            prop_assert_eq!(got, Some(gen), "grounded switch {:#x}", g);
        } else {
            let l = got.ok_or_else(|| TestCaseError::fail(format!("{g:#x} unranked")))?;
            prop_assert!(
                l >= gen + 2 && (l - gen) % 2 == 0,
                "switch {:#x}: level {} for generator level {}",
                g,
                l,
                gen
            );
        }
    }
    let diag_guids: Vec<u64> = r.diagnostics.iter().filter_map(|d| d.switch).collect();
    prop_assert!(
        r.diagnostics.iter().all(|d| d.kind == DiagKind::Unranked),
        "{:?}",
        r.diagnostics
    );
    prop_assert_eq!(diag_guids, unranked);
    prop_assert!(rep
        .components
        .iter()
        .all(|c| matches!(c.method, RankMethod::Upward | RankMethod::Unranked)));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn degraded_pgft_keeps_generator_levels(
        (m, w, p) in params(),
        seed in any::<u64>(),
        links in 0u32..300,
        switches in 0u32..150,
        nodes in 0u32..500,
    ) {
        let t = pgft(&m, &w, &p);
        let f = degrade(&t.fabric, seed, links, switches, nodes);
        check_upward(&t.level, &f, false)?;
        // Role leaf on every generator leaf: orphaned leaves stay at level 0.
        check_upward(&t.level, &f, true)?;
    }

    #[test]
    fn degraded_pgft_ranked_from_configured_roots(
        (m, w, p) in params(),
        seed in any::<u64>(),
        links in 0u32..300,
        switches in 0u32..150,
        nodes in 0u32..500,
    ) {
        let t = pgft(&m, &w, &p);
        let f = degrade(&t.fabric, seed, links, switches, nodes);
        let top = m.len() as u32 - 1;
        let roots: Vec<u64> = f.switch_ids().filter(|s| t.level[s.idx()] == top).map(|s| f.switch(s).guid).collect();
        let rep = rank_report(&f, &RankOptions { roots, ..Default::default() });
        let r = &rep.ranking;
        prop_assert!(
            r.diagnostics.iter().all(|d| matches!(d.kind, DiagKind::Irregular | DiagKind::Unranked)),
            "{:?}", r.diagnostics
        );
        let base: Vec<bool> = f.switch_ids().map(|s| f.switch(s).up && t.level[s.idx()] == top).collect();
        let ascending = monotone_reach(&f, &t.level, &base, false);
        for c in rep.components.iter().filter(|c| c.method == RankMethod::ConfiguredRoots) {
            // Switches with a live ascending path to a top sit at their generator level plus one
            // offset per component; the offset is 0 when every switch has such a path and some
            // generator leaf is among them.
            let asc: Vec<SwitchId> = c.switches.iter().copied().filter(|s| ascending[s.idx()]).collect();
            let off: Vec<i64> =
                asc.iter().map(|s| r.level[s.idx()].map_or(-1000, i64::from) - i64::from(t.level[s.idx()])).collect();
            prop_assert!(off.windows(2).all(|x| x[0] == x[1]), "offsets {:?}", off);
            if asc.len() == c.switches.len() && asc.iter().any(|s| t.level[s.idx()] == 0) {
                prop_assert_eq!(off[0], 0);
            }
        }
    }

    /// The same property on the project's generator (`fabric_topology::gen`): switches and cables
    /// really removed by `gen::degrade`, then random links, switches and end ports taken down.
    #[test]
    fn generator_degraded_pgft_keeps_generator_levels(
        (m, w, p) in params(),
        seed in any::<u64>(),
        cut_switches in 0u32..300,
        cut_links in 0u32..300,
        nodes in 0u32..500,
    ) {
        let join = |v: &[usize]| v.iter().map(std::string::ToString::to_string).collect::<Vec<_>>().join(",");
        let text = format!("PGFT({};{};{};{})", m.len(), join(&m), join(&w), join(&p));
        let spec: PgftSpec = text.parse().map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        let full = gen::generate(&spec).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?.fabric;
        let non_leaves = full.switch_ids().filter(|&s| !full.is_leaf(s)).count();
        let cut = |n: usize, per_mille: u32| n * per_mille as usize / 1000;
        let d = Degrade { remove_switches: cut(non_leaves, cut_switches), remove_links: 0, seed };
        let f = gen::degrade(&full, &d).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let d = Degrade { remove_switches: 0, remove_links: cut(f.count_links().0, cut_links), seed: seed ^ 1 };
        let f = gen::degrade(&f, &d).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let f = degrade(&f, seed, 50, 30, nodes);
        let level: Vec<u32> = f
            .switch_ids()
            .map(|s| spec.decode_switch_guid(f.switch(s).guid).map(|(l, _)| l))
            .collect::<Option<_>>()
            .ok_or_else(|| TestCaseError::fail("switch GUID not from the generator"))?;
        check_upward(&level, &f, false)?;
        check_upward(&level, &f, true)?;
    }
}
