//! Reports of traps 64/65: `SaService::publish` compares the end ports in service of the
//! previous and the new snapshot and queues one Report per (trap, matching subscriber).

mod registry_support;

use fabric_sa::records::Record;
use fabric_sa::records::{InformInfo, Notice};
use fabric_sa::service::OutgoingReport;
use fabric_sa::wire::{self, attr, SaHeader, SA_HEADER_SIZE};
use fabric_sa::{Requester, SaService};
use registry_support::*;

fn subscribe(sa: &SaService, from: &Requester, ii: InformInfo) {
    let r = sa
        .handle(&mad(wire::METHOD_SET, attr::INFORM_INFO, 0, &image(&ii)), from, t0())
        .unwrap();
    assert_eq!(r.header.status, 0, "{ii:?}");
}

fn generic(trap: u16) -> InformInfo {
    InformInfo {
        lid_range_begin: 0xffff,
        is_generic: 1,
        subscribe: 1,
        trap_type: 0xffff,
        trap_number: trap,
        producer_type: 0x00ff_ffff,
        ..Default::default()
    }
}

/// (destination LID, QP, trap, port GUID in the notice) of each report, and checks the MAD.
fn summary(reports: &[OutgoingReport]) -> Vec<(u16, u32, u16, u64)> {
    reports
        .iter()
        .map(|r| {
            let h = SaHeader::decode(&r.mad[..]).unwrap();
            assert_eq!(
                (h.class_version, h.method, h.attr_id),
                (2, wire::METHOD_REPORT, attr::NOTICE)
            );
            let n = Notice::decode(&r.mad[SA_HEADER_SIZE..]).unwrap();
            assert_eq!(n.is_generic, 1);
            assert_eq!(
                (n.notice_type, n.producer_type),
                (3, 4),
                "subnet management, class manager"
            );
            assert_eq!(n.issuer_lid, SM_LID);
            assert_eq!(n.issuer_gid, gid(SWITCH_GUID), "the SM issues traps 64/65");
            assert_eq!(n.details_gid().prefix(), PREFIX);
            let port = n.details_gid().guid();
            (r.lid, r.qpn, n.trap_number, port)
        })
        .collect()
}

#[test]
fn a_port_going_out_and_back_in_service_is_reported_to_subscribers() {
    let sa = SaService::new(Default::default(), None);
    sa.set_serving(true);
    sa.publish(subnet(4, &[]));
    assert!(sa.take_reports().is_empty(), "the first publish generates no traps");
    subscribe(&sa, &from_ca(0), generic(0xffff));
    let q = Requester {
        qpn: 0x99,
        ..from_ca(3)
    };
    subscribe(&sa, &q, generic(64));
    // CA 1 goes down: trap 65 to the subscriber of every trap only.
    sa.publish(subnet(4, &[1]));
    let down = sa.take_reports();
    assert_eq!(summary(&down), vec![(ca_lid(0), 1, 65, ca_guid(1))]);
    assert!(sa.take_reports().is_empty(), "taken once");
    // Nothing changed: nothing reported.
    sa.publish(subnet(4, &[1]));
    assert!(sa.take_reports().is_empty());
    // CA 3 leaves the fabric (trap 65 to CA 0), then CA 1 and CA 3 come back: a trap 64 for
    // each, to both subscribers (CA 3 hears of its own port), notices in GUID order.
    sa.publish(subnet(3, &[1]));
    assert_eq!(summary(&sa.take_reports()), vec![(ca_lid(0), 1, 65, ca_guid(3))]);
    sa.publish(subnet(4, &[]));
    assert_eq!(
        summary(&sa.take_reports()),
        vec![
            (ca_lid(0), 1, 64, ca_guid(1)),
            (ca_lid(3), 0x99, 64, ca_guid(1)),
            (ca_lid(0), 1, 64, ca_guid(3)),
            (ca_lid(3), 0x99, 64, ca_guid(3)),
        ]
    );
    assert_eq!(sa.counters().reports_queued, 6);
}

#[test]
fn reports_follow_opensms_matching_rules() {
    let sa = SaService::new(Default::default(), None);
    sa.set_serving(true);
    sa.publish(subnet(8, &[]));
    // CA 0: by the issuer's GID (the SM's port): matches. CA 1: by CA 5's GID: the issuer
    // is the SM, not the port, so no match. CA 2: LID range holding the SM's LID. CA 3: a
    // range without it. CA 4: vendor subscription. CA 6: type 4 only (not subnet
    // management). CA 7: producer type 2 (switch) only.
    subscribe(
        &sa,
        &from_ca(0),
        InformInfo {
            gid: gid(SWITCH_GUID),
            ..generic(65)
        },
    );
    subscribe(
        &sa,
        &from_ca(1),
        InformInfo {
            gid: gid(ca_guid(5)),
            ..generic(65)
        },
    );
    subscribe(
        &sa,
        &from_ca(2),
        InformInfo {
            lid_range_begin: 1,
            lid_range_end: 1,
            ..generic(65)
        },
    );
    subscribe(
        &sa,
        &from_ca(3),
        InformInfo {
            lid_range_begin: 2,
            lid_range_end: 9,
            ..generic(65)
        },
    );
    subscribe(
        &sa,
        &from_ca(4),
        InformInfo {
            is_generic: 0,
            ..generic(65)
        },
    );
    subscribe(
        &sa,
        &from_ca(6),
        InformInfo {
            trap_type: 4,
            ..generic(65)
        },
    );
    subscribe(
        &sa,
        &from_ca(7),
        InformInfo {
            producer_type: 2,
            ..generic(65)
        },
    );
    sa.publish(subnet(8, &[5]));
    let lids: Vec<u16> = summary(&sa.take_reports()).iter().map(|r| r.0).collect();
    assert_eq!(lids, vec![ca_lid(0), ca_lid(2)]);
}

#[test]
fn no_reports_while_standby_to_absent_subscribers_or_from_an_empty_snapshot() {
    let sa = SaService::new(Default::default(), None);
    sa.set_serving(true);
    sa.publish(subnet(3, &[]));
    subscribe(&sa, &from_ca(0), generic(0xffff));
    subscribe(&sa, &from_ca(1), generic(0xffff));
    // The subscriber CA 1 itself goes down: only CA 0 hears of it.
    sa.publish(subnet(3, &[1]));
    assert_eq!(summary(&sa.take_reports()), vec![(ca_lid(0), 1, 65, ca_guid(1))]);
    // An empty snapshot (nothing discovered) is no information: no trap either way.
    sa.publish(fabric_sa::Subnet::default());
    sa.publish(subnet(3, &[]));
    assert!(sa.take_reports().is_empty());
    // A standby queues nothing.
    sa.set_serving(false);
    sa.publish(subnet(3, &[2]));
    assert!(sa.take_reports().is_empty());
    sa.set_serving(true);
    sa.publish(subnet(3, &[]));
    let back = sa.take_reports();
    assert_eq!(
        summary(&back),
        vec![(ca_lid(0), 1, 64, ca_guid(2)), (ca_lid(1), 1, 64, ca_guid(2))]
    );
    // Every Report has its own transaction id.
    let tids: std::collections::BTreeSet<u64> =
        back.iter().map(|r| SaHeader::decode(&r.mad[..]).unwrap().tid).collect();
    assert_eq!(tids.len(), back.len());
}

/// Subscriptions read back at start (a restart, a takeover) are reported to without being
/// made again.
#[test]
fn subscriptions_of_a_previous_run_are_reported_to() {
    let first = SaService::new(Default::default(), None);
    first.set_serving(true);
    first.publish(subnet(3, &[]));
    subscribe(&first, &from_ca(2), generic(65));
    let saved = first.registry();
    drop(first);
    let sa = SaService::new(saved, None);
    sa.set_serving(true);
    sa.publish(subnet(3, &[]));
    sa.publish(subnet(3, &[0]));
    assert_eq!(summary(&sa.take_reports()), vec![(ca_lid(2), 1, 65, ca_guid(0))]);
}
