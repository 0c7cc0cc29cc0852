//! Property tests: the fast metrics against a naive reference implementation on random small
//! fabrics with random (often broken) LFTs, and thesis properties on Dmodk-routed k-ary n-trees.
//!
//! The reference follows the definitions literally: one path walk per (source, destination)
//! pair through `Lfts::get` and the fabric model, loops detected by revisiting a switch, and
//! per switch port the *sets* of distinct sources and destinations (no permutation shortcut,
//! no grouping by leaf).

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use fabric_metrics::reference::{compute_reference, shift_profile_ranges, shift_profile_reference};
use fabric_metrics::{compute, jobs_metrics, mu_of_pairs, quantile, rp_permutation, MetricsOptions};
use fabric_routing::{Lfts, LidPlan, NO_ROUTE};
use fabric_topology::{EndPortId, Fabric, FabricBuilder, FabricEvent, NodeType, PortNum, Remote, SwitchId};
use proptest::prelude::*;

#[path = "../benches/support/mod.rs"]
mod support;

type Channel = (SwitchId, PortNum);

/// The switch ports crossed from `s` to `d`, or `None` when the walk does not reach `d`.
fn naive_path(f: &Fabric, lids: &LidPlan, lfts: &Lfts, s: EndPortId, d: EndPortId) -> Option<Vec<Channel>> {
    let (mut sw, _) = f.end_port(s).attach?;
    let lid = lids.end_port_base[d.idx()];
    if lid == 0 {
        return None;
    }
    let mut seen = HashSet::new();
    let mut path = Vec::new();
    loop {
        if !seen.insert(sw) || sw.idx() >= lfts.num_switches() {
            return None;
        }
        let port = lfts.get(sw, lid);
        if port == 0 || port == NO_ROUTE {
            return None;
        }
        match f.switch(sw).ports.get(port as usize)?.remote {
            Remote::EndPort(e) => return (e == d && f.end_port_live(e)).then_some(path),
            Remote::Switch { .. } => {
                let (to, _) = f.switch_link_live(sw, port)?;
                path.push((sw, port));
                sw = to;
            }
            Remote::None => return None,
        }
    }
}

fn live(f: &Fabric) -> Vec<EndPortId> {
    f.end_port_ids().filter(|&e| f.end_port_live(e)).collect()
}

#[derive(Default, Debug)]
struct NaivePairs {
    routed: u64,
    unrouted: u64,
    mu: u64,
    xi: u64,
    /// Paths per channel.
    load: BTreeMap<Channel, u64>,
}

fn naive_pairs(f: &Fabric, lids: &LidPlan, lfts: &Lfts, pairs: &[(EndPortId, EndPortId)]) -> NaivePairs {
    let mut sets: BTreeMap<Channel, (BTreeSet<EndPortId>, BTreeSet<EndPortId>)> = BTreeMap::new();
    let mut out = NaivePairs::default();
    for &(s, d) in pairs {
        if s == d {
            continue;
        }
        let path = if f.end_port_live(s) && f.end_port_live(d) {
            naive_path(f, lids, lfts, s, d)
        } else {
            None
        };
        match path {
            Some(p) => {
                out.routed += 1;
                for c in p {
                    let e = sets.entry(c).or_default();
                    e.0.insert(s);
                    e.1.insert(d);
                    *out.load.entry(c).or_default() += 1;
                }
            }
            None => out.unrouted += 1,
        }
    }
    out.mu = sets
        .values()
        .map(|(s, d)| s.len().min(d.len()) as u64)
        .max()
        .unwrap_or(0);
    out.xi = out.load.values().copied().max().unwrap_or(0);
    out
}

/// Shortest-path distances (switch hops over live links) from every switch to `target`.
fn distances(f: &Fabric, target: SwitchId) -> Vec<u32> {
    let mut dist = vec![u32::MAX; f.num_switches()];
    dist[target.idx()] = 0;
    let mut q = VecDeque::from([target]);
    while let Some(sw) = q.pop_front() {
        for (pn, _) in f.switch(sw).external_ports() {
            if let Some((to, _)) = f.switch_link_live(sw, pn) {
                if dist[to.idx()] == u32::MAX {
                    dist[to.idx()] = dist[sw.idx()] + 1;
                    q.push_back(to);
                }
            }
        }
    }
    dist
}

/// A random small fabric, LID plan and LFTs (mostly shortest-path, partly garbage).
#[derive(Debug, Clone)]
struct Case {
    switches: usize,
    cables: Vec<(usize, u8, usize, u8)>,
    ends: Vec<(usize, u8)>,
    events: Vec<u16>,
    lft: Vec<u16>,
    lmc: u8,
    no_lid: Option<usize>,
}

const NPORTS: u8 = 6;

fn case() -> impl Strategy<Value = Case> {
    (
        1..=5usize,
        proptest::collection::vec((0..5usize, 1..=NPORTS, 0..5usize, 1..=NPORTS), 0..14),
        proptest::collection::vec((0..5usize, 1..=NPORTS), 0..10),
        proptest::collection::vec(any::<u16>(), 0..4),
        proptest::collection::vec(any::<u16>(), 1..64),
        0..=1u8,
        proptest::option::weighted(0.15, 0..10usize),
    )
        .prop_map(|(switches, cables, ends, events, lft, lmc, no_lid)| Case {
            switches,
            cables,
            ends,
            events,
            lft,
            lmc,
            no_lid,
        })
}

fn build(c: &Case) -> (Fabric, LidPlan, Lfts) {
    let mut b = FabricBuilder::new();
    let sws: Vec<SwitchId> = (0..c.switches)
        .map(|i| b.add_switch(0x10 + i as u64, format!("s{i}"), NPORTS).unwrap())
        .collect();
    for &(a, pa, z, pz) in &c.cables {
        // Occupied ports and a port cabled to itself are rejected: skip those.
        let _ = b.connect_switches(sws[a % c.switches], pa, sws[z % c.switches], pz);
    }
    for (i, &(s, p)) in c.ends.iter().enumerate() {
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
        let _ = b.connect_end_port(e, sws[s % c.switches], p); // occupied: stays unattached
    }
    let mut f = b.build();
    for &ev in &c.events {
        let sw = (ev as usize >> 4) % c.switches;
        let event = match ev % 4 {
            0 | 1 => FabricEvent::LinkDown {
                switch: 0x10 + sw as u64,
                port: 1 + (ev >> 8) as u8 % NPORTS,
            },
            2 if !c.ends.is_empty() => FabricEvent::EndPortDown(0x100 + (u64::from(ev) >> 4) % c.ends.len() as u64),
            _ => FabricEvent::SwitchDown(0x10 + sw as u64),
        };
        if let Ok(g) = f.apply(&[event]) {
            f = g;
        }
    }
    let n = c.ends.len() as u32;
    let step = 1 << c.lmc;
    let mut end_port_base: Vec<u32> = (0..n).map(|i| step * (i + 1)).collect();
    if let Some(i) = c.no_lid {
        if let Some(l) = end_port_base.get_mut(i) {
            *l = 0;
        }
    }
    let lids = LidPlan {
        lmc: c.lmc,
        max_lid: 0xBFFF,
        switch_lid: (0..c.switches as u32).map(|s| step * (n + 1) + s).collect(),
        end_port_base,
    };
    let mut lfts = Lfts::new(c.switches, lids.top());
    let mut k = 0;
    for e in f.end_port_ids() {
        let lid = lids.end_port_base[e.idx()];
        let dist = f.end_port(e).attach.map(|(t, _)| distances(&f, t));
        for s in f.switch_ids() {
            let r = c.lft[k % c.lft.len()];
            k += 1;
            let port = match (f.end_port(e).attach, &dist) {
                (Some((t, tp)), Some(dist)) if r % 8 < 6 => {
                    if s == t {
                        tp
                    } else {
                        let next: Vec<PortNum> = f
                            .switch(s)
                            .external_ports()
                            .filter_map(|(pn, _)| f.switch_link_live(s, pn).map(|(to, _)| (pn, to)))
                            .filter(|(_, to)| dist[to.idx()].saturating_add(1) == dist[s.idx()])
                            .map(|(pn, _)| pn)
                            .collect();
                        if next.is_empty() {
                            NO_ROUTE
                        } else {
                            next[(r as usize / 8) % next.len()]
                        }
                    }
                }
                // Garbage: switch port 0, any port (cabled or not, up or not), or no route.
                _ => match (r / 8) % 9 {
                    8 => NO_ROUTE,
                    p => p as u8,
                },
            };
            if lid != 0 {
                lfts.set(s, lid, port);
            }
        }
    }
    (f, lids, lfts)
}

fn check_against_reference(c: &Case) -> Result<(), TestCaseError> {
    let (f, lids, lfts) = build(c);
    let opts = MetricsOptions {
        random_perms: 6,
        seed: 11,
        all_to_all: true,
        shifts: true,
    };
    let m = compute(&f, &lids, &lfts, &opts);
    let nodes = live(&f);
    let n = nodes.len();
    prop_assert_eq!(m.end_ports, n);

    // All ordered pairs: unrouted count, nu, diameter, mu_a2a, xi.
    let all: Vec<_> = nodes.iter().flat_map(|&s| nodes.iter().map(move |&d| (s, d))).collect();
    let a2a = naive_pairs(&f, &lids, &lfts, &all);
    prop_assert_eq!(m.unrouted_pairs, a2a.unrouted);
    prop_assert_eq!(m.xi, a2a.xi);
    prop_assert_eq!(u64::from(m.mu_a2a), a2a.mu);
    let mut edges = Vec::new();
    for &(s, d) in &all {
        if s != d {
            if let Some(p) = naive_path(&f, &lids, &lfts, s, d) {
                edges.push(p.len() as f64 + 2.0);
            }
        }
    }
    let nu = if edges.is_empty() {
        0.0
    } else {
        edges.iter().sum::<f64>() / edges.len() as f64
    };
    prop_assert!((m.nu - nu).abs() < 1e-9, "nu {} vs {}", m.nu, nu);
    prop_assert_eq!(f64::from(m.diameter), edges.iter().copied().fold(0.0, f64::max));

    // Every shift, with distinct-source/destination sets (checks mu_p = #paths on permutations).
    let mut mu_sp = 0;
    let mut worst = 0;
    for k in 1..n {
        let pairs: Vec<_> = (0..n).map(|i| (nodes[i], nodes[(i + k) % n])).collect();
        let r = naive_pairs(&f, &lids, &lfts, &pairs);
        prop_assert_eq!(r.mu, r.xi, "a permutation has mu_p = paths through p");
        if r.mu > mu_sp {
            mu_sp = r.mu;
            worst = k;
        }
    }
    prop_assert_eq!(u64::from(m.mu_sp), mu_sp);
    prop_assert_eq!(m.worst_shift as usize, worst);

    // Random permutations replayed.
    let mut rp: Vec<f64> = (0..6)
        .map(|i| {
            let perm = rp_permutation(n, 11, i);
            let pairs: Vec<_> = (0..n).map(|s| (nodes[s], nodes[perm[s] as usize])).collect();
            naive_pairs(&f, &lids, &lfts, &pairs).mu as f64
        })
        .collect();
    rp.sort_by(f64::total_cmp);
    prop_assert_eq!(m.mu_rp.median, quantile(&rp, 0.5));
    prop_assert_eq!(m.mu_rp.q1, quantile(&rp, 1.0 / 40.0));
    prop_assert_eq!(m.mu_rp.q39, quantile(&rp, 39.0 / 40.0));

    // The fast passes against the straightforward implementation (arbitrary end-port orders
    // here: the leaves' end ports interleave), with one channel per range group.
    prop_assert_eq!(&m, &compute_reference(&f, &lids, &lfts, &opts));
    prop_assert_eq!(
        shift_profile_ranges(&f, &lids, &lfts, 16),
        shift_profile_reference(&f, &lids, &lfts)
    );
    Ok(())
}

fn check_pairs_and_jobs(c: &Case, picks: &[(u8, u8)], split: u8) -> Result<(), TestCaseError> {
    let (f, lids, lfts) = build(c);
    let ne = f.num_end_ports();
    if ne == 0 {
        return Ok(());
    }
    // Arbitrary pairs (dead end ports, duplicates and self pairs included).
    let pairs: Vec<_> = picks
        .iter()
        .map(|&(a, b)| (EndPortId(u32::from(a) % ne as u32), EndPortId(u32::from(b) % ne as u32)))
        .collect();
    let pm = mu_of_pairs(&f, &lids, &lfts, &pairs).unwrap();
    let r = naive_pairs(&f, &lids, &lfts, &pairs);
    prop_assert_eq!(
        (pm.routed, pm.unrouted, u64::from(pm.mu), pm.xi),
        (r.routed, r.unrouted, r.mu, r.xi)
    );
    prop_assert_eq!(pm.pairs, r.routed + r.unrouted);

    // Two jobs: end ports split by id; γ^e summed over the jobs' all-to-all routes.
    let ids: Vec<EndPortId> = f.end_port_ids().collect();
    let (j1, j2): (Vec<EndPortId>, Vec<EndPortId>) = ids.iter().partition(|e| (e.0 as u8) < split);
    let jm = jobs_metrics(&f, &lids, &lfts, &[j1.clone(), j2.clone()]).unwrap();
    let mut load: BTreeMap<Channel, u64> = BTreeMap::new();
    let mut routes = 0;
    let mut unrouted = 0;
    for job in [&j1, &j2] {
        let members: Vec<_> = job.iter().copied().filter(|&e| f.end_port_live(e)).collect();
        let all: Vec<_> = members
            .iter()
            .flat_map(|&s| members.iter().map(move |&d| (s, d)))
            .collect();
        let r = naive_pairs(&f, &lids, &lfts, &all);
        routes += r.routed + r.unrouted;
        unrouted += r.unrouted;
        for (c, v) in r.load {
            *load.entry(c).or_default() += v;
        }
    }
    let channels: Vec<Channel> = f
        .switch_ids()
        .flat_map(|s| f.switch(s).external_ports().map(move |(pn, _)| (s, pn)))
        .filter(|&(s, pn)| pn != NO_ROUTE && f.switch_link_live(s, pn).is_some())
        .collect();
    let dark = channels.iter().filter(|c| !load.contains_key(c)).count();
    prop_assert_eq!(jm.switch_ports, channels.len());
    prop_assert_eq!(jm.dark_ports, dark);
    prop_assert_eq!((jm.routes, jm.unrouted_pairs), (routes, unrouted));
    prop_assert_eq!(jm.effective_xi, load.values().copied().max().unwrap_or(0));
    prop_assert_eq!(jm.end_ports, ids.iter().filter(|&&e| f.end_port_live(e)).count());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn fast_metrics_match_naive_reference(c in case()) {
        check_against_reference(&c)?;
    }

    #[test]
    fn pair_and_job_metrics_match_naive_reference(
        c in case(),
        picks in proptest::collection::vec((any::<u8>(), any::<u8>()), 0..24),
        split in 0..10u8,
    ) {
        check_pairs_and_jobs(&c, &picks, split)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// k-ary n-trees (RLFTs, top level `k` or `2k` wide) under Dmodk: every pair routed, every
    /// shift counted, `mu^SP = 1` (thesis §2.3.2), and the fast metrics equal the reference.
    #[test]
    fn kary_ntree_dmodk(k in 2..=3u32, n in 1..=3usize, wide_top in any::<bool>()) {
        let mut m = vec![k; n];
        if wide_top {
            m[n - 1] = 2 * k;
        }
        let mut w = vec![k; n];
        w[0] = 1;
        let t = support::pgft(&m, &w, &vec![1; n]);
        let lfts = support::dmodk(&t);
        let metrics = compute(&t.fabric, &t.lids, &lfts, &MetricsOptions { random_perms: 0, ..Default::default() });
        prop_assert_eq!(metrics.unrouted_pairs, 0);
        let leaves = t.levels[0].len();
        prop_assert_eq!(metrics.mu_sp, u32::from(leaves > 1));
        // Effective diameter in closed form: 2l edges to the Π_{i<l} m_i·(m_l - 1) others
        // first met at level l.
        let nodes: u32 = m.iter().product();
        let mut sum = 0.0;
        let mut below = 1;
        for (l, &ml) in m.iter().enumerate() {
            sum += 2.0 * (l as f64 + 1.0) * f64::from(below * (ml - 1));
            below *= ml;
        }
        prop_assert!((metrics.nu - sum / f64::from(nodes - 1)).abs() < 1e-9);
        let case_ok = if nodes <= 32 {
            let nodes_v = live(&t.fabric);
            let all: Vec<_> = nodes_v.iter().flat_map(|&s| nodes_v.iter().map(move |&d| (s, d))).collect();
            let r = naive_pairs(&t.fabric, &t.lids, &lfts, &all);
            r.mu == u64::from(metrics.mu_a2a) && r.xi == metrics.xi
        } else {
            true
        };
        prop_assert!(case_ok);
    }
}
