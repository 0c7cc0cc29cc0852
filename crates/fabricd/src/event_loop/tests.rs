//! Unit tests of the loop's pure helpers: exclusions and what breaks a routing.

use super::exclusion::{canonical_link, exclusion_from_persisted};
use super::faults::breaking_reason;
use super::*;
use crate::persist::VirtualFault;
use fabric_topology::{FabricBuilder, NodeType};

fn tiny() -> Fabric {
    let mut b = FabricBuilder::new();
    let l0 = b.add_switch(0x10, "leaf0", 8).unwrap();
    let s0 = b.add_switch(0x20, "spine0", 8).unwrap();
    b.connect_switches(l0, 5, s0, 1).unwrap();
    let e0 = b.add_end_port(0x101, 0x100, "n0", 1, 1, NodeType::Compute).unwrap();
    b.connect_end_port(e0, l0, 1).unwrap();
    b.build()
}

#[test]
fn links_are_keyed_by_their_lower_end() {
    let f = tiny();
    assert_eq!(canonical_link(&f, 0x20, 1), Exclusion::Link(0x10, 5));
    assert_eq!(canonical_link(&f, 0x10, 5), Exclusion::Link(0x10, 5));
    // A port facing an end port is its own key.
    assert_eq!(canonical_link(&f, 0x10, 1), Exclusion::Link(0x10, 1));
}

/// The tiny fabric routed with `exclusions` applied.
fn routed(exclusions: Vec<FabricEvent>) -> crate::compute::Computed {
    crate::compute::compute(crate::compute::ComputeInput {
        job: 1,
        ..crate::compute::ComputeInput::from_scratch(Arc::new(tiny()), exclusions)
    })
    .unwrap()
}

#[test]
fn a_change_breaks_the_target_only_when_it_kills_a_port_the_target_forwards_through() {
    let f = tiny();
    let c = routed(vec![]);
    let used = &c.ports_in_use;
    let down = FabricEvent::LinkDown { switch: 0x20, port: 1 };
    let r = breaking_reason(&f, used, &down).expect("the leaf-spine link carries the spine's LID and n0's");
    assert!(r.contains("link-down 0x0000000000000020[1]"), "{r}");
    assert!(
        r.contains("switch 0x0000000000000010 port 5") || r.contains("switch 0x0000000000000020 port 1"),
        "{r}"
    );
    assert!(breaking_reason(&f, used, &FabricEvent::SwitchDown(0x20)).is_some());
    assert!(breaking_reason(&f, used, &FabricEvent::SwitchDown(0x10)).is_some());
    // Bringing things up, and the end port's own cable, never break a routing.
    assert_eq!(
        breaking_reason(&f, used, &FabricEvent::LinkUp { switch: 0x10, port: 5 }),
        None
    );
    assert_eq!(breaking_reason(&f, used, &FabricEvent::EndPortDown(0x101)), None);
    assert_eq!(
        breaking_reason(&f, used, &FabricEvent::LinkDown { switch: 0x10, port: 1 }),
        None
    );
    assert_eq!(breaking_reason(&f, used, &FabricEvent::SwitchDown(0x99)), None);
    // A routing that already avoids the link is not broken by it going down physically.
    let c = routed(vec![FabricEvent::LinkDown { switch: 0x10, port: 5 }]);
    assert_eq!(breaking_reason(&f, &c.ports_in_use, &down), None);
    assert_eq!(
        breaking_reason(&f, &c.ports_in_use, &FabricEvent::SwitchDown(0x20)),
        None
    );
}

#[test]
fn persisted_faults_round_trip_and_stale_ones_are_rejected() {
    let f = tiny();
    let x = exclusion_from_persisted(
        &f,
        &VirtualFault::Link {
            switch: fmt_guid(0x20),
            port: 1,
        },
    )
    .unwrap();
    assert_eq!(x, Exclusion::Link(0x10, 5));
    assert_eq!(exclusion_from_persisted(&f, &x.persisted()).unwrap(), x);
    assert!(exclusion_from_persisted(&f, &VirtualFault::Switch { switch: fmt_guid(0x77) }).is_err());
}
