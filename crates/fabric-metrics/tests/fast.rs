//! Property tests: the fast passes (destination-major ranges for the shifts, destination-major
//! walks for the random permutations) give exactly the numbers of the straightforward
//! implementation (`fabric_metrics::reference`) on random degraded PGFTs: Dmodk tables, then
//! random cables, switches and end ports down and random LFT entries overwritten (loops,
//! dead ends, wrong deliveries).

use fabric_metrics::reference::{compute_reference, shift_profile_ranges, shift_profile_reference};
use fabric_metrics::{compute, MetricsOptions};
use fabric_topology::{FabricEvent, SwitchId};
use proptest::prelude::*;

#[path = "../benches/support/mod.rs"]
mod support;

/// A PGFT shape: child arities, parent arities, parallel links (2 or 3 levels, small).
fn shape() -> impl Strategy<Value = (Vec<u32>, Vec<u32>, Vec<u32>)> {
    prop_oneof![
        (2..=4u32, 2..=4u32, 1..=3u32, 1..=2u32).prop_map(|(m1, m2, w2, p2)| (vec![m1, m2], vec![1, w2], vec![1, p2])),
        (2..=3u32, 2..=3u32, 2..=3u32, 1..=2u32, 1..=2u32, 1..=2u32).prop_map(|(m1, m2, m3, w2, w3, p2)| (
            vec![m1, m2, m3],
            vec![1, w2, w3],
            vec![1, p2, 1]
        )),
    ]
}

fn check(
    (m, w, p): &(Vec<u32>, Vec<u32>, Vec<u32>),
    events: &[u16],
    scribbles: &[(u16, u16, u8)],
    budget: usize,
) -> Result<(), TestCaseError> {
    let t = support::pgft(m, w, p);
    let mut lfts = support::dmodk(&t);
    let ns = t.fabric.num_switches();
    let ne = t.fabric.num_end_ports();
    let mut f = t.fabric.clone();
    for &ev in events {
        let sw = f.switch(SwitchId((ev as usize >> 3) as u32 % ns as u32)).guid;
        let event = match ev % 8 {
            0..=4 => FabricEvent::LinkDown {
                switch: sw,
                port: 1
                    + (ev >> 8) as u8
                        % f.switch(SwitchId((ev as usize >> 3) as u32 % ns as u32))
                            .ports
                            .len()
                            .max(1) as u8,
            },
            5 | 6 => FabricEvent::EndPortDown(
                f.end_port(fabric_topology::EndPortId(u32::from(ev >> 3) % ne as u32))
                    .port_guid,
            ),
            _ => FabricEvent::SwitchDown(sw),
        };
        if let Ok(g) = f.apply(&[event]) {
            f = g;
        }
    }
    for &(s, lid, port) in scribbles {
        let lid = 1 + u32::from(lid) % ne as u32;
        lfts.set(SwitchId(u32::from(s) % ns as u32), lid, port % 12);
    }
    let fast = shift_profile_ranges(&f, &t.lids, &lfts, budget);
    let slow = shift_profile_reference(&f, &t.lids, &lfts);
    prop_assert_eq!(&fast, &slow);
    let opts = MetricsOptions {
        random_perms: 5,
        seed: 3,
        all_to_all: true,
        shifts: true,
    };
    let a = compute(&f, &t.lids, &lfts, &opts);
    let b = compute_reference(&f, &t.lids, &lfts, &opts);
    prop_assert_eq!(&a, &b);
    prop_assert_eq!((a.mu_sp, a.worst_shift), (slow.mu_sp, slow.worst_shift));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn fast_shifts_and_permutations_match_reference_on_degraded_pgfts(
        shape in shape(),
        events in proptest::collection::vec(any::<u16>(), 0..6),
        scribbles in proptest::collection::vec((any::<u16>(), any::<u16>(), any::<u8>()), 0..12),
        budget in prop_oneof![Just(16usize), Just(200), Just(1 << 20)],
    ) {
        check(&shape, &events, &scribbles, budget)?;
    }
}

/// The healthy fabrics too (every pair routed: the per-shift profile is nonzero everywhere).
#[test]
fn fast_shifts_match_reference_on_healthy_pgfts() {
    for shape in [
        (vec![4, 4], vec![1, 2], vec![1, 2]),
        (vec![3, 3, 4], vec![1, 3, 2], vec![1, 1, 1]),
        (vec![2, 3, 2], vec![1, 2, 3], vec![1, 2, 1]),
    ] {
        check(&shape, &[], &[], 1 << 20).unwrap();
        check(&shape, &[], &[], 16).unwrap();
    }
}
