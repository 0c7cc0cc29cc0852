//! Smodk on the thesis' example (Fig. 1.9: the 2-ary 3-tree, first four sources) and the
//! Dmodk/Smodk symmetry of §3.4.

use fabric_topology::{EndPortId, Fabric, SwitchId};

use super::*;
use crate::check::{trace, TraceEnd};
use crate::testutil::*;
use crate::{engine, EngineKind, LidPlan};

fn hops_of(f: &Fabric, sp: &SmodkPaths<'_>, s: u32, d: u32) -> Vec<(SwitchId, PortNum)> {
    let mut h = Vec::new();
    sp.path(EndPortId(s), EndPortId(d), &mut h).unwrap();
    // The path is connected and ends at d.
    let last = *h.last().unwrap();
    assert_eq!(
        f.switch(last.0).ports[last.1 as usize].remote,
        Remote::EndPort(EndPortId(d))
    );
    for w in h.windows(2) {
        assert_eq!(f.switch_link_live(w[0].0, w[0].1).unwrap().0, w[1].0);
    }
    h
}

/// μ of a permutation from per-pair hops (switch-to-switch channels only).
fn mu(n: u32, mut hops: impl FnMut(u32, u32) -> Vec<(SwitchId, PortNum)>, dest: impl Fn(u32) -> u32) -> u32 {
    let mut count = std::collections::HashMap::new();
    for s in 0..n {
        let d = dest(s);
        if d == s {
            continue;
        }
        let h = hops(s, d);
        for &c in &h[..h.len() - 1] {
            *count.entry(c).or_insert(0u32) += 1;
        }
    }
    count.values().copied().max().unwrap_or(0)
}

fn dmodk_hops(f: &Fabric, lids: &LidPlan, lfts: &Lfts, s: u32, d: u32) -> Vec<(SwitchId, PortNum)> {
    let mut h = Vec::new();
    assert_eq!(
        trace(f, lfts, EndPortId(s), lids.base_lid(EndPortId(d)), &mut h),
        Ok(TraceEnd::EndPort(EndPortId(d)))
    );
    h
}

#[test]
fn smodk_refuses_lft_routing() {
    let t = pgft(&[2, 2, 2], &[1, 2, 2], &[1, 1, 1]);
    let r = Routable::new(t.fabric);
    let mut lfts = Lfts::new(r.fabric.num_switches(), r.lids.top());
    let e = engine(EngineKind::Smodk).route(&r.ctx(), LidSet::Base, &mut lfts);
    assert!(
        matches!(&e, Err(RoutingError::Unsupported { engine: "smodk", reason }) if reason.contains("input port")),
        "{e:?}"
    );
}

/// Fig. 1.9: each of the first four sources keeps one up path to its own top switch (the
/// routes are concentrated per source), and the four use the four distinct top switches.
#[test]
fn fig_1_9_first_four_sources_each_own_a_top_switch() {
    let t = pgft(&[2, 2, 2], &[1, 2, 2], &[1, 1, 1]);
    let f = &t.fabric;
    let sp = SmodkPaths::new(f, &bfs_rank(f));
    let mut tops = Vec::new();
    for s in 0..4u32 {
        // Destinations in the other half (4..8) go through a top switch (level 3 = ids 8..12).
        let top: Vec<SwitchId> = (4..8).map(|d| hops_of(f, &sp, s, d)[2].0).collect();
        assert!(top.iter().all(|&x| x == top[0] && x.0 >= 8), "source {s}: {top:?}");
        // Inside the own half, the same level-2 switch as towards the other half.
        let l2 = hops_of(f, &sp, s, 4)[1].0;
        for d in 0..4 {
            if d / 2 != s / 2 {
                assert_eq!(hops_of(f, &sp, s, d)[1].0, l2, "{s} -> {d}");
            }
        }
        tops.push(top[0]);
    }
    tops.sort();
    tops.dedup();
    assert_eq!(tops.len(), 4, "{tops:?}");
}

/// §3.4: on k-ary n-trees Smodk's path s → d is Dmodk's d → s reversed, so
/// μ(shift k (Smodk)) = μ(shift −k (Dmodk)) for every k.
#[test]
fn smodk_is_dmodk_transposed_on_k_ary_n_trees() {
    for (m, w) in [
        (vec![2, 2, 2], vec![1, 2, 2]),
        (vec![3, 3, 3], vec![1, 3, 3]),
        (vec![4, 4], vec![1, 4]),
    ] {
        let p = vec![1; m.len()];
        let t = pgft(&m, &w, &p);
        let f = &t.fabric;
        // Dmodc writes Dmodk's closed form on complete PGFTs (`dmodc` tests); Dmodk itself
        // only accepts the generator's switch names.
        let (_, lids, lfts) = routed(f, EngineKind::Dmodc, 0);
        let sp = SmodkPaths::new(f, &bfs_rank(f));
        let n = f.num_end_ports() as u32;
        for s in 0..n {
            for d in 0..n {
                if s == d {
                    continue;
                }
                let a: Vec<SwitchId> = hops_of(f, &sp, s, d).iter().map(|h| h.0).collect();
                let mut b: Vec<SwitchId> = dmodk_hops(f, &lids, &lfts, d, s).iter().map(|h| h.0).collect();
                b.reverse();
                assert_eq!(a, b, "{m:?}: {s} -> {d}");
            }
        }
        for k in 1..n {
            let smodk = mu(n, |s, d| hops_of(f, &sp, s, d), |s| (s + k) % n);
            let dmodk = mu(n, |s, d| dmodk_hops(f, &lids, &lfts, s, d), |s| (s + n - k) % n);
            assert_eq!(smodk, dmodk, "{m:?} shift {k}");
        }
    }
}

/// On a PGFT with parallel links and unequal arities the paths are still up*-down* and reach
/// every destination; on a degraded fabric a stuck path is an error, not a panic.
#[test]
fn smodk_paths_on_other_pgfts_and_degraded_fabrics() {
    let t = pgft(&[4, 2, 3], &[1, 4, 2], &[1, 2, 1]);
    let f = &t.fabric;
    let r = bfs_rank(f);
    let sp = SmodkPaths::new(f, &r);
    let n = f.num_end_ports() as u32;
    for s in 0..n {
        for d in 0..n {
            if s != d {
                let h = hops_of(f, &sp, s, d);
                let lv: Vec<u32> = h.iter().map(|x| r[x.0.idx()].unwrap()).collect();
                let top = lv.iter().position(|&l| l == *lv.iter().max().unwrap()).unwrap();
                assert!(lv[..=top].windows(2).all(|w| w[0] < w[1]) && lv[top..].windows(2).all(|w| w[0] > w[1]));
            }
        }
    }
    let g = degrade(f, 10, 0, 3);
    let sp = SmodkPaths::new(&g, &bfs_rank(&g));
    let mut h = Vec::new();
    for s in 0..n {
        for d in 0..n {
            match sp.path(EndPortId(s), EndPortId(d), &mut h) {
                Ok(()) | Err(SmodkPathError::Stuck { .. }) => {}
                Err(e) => panic!("{e}"),
            }
        }
    }
}
