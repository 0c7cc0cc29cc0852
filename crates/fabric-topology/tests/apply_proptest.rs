//! Property test of the model's invariant "ids are never renumbered" (docs/ARCHITECTURE.md):
//! whatever sequence of valid fault events is applied to a fat-tree, every switch and end port
//! keeps its id, its GUID and its cabling record; only states change, and undoing every event
//! gives back the original fabric. And the derived live views that `Fabric::apply` re-derives
//! only for the switches an event touches (port groups, attached end ports) equal those
//! derived from the states alone.

use fabric_topology::gen::generate_str;
use fabric_topology::{Fabric, FabricEvent, Remote};
use proptest::prelude::*;

/// A few fat-trees of different shapes (two and three levels, parallel links).
const SPECS: &[&str] = &[
    "PGFT(2;4,6;1,3;1,1)",
    "PGFT(2;4,4;1,2;1,2)",
    "PGFT(3;2,2,3;1,2,2;1,1,1)",
];

/// Every event this fabric accepts: each cabled switch port, switch and end port, down and up.
fn events(f: &Fabric) -> Vec<FabricEvent> {
    let mut v = Vec::new();
    for s in f.switches() {
        for (port, p) in s.external_ports() {
            if p.remote != Remote::None {
                v.push(FabricEvent::LinkDown { switch: s.guid, port });
                v.push(FabricEvent::LinkUp { switch: s.guid, port });
            }
        }
        v.push(FabricEvent::SwitchDown(s.guid));
        v.push(FabricEvent::SwitchUp(s.guid));
    }
    for e in f.end_ports() {
        v.push(FabricEvent::EndPortDown(e.port_guid));
        v.push(FabricEvent::EndPortUp(e.port_guid));
    }
    v
}

/// What must survive any event: ids, GUIDs, names, port counts and the cabling.
fn identity(f: &Fabric) -> Vec<String> {
    let sw = f.switches().iter().enumerate().map(|(i, s)| {
        let cabling: Vec<_> = s.ports.iter().map(|p| p.remote).collect();
        format!("switch {i} {:#x} {} {} {cabling:?}", s.guid, s.desc, s.nports)
    });
    let ep = f.end_ports().iter().enumerate().map(|(i, e)| {
        format!(
            "end port {i} {:#x} {:#x} {} {:?}",
            e.port_guid, e.node_guid, e.desc, e.attach
        )
    });
    sw.chain(ep).collect()
}

fn up_event(e: &FabricEvent) -> FabricEvent {
    match *e {
        FabricEvent::LinkDown { switch, port } | FabricEvent::LinkUp { switch, port } => {
            FabricEvent::LinkUp { switch, port }
        }
        FabricEvent::SwitchDown(g) | FabricEvent::SwitchUp(g) => FabricEvent::SwitchUp(g),
        FabricEvent::EndPortDown(g) | FabricEvent::EndPortUp(g) => FabricEvent::EndPortUp(g),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn ids_and_cabling_survive_any_sequence_of_events(
        spec in 0..SPECS.len(),
        picks in prop::collection::vec((any::<prop::sample::Index>(), 1usize..4), 1..12),
    ) {
        let f = generate_str(SPECS[spec], None).unwrap();
        let all = events(&f);
        let before = identity(&f);
        let mut cur = f.clone();
        let mut applied = Vec::new();
        for (pick, batch) in picks {
            let evs: Vec<FabricEvent> =
                (0..batch).map(|k| all[(pick.index(all.len()) + k) % all.len()].clone()).collect();
            for e in &evs {
                prop_assert_eq!(cur.check_event(e), Ok(()));
            }
            let next = cur.apply(&evs).unwrap();
            prop_assert_eq!(next.generation(), cur.generation() + 1);
            prop_assert_eq!(identity(&next), before.clone(), "ids or cabling changed by {:?}", evs);
            for s in next.switch_ids() {
                prop_assert_eq!(next.switch_by_guid(next.switch(s).guid), Some(s));
            }
            for e in next.end_port_ids() {
                prop_assert_eq!(next.end_port_by_guid(next.end_port(e).port_guid), Some(e));
            }
            applied.extend(evs);
            cur = next;
        }
        // Everything back up: the original fabric, generation aside.
        let undo: Vec<FabricEvent> = applied.iter().map(up_event).collect();
        let back = cur.apply(&undo).unwrap();
        let f_again = f.apply(&[]).unwrap();
        prop_assert_eq!(identity(&back), before);
        prop_assert_eq!(back.switches(), f_again.switches());
        prop_assert_eq!(back.end_ports(), f_again.end_ports());
    }
}

/// Per switch: its live port groups (remote id, local ports) and its attached end ports.
type Views = Vec<(Vec<(u32, Vec<u8>)>, Vec<u32>)>;

/// The live port groups (remote, ports) and attached end ports of every switch, derived from
/// the link states alone (the oracle of the views `apply` keeps incrementally).
fn derived_from_states(f: &Fabric) -> Views {
    f.switch_ids()
        .map(|s| {
            let sw = f.switch(s);
            let mut groups: Vec<(u64, u32, Vec<u8>)> = Vec::new();
            if sw.up {
                for pn in 1..=sw.nports {
                    if let Some((r, _)) = f.switch_link_live(s, pn) {
                        match groups.iter_mut().find(|g| g.1 == r.0) {
                            Some(g) => g.2.push(pn),
                            None => groups.push((f.switch(r).guid, r.0, vec![pn])),
                        }
                    }
                }
            }
            groups.sort_by_key(|g| g.0);
            let attached = sw
                .external_ports()
                .filter_map(|(_, p)| match p.remote {
                    Remote::EndPort(e) if f.end_port_live(e) => Some(e.0),
                    _ => None,
                })
                .collect();
            (groups.into_iter().map(|(_, r, p)| (r, p)).collect(), attached)
        })
        .collect()
}

/// The views as the model holds them.
fn derived_held(f: &Fabric) -> Views {
    f.switch_ids()
        .map(|s| {
            let groups = f.port_groups(s).iter().map(|g| (g.remote.0, g.ports.clone())).collect();
            (groups, f.attached_end_ports(s).iter().map(|e| e.0).collect())
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn derived_views_after_any_sequence_of_events_equal_the_states(
        spec in 0..SPECS.len() + 1,
        picks in prop::collection::vec((any::<prop::sample::Index>(), 1usize..4), 1..16),
    ) {
        // The larger fabric keeps most batches on the per-switch path (a batch touching more
        // than a quarter of the switches is re-derived in full).
        let f = generate_str(SPECS.get(spec).copied().unwrap_or("PGFT(3;4,4,4;1,4,4;1,1,1)"), None).unwrap();
        let all = events(&f);
        let mut cur = f.clone();
        prop_assert_eq!(derived_held(&cur), derived_from_states(&cur));
        for (pick, batch) in picks {
            let evs: Vec<FabricEvent> =
                (0..batch).map(|k| all[(pick.index(all.len()) + 7 * k) % all.len()].clone()).collect();
            cur = cur.apply(&evs).unwrap();
            prop_assert_eq!(derived_held(&cur), derived_from_states(&cur), "after {:?}", evs);
        }
    }
}
