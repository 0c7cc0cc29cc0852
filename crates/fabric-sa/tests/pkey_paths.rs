//! P_Key-aware PathRecords and MultiPathRecords (OpenSM's `pr_rcv_get_path_parms`) and
//! P_KeyTableRecords, on a routed fat-tree: a path only between ports sharing a partition
//! with one full member at least; the answer carries that P_Key.

mod path_support;

use std::sync::Arc;
use std::time::SystemTime;

use fabric_sa::partitions::PkeyTables;
use fabric_sa::records::pkey_table::PkeyTableRecord;
use fabric_sa::records::Record;
use fabric_sa::wire::{self, attr, status, SaHeader, SA_HEADER_SIZE};
use fabric_sa::{Partitions, Request, Requester, SaResponse, SaService};
use fabric_topology::gen::generate_str;
use path_support::*;
use proptest::prelude::*;

const PKEY_BIT: u64 = 1 << 13;

fn ask_in(r: &Routed, parts: &Partitions, mad: &[u8]) -> SaResponse {
    let req = Request {
        header: SaHeader::decode(mad).unwrap(),
        data: &mad[SA_HEADER_SIZE..],
        from: Requester::default(),
        now: SystemTime::UNIX_EPOCH,
        trusted: false,
    };
    fabric_sa::path::answer_in(&r.subnet, PkeyTables::new(Some(parts)), &req)
}

fn pr(r: &Routed, parts: &Partitions, method: u8, t: Template, pkey: Option<u16>) -> SaResponse {
    let (mut b, mut m) = t.image();
    if let Some(p) = pkey {
        b[50..52].copy_from_slice(&p.to_be_bytes());
        m |= PKEY_BIT;
    }
    ask_in(r, parts, &mad(method, attr::PATH_RECORD, m, &b))
}

/// Four CAs: A and B full members of 0x0001, C a limited member of 0x0001, D full of 0x0002;
/// everyone a limited member of the default partition but A (full).
fn setup() -> (Routed, Partitions, [u64; 4]) {
    let r = routed(generate_str("PGFT(2;4,4;1,2;1,1)", None).unwrap());
    let g: Vec<u64> = r.fabric.end_ports().iter().map(|e| e.port_guid).collect();
    let ids = [g[0], g[5], g[10], g[15]];
    let tables = [
        vec![0xffff, 0x8001],
        vec![0x7fff, 0x8001],
        vec![0x7fff, 0x0001],
        vec![0x7fff, 0x8002],
    ];
    let parts = Partitions {
        tables: ids.iter().copied().zip(tables).collect(),
        ipoib_groups: Vec::new(),
    };
    (r, parts, ids)
}

fn pair(a: u64, b: u64) -> Template {
    Template {
        sgid: Some(a),
        dgid: Some(b),
        ..Default::default()
    }
}

#[test]
fn a_path_exists_only_inside_a_partition_and_carries_its_pkey() {
    let (r, parts, [a, b, c, d]) = setup();
    let get = wire::METHOD_GET;
    // A and B share 0x0001 (both full) and the default one (A full): the first in OpenSM's
    // order is 0x0001 (byte-reversed 0x0100 < 0xff7f), answered as A's entry.
    let ab = records(&pr(&r, &parts, get, pair(a, b), None));
    assert_eq!(ab.len(), 1);
    assert_eq!(ab[0].pkey, 0x8001);
    // B to A: B's entry.
    assert_eq!(records(&pr(&r, &parts, get, pair(b, a), None))[0].pkey, 0x8001);
    // B and C: 0x0001 (B full, C limited) — the default partition is limited on both.
    assert_eq!(records(&pr(&r, &parts, get, pair(c, b), None))[0].pkey, 0x0001);
    // C and D share nothing with a full member: no path (Get: ERR_NO_RECORDS).
    let cd = pr(&r, &parts, get, pair(c, d), None);
    assert_eq!(cd.header.status, status::NO_RECORDS);
    // B and D: both limited in the default partition, different partitions otherwise.
    assert_eq!(pr(&r, &parts, get, pair(b, d), None).header.status, status::NO_RECORDS);
    // A and D: the default partition (A full).
    assert_eq!(records(&pr(&r, &parts, get, pair(a, d), None))[0].pkey, 0xffff);
    // GetTable of the pair: every LID pair, all with the P_Key; across partitions empty.
    let table = pr(&r, &parts, wire::METHOD_GET_TABLE, pair(a, b), None);
    let recs = records(&table);
    assert_eq!(recs.len(), 4, "LMC 1: 4 LID pairs");
    assert!(recs.iter().all(|p| p.pkey == 0x8001));
    let none = pr(&r, &parts, wire::METHOD_GET_TABLE, pair(b, d), None);
    assert_eq!((none.header.status, none.data.len()), (status::OK, 0));
}

#[test]
fn a_requested_pkey_must_be_shared_and_is_answered_as_asked() {
    let (r, parts, [a, b, c, d]) = setup();
    let get = wire::METHOD_GET;
    // The default partition, asked limited or full: answered as asked.
    assert_eq!(records(&pr(&r, &parts, get, pair(a, b), Some(0x7fff)))[0].pkey, 0x7fff);
    assert_eq!(records(&pr(&r, &parts, get, pair(a, b), Some(0xffff)))[0].pkey, 0xffff);
    // B and C in the default partition: both limited.
    assert_eq!(
        pr(&r, &parts, get, pair(b, c), Some(0xffff)).header.status,
        status::NO_RECORDS
    );
    // A and D in partition 2: A is not in it.
    assert_eq!(
        pr(&r, &parts, get, pair(a, d), Some(0x8002)).header.status,
        status::NO_RECORDS
    );
    // Limited-limited in partition 1 (C with itself: a loopback needs a full member too).
    assert_eq!(
        pr(&r, &parts, get, pair(c, c), Some(0x0001)).header.status,
        status::NO_RECORDS
    );
    assert_eq!(records(&pr(&r, &parts, get, pair(b, b), Some(0x8001)))[0].pkey, 0x8001);
}

#[test]
fn the_whole_table_and_multipath_leave_out_pairs_across_partitions() {
    let (r, parts, ids) = setup();
    let all = records(&pr(&r, &parts, wire::METHOD_GET_TABLE, Template::default(), None));
    // Only the four listed ports have tables: the pairs among them that share a P_Key.
    let mut pairs: Vec<(u64, u64)> = all.iter().map(|p| (p.sgid_guid, p.dgid_guid)).collect();
    pairs.dedup();
    pairs.sort();
    pairs.dedup();
    let shared = |x: u64, y: u64| PkeyTables::new(Some(&parts)).common_pkey(x, y).is_some();
    let mut want: Vec<(u64, u64)> = ids
        .iter()
        .flat_map(|&s| ids.iter().map(move |&d| (s, d)))
        .filter(|&(s, d)| shared(s, d))
        .collect();
    want.sort();
    assert_eq!(pairs, want);
    // MultiPathRecord: the SGIDs A, C to DGIDs B, D: A→B, A→D, C→B only.
    let [a, b, c, d] = ids;
    let mut data = vec![0u8; 24 + 4 * 16];
    data[15] = 2; // SGIDCount
    data[16] = 2; // DGIDCount
    for (i, g) in [a, c, b, d].into_iter().enumerate() {
        data[24 + 16 * i..40 + 16 * i].copy_from_slice(&gid(g));
    }
    let mask = 1 << 19 | 1 << 20;
    let resp = ask_in(
        &r,
        &parts,
        &mad(wire::METHOD_GET_MULTI, attr::MULTI_PATH_RECORD, mask, &data),
    );
    let mut got: Vec<(u64, u64)> = records(&resp).iter().map(|p| (p.sgid_guid, p.dgid_guid)).collect();
    got.dedup();
    assert_eq!(got, [(a, b), (a, d), (c, b)]);
}

#[test]
fn the_service_answers_with_the_partitions_set_and_default_without() {
    let (r, parts, [_, b, _, d]) = setup();
    let sa = SaService::new(Default::default(), None);
    sa.publish(r.subnet.clone());
    sa.set_serving(true);
    let (img, m) = pair(b, d).image();
    let q = mad(wire::METHOD_GET, attr::PATH_RECORD, m, &img);
    let before = sa.handle(&q, &Requester::default(), SystemTime::UNIX_EPOCH).unwrap();
    assert_eq!(records(&before)[0].pkey, 0xffff, "no partitions: the default one");
    sa.set_partitions(Arc::new(parts));
    let after = sa.handle(&q, &Requester::default(), SystemTime::UNIX_EPOCH).unwrap();
    assert_eq!(after.header.status, status::NO_RECORDS);
}

#[test]
fn pkey_table_records_for_trusted_requesters_from_the_tables_in_force() {
    let (r, mut parts, [a, ..]) = setup();
    parts.tables.insert(a, (0..40).map(|i| 0x8000 | (i + 1)).collect());
    let sa = SaService::new(Default::default(), None);
    sa.publish(r.subnet.clone());
    sa.set_serving(true);
    sa.set_trusted_key(0x77);
    sa.set_partitions(Arc::new(parts));
    let port = r.subnet.port_index_by_guid(a).unwrap();
    let lid = r.subnet.ports[port as usize].lid();
    let ask = |method: u8, mask: u64, t: &PkeyTableRecord, key: u64| {
        let mut b = mad(method, attr::P_KEY_TABLE_RECORD, mask, &{
            let mut i = vec![0u8; PkeyTableRecord::SIZE];
            t.encode(&mut i);
            i
        });
        b[36..44].copy_from_slice(&key.to_be_bytes()); // SM_Key
        sa.handle(&b, &Requester::default(), SystemTime::UNIX_EPOCH).unwrap()
    };
    let t = PkeyTableRecord {
        lid,
        ..Default::default()
    };
    // Untrusted: ERR_REQ_INVALID (IBA p922).
    assert_eq!(ask(wire::METHOD_GET_TABLE, 1, &t, 0).header.status, status::REQ_INVALID);
    let resp = ask(wire::METHOD_GET_TABLE, 1, &t, 0x77);
    assert_eq!(resp.header.status, 0);
    let recs: Vec<PkeyTableRecord> = resp
        .data
        .chunks(72)
        .map(|c| PkeyTableRecord::decode(c).unwrap())
        .collect();
    assert_eq!(recs.len(), 2, "40 P_Keys: two blocks");
    assert_eq!((recs[0].lid, recs[0].block_num, recs[1].block_num), (lid, 0, 1));
    assert_eq!(recs[0].pkeys[0], 0x8001);
    assert_eq!(recs[1].pkeys[7], 0x8000 | 40);
    assert_eq!(recs[1].pkeys[8], 0);
    // One block by number.
    let t1 = PkeyTableRecord {
        lid,
        block_num: 1,
        ..Default::default()
    };
    let one = ask(wire::METHOD_GET, 0b11, &t1, 0x77);
    assert_eq!(PkeyTableRecord::decode(&one.data).unwrap().pkeys[0], 0x8000 | 33);
    // The whole table: the four ports with tables (the others have none).
    let all = ask(wire::METHOD_GET_TABLE, 0, &PkeyTableRecord::default(), 0x77);
    assert_eq!(all.data.len() / 72, 2 + 3);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random tables: a pair has a path iff the tables share a partition with a full member,
    /// and the P_Key answered is one both hold.
    #[test]
    fn paths_exist_exactly_between_ports_sharing_a_partition(
        tables in prop::collection::vec(prop::collection::vec((1u16..4, any::<bool>()), 0..3), 4)
    ) {
        let (r, _, ids) = setup();
        let parts = Partitions {
            tables: ids.iter().zip(&tables)
                .map(|(&g, t)| (g, t.iter().map(|&(p, full)| p | if full { 0x8000 } else { 0 }).collect()))
                .collect(),
            ipoib_groups: Vec::new(),
        };
        let pk = PkeyTables::new(Some(&parts));
        for &s in &ids {
            for &d in &ids {
                let resp = pr(&r, &parts, wire::METHOD_GET, pair(s, d), None);
                let shares = tables_share(&parts.tables[&s], &parts.tables[&d]);
                prop_assert_eq!(resp.header.status == 0, shares);
                if shares {
                    let p = records(&resp)[0].pkey;
                    prop_assert!(pk.has_pkey(s, p) && pk.has_pkey(d, p));
                    prop_assert!(pk.share_this_pkey(s, d, p));
                }
            }
        }
    }
}

/// The reference: some entry of `a` and some of `b` of the same partition, one full.
fn tables_share(a: &[u16], b: &[u16]) -> bool {
    a.iter()
        .any(|&x| b.iter().any(|&y| x & 0x7fff == y & 0x7fff && (x | y) & 0x8000 != 0))
}
