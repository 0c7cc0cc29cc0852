//! Degraded generated fabrics: exactly N cables / N non-leaf switches removed, really absent,
//! deterministic per seed, leaves never removed.

use std::collections::BTreeSet;

use fabric_topology::gen::{degrade, generate, generate_str, Degrade, GenError, PgftLayout};
use fabric_topology::{Fabric, Guid, PortNum, Remote};
use proptest::prelude::*;

/// Every inter-switch cable as an unordered pair of (switch GUID, port) ends.
fn cables(f: &Fabric) -> BTreeSet<((Guid, PortNum), (Guid, PortNum))> {
    let mut out = BTreeSet::new();
    for s in f.switches() {
        for (pn, p) in s.external_ports() {
            if let Remote::Switch { sw, port } = p.remote {
                let (a, b) = ((s.guid, pn), (f.switch(sw).guid, port));
                out.insert((a.min(b), a.max(b)));
            }
        }
    }
    out
}

fn leaves(f: &Fabric) -> BTreeSet<Guid> {
    f.switch_ids()
        .filter(|&s| f.is_leaf(s))
        .map(|s| f.switch(s).guid)
        .collect()
}

/// End ports as (port GUID, leaf GUID, leaf port), in id order.
fn end_ports(f: &Fabric) -> Vec<(Guid, Option<(Guid, PortNum)>)> {
    f.end_ports()
        .iter()
        .map(|e| (e.port_guid, e.attach.map(|(s, p)| (f.switch(s).guid, p))))
        .collect()
}

fn check_degraded(full: &Fabric, d: &Degrade, out: &Fabric) -> Result<(), TestCaseError> {
    let before = cables(full);
    let after = cables(out);
    let removed_switches: BTreeSet<Guid> = full
        .switches()
        .iter()
        .map(|s| s.guid)
        .filter(|&g| out.switch_by_guid(g).is_none())
        .collect();
    prop_assert_eq!(removed_switches.len(), d.remove_switches);
    prop_assert_eq!(out.num_switches(), full.num_switches() - d.remove_switches);
    // Leaves are never removed; end ports keep their order and their cabling.
    prop_assert!(removed_switches.is_disjoint(&leaves(full)));
    prop_assert_eq!(leaves(out), leaves(full));
    prop_assert_eq!(end_ports(out), end_ports(full));
    // Removed cables are exactly those of the removed switches plus N more; none is added.
    prop_assert!(after.is_subset(&before));
    let with_removed_switch = before
        .iter()
        .filter(|(a, b)| removed_switches.contains(&a.0) || removed_switches.contains(&b.0))
        .count();
    prop_assert_eq!(before.len() - after.len(), with_removed_switch + d.remove_links);
    prop_assert_eq!(out.count_links(), (after.len(), after.len()));
    // Kept switches keep their names, port counts and relative order.
    let kept: Vec<(Guid, &str, PortNum)> = full
        .switches()
        .iter()
        .filter(|s| !removed_switches.contains(&s.guid))
        .map(|s| (s.guid, s.desc.as_str(), s.nports))
        .collect();
    let got: Vec<(Guid, &str, PortNum)> = out
        .switches()
        .iter()
        .map(|s| (s.guid, s.desc.as_str(), s.nports))
        .collect();
    prop_assert_eq!(got, kept);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn degrade_removes_exactly_what_is_asked(
        spec in prop_oneof![
            Just("PGFT(3;4,2,4;1,2,2;1,2,1)"),
            Just("QFT(3;4,2,4;1,2,2;1,2,1)"),
            Just("KARY(3,3)"),
            Just("XGFT(2;5,3;1,4)"),
        ],
        link_frac in 0.0f64..=1.0,
        switch_frac in 0.0f64..=1.0,
        seed in any::<u64>(),
    ) {
        let g = generate(&spec.parse().unwrap()).unwrap();
        let full = &g.fabric;
        let non_leaves = full.switch_ids().filter(|&s| !full.is_leaf(s)).count();
        let remove_switches = (switch_frac * non_leaves as f64 / 2.0) as usize;
        // Cables left once the switches are gone is at least the leaves' share of cables to
        // switches that stay; keep the request well within what remains.
        let remove_links = (link_frac * full.count_links().0 as f64 / 4.0) as usize;
        let d = Degrade { remove_links, remove_switches, seed };
        match degrade(full, &d) {
            Ok(out) => {
                check_degraded(full, &d, &out)?;
                // Deterministic per seed, and through the string entry point too.
                prop_assert_eq!(&degrade(full, &d).unwrap(), &out);
                prop_assert_eq!(&generate_str(spec, Some(&d)).unwrap(), &out);
                // GUIDs still tell the generator address.
                for s in out.switches() {
                    let a = g.layout.addr_of_guid(s.guid).unwrap();
                    prop_assert_eq!(&g.layout.switch_addr[full.switch_by_guid(s.guid).unwrap().idx()], &a);
                }
                if remove_links + remove_switches > 0 {
                    prop_assert!(PgftLayout::recognize(&out).is_err());
                }
            }
            Err(GenError::TooManyLinks { requested, available }) => {
                // Only when the removed switches took too many cables with them.
                prop_assert_eq!(requested, remove_links);
                prop_assert!(available < requested);
            }
            Err(e) => prop_assert!(false, "unexpected error {}", e),
        }
    }
}

#[test]
fn degrading_nothing_is_the_identity() {
    let g = generate(&"PGFT(3;4,2,4;1,2,2;1,2,1)".parse().unwrap()).unwrap();
    let out = degrade(&g.fabric, &Degrade::default()).unwrap();
    assert_eq!(out, g.fabric);
    assert_eq!(PgftLayout::recognize(&out).unwrap(), g.layout);
}

#[test]
fn seeds_change_the_choice() {
    let full = generate_str("PGFT(3;4,2,4;1,2,2;1,2,1)", None).unwrap();
    let picks: BTreeSet<_> = (0..8u64)
        .map(|seed| {
            let out = degrade(
                &full,
                &Degrade {
                    remove_links: 3,
                    remove_switches: 2,
                    seed,
                },
            )
            .unwrap();
            (cables(&out), out.switches().iter().map(|s| s.guid).collect::<Vec<_>>())
        })
        .collect();
    assert!(
        picks.len() >= 6,
        "8 seeds gave only {} different degradations",
        picks.len()
    );
}

#[test]
fn removing_every_non_leaf_switch_leaves_only_leaves_and_their_nodes() {
    let full = generate_str("KARY(2,3)", None).unwrap();
    let out = degrade(
        &full,
        &Degrade {
            remove_links: 0,
            remove_switches: 8,
            seed: 7,
        },
    )
    .unwrap();
    assert_eq!(
        (out.num_switches(), out.num_end_ports(), out.count_links().0),
        (4, 8, 0)
    );
    assert!(out.switch_ids().all(|s| out.is_leaf(s)));
}

#[test]
fn asking_for_too_much_is_an_error() {
    let full = generate_str("KARY(2,3)", None).unwrap(); // 8 non-leaf switches, 16 cables
    let e = degrade(
        &full,
        &Degrade {
            remove_links: 0,
            remove_switches: 9,
            seed: 1,
        },
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "cannot remove 9 non-leaf switches: the fabric has 8");
    let e = degrade(
        &full,
        &Degrade {
            remove_links: 17,
            remove_switches: 0,
            seed: 1,
        },
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "cannot remove 17 inter-switch cables: the fabric has 16");
    // The top switches of KARY(2,3) carry 8 of the 16 cables.
    let e = generate_str(
        "KARY(2,3)",
        Some(&Degrade {
            remove_links: 16,
            remove_switches: 8,
            seed: 1,
        }),
    )
    .unwrap_err();
    assert_eq!(
        e,
        GenError::TooManyLinks {
            requested: 16,
            available: 0
        }
    );
    assert!(degrade(
        &full,
        &Degrade {
            remove_links: 16,
            remove_switches: 0,
            seed: 3
        }
    )
    .is_ok());
}

#[test]
fn link_states_and_generation_survive() {
    use fabric_topology::{FabricEvent, LinkState, SwitchId};
    let full = generate_str("XGFT(2;3,4;1,2)", None).unwrap(); // 8 cables
    let leaf = full.switch(SwitchId(0)).guid;
    let down = full.apply(&[FabricEvent::LinkDown { switch: leaf, port: 4 }]).unwrap();
    let mut outcomes = BTreeSet::new();
    for seed in 0..40 {
        let out = degrade(
            &down,
            &Degrade {
                remove_links: 1,
                remove_switches: 0,
                seed,
            },
        )
        .unwrap();
        assert_eq!(out.generation(), 1);
        let (total, live) = out.count_links();
        assert_eq!(total, 7);
        let port = &out.switch(out.switch_by_guid(leaf).unwrap()).ports[4];
        match port.remote {
            Remote::Switch { sw, port: rp } => {
                // The down cable was kept: still down at both ends.
                assert_eq!(
                    (port.state, out.switch(sw).ports[rp as usize].state),
                    (LinkState::Down, LinkState::Down)
                );
                assert_eq!(live, 6);
                outcomes.insert("kept");
            }
            Remote::None => {
                assert_eq!(live, 7);
                outcomes.insert("removed");
            }
            Remote::EndPort(_) => panic!("port 4 of a leaf with 3 nodes is an up port"),
        }
    }
    assert_eq!(outcomes.len(), 2, "40 seeds should both keep and remove the down cable");
}
