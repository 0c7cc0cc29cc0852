//! Fuzzing `SaService::handle` (the SA decoder and every attribute behind it) with random
//! bytes and structure-aware mutations of valid requests: every attribute × method, random
//! component masks and attribute modifiers, truncations, random class versions and oversized
//! RMPP header fields. Properties: no panic; what is answered is a response method carrying
//! a status; a well-formed Get/GetTable of a read-only record gets one of the statuses the
//! SA documents, with whole records; every answer is counted; the service keeps answering.
//!
//! Case count: 8000 per property by default (about a second); `PROPTEST_CASES` sets it.

mod records_fixture;

use std::time::SystemTime;

use fabric_sa::records::*;
use fabric_sa::wire::{self, attr, status, SaHeader, MAD_SIZE, SA_HEADER_SIZE};
use fabric_sa::{SaResponse, SaService};
use proptest::prelude::*;
use records_fixture::*;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8000)
}

const ATTRS: &[u16] = &[
    attr::CLASS_PORT_INFO,
    attr::NOTICE,
    attr::INFORM_INFO,
    attr::NODE_RECORD,
    attr::PORT_INFO_RECORD,
    attr::SL_TO_VL_RECORD,
    attr::SWITCH_INFO_RECORD,
    attr::LFT_RECORD,
    attr::RFT_RECORD,
    attr::MFT_RECORD,
    attr::SM_INFO_RECORD,
    attr::LINK_RECORD,
    attr::GUID_INFO_RECORD,
    attr::SERVICE_RECORD,
    attr::P_KEY_TABLE_RECORD,
    attr::PATH_RECORD,
    attr::VL_ARB_RECORD,
    attr::MC_MEMBER_RECORD,
    attr::TRACE_RECORD,
    attr::MULTI_PATH_RECORD,
    attr::SERVICE_ASSOCIATION_RECORD,
    attr::INFORM_INFO_RECORD,
];

const METHODS: &[u8] = &[
    wire::METHOD_GET,
    wire::METHOD_SET,
    wire::METHOD_SEND,
    wire::METHOD_TRAP,
    wire::METHOD_REPORT,
    wire::METHOD_TRAP_REPRESS,
    wire::METHOD_GET_TABLE,
    wire::METHOD_GET_TRACE_TABLE,
    wire::METHOD_GET_MULTI,
    wire::METHOD_DELETE,
    wire::METHOD_GET_RESP,
    wire::METHOD_GET_TABLE_RESP,
    wire::METHOD_REPORT_RESP,
];

/// Valid record images of the fixture fabric, to mutate.
fn seeds() -> Vec<Vec<u8>> {
    fn img<R: Record>(r: &R) -> Vec<u8> {
        let mut b = vec![0u8; R::SIZE];
        r.encode(&mut b);
        b
    }
    vec![
        img(&NodeRecord {
            lid: 4,
            node_guid: H2,
            ..Default::default()
        }),
        img(&PortInfoRecord {
            endport_lid: 2,
            port_num: 3,
            capability_mask: CapMask(2),
            ..Default::default()
        }),
        img(&LftRecord {
            lid: 1,
            ..Default::default()
        }),
        img(&LinkRecord {
            from_lid: 1,
            to_lid: 3,
            from_port_num: 1,
            to_port_num: 1,
        }),
        img(&PathRecord {
            slid: 3,
            dlid: 7,
            sgid: Gid::new(0xfe80_0000_0000_0000, H1 + 1),
            dgid: Gid::new(0xfe80_0000_0000_0000, H3 + 1),
            num_path: 1,
            ..Default::default()
        }),
        img(&ServiceRecord {
            service_id: 0x1000_0000_0000_0001,
            service_lease: 60,
            ..Default::default()
        }),
        img(&InformInfo {
            lid_range_begin: 0xffff,
            is_generic: 1,
            subscribe: 1,
            trap_number: 64,
            ..Default::default()
        }),
        img(&GuidInfoRecord {
            lid: 6,
            ..Default::default()
        }),
        vec![0u8; 200],
        img(&mc_join(mc_mgid(1), H1 + 1, 1)),
        img(&mc_join(
            Gid(fabric_sa::partitions::ipv4_broadcast_mgid(0xffff, 2)),
            H2 + 2,
            4,
        )),
    ]
}

/// A site-local MGID `ff15::n`.
fn mc_mgid(n: u8) -> Gid {
    let mut m = [0u8; 16];
    m[0] = 0xff;
    m[1] = 0x15;
    m[15] = n;
    Gid(m)
}

/// A join/leave record of port `guid` for `mgid` with `state`, default partition.
fn mc_join(mgid: Gid, guid: u64, state: u8) -> McMemberRecord {
    McMemberRecord {
        mgid,
        port_gid: Gid::new(0xfe80_0000_0000_0000, guid),
        qkey: 0x0b1b,
        pkey: 0xffff,
        join_state: state,
        ..Default::default()
    }
}

/// A structure-aware request: a header with chosen fields, a seed template with byte
/// mutations, then cut to `len`.
#[derive(Debug, Clone)]
struct Mutation {
    class_version: u8,
    method: u8,
    attr_id: u16,
    attr_mod: u32,
    mask: u64,
    rmpp: (u8, u8, u8, u8, u32, u32),
    attr_offset: u16,
    seed: usize,
    flips: Vec<(usize, u8)>,
    len: usize,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let class_version = prop_oneof![8 => Just(2u8), 1 => any::<u8>()];
    let method = prop_oneof![8 => prop::sample::select(METHODS), 1 => any::<u8>()];
    let attr_id = prop_oneof![8 => prop::sample::select(ATTRS), 1 => any::<u16>()];
    let attr_mod = prop_oneof![Just(0u32), Just(1u32 << 31), any::<u32>()];
    let mask = prop_oneof![
        Just(0u64),
        (0u32..64).prop_map(|b| 1u64 << b),
        (0u64..1 << 16),
        any::<u64>(),
    ];
    let rmpp = (
        any::<u8>(),
        0u8..6,
        any::<u8>(),
        any::<u8>(),
        prop_oneof![Just(0u32), Just(1), any::<u32>()],
        prop_oneof![Just(0u32), Just(u32::MAX), any::<u32>()],
    );
    let len = prop_oneof![
        4 => Just(MAD_SIZE),
        1 => 0usize..SA_HEADER_SIZE,
        2 => SA_HEADER_SIZE..MAD_SIZE,
        1 => MAD_SIZE..MAD_SIZE + 64,
    ];
    (
        class_version,
        method,
        attr_id,
        attr_mod,
        mask,
        rmpp,
        any::<u16>(),
        0usize..11,
        prop::collection::vec((0usize..200, any::<u8>()), 0..6),
        len,
    )
        .prop_map(
            |(class_version, method, attr_id, attr_mod, mask, rmpp, attr_offset, seed, flips, len)| Mutation {
                class_version,
                method,
                attr_id,
                attr_mod,
                mask,
                rmpp,
                attr_offset,
                seed,
                flips,
                len,
            },
        )
}

fn build(m: &Mutation, seeds: &[Vec<u8>]) -> Vec<u8> {
    let h = SaHeader {
        class_version: m.class_version,
        method: m.method,
        status: 0,
        tid: 0x77,
        attr_id: m.attr_id,
        attr_mod: m.attr_mod,
        rmpp: wire::RmppHeader {
            version: m.rmpp.0,
            rmpp_type: m.rmpp.1,
            resp_time: m.rmpp.2 & 0x1f,
            flags: m.rmpp.3 & 7,
            status: 0,
            data1: m.rmpp.4,
            data2: m.rmpp.5,
        },
        sm_key: 0,
        attr_offset: m.attr_offset,
        component_mask: m.mask,
    };
    let mut b = vec![0u8; MAD_SIZE.max(m.len)];
    h.encode(&mut b);
    let seed = &seeds[m.seed];
    b[SA_HEADER_SIZE..SA_HEADER_SIZE + seed.len()].copy_from_slice(seed);
    for &(at, v) in &m.flips {
        b[SA_HEADER_SIZE + at] ^= v;
    }
    b.truncate(m.len);
    b
}

/// The statuses a read-only record's Get/GetTable may answer.
const RECORD_STATUSES: &[u16] = &[
    status::OK,
    status::NO_RECORDS,
    status::TOO_MANY_RECORDS,
    status::REQ_INVALID,
    status::UNSUPPORTED_METHOD_ATTR,
];

fn check_answer(mad: &[u8], resp: &Option<SaResponse>) -> Result<(), TestCaseError> {
    let Ok(h) = SaHeader::decode(mad) else {
        prop_assert!(resp.is_none(), "a runt or non-SA MAD is not answered");
        return Ok(());
    };
    let is_request = h.method & wire::METHOD_RESPONSE == 0
        && !matches!(
            h.method,
            wire::METHOD_SEND | wire::METHOD_TRAP | wire::METHOD_REPORT | wire::METHOD_TRAP_REPRESS
        );
    let Some(r) = resp else {
        prop_assert!(!is_request, "request {:#x}/{:#x} unanswered", h.method, h.attr_id);
        return Ok(());
    };
    prop_assert!(is_request, "a response or report was answered");
    prop_assert!(r.header.method & wire::METHOD_RESPONSE != 0, "{r:?}");
    prop_assert_eq!(r.header.tid, h.tid);
    prop_assert_eq!(r.header.sm_key, 0);
    if h.class_version != wire::SA_CLASS_VERSION {
        prop_assert_eq!(r.header.status, status::BAD_VERSION);
        return Ok(());
    }
    let read_only = matches!(
        h.attr_id,
        attr::NODE_RECORD
            | attr::PORT_INFO_RECORD
            | attr::SWITCH_INFO_RECORD
            | attr::LFT_RECORD
            | attr::SM_INFO_RECORD
            | attr::LINK_RECORD
            | attr::GUID_INFO_RECORD
            | attr::MC_MEMBER_RECORD
            | attr::CLASS_PORT_INFO
    );
    if read_only && matches!(h.method, wire::METHOD_GET | wire::METHOD_GET_TABLE) {
        prop_assert!(RECORD_STATUSES.contains(&r.header.status), "{r:?}");
        if r.header.status == status::OK && !r.data.is_empty() {
            let size = usize::from(r.header.attr_offset) * 8;
            prop_assert!(size > 0 && r.data.len() % size == 0, "{r:?}");
            if h.method == wire::METHOD_GET {
                prop_assert_eq!(r.data.len(), size, "a Get answers one record");
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn random_bytes_never_panic_and_get_a_response_or_nothing(
        bytes in prop::collection::vec(any::<u8>(), 0..320),
        sa_class in any::<bool>(),
    ) {
        let sa = service();
        let mut mad = bytes;
        if sa_class && mad.len() >= 3 {
            // Enough of the header to get past the class checks.
            mad[0] = 1;
            mad[1] = wire::CLASS_SUBN_ADM;
            mad[2] = wire::SA_CLASS_VERSION;
        }
        let resp = sa.handle(&mad, &requester(), SystemTime::UNIX_EPOCH);
        check_answer(&mad, &resp)?;
    }

    #[test]
    fn mutated_requests_get_documented_answers(ms in prop::collection::vec(mutation(), 1..8)) {
        let sa = service();
        let seeds = seeds();
        let mut answered = 0u64;
        let mut malformed = 0u64;
        for m in &ms {
            let mad = build(m, &seeds);
            let resp = sa.handle(&mad, &requester(), SystemTime::UNIX_EPOCH);
            check_answer(&mad, &resp)?;
            answered += u64::from(resp.is_some());
            malformed += u64::from(SaHeader::decode(&mad).is_err());
        }
        let c = sa.counters();
        prop_assert_eq!(c.answers.values().sum::<u64>(), answered, "every answer is counted");
        prop_assert_eq!(c.malformed, malformed);
        // The service still answers after whatever it was sent.
        let after = ask(&sa, &request(wire::METHOD_GET, attr::CLASS_PORT_INFO, 0, 0, &[]));
        prop_assert_eq!(after.header.status, status::OK);
    }
}

/// One MCMemberRecord request of [`mc_sequences_keep_the_groups_consistent`].
#[derive(Debug, Clone)]
struct McOp {
    method: u8,
    mask: u64,
    mgid: u8,
    port: usize,
    state: u8,
    from: usize,
    trusted: bool,
    flips: Vec<(usize, u8)>,
}

const MC_PORTS: [u64; 4] = [H1 + 1, H2 + 1, H2 + 2, H3 + 1];
const MC_LIDS: [u16; 5] = [3, 4, 6, 7, 0];

fn mc_op() -> impl Strategy<Value = McOp> {
    let method = prop_oneof![
        4 => Just(wire::METHOD_SET),
        3 => Just(wire::METHOD_DELETE),
        1 => Just(wire::METHOD_GET_TABLE),
        1 => Just(wire::METHOD_GET),
    ];
    let mask = prop_oneof![
        3 => Just(0x1_30c7u64), // the create components
        3 => Just(0x1_0003u64),                         // MGID, PortGID, JoinState
        1 => any::<u64>().prop_map(|m| m & 0x3_ffff),
        1 => any::<u64>(),
    ];
    (
        method,
        mask,
        0u8..4,
        0usize..4,
        any::<u8>(),
        0usize..5,
        any::<bool>(),
        prop::collection::vec((0usize..56, any::<u8>()), 0..3),
    )
        .prop_map(|(method, mask, mgid, port, state, from, trusted, flips)| McOp {
            method,
            mask,
            mgid,
            port,
            state,
            from,
            trusted,
            flips,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases() / 8))]

    /// Random MCMemberRecord Set / Delete / Get sequences (MGID 0 included, random masks,
    /// JoinStates, requesters, trusted or not, partitions set, byte flips): no panic, only
    /// documented statuses, and after each request every group has its own MLID.
    #[test]
    fn mc_sequences_keep_the_groups_consistent(ops in prop::collection::vec(mc_op(), 1..40)) {
        let sa = service();
        sa.set_trusted_key(0xabc);
        sa.set_partitions(std::sync::Arc::new(fabric_sa::Partitions {
            tables: [
                (H1 + 1, vec![0xffff, 0x8001]),
                (H2 + 1, vec![0x7fff]),
                (H2 + 2, vec![0x7fff, 0x0001]),
                (H3 + 1, vec![0xffff]),
            ]
            .into_iter()
            .collect(),
            ipoib_groups: vec![fabric_sa::IpoibGroupSpec {
                pkey: 0x7fff,
                mtu: 4,
                rate: 3,
                qkey: 0x0b1b,
                ..Default::default()
            }],
        }));
        for op in &ops {
            let mgid = if op.mgid == 0 { Gid::default() } else { mc_mgid(op.mgid) };
            let mut t = [0u8; McMemberRecord::SIZE];
            mc_join(mgid, MC_PORTS[op.port], op.state).encode(&mut t);
            for &(at, v) in &op.flips {
                t[at] ^= v;
            }
            let mut mad = request(op.method, attr::MC_MEMBER_RECORD, 0, op.mask, &t);
            if op.trusted {
                mad[36..44].copy_from_slice(&0xabcu64.to_be_bytes());
            }
            let from = fabric_sa::Requester { lid: MC_LIDS[op.from], qpn: 1, ..Default::default() };
            let resp = sa.handle(&mad, &from, SystemTime::UNIX_EPOCH);
            let r = resp.expect("an MCMemberRecord request is answered");
            prop_assert!(
                [
                    status::OK,
                    status::NO_RESOURCES,
                    status::REQ_INVALID,
                    status::NO_RECORDS,
                    status::TOO_MANY_RECORDS,
                    status::INVALID_GID,
                    status::INSUFFICIENT_COMPONENTS,
                ]
                .contains(&r.header.status),
                "{r:?}"
            );
            let groups = sa.mcast_groups();
            let mut mlids: Vec<u16> = groups.iter().map(|g| g.mlid).collect();
            mlids.dedup();
            prop_assert_eq!(mlids.len(), groups.len());
            prop_assert_eq!(sa.registry().mcast().mlids_in_use(), groups.len());
            prop_assert!(groups.iter().all(|g| g.members.iter().all(|m| m.join_state != 0)));
        }
    }
}

/// The SA also stays quiet when it is not serving (a standby manager), whatever arrives.
#[test]
fn a_standby_service_answers_nothing() {
    let sa: SaService = service();
    sa.set_serving(false);
    let mad = request(wire::METHOD_GET, attr::CLASS_PORT_INFO, 0, 0, &[]);
    assert!(sa.handle(&mad, &requester(), SystemTime::UNIX_EPOCH).is_none());
}
