//! Shared helpers of the integration tests: generated fabrics, routing, and a small static
//! congestion checker (thesis §2.3: per directed switch-to-switch port, the number of paths of
//! one permutation crossing it; `mu` of a permutation is the maximum over ports).

#![allow(dead_code)]

pub mod disguise;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rayon::prelude::*;

use fabric_ranking::{rank, RankOptions, Ranking};
use fabric_routing::{assign_lids, trace, EngineKind, Guid2Lid, Lfts, LidPlan, TraceEnd, IB_MAX_UNICAST_LID};
use fabric_topology::gen::{generate, Degrade, PgftSpec};
use fabric_topology::{EndPortId, Fabric};

pub struct Routed {
    pub fabric: Fabric,
    pub ranking: Ranking,
    pub lids: LidPlan,
    pub lfts: Lfts,
}

pub fn spec(s: &str) -> PgftSpec {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

pub fn fabric(s: &str) -> Fabric {
    generate(&spec(s)).unwrap().fabric
}

/// `s` with `switches` random non-leaf switches removed, then `links` random cables (at most
/// as many as remain).
pub fn degraded(s: &str, links: usize, switches: usize, seed: u64) -> Fabric {
    use fabric_topology::gen::degrade;
    let f = degrade(
        &fabric(s),
        &Degrade {
            remove_links: 0,
            remove_switches: switches,
            seed,
        },
    )
    .unwrap();
    let links = links.min(f.count_links().0);
    degrade(
        &f,
        &Degrade {
            remove_links: links,
            remove_switches: 0,
            seed: seed ^ 0x5eed,
        },
    )
    .unwrap()
}

pub fn route_with(f: &Fabric, kind: EngineKind, lmc: u8) -> Routed {
    route_with_groups(f, kind, lmc, None)
}

fn route_with_groups(f: &Fabric, kind: EngineKind, lmc: u8, groups: Option<&fabric_routing::NodeGroups>) -> Routed {
    let ranking = rank(f, &RankOptions::default());
    let lids = assign_lids(f, &Guid2Lid::default(), lmc, IB_MAX_UNICAST_LID).unwrap();
    let ctx = fabric_routing::RoutingContext {
        fabric: f,
        ranking: &ranking,
        lids: &lids,
    };
    let lfts = fabric_routing::route_all_grouped(&ctx, kind, groups)
        .unwrap_or_else(|e| panic!("{kind} (grouped: {}): {e}", groups.is_some()))
        .lfts;
    Routed {
        fabric: f.clone(),
        ranking,
        lids,
        lfts,
    }
}

/// `mu` of one permutation given as destination index per source index (over the live end
/// ports in global order). Unroutable pairs panic: callers check validity first.
pub fn mu_of(r: &Routed, live: &[EndPortId], dest: impl Fn(usize) -> usize, counts: &mut Vec<u32>) -> u32 {
    let f = &r.fabric;
    counts.clear();
    counts.resize(f.num_switches() * 256, 0);
    let mut hops = Vec::with_capacity(16);
    let mut mu = 0;
    for (i, &s) in live.iter().enumerate() {
        let d = live[dest(i)];
        if d == s {
            continue;
        }
        match trace(f, &r.lfts, s, r.lids.base_lid(d), &mut hops) {
            Ok(TraceEnd::EndPort(x)) if x == d => {}
            other => panic!("{s:?} -> {d:?}: {other:?}"),
        }
        // Switch-to-switch ports only: the last hop is the leaf port to the destination.
        for &(sw, port) in &hops[..hops.len() - 1] {
            let c = &mut counts[sw.idx() * 256 + port as usize];
            *c += 1;
            mu = mu.max(*c);
        }
    }
    mu
}

pub fn live(f: &Fabric) -> Vec<EndPortId> {
    f.end_port_ids().filter(|&e| f.end_port_live(e)).collect()
}

/// `mu^SP`: maximum over shifts `k = 1..N-1` of the shift permutation `i -> i + k mod N`.
pub fn mu_sp(r: &Routed) -> u32 {
    let live = live(&r.fabric);
    let n = live.len();
    (1..n)
        .into_par_iter()
        .map_init(Vec::new, |c, k| mu_of(r, &live, |i| (i + k) % n, c))
        .max()
        .unwrap_or(0)
}

/// `mu^RP(count)`: the `mu` of `count` random permutations (seeded), sorted.
pub fn mu_rp(r: &Routed, count: usize, seed: u64) -> Vec<u32> {
    let live = live(&r.fabric);
    let mut v: Vec<u32> = (0..count)
        .into_par_iter()
        .map_init(Vec::new, |c, j| {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed.wrapping_add(j as u64));
            let mut perm: Vec<usize> = (0..live.len()).collect();
            perm.shuffle(&mut rng);
            mu_of(r, &live, |i| perm[i], c)
        })
        .collect();
    v.sort_unstable();
    v
}

/// [`route_with`] through [`fabric_routing::route_all_grouped`].
pub fn route_grouped(f: &Fabric, kind: EngineKind, lmc: u8, groups: &fabric_routing::NodeGroups) -> Routed {
    route_with_groups(f, kind, lmc, Some(groups))
}

/// `mu_a2a` as `fabric-metrics` defines it: per directed switch-to-switch port, min(distinct
/// sources, distinct destinations) of the routed pairs crossing it; the maximum over ports
/// (every pair traced and checked to arrive).
pub fn mu_a2a(r: &Routed) -> usize {
    let f = &r.fabric;
    let live = live(f);
    let n = live.len();
    let words = n.div_ceil(64);
    let nports = f.num_switches() * 256;
    let mut src = vec![0u64; nports * words];
    let mut dst = vec![0u64; nports * words];
    let mut hops = Vec::new();
    for (i, &s) in live.iter().enumerate() {
        for (j, &d) in live.iter().enumerate() {
            if i == j {
                continue;
            }
            match trace(f, &r.lfts, s, r.lids.base_lid(d), &mut hops) {
                Ok(TraceEnd::EndPort(x)) if x == d => {}
                other => panic!("{s:?} -> {d:?}: {other:?}"),
            }
            for &(sw, port) in &hops[..hops.len() - 1] {
                let k = sw.idx() * 256 + port as usize;
                src[k * words + i / 64] |= 1 << (i % 64);
                dst[k * words + j / 64] |= 1 << (j % 64);
            }
        }
    }
    let count = |v: &[u64], k: usize| {
        v[k * words..(k + 1) * words]
            .iter()
            .map(|w| w.count_ones() as usize)
            .sum::<usize>()
    };
    (0..nports)
        .map(|k| count(&src, k).min(count(&dst, k)))
        .max()
        .unwrap_or(0)
}
