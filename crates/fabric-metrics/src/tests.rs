//! Hand-computed cases for every metric, and thesis claims on Dmodk-routed fat-trees.

use super::*;
use fabric_routing::NO_ROUTE;
use fabric_topology::{EndPortId, FabricBuilder, FabricEvent, NodeType, SwitchId};

#[path = "../benches/support/mod.rs"]
mod support;

const L0: SwitchId = SwitchId(0);
const L1: SwitchId = SwitchId(1);
const S0: SwitchId = SwitchId(2);
const S1: SwitchId = SwitchId(3);

/// Two leaves with two end ports each and two spines:
/// `L0`: n0@1, n1@2, 3->S0:1, 4->S1:1; `L1`: n2@1, n3@2, 3->S0:2, 4->S1:2.
/// LIDs: n_i -> i + 1 (LMC 0), switches 5..8.
fn two_level() -> (Fabric, LidPlan) {
    let mut b = FabricBuilder::new();
    let l0 = b.add_switch(0x10, "L0", 4).unwrap();
    let l1 = b.add_switch(0x11, "L1", 4).unwrap();
    let s0 = b.add_switch(0x20, "S0", 2).unwrap();
    let s1 = b.add_switch(0x21, "S1", 2).unwrap();
    b.connect_switches(l0, 3, s0, 1).unwrap();
    b.connect_switches(l0, 4, s1, 1).unwrap();
    b.connect_switches(l1, 3, s0, 2).unwrap();
    b.connect_switches(l1, 4, s1, 2).unwrap();
    for i in 0..4u64 {
        let e = b
            .add_end_port(0x100 + i, 0x200 + i, format!("n{i}"), 1, 1, NodeType::Compute)
            .unwrap();
        b.connect_end_port(e, if i < 2 { l0 } else { l1 }, 1 + (i % 2) as u8)
            .unwrap();
    }
    let lids = LidPlan {
        lmc: 0,
        max_lid: 0xBFFF,
        switch_lid: vec![5, 6, 7, 8],
        end_port_base: vec![1, 2, 3, 4],
    };
    (b.build(), lids)
}

/// LFTs of [`two_level`]: local end ports direct, spines down; leaf up-ports chosen by `up`
/// (`up(leaf, dst) -> 3 | 4`).
fn two_level_lfts(up: impl Fn(SwitchId, u32) -> u8) -> Lfts {
    let mut t = Lfts::new(4, 8);
    for d in 0..4u32 {
        let lid = d + 1;
        let (own, other) = if d < 2 { (L0, L1) } else { (L1, L0) };
        t.set(own, lid, 1 + (d % 2) as u8);
        t.set(other, lid, up(other, d));
        t.set(S0, lid, if d < 2 { 1 } else { 2 });
        t.set(S1, lid, if d < 2 { 1 } else { 2 });
    }
    t
}

fn good_lfts() -> Lfts {
    // Dmodk-like: destination d leaves by up-port 3 + d mod 2.
    two_level_lfts(|_, d| 3 + (d % 2) as u8)
}

fn bad_lfts() -> Lfts {
    // Everything through spine S0.
    two_level_lfts(|_, _| 3)
}

fn opts(r: usize) -> MetricsOptions {
    MetricsOptions {
        random_perms: r,
        seed: 42,
        all_to_all: true,
        shifts: true,
    }
}

#[test]
fn two_level_good_routing_is_non_blocking() {
    let (f, lids) = two_level();
    let m = compute(&f, &lids, &good_lfts(), &opts(50));
    assert_eq!(m.end_ports, 4);
    assert_eq!(m.switch_ports, 8);
    // Every shift: each channel carries at most one path (by hand, see module doc).
    assert_eq!(m.mu_sp, 1);
    // A2A: L0:3 carries n0->n2, n1->n2: 2 paths, 2 sources, 1 destination.
    assert_eq!(m.xi, 2);
    assert_eq!(m.mu_a2a, 1);
    // 4 same-leaf pairs at 2 edges, 8 cross pairs at 4 edges.
    assert!((m.nu - 40.0 / 12.0).abs() < 1e-12, "{}", m.nu);
    assert_eq!(m.diameter, 4);
    assert_eq!(m.unrouted_pairs, 0);
    // Any permutation here has mu <= 1: a leaf's two up-ports serve distinct destinations.
    assert_eq!((m.mu_rp.max, m.mu_rp.samples), (1, 50));
}

#[test]
fn two_level_bad_routing_congests() {
    let (f, lids) = two_level();
    let m = compute(&f, &lids, &bad_lfts(), &opts(0));
    // Shift 2: n0->n2 and n1->n3 both cross L0:3 and S0:2.
    assert_eq!(m.mu_sp, 2);
    assert_eq!(m.worst_shift, 2);
    // A2A: L0:3 carries the 4 paths {n0,n1} x {n2,n3}.
    assert_eq!(m.xi, 4);
    assert_eq!(m.mu_a2a, 2);
    assert!((m.nu - 40.0 / 12.0).abs() < 1e-12);
    assert_eq!(m.mu_rp, RpStats::default());
}

#[test]
fn random_permutation_stats_match_replayed_permutations() {
    let (f, lids) = two_level();
    let lfts = bad_lfts();
    let m = compute(&f, &lids, &lfts, &opts(40));
    // Replay each sampled permutation through mu_of_pairs.
    let mut values: Vec<f64> = (0..40)
        .map(|i| {
            let perm = rp_permutation(4, 42, i);
            let pairs: Vec<_> = perm
                .iter()
                .enumerate()
                .map(|(s, &d)| (EndPortId(s as u32), EndPortId(d)))
                .collect();
            f64::from(mu_of_pairs(&f, &lids, &lfts, &pairs).unwrap().mu)
        })
        .collect();
    values.sort_by(f64::total_cmp);
    assert_eq!(m.mu_rp.samples, 40);
    assert_eq!(m.mu_rp.median, quantile(&values, 0.5));
    assert_eq!(m.mu_rp.q1, quantile(&values, 0.025));
    assert_eq!(m.mu_rp.q39, quantile(&values, 0.975));
    assert_eq!(f64::from(m.mu_rp.max), values[39]);
    assert_eq!(f64::from(m.mu_rp.min), values[0]);
    // Same seed, same answer; thread scheduling does not matter.
    assert_eq!(compute(&f, &lids, &lfts, &opts(40)).mu_rp, m.mu_rp);
}

#[test]
fn options_switch_patterns_off() {
    let (f, lids) = two_level();
    let m = compute(
        &f,
        &lids,
        &bad_lfts(),
        &MetricsOptions {
            random_perms: 0,
            seed: 0,
            all_to_all: false,
            shifts: false,
        },
    );
    assert_eq!((m.mu_sp, m.mu_a2a, m.xi, m.mu_rp.samples), (0, 0, 0, 0));
    assert_eq!(m.unrouted_pairs, 0);
    assert!((m.nu - 40.0 / 12.0).abs() < 1e-12);
}

#[test]
fn unrouted_pairs_are_counted_and_carry_no_load() {
    let (f, lids) = two_level();
    let mut t = bad_lfts();
    t.set(L0, 3, NO_ROUTE); // n0, n1 -> n2: no route (2 pairs)
    t.set(S0, 4, 1); // n0, n1 -> n3: L0 -> S0 -> L0 -> ... loop (2 pairs)
    t.set(L0, 4, 3);
    t.set(L1, 1, 2); // n2, n3 -> n0 delivered to n3: n2 -> n0 wrong end port, n3 -> n0 too (2 pairs)
    let m = compute(&f, &lids, &t, &opts(0));
    assert_eq!(m.unrouted_pairs, 6);
    // Remaining cross pairs: n2 -> n1 and n3 -> n1 via L1:3 -> S0:1.
    assert_eq!(m.xi, 2);
    assert_eq!(m.mu_a2a, 1);
    // 4 same-leaf pairs (2 edges) + 2 cross pairs (4 edges), over 6 routed pairs.
    assert!((m.nu - 16.0 / 6.0).abs() < 1e-12);
    // Shift 1: 1->2 unrouted, 3->0 misdelivered; shift 2: only 3->1 routed; shift 3: 0->3
    // loops, only 2->1 routed.
    assert_eq!(m.mu_sp, 1);
}

#[test]
fn link_down_port_and_missing_lid_make_pairs_unrouted() {
    let (f, lids) = two_level();
    // Cable L0:3 - S0:1 goes down: the bad routing sends every L0 -> L1 path into L0:3 and
    // every L1 -> L0 path into S0:1.
    let g = f.apply(&[FabricEvent::LinkDown { switch: 0x10, port: 3 }]).unwrap();
    let m = compute(&g, &lids, &bad_lfts(), &opts(0));
    assert_eq!(m.switch_ports, 6);
    assert_eq!(m.unrouted_pairs, 8);
    assert!((m.nu - 2.0).abs() < 1e-12);
    // End port n3 without LID: every pair towards it is unrouted.
    let mut lids2 = lids.clone();
    lids2.end_port_base[3] = 0;
    let m = compute(&f, &lids2, &good_lfts(), &opts(0));
    assert_eq!(m.unrouted_pairs, 3);
    // LFTs covering fewer switches than the fabric: spines have no route at all.
    let mut short = Lfts::new(2, 8);
    for sw in [L0, L1] {
        for lid in 1..=4 {
            short.set(sw, lid, good_lfts().get(sw, lid));
        }
    }
    let m = compute(&f, &lids, &short, &opts(0));
    assert_eq!(m.unrouted_pairs, 8);
    assert_eq!(m.xi, 0);
}

#[test]
fn only_live_end_ports_take_part() {
    let (f, lids) = two_level();
    let g = f.apply(&[FabricEvent::EndPortDown(0x103)]).unwrap();
    let m = compute(&g, &lids, &bad_lfts(), &opts(0));
    assert_eq!(m.end_ports, 3);
    // Live order n0, n1, n2: shift 1 = 0->1, 1->2, 2->0; shift 2 = 0->2, 1->0, 2->1: one
    // path per channel in each.
    assert_eq!(m.mu_sp, 1);
    // A2A: L0:3 carries n0->n2, n1->n2 (2 paths, 2 sources, 1 destination).
    assert_eq!((m.xi, m.mu_a2a), (2, 1));
    // Pairs: n0<->n1 (2 edges), 4 cross pairs (4 edges).
    assert!((m.nu - 20.0 / 6.0).abs() < 1e-12);
}

/// One spine, two leaves, each leaf with two parallel cables to the spine:
/// `L0`: n0@1, n1@2, 3->S:1, 4->S:2; `L1`: n2@1, n3@2, 3->S:3, 4->S:4.
fn parallel_links() -> (Fabric, LidPlan) {
    let mut b = FabricBuilder::new();
    let l0 = b.add_switch(0x10, "L0", 4).unwrap();
    let l1 = b.add_switch(0x11, "L1", 4).unwrap();
    let s = b.add_switch(0x20, "S", 4).unwrap();
    b.connect_switches(l0, 3, s, 1).unwrap();
    b.connect_switches(l0, 4, s, 2).unwrap();
    b.connect_switches(l1, 3, s, 3).unwrap();
    b.connect_switches(l1, 4, s, 4).unwrap();
    for i in 0..4u64 {
        let e = b
            .add_end_port(0x100 + i, 0x200 + i, format!("n{i}"), 1, 1, NodeType::Compute)
            .unwrap();
        b.connect_end_port(e, if i < 2 { l0 } else { l1 }, 1 + (i % 2) as u8)
            .unwrap();
    }
    let lids = LidPlan {
        lmc: 0,
        max_lid: 0xBFFF,
        switch_lid: vec![5, 6, 7],
        end_port_base: vec![1, 2, 3, 4],
    };
    (b.build(), lids)
}

#[test]
fn parallel_links_are_counted_separately() {
    let (f, lids) = parallel_links();
    let (l0, l1, s) = (SwitchId(0), SwitchId(1), SwitchId(2));
    let mut t = Lfts::new(3, 7);
    for d in 0..4u32 {
        let lid = d + 1;
        let (own, other) = if d < 2 { (l0, l1) } else { (l1, l0) };
        t.set(own, lid, 1 + (d % 2) as u8);
        t.set(other, lid, 3 + (d % 2) as u8); // parallel up-link by destination parity
        t.set(s, lid, 1 + d as u8); // parallel down-link by destination parity
    }
    let m = compute(&f, &lids, &t, &opts(0));
    assert_eq!(m.switch_ports, 8);
    // Shift 2 = n0->n2 (L0:3, S:3), n1->n3 (L0:4, S:4), ...: one path per parallel port.
    // Were the parallel cables one port, this would be 2.
    assert_eq!(m.mu_sp, 1);
    assert_eq!(m.xi, 2);
    // Now the spine sends both destinations of L1 down the same cable.
    t.set(s, 4, 3);
    let m = compute(&f, &lids, &t, &opts(0));
    assert_eq!(m.mu_sp, 2);
    assert_eq!(m.worst_shift, 2);
    let pm = mu_of_pairs(
        &f,
        &lids,
        &t,
        &[(EndPortId(0), EndPortId(2)), (EndPortId(1), EndPortId(3))],
    )
    .unwrap();
    assert_eq!(pm.mu, 2);
    assert_eq!(
        pm.worst_port,
        Some(SwitchPort {
            switch: s,
            guid: 0x20,
            port: 3
        })
    );
}

#[test]
fn mu_of_pairs_counts_distinct_sources_and_destinations() {
    let (f, lids) = two_level();
    let t = bad_lfts();
    let e = EndPortId;
    // Gather to n2 from n0 and n1: L0:3 has 2 sources, 1 destination -> mu 1, xi 2.
    let pm = mu_of_pairs(&f, &lids, &t, &[(e(0), e(2)), (e(1), e(2))]).unwrap();
    assert_eq!((pm.mu, pm.xi, pm.pairs, pm.routed, pm.unrouted), (1, 2, 2, 2, 0));
    // Scatter from n0 to n2 and n3: 1 source, 2 destinations -> mu 1.
    let pm = mu_of_pairs(&f, &lids, &t, &[(e(0), e(2)), (e(0), e(3))]).unwrap();
    assert_eq!((pm.mu, pm.xi), (1, 2));
    // Both: 2 sources and 2 destinations on L0:3 -> mu 2 (reported at L0 port 3, the lowest
    // switch id attaining it); duplicates and self pairs change nothing but the counts.
    let pairs = [(e(0), e(2)), (e(1), e(3)), (e(1), e(3)), (e(2), e(2))];
    let pm = mu_of_pairs(&f, &lids, &t, &pairs).unwrap();
    assert_eq!((pm.mu, pm.xi, pm.pairs), (2, 3, 3));
    assert_eq!(
        pm.worst_port,
        Some(SwitchPort {
            switch: L0,
            guid: 0x10,
            port: 3
        })
    );
    // Local pairs cross no switch-to-switch port.
    let pm = mu_of_pairs(&f, &lids, &t, &[(e(0), e(1)), (e(1), e(0))]).unwrap();
    assert_eq!((pm.mu, pm.xi, pm.routed, pm.worst_port), (0, 0, 2, None));
    // Unknown end port id: an error naming it.
    let err = mu_of_pairs(&f, &lids, &t, &[(e(0), e(9))]).unwrap_err();
    assert_eq!(err, MetricsError::UnknownEndPort { id: 9, count: 4 });
    assert_eq!(
        err.to_string(),
        "end port id 9 does not exist (the fabric has 4 end ports)"
    );
    // A dead end port makes its pairs unrouted.
    let g = f.apply(&[FabricEvent::EndPortDown(0x102)]).unwrap();
    let pm = mu_of_pairs(&g, &lids, &t, &[(e(0), e(2)), (e(1), e(3))]).unwrap();
    assert_eq!((pm.pairs, pm.routed, pm.unrouted, pm.mu), (2, 1, 1, 1));
}

#[test]
fn job_metrics_by_hand() {
    let (f, lids) = two_level();
    let t = bad_lfts();
    let e = EndPortId;
    // Job {n0, n2}: n0->n2 uses L0:3, S0:2; n2->n0 uses L1:3, S0:1. 4 of 8 ports dark.
    let j = job_metrics(&f, &lids, &t, &[e(0), e(2)]).unwrap();
    assert_eq!((j.end_ports, j.routes, j.unrouted_pairs, j.effective_xi), (2, 2, 0, 1));
    assert_eq!((j.switch_ports, j.dark_ports), (8, 4));
    assert_eq!(j.dark_share, 0.5);
    assert_eq!(
        j.busiest_port,
        Some(SwitchPort {
            switch: L0,
            guid: 0x10,
            port: 3
        })
    );
    // Job {n0, n1, n2} (n1 listed twice): 6 routes, 2 of them local; L0:3 and S0:2 carry
    // n0->n2 and n1->n2.
    let j = job_metrics(&f, &lids, &t, &[e(0), e(1), e(2), e(1)]).unwrap();
    assert_eq!((j.end_ports, j.routes, j.effective_xi, j.dark_ports), (3, 6, 2, 4));
    // With the good routing the same job lights L0:3 (->n2), S0:2, L1:3 (->n0), S0:1 and
    // L1:4 (->n1), S1:1.
    let j = job_metrics(&f, &lids, &good_lfts(), &[e(0), e(1), e(2)]).unwrap();
    assert_eq!((j.effective_xi, j.dark_ports), (2, 2));
    // Two jobs together: γ^e adds up; routes between jobs are not traffic.
    let j = jobs_metrics(&f, &lids, &t, &[vec![e(0), e(2)], vec![e(1), e(3)]]).unwrap();
    assert_eq!(
        (j.jobs, j.end_ports, j.routes, j.effective_xi, j.dark_ports),
        (2, 4, 4, 2, 4)
    );
    // A job on one leaf leaves every switch port dark.
    let j = job_metrics(&f, &lids, &t, &[e(0), e(1)]).unwrap();
    assert_eq!(
        (j.routes, j.effective_xi, j.dark_share, j.busiest_port),
        (2, 0, 1.0, None)
    );
    // Dead members are left out and reported.
    let g = f.apply(&[FabricEvent::EndPortDown(0x100)]).unwrap();
    let j = job_metrics(&g, &lids, &t, &[e(0), e(1), e(2)]).unwrap();
    assert_eq!((j.end_ports, j.dead_end_ports, j.routes, j.effective_xi), (2, 1, 2, 1));
    assert!(matches!(
        job_metrics(&f, &lids, &t, &[e(4)]),
        Err(MetricsError::UnknownEndPort { id: 4, .. })
    ));
}

#[test]
fn empty_and_tiny_fabrics() {
    let f = FabricBuilder::new().build();
    let lids = LidPlan {
        lmc: 0,
        max_lid: 0xBFFF,
        switch_lid: vec![],
        end_port_base: vec![],
    };
    let m = compute(&f, &lids, &Lfts::new(0, 0), &MetricsOptions::default());
    assert_eq!(
        m,
        Metrics {
            mu_rp: m.mu_rp.clone(),
            ..Metrics::default()
        }
    );
    assert_eq!(m.mu_rp.samples, 1000);
    assert_eq!(m.mu_rp.max, 0);
    let j = job_metrics(&f, &lids, &Lfts::new(0, 0), &[]).unwrap();
    assert_eq!((j.switch_ports, j.dark_share), (0, 0.0));
}

/// RLFT `XGFT(2; 4, 4; 1, 4)` (16 end ports, 4 leaves, 4 spines): thesis §2.3.2, "an RLFT has
/// `mu^SP(Dmodk) = 1`".
#[test]
fn rlft_dmodk_is_shift_optimal() {
    let t = support::pgft(&[4, 4], &[1, 4], &[1, 1]);
    let m = compute(&t.fabric, &t.lids, &support::dmodk(&t), &opts(100));
    assert_eq!(m.end_ports, 16);
    assert_eq!(m.unrouted_pairs, 0);
    assert_eq!(m.mu_sp, 1);
    // Each leaf up-port carries the destinations d ≡ j (mod 4): at most 4 sources per
    // permutation; spine down-ports carry one destination each.
    assert!(m.mu_rp.max <= 4 && m.mu_rp.median >= 1.0);
    // 3 others at 2 edges, 12 at 4 edges.
    assert!((m.nu - (2.0 * 3.0 + 4.0 * 12.0) / 15.0).abs() < 1e-12);
    // A2A: leaf up-port j carries 4 sources x 3 destinations (d ≡ j mod 4 on other leaves).
    assert_eq!(m.xi, 12);
    assert_eq!(m.mu_a2a, 3);
}

/// 3-level k-ary n-tree `XGFT(3; 4, 4, 4; 1, 4, 4)` (64 end ports): also shift-optimal.
#[test]
fn three_level_rlft_dmodk_is_shift_optimal() {
    let t = support::pgft(&[4, 4, 4], &[1, 4, 4], &[1, 1, 1]);
    let m = compute(&t.fabric, &t.lids, &support::dmodk(&t), &opts(0));
    assert_eq!((m.end_ports, m.unrouted_pairs, m.mu_sp), (64, 0, 1));
    // 3 others at 2 edges, 12 at 4, 48 at 6.
    assert!((m.nu - (2.0 * 3.0 + 4.0 * 12.0 + 6.0 * 48.0) / 63.0).abs() < 1e-12);
    assert_eq!(m.diameter, 6);
}

/// Blocking factor 2 (`XGFT(2; 8, 4; 1, 4)`): thesis §2.3.2, `mu^SP` gives the blocking factor
/// of the network under a shift-optimal routing.
#[test]
fn blocking_factor_shows_in_mu_sp() {
    let t = support::pgft(&[8, 4], &[1, 4], &[1, 1]);
    let m = compute(&t.fabric, &t.lids, &support::dmodk(&t), &opts(0));
    assert_eq!(m.mu_sp, 2);
    // Shift k sends the last k end ports of a leaf to the first k of the next leaf, whose
    // residues mod 4 are distinct up to k = 4; at k = 5 residue 0 appears twice.
    assert_eq!(m.worst_shift, 5);
}

/// Thesis §2.3.3, Figure 2.2: the PGFT `G_P` with 20 8-port switches and 32 end ports has
/// `nu = (2·3 + 4·4 + 6·24) / 31 ≈ 5.35`.
#[test]
fn effective_diameter_of_thesis_pgft() {
    let t = support::pgft(&[4, 2, 4], &[1, 2, 2], &[1, 2, 1]);
    assert_eq!(t.fabric.num_switches(), 20);
    assert_eq!(t.fabric.count_links().0 + t.fabric.num_end_ports(), 80);
    let m = compute(&t.fabric, &t.lids, &support::dmodk(&t), &opts(0));
    assert_eq!(m.unrouted_pairs, 0);
    assert!((m.nu - 166.0 / 31.0).abs() < 1e-12, "{}", m.nu);
    assert_eq!(format!("{:.2}", m.nu), "5.35");
    // Same thesis paragraph: mu^SP(Dmodk) = 2 (blocking factor 2 at the top level).
    assert_eq!(m.mu_sp, 2);
}

#[test]
fn port_loads_count_the_paths_of_each_port() {
    let (f, lids) = two_level();
    let good = port_loads(&f, &lids, &good_lfts(), true);
    assert_eq!(good.end_ports, 4);
    // 8 directed switch-to-switch ports, 8 cross-leaf ordered pairs of 2 hops each.
    assert_eq!(good.ports.len(), 8);
    assert!(
        good.ports.iter().all(|p| p.all_to_all == 2 && p.worst_shift == 1),
        "{good:?}"
    );
    let bad = port_loads(&f, &lids, &bad_lfts(), true);
    let load = |sw: SwitchId, port: u8| {
        bad.ports
            .iter()
            .find(|p| p.port.switch == sw && p.port.port == port)
            .unwrap_or_else(|| panic!("no port {sw:?}/{port} in {bad:?}"))
            .clone()
    };
    assert_eq!((load(L0, 3).all_to_all, load(L0, 3).worst_shift), (4, 2));
    assert_eq!((load(S0, 2).all_to_all, load(S0, 2).worst_shift), (4, 2));
    assert_eq!((load(L0, 4).all_to_all, load(L0, 4).worst_shift), (0, 0));
    // The maxima are the fabric's xi and mu_sp.
    let m = compute(&f, &lids, &bad_lfts(), &opts(0));
    assert_eq!(bad.ports.iter().map(|p| p.all_to_all).max(), Some(m.xi));
    assert_eq!(bad.ports.iter().map(|p| p.worst_shift).max(), Some(m.mu_sp));
    // Without shifts only the all-to-all loads are computed.
    let a2a = port_loads(&f, &lids, &bad_lfts(), false);
    assert!(!a2a.shifts && a2a.ports.iter().all(|p| p.worst_shift == 0));
    assert_eq!(load(L0, 3).port.guid, 0x10);
}

#[test]
fn progress_counts_every_unit_and_changes_nothing() {
    let (f, lids) = two_level();
    let lfts = good_lfts();
    let p = Progress::new();
    let with = compute_with_progress(&f, &lids, &lfts, &opts(25), &p);
    let without = compute(&f, &lids, &lfts, &opts(25));
    assert_eq!(with.mu_sp, without.mu_sp);
    assert_eq!(with.mu_rp.counts, without.mu_rp.counts);
    // 25 random permutations, one block of 64 destinations for the path scan, and the shift
    // pass: one block to count the transit ranges, one per switch group to gather them, one
    // per switch (4).
    assert_eq!(p.total(), 25 + 1 + 1 + 1 + 4);
    assert_eq!(p.done(), p.total());
}
