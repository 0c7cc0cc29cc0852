//! MCMemberRecord joins, leaves and queries through `SaService::handle`, with the statuses
//! OpenSM 3.3.23 answers (`osm_sa_mcmember_record.c`; see docs/multicast-partitions.md).

mod mcast_support;
mod registry_support;

use fabric_sa::mcast::join_state::*;
use fabric_sa::mcast::MLID_START;
use fabric_sa::records::mc_member::comp;
use fabric_sa::records::{Gid, McMemberRecord};
use fabric_sa::wire::{self, status};
use fabric_sa::Requester;
use mcast_support::*;
use registry_support::{ca_guid, from_ca, gid, records, t0};

const ST_OK: u16 = status::OK;

fn status_of(r: &fabric_sa::SaResponse) -> u16 {
    r.header.status
}

#[test]
fn a_full_member_join_creates_the_group_with_the_ports_mtu_and_rate() {
    let sa = mc_service(4);
    let v0 = sa.mcast_version();
    let r = join(&sa, CREATE, &rec(mgid(1), 0, FULL), 0);
    assert_eq!(r.header.method, wire::METHOD_GET_RESP);
    let m = one(&r);
    assert_eq!(m.mgid, mgid(1));
    assert_eq!(m.port_gid, gid(ca_guid(0)));
    assert_eq!((m.mlid, m.qkey, m.pkey, m.join_state), (MLID_START, QKEY, 0xffff, FULL));
    assert_eq!(
        (m.mtu_selector, m.mtu, m.rate_selector, m.rate),
        (2, PORT_MTU, 2, PORT_RATE)
    );
    assert_eq!((m.pkt_life_selector, m.pkt_life, m.scope), (2, 18, 5));
    let groups = sa.mcast_groups();
    assert_eq!(groups.len(), 1);
    assert_eq!((groups[0].mlid, groups[0].well_known), (MLID_START, false));
    assert_eq!(groups[0].members.len(), 1);
    assert_eq!(
        (groups[0].members[0].port_guid, groups[0].members[0].join_state),
        (ca_guid(0), FULL)
    );
    assert!(sa.mcast_version() > v0);
}

#[test]
fn creates_are_refused_with_opensms_statuses_and_leave_no_group() {
    let sa = mc_service(4);
    let bad_mgid = |b: [u8; 2]| {
        let mut g = mgid(9);
        g.0[0] = b[0];
        g.0[1] = b[1];
        g
    };
    let mut sa_signed = mgid(9);
    sa_signed.0[1] = 0x12;
    sa_signed.0[2..4].copy_from_slice(&[0xa0, 0x1b]);
    let mut ipoib_other = Gid(fabric_sa::partitions::ipv4_broadcast_mgid(0xffff, 2));
    ipoib_other.0[15] = 0x01; // an IPoIB MGID that is not the broadcast one
    let mut other_prefix = rec(mgid(2), 0, FULL);
    other_prefix.port_gid.0[0] = 0x20;
    let mut unknown = rec(mgid(2), 0, FULL);
    unknown.port_gid = gid(0xdead);
    let mut bad_pkey = rec(mgid(2), 0, FULL);
    bad_pkey.pkey = 0x8000;
    let mut too_big_mtu = rec(mgid(2), 0, FULL);
    too_big_mtu.mtu_selector = 0; // greater than 4096: not on this port
    too_big_mtu.mtu = 5;
    let mut too_fast = rec(mgid(2), 0, FULL);
    too_fast.rate_selector = 0; // greater than 40 Gb/s
    too_fast.rate = PORT_RATE;
    let mtu_sel = 1 << comp::MTU_SELECTOR | 1 << comp::MTU;
    let rate_sel = 1 << comp::RATE_SELECTOR | 1 << comp::RATE;
    let cases: Vec<(&str, u64, McMemberRecord, u16)> = vec![
        (
            "no JoinState",
            CREATE & !(1 << comp::JOIN_STATE),
            rec(mgid(2), 0, FULL),
            status::INSUFFICIENT_COMPONENTS,
        ),
        (
            "no PortGID",
            CREATE & !(1 << comp::PORT_GID),
            rec(mgid(2), 0, FULL),
            status::INSUFFICIENT_COMPONENTS,
        ),
        ("NonMember create", CREATE, rec(mgid(2), 0, NON), status::REQ_INVALID),
        (
            "SendOnly create",
            CREATE,
            rec(mgid(2), 0, SEND_ONLY_NON),
            status::REQ_INVALID,
        ),
        (
            "no Q_Key",
            CREATE & !(1 << comp::QKEY),
            rec(mgid(2), 0, FULL),
            status::INSUFFICIENT_COMPONENTS,
        ),
        (
            "no SL",
            CREATE & !(1 << comp::SL),
            rec(mgid(2), 0, FULL),
            status::INSUFFICIENT_COMPONENTS,
        ),
        ("other prefix", CREATE, other_prefix, status::INVALID_GID),
        ("unknown port", CREATE, unknown, status::REQ_INVALID),
        ("invalid P_Key", CREATE, bad_pkey, status::REQ_INVALID),
        (
            "not 0xFF",
            CREATE,
            rec(bad_mgid([0xfe, 0x15]), 0, FULL),
            status::REQ_INVALID,
        ),
        (
            "reserved flag",
            CREATE,
            rec(bad_mgid([0xff, 0x35]), 0, FULL),
            status::REQ_INVALID,
        ),
        ("A01B link-local", CREATE, rec(sa_signed, 0, FULL), status::REQ_INVALID),
        (
            "IPoIB without broadcast group",
            CREATE,
            rec(ipoib_other, 0, FULL),
            status::REQ_INVALID,
        ),
        ("MTU > port", CREATE | mtu_sel, too_big_mtu, status::REQ_INVALID),
        ("rate > port", CREATE | rate_sel, too_fast, status::REQ_INVALID),
    ];
    for (what, mask, r, want) in cases {
        let resp = join(&sa, mask, &r, 0);
        assert_eq!(status_of(&resp), want, "{what}");
        assert_eq!(resp.header.method, wire::METHOD_GET_RESP, "{what}");
        assert!(sa.mcast_groups().is_empty(), "{what}: no group left behind");
    }
    assert_eq!(sa.registry().mcast().mlids_in_use(), 0);
}

#[test]
fn mgid_zero_gets_an_sa_assigned_mgid_each_time_a_new_one() {
    let sa = mc_service(2);
    let a = one(&join(&sa, CREATE, &rec(Gid::default(), 0, FULL), 0));
    let b = one(&join(&sa, CREATE, &rec(Gid::default(), 1, FULL), 1));
    assert_ne!(a.mgid, b.mgid);
    for g in [a.mgid, b.mgid] {
        assert_eq!(&g.0[..4], &[0xff, 0x12, 0xa0, 0x1b], "{g}");
        assert_eq!(&g.0[4..10], &[0xfe, 0x80, 0, 0, 0, 0], "the subnet prefix");
    }
    assert_eq!((a.mlid, b.mlid), (MLID_START, MLID_START + 1));
    // The scope of the request when in the mask.
    let mut r = rec(Gid::default(), 0, FULL);
    r.scope = 8;
    let c = one(&join(&sa, CREATE | 1 << comp::SCOPE, &r, 0));
    assert_eq!((c.mgid.0[1], c.scope), (0x18, 8));
}

#[test]
fn joins_of_an_existing_group_follow_the_iba_rules() {
    let mut s = mc_subnet(5, &[]);
    // CA 4 has MTUCap 2048 only.
    let p4 = s.port_index_by_guid(ca_guid(4)).unwrap() as usize;
    set_caps(&mut s.ports_mut()[p4].port_info, 4);
    let sa = registry_support::service(s);
    let g = mgid(1);
    one(&join(&sa, CREATE, &rec(g, 0, FULL), 0));
    // NonMember and SendOnlyNonMember joins need only MGID, PortGID, JoinState.
    let m = one(&join(&sa, JOIN, &rec(g, 1, NON), 1));
    assert_eq!((m.join_state, m.mlid, m.qkey, m.mtu), (NON, MLID_START, QKEY, PORT_MTU));
    assert_eq!(
        one(&join(&sa, JOIN, &rec(g, 2, SEND_ONLY_NON), 2)).join_state,
        SEND_ONLY_NON
    );
    // Joining again adds bits.
    assert_eq!(one(&join(&sa, JOIN, &rec(g, 1, FULL), 1)).join_state, FULL | NON);
    let with = |f: &dyn Fn(&mut McMemberRecord)| {
        let mut r = rec(g, 3, FULL);
        f(&mut r);
        r
    };
    let bit = |c: u32| 1u64 << c;
    let mtu_sel = bit(comp::MTU_SELECTOR) | bit(comp::MTU);
    let rate_sel = bit(comp::RATE_SELECTOR) | bit(comp::RATE);
    let cases: Vec<(&str, u64, McMemberRecord, usize, u16)> = vec![
        (
            "Q_Key differs",
            JOIN | bit(comp::QKEY),
            with(&|r| r.qkey = 7),
            3,
            status::REQ_INVALID,
        ),
        (
            "P_Key of another partition",
            JOIN | bit(comp::PKEY),
            with(&|r| r.pkey = 0x8001),
            3,
            status::REQ_INVALID,
        ),
        (
            "SL differs",
            JOIN | bit(comp::SL),
            with(&|r| r.sl = 3),
            3,
            status::REQ_INVALID,
        ),
        (
            "TClass differs",
            JOIN | bit(comp::TCLASS),
            with(&|r| r.tclass = 1),
            3,
            status::REQ_INVALID,
        ),
        (
            "FlowLabel differs",
            JOIN | bit(comp::FLOW_LABEL),
            with(&|r| r.flow_label = 5),
            3,
            status::REQ_INVALID,
        ),
        (
            "MTU exactly 2048",
            JOIN | mtu_sel,
            with(&|r| {
                r.mtu_selector = 2;
                r.mtu = 4;
            }),
            3,
            status::REQ_INVALID,
        ),
        (
            "MTU less than 4096",
            JOIN | mtu_sel,
            with(&|r| {
                r.mtu_selector = 1;
                r.mtu = 5;
            }),
            3,
            status::REQ_INVALID,
        ),
        (
            "rate exactly 10 Gb/s",
            JOIN | rate_sel,
            with(&|r| {
                r.rate_selector = 2;
                r.rate = 3;
            }),
            3,
            status::REQ_INVALID,
        ),
        (
            "rate less than 40",
            JOIN | rate_sel,
            with(&|r| {
                r.rate_selector = 1;
                r.rate = 7;
            }),
            3,
            status::REQ_INVALID,
        ),
        ("JoinState 0", JOIN, with(&|r| r.join_state = 0), 3, status::REQ_INVALID),
        (
            "port MTU below the group's",
            JOIN,
            rec(g, 4, FULL),
            4,
            status::REQ_INVALID,
        ),
        (
            "limited P_Key of the group's partition",
            JOIN | bit(comp::PKEY),
            with(&|r| r.pkey = 0x7fff),
            3,
            ST_OK,
        ),
        (
            "MTU greater than 2048",
            JOIN | mtu_sel,
            with(&|r| {
                r.mtu_selector = 0;
                r.mtu = 4;
            }),
            3,
            ST_OK,
        ),
        (
            "rate greater than 10",
            JOIN | rate_sel,
            with(&|r| {
                r.rate_selector = 0;
                r.rate = 3;
            }),
            3,
            ST_OK,
        ),
        (
            "rate largest",
            JOIN | rate_sel,
            with(&|r| {
                r.rate_selector = 3;
                r.rate = 3;
            }),
            3,
            ST_OK,
        ),
        (
            "Q_Key the group's",
            JOIN | bit(comp::QKEY),
            with(&|r| r.qkey = QKEY),
            3,
            ST_OK,
        ),
    ];
    for (what, mask, r, ca, want) in cases {
        assert_eq!(status_of(&join(&sa, mask, &r, ca)), want, "{what}");
    }
    let groups = sa.mcast_groups();
    let members: Vec<(u64, u8)> = groups[0].members.iter().map(|m| (m.port_guid, m.join_state)).collect();
    assert_eq!(
        members,
        [
            (ca_guid(0), FULL),
            (ca_guid(1), FULL | NON),
            (ca_guid(2), SEND_ONLY_NON),
            (ca_guid(3), FULL)
        ]
    );
}

#[test]
fn a_port_outside_the_groups_partition_cannot_join() {
    let sa = mc_service(3);
    sa.set_partitions(partitions(&[
        (ca_guid(0), vec![0xffff, 0x8001]),
        (ca_guid(1), vec![0xffff]),
        (ca_guid(2), vec![0x0001]),
    ]));
    let mut r = rec(mgid(1), 0, FULL);
    r.pkey = 0x8001;
    one(&join(&sa, CREATE, &r, 0));
    assert_eq!(
        status_of(&join(&sa, JOIN, &rec(mgid(1), 1, FULL), 1)),
        status::REQ_INVALID
    );
    // A limited member of the partition may join (OpenSM checks membership of any kind).
    assert_eq!(one(&join(&sa, JOIN, &rec(mgid(1), 2, FULL), 2)).pkey, 0x8001);
    // Creating a group in a partition the port is not in.
    let mut r = rec(mgid(2), 1, FULL);
    r.pkey = 0x8001;
    assert_eq!(status_of(&join(&sa, CREATE, &r, 1)), status::REQ_INVALID);
    assert_eq!(sa.mcast_groups().len(), 1);
}

#[test]
fn proxy_joins_only_for_trusted_requesters_and_modifications_by_the_rightful_port() {
    let sa = mc_service(3);
    sa.set_trusted_key(0x5eed);
    let g = mgid(1);
    one(&join(&sa, CREATE, &rec(g, 0, FULL), 0));
    // CA 1 joins CA 2: untrusted, refused.
    assert_eq!(status_of(&join(&sa, JOIN, &rec(g, 2, FULL), 1)), status::REQ_INVALID);
    // With the SM_Key: accepted, stored as a proxy join.
    let trusted = |r: &McMemberRecord, method: u8, mask: u64, ca: usize| {
        sa.handle(&mc_mad(method, mask, r, 0x5eed), &from_ca(ca), t0()).unwrap()
    };
    let m = one(&trusted(&rec(g, 2, FULL), wire::METHOD_SET, JOIN, 1));
    assert_eq!((m.proxy_join, m.join_state), (1, FULL));
    // A proxy-joined member may be changed by any port of the group's partition.
    assert_eq!(one(&leave(&sa, &rec(g, 2, FULL), 2)).join_state, 0);
    // A member that joined itself may be changed by itself only, even with the SM_Key.
    let r = trusted(&rec(g, 0, FULL), wire::METHOD_DELETE, JOIN, 1);
    assert_eq!(status_of(&r), status::REQ_INVALID);
    // The daemon (LID 0, gRPC) acts for the port.
    let local = Requester::default();
    assert_eq!(
        one(&mc(&sa, wire::METHOD_SET, JOIN, &rec(g, 1, NON), &local)).join_state,
        NON
    );
    // A requester LID of no port: refused.
    let ghost = Requester { lid: 900, ..from_ca(0) };
    assert_eq!(
        status_of(&mc(&sa, wire::METHOD_SET, JOIN, &rec(g, 0, NON), &ghost)),
        status::REQ_INVALID
    );
}

#[test]
fn leaves_follow_o15_0_1_14() {
    let sa = mc_service(3);
    let g = mgid(1);
    one(&join(&sa, CREATE, &rec(g, 0, FULL), 0));
    one(&join(&sa, JOIN, &rec(g, 1, FULL | NON | SEND_ONLY_NON), 1));
    let cases: Vec<(&str, u64, McMemberRecord, usize, u16)> = vec![
        (
            "no JoinState",
            JOIN & !(1 << comp::JOIN_STATE),
            rec(g, 1, NON),
            1,
            status::INSUFFICIENT_COMPONENTS,
        ),
        ("no such group", JOIN, rec(mgid(7), 1, NON), 1, status::REQ_INVALID),
        ("not a member", JOIN, rec(g, 2, FULL), 2, status::REQ_INVALID),
        ("a bit not held", JOIN, rec(g, 0, FULL | NON), 0, status::REQ_INVALID),
        ("another port", JOIN, rec(g, 1, NON), 0, status::REQ_INVALID),
    ];
    for (what, mask, r, ca, want) in cases {
        let resp = mc(&sa, wire::METHOD_DELETE, mask, &r, &from_ca(ca));
        assert_eq!(status_of(&resp), want, "{what}");
        assert_eq!(resp.header.method, wire::METHOD_DELETE_RESP);
    }
    // A partial leave keeps the other bits.
    let r = leave(&sa, &rec(g, 1, NON), 1);
    assert_eq!(r.header.method, wire::METHOD_DELETE_RESP);
    assert_eq!(one(&r).join_state, FULL | SEND_ONLY_NON);
    // CA 1 leaves FullMember while CA 0 stays full: it keeps SendOnlyNonMember.
    assert_eq!(one(&leave(&sa, &rec(g, 1, FULL), 1)).join_state, SEND_ONLY_NON);
    // The last full member leaves: the group goes, with its remaining members and its MLID.
    assert_eq!(one(&leave(&sa, &rec(g, 0, FULL), 0)).join_state, 0);
    assert!(sa.mcast_groups().is_empty());
    assert_eq!(sa.registry().mcast().mlids_in_use(), 0);
}

#[test]
fn get_and_get_table_show_untrusted_requesters_groups_and_trusted_ones_members() {
    let sa = mc_service(4);
    sa.set_trusted_key(0x5eed);
    one(&join(&sa, CREATE, &rec(mgid(1), 0, FULL), 0));
    one(&join(&sa, JOIN, &rec(mgid(1), 1, NON), 1));
    one(&join(&sa, CREATE, &rec(mgid(2), 1, FULL), 1));
    let table = |mask: u64, r: &McMemberRecord, key: u64, ca: usize| {
        let resp = sa
            .handle(&mc_mad(wire::METHOD_GET_TABLE, mask, r, key), &from_ca(ca), t0())
            .unwrap();
        assert_eq!(resp.header.status, 0);
        records::<McMemberRecord>(&resp)
    };
    // Untrusted: one record per group, PortGID / JoinState / ProxyJoin zero.
    let all = table(0, &McMemberRecord::default(), 0, 3);
    assert_eq!(all.len(), 2);
    assert!(all.iter().all(|r| r.port_gid == Gid::default() && r.join_state == 0));
    assert_eq!(
        all.iter().map(|r| (r.mgid, r.mlid)).collect::<Vec<_>>(),
        [(mgid(1), MLID_START), (mgid(2), MLID_START + 1)]
    );
    // PortGID in the mask: only the groups that port is in.
    let mine = table(1 << comp::PORT_GID, &rec(Gid::default(), 0, 0), 0, 0);
    assert_eq!(mine.iter().map(|r| r.mgid).collect::<Vec<_>>(), [mgid(1)]);
    // Trusted without PortGID: one record per member.
    let members = table(0, &McMemberRecord::default(), 0x5eed, 3);
    let mut seen: Vec<(Gid, u64, u8)> = members
        .iter()
        .map(|r| (r.mgid, r.port_gid.guid(), r.join_state))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            (mgid(1), ca_guid(0), FULL),
            (mgid(1), ca_guid(1), NON),
            (mgid(2), ca_guid(1), FULL)
        ]
    );
    // JoinState in the mask selects members.
    let non = table(1 << comp::JOIN_STATE, &rec(Gid::default(), 0, NON), 0x5eed, 3);
    assert_eq!(non.len(), 1);
    // Get: one by MGID; several: too many; none: no records.
    let get = |mask: u64, r: &McMemberRecord| mc(&sa, wire::METHOD_GET, mask, r, &from_ca(3));
    assert_eq!(one(&get(1 << comp::MGID, &rec(mgid(2), 0, 0))).mlid, MLID_START + 1);
    assert_eq!(status_of(&get(0, &McMemberRecord::default())), status::TOO_MANY_RECORDS);
    assert_eq!(
        status_of(&get(1 << comp::MGID, &rec(mgid(9), 0, 0))),
        status::NO_RECORDS
    );
    // MLID selects.
    let by_mlid = McMemberRecord {
        mlid: MLID_START,
        ..Default::default()
    };
    assert_eq!(one(&get(1 << comp::MLID, &by_mlid)).mgid, mgid(1));
}

#[test]
fn requesters_see_only_the_groups_of_their_partitions() {
    let sa = mc_service(3);
    sa.set_partitions(partitions(&[
        (ca_guid(0), vec![0xffff, 0x8002]),
        (ca_guid(1), vec![0xffff]),
        (ca_guid(2), vec![0x8002]),
    ]));
    let mut r = rec(mgid(1), 0, FULL);
    r.pkey = 0x8002;
    one(&join(&sa, CREATE, &r, 0));
    one(&join(&sa, CREATE, &rec(mgid(2), 0, FULL), 0));
    let seen = |ca: usize| {
        let resp = mc(&sa, wire::METHOD_GET_TABLE, 0, &McMemberRecord::default(), &from_ca(ca));
        records::<McMemberRecord>(&resp)
            .iter()
            .map(|r| r.mgid)
            .collect::<Vec<_>>()
    };
    assert_eq!(seen(0), [mgid(1), mgid(2)]);
    assert_eq!(seen(1), [mgid(2)]);
    assert_eq!(seen(2), [mgid(1)]);
    // A requester of no known port sees nothing; the daemon (LID 0) sees everything.
    let ghost = Requester { lid: 900, ..from_ca(0) };
    let table = |from: &Requester| {
        let resp = mc(&sa, wire::METHOD_GET_TABLE, 0, &McMemberRecord::default(), from);
        records::<McMemberRecord>(&resp).len()
    };
    assert_eq!(table(&ghost), 0);
    assert_eq!(table(&Requester::default()), 2);
}

#[test]
fn other_methods_are_unsupported() {
    let sa = mc_service(1);
    let r = mc(&sa, wire::METHOD_GET_MULTI, 0, &McMemberRecord::default(), &from_ca(0));
    assert_eq!(status_of(&r), status::UNSUPPORTED_METHOD_ATTR);
    // A component bit beyond ProxyJoin.
    let r = mc(
        &sa,
        wire::METHOD_GET_TABLE,
        1 << 18,
        &McMemberRecord::default(),
        &from_ca(0),
    );
    assert_eq!(status_of(&r), status::REQ_INVALID);
}
