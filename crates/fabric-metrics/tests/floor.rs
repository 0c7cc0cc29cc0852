//! The `mu_rp` floor estimate ([`rp_floor`]) against measured routings.
//!
//! * On complete fat-trees Dmodc/Dmodk split every subtree's destinations evenly over its
//!   up-links and coalesce every destination's paths, i.e. they *are* the routing the floor
//!   describes: the measured share of permutations with `mu ≥ k` must match the estimate for
//!   every `k` (within sampling error plus the model's independence error).
//! * On degraded fat-trees no routing can beat the floor: Dmodc's measured shares must not be
//!   below it (same tolerance), and the floor must move up when capacity is lost.

use fabric_metrics::{compute, rp_floor, MetricsOptions, RpFloor};
use fabric_ranking::{rank, RankOptions};
use fabric_routing::{assign_lids, route_all, EngineKind, Guid2Lid, RoutingContext, IB_MAX_UNICAST_LID};
use fabric_topology::gen::{degrade, generate, Degrade, PgftSpec};
use fabric_topology::Fabric;

const SAMPLES: usize = 1500;

/// Allowed gap between a measured share and the estimate: 4 standard errors of the sampled
/// share plus 0.04 for the model (links treated as independent; measured at 0.03 on the
/// 7 776-node complete PGFT).
fn tolerance(p: f64) -> f64 {
    4.0 * (p * (1.0 - p) / SAMPLES as f64).sqrt() + 0.04
}

fn pgft(spec: &str) -> Fabric {
    let s: PgftSpec = spec.parse().unwrap_or_else(|e| panic!("{spec}: {e}"));
    generate(&s).unwrap().fabric
}

/// Dmodc-routed shares `P(mu ≥ k)` over `SAMPLES` random permutations, and the floor.
fn measure(f: &Fabric, seed: u64) -> (fabric_metrics::RpStats, RpFloor) {
    let ranking = rank(f, &RankOptions::default());
    let lids = assign_lids(f, &Guid2Lid::default(), 0, IB_MAX_UNICAST_LID).unwrap();
    let ctx = RoutingContext {
        fabric: f,
        ranking: &ranking,
        lids: &lids,
    };
    let lfts = route_all(&ctx, EngineKind::Dmodc).unwrap().lfts;
    let m = compute(
        f,
        &lids,
        &lfts,
        &MetricsOptions {
            random_perms: SAMPLES,
            seed,
            all_to_all: false,
            shifts: false,
        },
    );
    (m.mu_rp, rp_floor(f, &ranking.level))
}

#[test]
fn floor_matches_dmodc_on_complete_fat_trees() {
    for spec in [
        "PGFT(3;8,8,8;1,8,8;1,1,1)",
        "PGFT(2;16,32;1,16;1,1)",
        // Oversubscribed (4 up-links for 8 end ports per leaf) with parallel cables.
        "PGFT(2;8,16;1,4;1,2)",
        "PGFT(3;6,6,12;1,6,3;1,1,2)",
    ] {
        let f = pgft(spec);
        let (rp, floor) = measure(&f, 7);
        assert!(floor.median > 0, "{spec}: {floor:?}");
        let top = rp.counts.len() as u32 + 1;
        for k in 1..=top.max(floor.p_at_least.len() as u32) {
            let (measured, est) = (rp.share_at_least(k), floor.p_at_least(k));
            assert!(
                (measured - est).abs() <= tolerance(est),
                "{spec}: P(mu >= {k}) measured {measured:.3}, floor {est:.3}\n{floor:?}\n{:?}",
                rp.counts
            );
        }
        assert!(
            (rp.median - f64::from(floor.median)).abs() <= 1.0,
            "{spec}: median {} vs floor {}",
            rp.median,
            floor.median
        );
    }
}

#[test]
fn no_routing_measured_beats_the_floor_on_degraded_fat_trees() {
    let spec = "PGFT(3;8,8,8;1,8,8;1,1,1)";
    let complete = pgft(spec);
    let base_floor = rp_floor(&complete, &rank(&complete, &RankOptions::default()).level);
    let cables = complete.count_links().0;
    for (pct, seed) in [(5usize, 1u64), (5, 2), (10, 3), (20, 4)] {
        let f = degrade(
            &complete,
            &Degrade {
                remove_links: cables * pct / 100,
                remove_switches: 0,
                seed,
            },
        )
        .unwrap();
        let (rp, floor) = measure(&f, seed);
        for k in 1..floor.p_at_least.len() as u32 {
            let (measured, est) = (rp.share_at_least(k), floor.p_at_least(k));
            assert!(
                measured >= est - tolerance(est),
                "{pct} % seed {seed}: P(mu >= {k}) measured {measured:.3} is below the floor {est:.3}"
            );
        }
        // Less capacity, same traffic: the best achievable congestion gets worse.
        let k = base_floor.median + 1;
        assert!(
            floor.p_at_least(k) > base_floor.p_at_least(k),
            "{pct} % seed {seed}: floor P(mu >= {k}) {} not above the complete fabric's {}",
            floor.p_at_least(k),
            base_floor.p_at_least(k)
        );
    }
}

#[test]
fn floor_of_fabrics_without_switch_to_switch_traffic_is_zero() {
    // One leaf: every path stays on the switch.
    let f = pgft("PGFT(1;8;1;1)");
    let floor = rp_floor(&f, &rank(&f, &RankOptions::default()).level);
    assert_eq!(
        (floor.median, floor.p_at_least.clone(), floor.subtrees),
        (0, vec![1.0], 0)
    );
    // No levels known: nothing to estimate, no panic.
    let f = pgft("PGFT(2;4,4;1,2;1,1)");
    let floor = rp_floor(&f, &[]);
    assert_eq!(floor.median, 0);
}

#[test]
fn floor_of_a_split_fabric_counts_each_part() {
    // Remove every cable of one leaf: its end ports can only talk among themselves.
    let f = pgft("PGFT(2;4,4;1,2;1,1)");
    let leaf = f.switch_ids().find(|&s| f.is_leaf(s)).unwrap();
    let events: Vec<_> = f
        .port_groups(leaf)
        .iter()
        .flat_map(|g| g.ports.iter().map(move |&p| (leaf, p)))
        .map(|(sw, port)| fabric_topology::FabricEvent::LinkDown {
            switch: f.switch(sw).guid,
            port,
        })
        .collect();
    let split = f.apply(&events).unwrap();
    let ranking = rank(&split, &RankOptions::default());
    let floor = rp_floor(&split, &ranking.level);
    assert!(floor.subtrees >= 3, "{floor:?}");
    assert!(floor
        .p_at_least
        .iter()
        .all(|p| p.is_finite() && (0.0..=1.0).contains(p)));
}

/// Real `ibnetdiscover` dumps (irregular, oversubscribed, a two-switch lab with self-looped
/// cables): Dmodc never measures below the floor.
#[test]
fn no_routing_measured_beats_the_floor_on_real_fabrics() {
    let dumps = [
        (
            "ufm-lab",
            include_str!("../../fabric-routing/tests/data/ibtopotool-ufm-lab-degraded.ibnet"),
        ),
        (
            "sx6036",
            include_str!("../../fabric-routing/tests/data/loginoff-sx6036-fdr10-8sw.ibnet"),
        ),
        (
            "psmn-x5",
            include_str!("../../fabric-routing/tests/data/psmn-x5-voltaire4036-qdr.ibnet"),
        ),
        (
            "switchib",
            include_str!("../../fabric-routing/tests/data/switchib-edr-6sw-flat.ibnet"),
        ),
    ];
    for (name, text) in dumps {
        let f = fabric_topology::ibnet::parse(text, name).unwrap().fabric;
        let (rp, floor) = measure(&f, 11);
        assert!(floor.median >= 1, "{name}: {floor:?}");
        for k in 1..floor.p_at_least.len() as u32 {
            let (measured, est) = (rp.share_at_least(k), floor.p_at_least(k));
            assert!(
                measured >= est - tolerance(est),
                "{name}: P(mu >= {k}) measured {measured:.3} is below the floor {est:.3}"
            );
        }
    }
}
