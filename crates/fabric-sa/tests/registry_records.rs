//! ServiceRecord, InformInfo and InformInfoRecord through `SaService::handle`: status codes,
//! component masks, leases, bounds (as OpenSM answers them, see docs/subnet-administration.md,
//! "Registrations").

mod registry_support;

use std::time::Duration;

use fabric_sa::records::service::comp;
use fabric_sa::records::{Gid, InformInfo, InformInfoRecord, Raw, ServiceRecord};
use fabric_sa::registry::MAX_SERVICE_RECORDS;
use fabric_sa::wire::{self, attr, status, SA_HEADER_SIZE};
use registry_support::*;

const SR_KEY: u64 = 1 << comp::SERVICE_ID | 1 << comp::SERVICE_GID;

fn service_record(id: u64, owner: usize, name: &str) -> ServiceRecord {
    let mut r = ServiceRecord {
        service_id: id,
        service_gid: gid(ca_guid(owner)),
        service_lease: 60,
        ..Default::default()
    };
    r.service_name.0[..name.len()].copy_from_slice(name.as_bytes());
    r.service_key = Raw([0x5a + owner as u8; 16]);
    r.service_data32[2] = owner as u32;
    r
}

#[test]
fn service_record_set_get_table_delete_as_opensm() {
    let sa = service(subnet(4, &[]));
    let now = t0();
    let a = service_record(0x10, 0, "lustre-mgs");
    let b = service_record(0x20, 1, "nvme-target");
    // Set without ServiceGID in the mask: ERR_REQ_INVALID, nothing registered.
    let r = sa
        .handle(
            &mad(
                wire::METHOD_SET,
                attr::SERVICE_RECORD,
                bit(comp::SERVICE_ID),
                &image(&a),
            ),
            &from_ca(0),
            now,
        )
        .unwrap();
    assert_eq!(
        (r.header.method, r.header.status),
        (wire::METHOD_GET_RESP, status::REQ_INVALID)
    );
    assert!(sa.registry().is_empty());
    // Set with lease: answered with the record, ServiceKey zeroed, default P_Key.
    let mask = SR_KEY | bit(comp::SERVICE_LEASE) | bit(comp::SERVICE_NAME) | bit(comp::SERVICE_KEY);
    let r = sa
        .handle(
            &mad(wire::METHOD_SET, attr::SERVICE_RECORD, mask, &image(&a)),
            &from_ca(0),
            now,
        )
        .unwrap();
    assert_eq!((r.header.method, r.header.status), (wire::METHOD_GET_RESP, status::OK));
    let got: Vec<ServiceRecord> = records(&r);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].service_key, Raw([0; 16]), "the ServiceKey never goes out");
    assert_eq!(got[0].service_pkey, 0xffff, "no P_Key in the mask: the default one");
    assert_eq!(got[0].service_lease, 60);
    assert_eq!(got[0].service_name, a.service_name);
    // Without a lease in the mask: infinite.
    let r = sa
        .handle(
            &mad(wire::METHOD_SET, attr::SERVICE_RECORD, SR_KEY, &image(&b)),
            &from_ca(1),
            now,
        )
        .unwrap();
    assert_eq!(records::<ServiceRecord>(&r)[0].service_lease, 0xffff_ffff);
    // GetTable, empty template: both, in ServiceID order; AttributeOffset = 176 / 8.
    let r = sa
        .handle(
            &mad(wire::METHOD_GET_TABLE, attr::SERVICE_RECORD, 0, &[]),
            &from_ca(2),
            now,
        )
        .unwrap();
    assert_eq!(
        (r.header.method, r.header.status, r.header.attr_offset),
        (wire::METHOD_GET_TABLE_RESP, 0, 22)
    );
    let all: Vec<ServiceRecord> = records(&r);
    assert_eq!(all.iter().map(|r| r.service_id).collect::<Vec<_>>(), vec![0x10, 0x20]);
    // Get by name: one; by a ServiceData32 component: the other; Get of both: too many.
    let by_name = sa
        .handle(
            &mad(
                wire::METHOD_GET,
                attr::SERVICE_RECORD,
                bit(comp::SERVICE_NAME),
                &image(&b),
            ),
            &from_ca(2),
            now,
        )
        .unwrap();
    assert_eq!(records::<ServiceRecord>(&by_name)[0].service_id, 0x20);
    let mut t = ServiceRecord::default();
    t.service_data32[2] = 0;
    let data32_2 = bit(comp::DATA32 + 2);
    let by_data = sa
        .handle(
            &mad(wire::METHOD_GET, attr::SERVICE_RECORD, data32_2, &image(&t)),
            &from_ca(2),
            now,
        )
        .unwrap();
    assert_eq!(records::<ServiceRecord>(&by_data)[0].service_id, 0x10);
    let get_all = mad(wire::METHOD_GET, attr::SERVICE_RECORD, 0, &image(&t));
    let r = sa.handle(&get_all, &from_ca(2), now).unwrap();
    assert_eq!(r.header.status, status::TOO_MANY_RECORDS);
    assert_eq!(r.data, &get_all[SA_HEADER_SIZE..], "the request's SA data echoed");
    // A ServiceKey match works although the key is never returned.
    let r = sa
        .handle(
            &mad(
                wire::METHOD_GET_TABLE,
                attr::SERVICE_RECORD,
                bit(comp::SERVICE_KEY),
                &image(&a),
            ),
            &from_ca(2),
            now,
        )
        .unwrap();
    assert_eq!(records::<ServiceRecord>(&r).len(), 1);
    // Set again (same ServiceID, GID, P_Key): replaced, not added.
    let mut a2 = a.clone();
    a2.service_data8[0] = 9;
    sa.handle(
        &mad(wire::METHOD_SET, attr::SERVICE_RECORD, mask, &image(&a2)),
        &from_ca(0),
        now,
    )
    .unwrap();
    assert_eq!(sa.registry().service_records().count(), 2);
    // Delete: DeleteResp with the deleted record; again: ERR_NO_RECORDS.
    let r = sa
        .handle(
            &mad(wire::METHOD_DELETE, attr::SERVICE_RECORD, SR_KEY, &image(&a)),
            &from_ca(0),
            now,
        )
        .unwrap();
    assert_eq!(
        (r.header.method, r.header.status),
        (wire::METHOD_DELETE_RESP, status::OK)
    );
    assert_eq!(records::<ServiceRecord>(&r)[0].service_data8[0], 9);
    let r = sa
        .handle(
            &mad(wire::METHOD_DELETE, attr::SERVICE_RECORD, SR_KEY, &image(&a)),
            &from_ca(0),
            now,
        )
        .unwrap();
    assert_eq!(r.header.status, status::NO_RECORDS);
    // Get of nothing: ERR_NO_RECORDS; GetTable of nothing: an empty table, status 0.
    let get_a = mad(wire::METHOD_GET, attr::SERVICE_RECORD, SR_KEY, &image(&a));
    let r = sa.handle(&get_a, &from_ca(0), now).unwrap();
    assert_eq!(r.header.status, status::NO_RECORDS);
    assert_eq!(
        r.data,
        &get_a[SA_HEADER_SIZE..],
        "a Get's error echoes the request's SA data (osm_sa_send_error)"
    );
    let r = sa
        .handle(
            &mad(wire::METHOD_GET_TABLE, attr::SERVICE_RECORD, SR_KEY, &image(&a)),
            &from_ca(0),
            now,
        )
        .unwrap();
    assert_eq!((r.header.status, r.data.len()), (status::OK, 0));
    // Unsupported method: 0x000C; counters see every answer by status.
    let r = sa
        .handle(
            &mad(wire::METHOD_GET_MULTI, attr::SERVICE_RECORD, 0, &[]),
            &from_ca(0),
            now,
        )
        .unwrap();
    assert_eq!(r.header.status, status::UNSUPPORTED_METHOD_ATTR);
    let c = sa.counters();
    assert_eq!(
        c.answers[&(attr::SERVICE_RECORD, wire::METHOD_DELETE, status::NO_RECORDS)],
        1
    );
}

/// ServiceName is compared on all 64 bytes, as OpenSM's `memcmp` in `get_matching_sr`: a
/// template equal up to the NUL but not after it finds nothing.
#[test]
fn service_name_matches_on_all_64_bytes_as_opensm() {
    let sa = service(subnet(2, &[]));
    let plain = service_record(1, 0, "lustre");
    let mut tail = service_record(2, 1, "lustre");
    tail.service_name.0[63] = b'z';
    for (r, from) in [(&plain, from_ca(0)), (&tail, from_ca(1))] {
        let a = sa
            .handle(
                &mad(wire::METHOD_SET, attr::SERVICE_RECORD, SR_KEY, &image(r)),
                &from,
                t0(),
            )
            .unwrap();
        assert_eq!(a.header.status, status::OK);
    }
    let by_name = |t: &ServiceRecord| {
        let r = sa
            .handle(
                &mad(
                    wire::METHOD_GET_TABLE,
                    attr::SERVICE_RECORD,
                    bit(comp::SERVICE_NAME),
                    &image(t),
                ),
                &from_ca(0),
                t0(),
            )
            .unwrap();
        records::<ServiceRecord>(&r)
            .iter()
            .map(|r| r.service_id)
            .collect::<Vec<_>>()
    };
    assert_eq!(by_name(&plain), vec![1], "\"lustre\" and zeros: the first only");
    assert_eq!(by_name(&tail), vec![2], "the byte after the NUL counts");
    let mut neither = plain.clone();
    neither.service_name.0[40] = b'x';
    assert_eq!(by_name(&neither), Vec::<u64>::new());
}

#[test]
fn service_p_key_in_the_mask_needs_the_service_port_in_the_subnet() {
    let sa = service(subnet(2, &[]));
    let mut r = service_record(1, 0, "x");
    r.service_pkey = 0x8001;
    let mask = SR_KEY | bit(comp::SERVICE_PKEY);
    let ok = sa
        .handle(
            &mad(wire::METHOD_SET, attr::SERVICE_RECORD, mask, &image(&r)),
            &from_ca(0),
            t0(),
        )
        .unwrap();
    assert_eq!(ok.header.status, status::OK);
    assert_eq!(records::<ServiceRecord>(&ok)[0].service_pkey, 0x8001);
    r.service_gid = gid(0xdead);
    let bad = sa
        .handle(
            &mad(wire::METHOD_SET, attr::SERVICE_RECORD, mask, &image(&r)),
            &from_ca(0),
            t0(),
        )
        .unwrap();
    assert_eq!(bad.header.status, status::REQ_INVALID);
    // Without the P_Key component the GID is not checked (as OpenSM).
    let unchecked = sa
        .handle(
            &mad(wire::METHOD_SET, attr::SERVICE_RECORD, SR_KEY, &image(&r)),
            &from_ca(0),
            t0(),
        )
        .unwrap();
    assert_eq!(unchecked.header.status, status::OK);
}

#[test]
fn leases_expire_lazily_at_the_next_request() {
    let sa = service(subnet(2, &[]));
    let mut short = service_record(1, 0, "short");
    short.service_lease = 5;
    let mask = SR_KEY | bit(comp::SERVICE_LEASE);
    sa.handle(
        &mad(wire::METHOD_SET, attr::SERVICE_RECORD, mask, &image(&short)),
        &from_ca(0),
        t0(),
    )
    .unwrap();
    let forever = service_record(2, 1, "forever");
    sa.handle(
        &mad(wire::METHOD_SET, attr::SERVICE_RECORD, SR_KEY, &image(&forever)),
        &from_ca(1),
        t0(),
    )
    .unwrap();
    let table = |at| {
        let r = sa
            .handle(
                &mad(wire::METHOD_GET_TABLE, attr::SERVICE_RECORD, 0, &[]),
                &from_ca(0),
                at,
            )
            .unwrap();
        records::<ServiceRecord>(&r)
            .iter()
            .map(|r| r.service_id)
            .collect::<Vec<_>>()
    };
    assert_eq!(table(t0() + Duration::from_millis(4_999)), vec![1, 2]);
    assert_eq!(sa.registry().service_records().count(), 2, "not dropped before its end");
    assert_eq!(table(t0() + Duration::from_secs(5)), vec![2]);
    assert_eq!(
        sa.registry().service_records().count(),
        1,
        "dropped from the registry itself"
    );
    // Renewing a lease (Set again) moves its end.
    sa.handle(
        &mad(wire::METHOD_SET, attr::SERVICE_RECORD, mask, &image(&short)),
        &from_ca(0),
        t0() + Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(table(t0() + Duration::from_secs(14)), vec![1, 2]);
    assert_eq!(table(t0() + Duration::from_secs(16)), vec![2]);
    // Expiry also happens on requests for the other registry attributes.
    sa.handle(
        &mad(wire::METHOD_SET, attr::SERVICE_RECORD, mask, &image(&short)),
        &from_ca(0),
        t0() + Duration::from_secs(20),
    )
    .unwrap();
    sa.handle(
        &mad(wire::METHOD_GET_TABLE, attr::INFORM_INFO_RECORD, 0, &[]),
        &from_ca(0),
        t0() + Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(sa.registry().service_records().count(), 1);
}

#[test]
fn the_service_record_table_is_bounded() {
    let sa = service(subnet(1, &[]));
    for id in 0..MAX_SERVICE_RECORDS as u64 {
        let r = service_record(id, 0, "");
        let a = sa
            .handle(
                &mad(wire::METHOD_SET, attr::SERVICE_RECORD, SR_KEY, &image(&r)),
                &from_ca(0),
                t0(),
            )
            .unwrap();
        assert_eq!(a.header.status, status::OK);
    }
    let extra = service_record(u64::MAX, 0, "");
    let r = sa
        .handle(
            &mad(wire::METHOD_SET, attr::SERVICE_RECORD, SR_KEY, &image(&extra)),
            &from_ca(0),
            t0(),
        )
        .unwrap();
    assert_eq!(r.header.status, status::NO_RESOURCES);
    // Replacing one that exists is still possible at the bound.
    let again = service_record(7, 0, "renamed");
    let r = sa
        .handle(
            &mad(wire::METHOD_SET, attr::SERVICE_RECORD, SR_KEY, &image(&again)),
            &from_ca(0),
            t0(),
        )
        .unwrap();
    assert_eq!(r.header.status, status::OK);
    assert_eq!(sa.registry().service_records().count(), MAX_SERVICE_RECORDS);
}

#[test]
fn truncated_registry_requests_are_refused_not_panicking() {
    let sa = service(subnet(1, &[]));
    let full = mad(
        wire::METHOD_SET,
        attr::SERVICE_RECORD,
        SR_KEY,
        &image(&service_record(1, 0, "")),
    );
    for len in [56, 57, 100, 56 + 175] {
        let r = sa.handle(&full[..len], &from_ca(0), t0()).unwrap();
        assert_eq!(r.header.status, status::REQ_INVALID, "{len} bytes");
    }
    let ii = mad(
        wire::METHOD_SET,
        attr::INFORM_INFO,
        0,
        &image(&subscribe_all_gid_traps(1)),
    );
    let r = sa.handle(&ii[..56 + 30], &from_ca(0), t0()).unwrap();
    assert_eq!(r.header.status, status::REQ_INVALID);
    assert!(sa.registry().is_empty());
}

/// A subscription to every generic trap of type "subnet management" from any issuer.
fn subscribe_all_gid_traps(subscribe: u8) -> InformInfo {
    InformInfo {
        gid: Gid::default(),
        lid_range_begin: 0xffff,
        lid_range_end: 0,
        is_generic: 1,
        subscribe,
        trap_type: 0xffff,
        trap_number: 0xffff,
        qpn: 0,
        resp_time_value: 18,
        producer_type: 0x00ff_ffff,
    }
}

#[test]
fn inform_info_subscribe_list_unsubscribe_as_opensm() {
    let sa = service(subnet(3, &[]));
    let now = t0();
    let all = subscribe_all_gid_traps(1);
    // Subscribe: GetResp echoing the InformInfo.
    let r = sa
        .handle(
            &mad(wire::METHOD_SET, attr::INFORM_INFO, 0, &image(&all)),
            &from_ca(0),
            now,
        )
        .unwrap();
    assert_eq!((r.header.method, r.header.status), (wire::METHOD_GET_RESP, status::OK));
    assert_eq!(records::<InformInfo>(&r), vec![all.clone()]);
    // A second subscription of the same port (trap 65 only): Enum 1.
    let only65 = InformInfo {
        trap_number: 65,
        ..all.clone()
    };
    sa.handle(
        &mad(wire::METHOD_SET, attr::INFORM_INFO, 0, &image(&only65)),
        &from_ca(0),
        now,
    )
    .unwrap();
    // Another subscriber, known by its GRH only (no LID of the subnet).
    let stranger = fabric_sa::Requester {
        lid: 999,
        qpn: 0x42,
        gid: Some(gid(0xabc).0),
        ..Default::default()
    };
    sa.handle(
        &mad(wire::METHOD_SET, attr::INFORM_INFO, 0, &image(&all)),
        &stranger,
        now,
    )
    .unwrap();
    assert_eq!(sa.registry().subscriptions().len(), 3);
    // InformInfoRecord table: the subscriber ports in the subnet (the stranger is not).
    let r = sa
        .handle(
            &mad(wire::METHOD_GET_TABLE, attr::INFORM_INFO_RECORD, 0, &[]),
            &from_ca(2),
            now,
        )
        .unwrap();
    assert_eq!(
        (r.header.method, r.header.attr_offset),
        (wire::METHOD_GET_TABLE_RESP, 8)
    );
    let recs: Vec<InformInfoRecord> = records(&r);
    assert_eq!(recs.len(), 2);
    assert!(recs.iter().all(|r| r.subscriber_gid == gid(ca_guid(0))));
    assert_eq!(recs.iter().map(|r| r.subscriber_enum).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(recs[0].inform_info.qpn, 1, "the subscriber's QP is recorded");
    // By Enum, and by an InformInfo field (TrapNumber, bit 10).
    let t = InformInfoRecord {
        subscriber_gid: gid(ca_guid(0)),
        subscriber_enum: 1,
        inform_info: InformInfo {
            trap_number: 65,
            ..Default::default()
        },
    };
    let by_enum = sa
        .handle(
            &mad(wire::METHOD_GET, attr::INFORM_INFO_RECORD, 0b11, &image(&t)),
            &from_ca(2),
            now,
        )
        .unwrap();
    assert_eq!(records::<InformInfoRecord>(&by_enum)[0].inform_info.trap_number, 65);
    let by_trap = sa
        .handle(
            &mad(wire::METHOD_GET, attr::INFORM_INFO_RECORD, 1 << 10, &image(&t)),
            &from_ca(2),
            now,
        )
        .unwrap();
    assert_eq!(records::<InformInfoRecord>(&by_trap)[0].subscriber_enum, 1);
    // Unsubscribe: echoed, removed; again: ERR_REQ_INVALID with Subscribe 0 in the echo.
    let off = InformInfo {
        subscribe: 0,
        ..only65.clone()
    };
    let r = sa
        .handle(
            &mad(wire::METHOD_SET, attr::INFORM_INFO, 0, &image(&off)),
            &from_ca(0),
            now,
        )
        .unwrap();
    assert_eq!(r.header.status, status::OK);
    assert_eq!(sa.registry().subscriptions().len(), 2);
    let r = sa
        .handle(
            &mad(wire::METHOD_SET, attr::INFORM_INFO, 0, &image(&off)),
            &from_ca(0),
            now,
        )
        .unwrap();
    assert_eq!(r.header.status, status::REQ_INVALID);
    // Subscribe 2, an unknown requester, a GID naming no port: ERR_REQ_INVALID, Subscribe
    // zeroed in the echo (o13-13.1.1).
    let two = InformInfo {
        subscribe: 2,
        ..all.clone()
    };
    let unknown = fabric_sa::Requester {
        lid: 999,
        ..Default::default()
    };
    let no_port = InformInfo {
        gid: gid(0xdead),
        ..all.clone()
    };
    for (ii, from) in [(two, from_ca(1)), (all, unknown), (no_port, from_ca(1))] {
        let r = sa
            .handle(&mad(wire::METHOD_SET, attr::INFORM_INFO, 0, &image(&ii)), &from, now)
            .unwrap();
        assert_eq!(r.header.status, status::REQ_INVALID, "{ii:?}");
        assert_eq!(r.data[23], 0);
    }
    // Get(InformInfo) is not a thing; Set(InformInfoRecord) neither.
    for (m, a) in [
        (wire::METHOD_GET, attr::INFORM_INFO),
        (wire::METHOD_SET, attr::INFORM_INFO_RECORD),
    ] {
        let r = sa.handle(&mad(m, a, 0, &[]), &from_ca(0), now).unwrap();
        assert_eq!(r.header.status, status::UNSUPPORTED_METHOD_ATTR);
    }
    assert_eq!(sa.registry().subscriptions().len(), 2);
}

/// A store that refuses every save after the first `ok` ones.
struct FlakyStore {
    ok: std::sync::atomic::AtomicUsize,
}

impl fabric_sa::service::RegistryStore for FlakyStore {
    fn save(&self, _: &fabric_sa::registry::Registry) -> Result<(), String> {
        let left = self.ok.load(std::sync::atomic::Ordering::Relaxed);
        if left == 0 {
            return Err("disk full".into());
        }
        self.ok.store(left - 1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn a_change_that_cannot_be_saved_is_undone_and_refused() {
    let store = FlakyStore {
        ok: std::sync::atomic::AtomicUsize::new(1),
    };
    let sa = fabric_sa::SaService::new(Default::default(), Some(Box::new(store)));
    sa.publish(subnet(2, &[]));
    sa.set_serving(true);
    let a = service_record(1, 0, "saved");
    let r = sa
        .handle(
            &mad(wire::METHOD_SET, attr::SERVICE_RECORD, SR_KEY, &image(&a)),
            &from_ca(0),
            t0(),
        )
        .unwrap();
    assert_eq!(r.header.status, status::OK);
    // The store fails from now on: a new Set, a Delete, a subscription are all refused and
    // leave the registry as it was.
    let b = service_record(2, 1, "lost");
    let r = sa
        .handle(
            &mad(wire::METHOD_SET, attr::SERVICE_RECORD, SR_KEY, &image(&b)),
            &from_ca(1),
            t0(),
        )
        .unwrap();
    assert_eq!(
        (r.header.method, r.header.status),
        (wire::METHOD_GET_RESP, status::NO_RESOURCES)
    );
    let r = sa
        .handle(
            &mad(wire::METHOD_DELETE, attr::SERVICE_RECORD, SR_KEY, &image(&a)),
            &from_ca(0),
            t0(),
        )
        .unwrap();
    assert_eq!(r.header.status, status::NO_RESOURCES);
    let r = sa
        .handle(
            &mad(
                wire::METHOD_SET,
                attr::INFORM_INFO,
                0,
                &image(&subscribe_all_gid_traps(1)),
            ),
            &from_ca(0),
            t0(),
        )
        .unwrap();
    assert_eq!(r.header.status, status::NO_RESOURCES);
    assert_eq!(r.data[23], 0, "echoed with Subscribe 0");
    let reg = sa.registry();
    assert_eq!(
        reg.service_records().map(|e| e.record.service_id).collect::<Vec<_>>(),
        vec![1]
    );
    assert!(reg.subscriptions().is_empty());
    let c = sa.counters();
    assert_eq!(c.persist_failures, 3);
    assert_eq!(c.last_persist_error.as_deref(), Some("disk full"));
    // Reads do not need the store.
    let r = sa
        .handle(
            &mad(wire::METHOD_GET, attr::SERVICE_RECORD, SR_KEY, &image(&a)),
            &from_ca(0),
            t0(),
        )
        .unwrap();
    assert_eq!(r.header.status, status::OK);
}

proptest::proptest! {
    /// Any registry request (any method, mask, bytes, length) is answered or ignored, never
    /// a panic; an answer always carries the request's attribute and transaction id.
    #[test]
    fn arbitrary_registry_requests_never_panic(
        attr_pick in 0usize..3,
        method in proptest::prelude::any::<u8>(),
        mask in proptest::prelude::any::<u64>(),
        data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
        cut in 0usize..257,
    ) {
        let sa = service(subnet(2, &[]));
        let a = [attr::SERVICE_RECORD, attr::INFORM_INFO, attr::INFORM_INFO_RECORD][attr_pick];
        let m = mad(method, a, mask, &data);
        let cut = cut.max(56);
        if let Some(r) = sa.handle(&m[..cut], &from_ca(0), t0()) {
            proptest::prop_assert_eq!(r.header.attr_id, a);
            proptest::prop_assert_eq!(r.header.tid, 0x77);
            proptest::prop_assert!(r.header.method & wire::METHOD_RESPONSE != 0);
        }
    }
}

#[test]
fn the_service_key_goes_out_only_to_a_request_carrying_the_managers_sm_key() {
    let sa = service(subnet(4, &[]));
    let now = t0();
    let a = service_record(0x10, 0, "lustre-mgs");
    let mask = SR_KEY | bit(comp::SERVICE_KEY);
    let r = sa
        .handle(
            &mad(wire::METHOD_SET, attr::SERVICE_RECORD, mask, &image(&a)),
            &from_ca(0),
            now,
        )
        .unwrap();
    assert_eq!(r.header.status, status::OK);
    let get_table = |sm_key: u64| {
        let mut m = mad(wire::METHOD_GET_TABLE, attr::SERVICE_RECORD, 0, &[]);
        m[36..44].copy_from_slice(&sm_key.to_be_bytes());
        let r = sa.handle(&m, &from_ca(1), now).unwrap();
        assert_eq!(r.header.status, status::OK);
        let got: Vec<ServiceRecord> = records(&r);
        assert_eq!(got.len(), 1);
        assert_eq!(r.header.sm_key, 0, "the answer's SM_Key is always 0");
        got[0].service_key
    };
    // No key configured: nobody is trusted, whatever the request carries (0 included).
    assert_eq!(get_table(0), Raw([0; 16]));
    assert_eq!(get_table(0x1234), Raw([0; 16]));
    sa.set_trusted_key(0x1234);
    assert_eq!(get_table(0x1234), a.service_key, "trusted: the ServiceKey");
    assert_eq!(get_table(0x1235), Raw([0; 16]), "another key: not trusted");
    assert_eq!(get_table(0), Raw([0; 16]));
}
