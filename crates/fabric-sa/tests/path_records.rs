//! PathRecord and MultiPathRecord answers on a routed fat-tree: Get and GetTable by LIDs and
//! GIDs, the LMC pairs in OpenSM's order with the escape SL, NumbPath, the selectors, the
//! error statuses, the whole-fabric table against the per-source tables, MultiPathRecord, and
//! the answer through `SaService`.

mod path_support;

use std::time::SystemTime;

use fabric_routing::Lfts;
use fabric_sa::path::{self, walk};
use fabric_sa::registry::Registry;
use fabric_sa::wire::{attr, status, METHOD_GET, METHOD_GET_MULTI, METHOD_GET_TABLE, METHOD_SET};
use fabric_sa::{Requester, SaService};
use fabric_topology::gen::generate_str;
use fabric_topology::{EndPortId, FabricBuilder, FabricEvent, NodeType};
use path_support::*;

fn fat_tree() -> Routed {
    routed(generate_str("PGFT(2;4,4;1,2;1,1)", None).unwrap())
}

/// The (port GUID, base LID) of end port `i`.
fn ep(r: &Routed, i: u32) -> (u64, u16) {
    let e = r.fabric.end_port(EndPortId(i));
    (e.port_guid, r.lids.base_lid(EndPortId(i)) as u16)
}

const PR_MASK_NUMB_PATH: u64 = 1 << 12;
const PR_MASK_SL: u64 = 1 << 15;

#[test]
fn get_by_lids_answers_one_path_with_the_link_parameters() {
    let r = fat_tree();
    let ((sg, sl), (dg, dl)) = (ep(&r, 0), ep(&r, 9));
    let (t, m) = Template {
        slid: Some(sl),
        dlid: Some(dl),
        ..Template::default()
    }
    .image();
    let a = ask(&r.subnet, &mad(METHOD_GET, attr::PATH_RECORD, m, &t));
    assert_eq!(
        (a.header.status, a.header.method, a.header.attr_id),
        (0, 0x81, attr::PATH_RECORD)
    );
    let recs = records(&a);
    assert_eq!(recs.len(), 1);
    let p = recs[0];
    assert_eq!((p.sgid_guid, p.slid, p.dgid_guid, p.dlid), (sg, sl, dg, dl));
    // Within the subnet HopLimit is 0, as OpenSM answers (> 1 would make clients add a GRH),
    // also when the request carries one (with FlowLabel and TClass, which select no path).
    assert_eq!(p.hop_limit, 0);
    let mut t2 = t;
    t2[44..49].copy_from_slice(&[0x0a, 0xbc, 0xde, 0x40, 0x77]);
    let a2 = ask(&r.subnet, &mad(METHOD_GET, attr::PATH_RECORD, m | (7 << 8), &t2));
    assert_eq!(records(&a2), recs);
    assert_eq!(&a2.data[44..49], &[0; 5]);
    assert!(p.reversible);
    assert_eq!((p.pkey, p.sl, p.preference), (0xffff, 0, 0));
    // Generated fabrics have no speed: 4x QDR (rate 7, 40 Gb/s), MTU 4096 (5).
    assert_eq!((p.mtu, p.rate, p.pkt_life), (5, 7, 18));
    // The walk behind it: CA, leaf, root, leaf, CA.
    let src = r.subnet.port_index_by_guid(sg).unwrap();
    assert_eq!(walk(&r.subnet, src, dl).unwrap().links, 4);
}

#[test]
fn table_by_gids_gives_the_lmc_pairs_in_opensm_order_with_the_escape_sl() {
    let r = fat_tree();
    let ((sg, sl), (dg, dl)) = (ep(&r, 1), ep(&r, 14));
    let (t, m) = Template {
        sgid: Some(sg),
        dgid: Some(dg),
        ..Template::default()
    }
    .image();
    let a = ask(&r.subnet, &mad(METHOD_GET_TABLE, attr::PATH_RECORD, m, &t));
    assert_eq!((a.header.status, a.header.method), (0, 0x92));
    let got: Vec<_> = records(&a)
        .iter()
        .map(|p| (p.slid, p.dlid, p.sl, p.preference))
        .collect();
    assert_eq!(
        got,
        vec![
            (sl, dl, 0, 0),
            (sl + 1, dl + 1, ESCAPE_SL, 0),
            (sl, dl + 1, ESCAPE_SL, 2),
            (sl + 1, dl, 0, 2),
        ]
    );

    // NumbPath limits the paths of the pair; 0 asks for none (an empty table, status 0).
    let mut t1 = t;
    t1[49] = 1;
    let a = ask(
        &r.subnet,
        &mad(METHOD_GET_TABLE, attr::PATH_RECORD, m | PR_MASK_NUMB_PATH, &t1),
    );
    assert_eq!(records(&a).iter().map(|p| p.dlid).collect::<Vec<_>>(), vec![dl]);
    t1[49] = 0;
    let a = ask(
        &r.subnet,
        &mad(METHOD_GET_TABLE, attr::PATH_RECORD, m | PR_MASK_NUMB_PATH, &t1),
    );
    assert_eq!((a.header.status, a.data.len()), (0, 0));

    // SL in the mask selects: the escape SL gives the paths to the escape LID.
    let mut ts = t;
    ts[53] = ESCAPE_SL;
    let a = ask(
        &r.subnet,
        &mad(METHOD_GET_TABLE, attr::PATH_RECORD, m | PR_MASK_SL, &ts),
    );
    assert!(records(&a).iter().all(|p| p.dlid == dl + 1 && p.sl == ESCAPE_SL));
    assert_eq!(records(&a).len(), 2);

    // A Get answers the first of them.
    let a = ask(&r.subnet, &mad(METHOD_GET, attr::PATH_RECORD, m, &t));
    assert_eq!(
        records(&a).iter().map(|p| (p.slid, p.dlid)).collect::<Vec<_>>(),
        vec![(sl, dl)]
    );
}

#[test]
fn selectors_filter_and_lower_mtu_rate_and_packet_lifetime() {
    let r = fat_tree();
    let ((_, sl), (_, dl)) = (ep(&r, 0), ep(&r, 5));
    let (base, m) = Template {
        slid: Some(sl),
        dlid: Some(dl),
        ..Template::default()
    }
    .image();
    // (byte, mask bits of selector + value, value) → (answered value or None)
    let cases: [(usize, u64, u8, Option<u8>); 13] = [
        (54, 3 << 16, (2 << 6) | 5, Some(5)),   // MTU exactly 4096
        (54, 3 << 16, (2 << 6) | 4, Some(4)),   // exactly 2048: lowered
        (54, 3 << 16, 5, None),                 // greater than 4096
        (54, 3 << 16, (1 << 6) | 5, Some(4)),   // less than 4096
        (54, 3 << 16, (1 << 6) | 1, None),      // less than 256
        (54, 1 << 16, 5, Some(5)),              // selector without value: ignored
        (55, 3 << 18, 16, None),                // rate greater than 100 Gb/s
        (55, 3 << 18, 3, Some(7)),              // greater than 10 Gb/s: the path's 40
        (55, 3 << 18, (1 << 6) | 7, Some(4)),   // less than 40 Gb/s: the fastest below, 30
        (55, 3 << 18, (1 << 6) | 3, Some(5)),   // less than 10 Gb/s: 5 Gb/s
        (55, 3 << 18, (2 << 6) | 2, Some(2)),   // exactly 2.5 Gb/s: lowered
        (56, 3 << 20, (1 << 6) | 18, Some(17)), // packet lifetime less than 18
        (56, 3 << 20, 18, None),                // greater than 18
    ];
    for (i, (byte, bits, v, want)) in cases.into_iter().enumerate() {
        let mut t = base;
        t[byte] = v;
        let a = ask(&r.subnet, &mad(METHOD_GET_TABLE, attr::PATH_RECORD, m | bits, &t));
        let got = records(&a).first().map(|p| match byte {
            54 => p.mtu,
            55 => p.rate,
            _ => p.pkt_life,
        });
        assert_eq!(got, want, "case {i}: byte {byte} value {v:#x}");
    }
}

#[test]
fn bad_requests_get_the_opensm_statuses() {
    let r = fat_tree();
    let (sg, sl) = ep(&r, 0);
    let cases: Vec<(Template, u16)> = vec![
        (
            Template {
                slid: Some(sl),
                dlid: Some(999),
                ..Template::default()
            },
            status::NO_RECORDS,
        ),
        (
            Template {
                slid: Some(999),
                ..Template::default()
            },
            status::NO_RECORDS,
        ),
        (
            Template {
                sgid: Some(0xdead_beef),
                dgid: Some(sg),
                ..Template::default()
            },
            status::INVALID_GID,
        ),
    ];
    for (t, want) in cases {
        let (b, m) = t.image();
        let a = ask(&r.subnet, &mad(METHOD_GET, attr::PATH_RECORD, m, &b));
        assert_eq!(a.header.status, want);
        assert_eq!(a.header.method, 0x81);
    }
    // A GID of another subnet (no router is known).
    let (mut b, m) = Template {
        sgid: Some(sg),
        ..Template::default()
    }
    .image();
    b[24] = 0x20;
    assert_eq!(
        ask(&r.subnet, &mad(METHOD_GET, attr::PATH_RECORD, m, &b)).header.status,
        status::INVALID_GID
    );
    // Set is not a PathRecord method; a truncated template is invalid.
    let a = ask(&r.subnet, &mad(METHOD_SET, attr::PATH_RECORD, 0, &[0; 64]));
    assert_eq!(
        (a.header.status, a.header.method),
        (status::UNSUPPORTED_METHOD_ATTR, 0x81)
    );
    let mut short = mad(METHOD_GET, attr::PATH_RECORD, 0, &[]);
    short.truncate(56 + 40);
    assert_eq!(ask(&r.subnet, &short).header.status, status::REQ_INVALID);
    // A multicast DGID: no unicast path (multicast groups are answered elsewhere).
    let (mut b, m) = Template {
        dgid: Some(1),
        ..Template::default()
    }
    .image();
    b[8] = 0xff;
    let a = ask(&r.subnet, &mad(METHOD_GET, attr::PATH_RECORD, m, &b));
    assert_eq!(a.header.status, status::NO_RECORDS);
}

#[test]
fn no_path_is_answered_over_a_link_gone_down_since_the_routing() {
    let r = fat_tree();
    let e9 = r.fabric.end_port(EndPortId(9)).clone();
    let (leaf, port) = e9.attach.unwrap();
    let f = r
        .fabric
        .apply(&[FabricEvent::LinkDown {
            switch: r.fabric.switch(leaf).guid,
            port,
        }])
        .unwrap();
    let s = snapshot(&f, &r.lids, &r.lfts);
    let ((_, sl), (_, dl)) = (ep(&r, 0), ep(&r, 9));
    for (slid, dlid) in [(sl, dl), (dl, sl)] {
        let (t, m) = Template {
            slid: Some(slid),
            dlid: Some(dlid),
            ..Template::default()
        }
        .image();
        let a = ask(&s, &mad(METHOD_GET, attr::PATH_RECORD, m, &t));
        assert_eq!(a.header.status, status::NO_RECORDS, "{slid} -> {dlid}");
    }
}

#[test]
fn whole_fabric_table_equals_the_tables_of_every_source() {
    let r = routed(
        fabric_topology::gen::degrade(
            &generate_str("PGFT(3;2,2,3;1,2,2;1,1,1)", None).unwrap(),
            &fabric_topology::gen::Degrade {
                remove_links: 3,
                remove_switches: 1,
                seed: 5,
            },
        )
        .unwrap(),
    );
    let s = &r.subnet;
    let whole = ask(s, &mad(METHOD_GET_TABLE, attr::PATH_RECORD, 0, &[0; 64]));
    assert_eq!(whole.header.status, 0);
    let mut whole = records(&whole);
    let mut per_source = Vec::new();
    let mut end_ports: Vec<u64> = r.fabric.end_ports().iter().map(|e| e.port_guid).collect();
    end_ports.extend(r.fabric.switches().iter().map(|s| s.guid));
    for g in &end_ports {
        let (t, m) = Template {
            sgid: Some(*g),
            ..Template::default()
        }
        .image();
        per_source.extend(records(&ask(s, &mad(METHOD_GET_TABLE, attr::PATH_RECORD, m, &t))));
    }
    assert!(!whole.is_empty());
    whole.sort();
    per_source.sort();
    assert_eq!(whole.len(), per_source.len());
    assert_eq!(whole, per_source);
    // Every CA-to-CA LID pair the walk delivers is there, once.
    let cas = r.fabric.num_end_ports();
    let mut expect = 0;
    for a in 0..cas {
        for b in 0..cas {
            let src = s.port_index_by_guid(ep(&r, a as u32).0).unwrap();
            let dl = ep(&r, b as u32).1;
            expect += (0..2).filter(|o| walk(s, src, dl + o).is_ok()).count() * 2;
        }
    }
    let ca_guids: std::collections::HashSet<u64> = r.fabric.end_ports().iter().map(|e| e.port_guid).collect();
    let ca_pairs = whole
        .iter()
        .filter(|p| ca_guids.contains(&p.sgid_guid) && ca_guids.contains(&p.dgid_guid))
        .count();
    assert_eq!(ca_pairs, expect);
    // The streaming form gives the same records.
    let mut n = 0;
    let count = path::for_each_record(s, &[0; 64], 0, &mut |_| n += 1).unwrap();
    assert_eq!((count as usize, n), (whole.len(), whole.len()));
}

#[test]
fn multipath_answers_path_records_between_the_gid_sets() {
    let r = fat_tree();
    let (s0, d0, d1) = (ep(&r, 0), ep(&r, 6), ep(&r, 12));
    let mut data = vec![0u8; 24 + 3 * 16];
    data[5] = 3; // NumbPath
    data[15] = 1; // SGIDCount
    data[16] = 2; // DGIDCount
    for (i, g) in [s0.0, d0.0, d1.0].into_iter().enumerate() {
        data[24 + 16 * i..40 + 16 * i].copy_from_slice(&gid(g));
    }
    let m = (1 << 19) | (1 << 20) | (1 << 6);
    let a = ask(&r.subnet, &mad(METHOD_GET_MULTI, attr::MULTI_PATH_RECORD, m, &data));
    assert_eq!(
        (a.header.status, a.header.method, a.header.attr_id),
        (0, 0x94, attr::PATH_RECORD)
    );
    let got: Vec<_> = records(&a).iter().map(|p| (p.slid, p.dlid)).collect();
    assert_eq!(got, vec![(s0.1, d0.1), (s0.1 + 1, d0.1 + 1), (s0.1, d0.1 + 1)]);
    // Without the counts: invalid. An unknown GID: invalid GID.
    let a = ask(
        &r.subnet,
        &mad(METHOD_GET_MULTI, attr::MULTI_PATH_RECORD, 1 << 6, &data),
    );
    assert_eq!(a.header.status, status::REQ_INVALID);
    data[24 + 16 + 15] ^= 0x55;
    let a = ask(&r.subnet, &mad(METHOD_GET_MULTI, attr::MULTI_PATH_RECORD, m, &data));
    assert_eq!(a.header.status, status::INVALID_GID);
    // MultiPathRecord is only asked with GetMulti.
    let a = ask(&r.subnet, &mad(METHOD_GET, attr::MULTI_PATH_RECORD, m, &data));
    assert_eq!(a.header.status, status::UNSUPPORTED_METHOD_ATTR);
}

#[test]
fn the_service_answers_path_records_only_while_serving() {
    let r = fat_tree();
    let sa = SaService::new(Registry::default(), None);
    sa.publish(r.subnet.clone());
    let (t, m) = Template {
        slid: Some(ep(&r, 0).1),
        dlid: Some(ep(&r, 3).1),
        ..Template::default()
    }
    .image();
    let q = mad(METHOD_GET, attr::PATH_RECORD, m, &t);
    assert!(sa.handle(&q, &Requester::default(), SystemTime::UNIX_EPOCH).is_none());
    sa.set_serving(true);
    let a = sa.handle(&q, &Requester::default(), SystemTime::UNIX_EPOCH).unwrap();
    assert_eq!((a.header.status, records(&a).len()), (0, 1));
    assert_eq!(sa.counters().answers.get(&(attr::PATH_RECORD, METHOD_GET, 0)), Some(&1));
}

#[test]
fn mtu_and_rate_are_the_least_along_the_path() {
    // Two CAs on one switch: one cable 4x EDR, the other 4x QDR; the path runs at 40 Gb/s.
    let mut b = FabricBuilder::new();
    let sw = b.add_switch(0x100, "sw", 2).unwrap();
    for i in 0..2u8 {
        let e = b
            .add_end_port(
                0x200 + u64::from(i) * 2 + 1,
                0x200 + u64::from(i) * 2,
                format!("n{i}"),
                1,
                1,
                NodeType::Compute,
            )
            .unwrap();
        b.connect_end_port(e, sw, i + 1).unwrap();
    }
    b.switch_mut(sw).ports[1].speed = Some("4xEDR".into());
    b.switch_mut(sw).ports[2].speed = Some("4xQDR".into());
    let f = b.build();
    let lids = fabric_routing::assign_lids(&f, &Default::default(), 0, 0xbfff).unwrap();
    let mut lfts = Lfts::new(1, lids.top());
    let id = |i: u32| EndPortId(i);
    lfts.set(fabric_topology::SwitchId(0), lids.base_lid(id(0)), 1);
    lfts.set(fabric_topology::SwitchId(0), lids.base_lid(id(1)), 2);
    lfts.set(fabric_topology::SwitchId(0), lids.switch_lid[0], 0);
    let s = snapshot(&f, &lids, &lfts);
    let src = s.port_index_by_guid(0x201).unwrap();
    let w = walk(&s, src, lids.base_lid(id(1)) as u16).unwrap();
    assert_eq!((w.links, w.mtu, w.rate), (2, 5, 7));
    // To the switch itself: the EDR link and port 0, which reports the switch's first port
    // speed (EDR): 100 Gb/s.
    let w = walk(&s, src, lids.switch_lid[0] as u16).unwrap();
    assert_eq!((w.links, w.rate), (1, 16));
    // From the QDR CA to the switch: 40 Gb/s.
    let w = walk(&s, s.port_index_by_guid(0x203).unwrap(), lids.switch_lid[0] as u16).unwrap();
    assert_eq!((w.links, w.rate), (1, 7));
    // Loopback: no link crossed, the port's own rate; packet lifetime 0.
    let l0 = lids.base_lid(id(0)) as u16;
    assert_eq!(walk(&s, src, l0).unwrap().links, 0);
    let (t, m) = Template {
        slid: Some(l0),
        dlid: Some(l0),
        ..Template::default()
    }
    .image();
    let p = records(&ask(&s, &mad(METHOD_GET, attr::PATH_RECORD, m, &t)))[0];
    assert_eq!((p.rate, p.pkt_life, p.reversible), (16, 0, true));
}

#[test]
fn a_port_read_down_is_not_crossed_even_with_a_peer_recorded() {
    // Drivers reading PortInfo (umad) may record a peer whose PortState is Down.
    let r = fat_tree();
    let mut s = r.subnet.clone();
    let (g9, l9) = ep(&r, 9);
    let p9 = s.port_index_by_guid(g9).unwrap() as usize;
    assert!(s.ports[p9].peer.is_some());
    s.ports_mut()[p9].port_info[32] = (s.ports[p9].port_info[32] & 0xf0) | 1;
    let src = s.port_index_by_guid(ep(&r, 0).0).unwrap();
    assert!(matches!(
        walk(&s, src, l9),
        Err(path::WalkError::WrongPort { .. }) | Err(path::WalkError::DeadPort { .. })
    ));
    assert!(matches!(
        walk(&s, p9 as u32, ep(&r, 0).1),
        Err(path::WalkError::SourceNotLive { .. })
    ));
    let (t, m) = Template {
        slid: Some(ep(&r, 0).1),
        dlid: Some(l9),
        ..Template::default()
    }
    .image();
    assert_eq!(
        ask(&s, &mad(METHOD_GET, attr::PATH_RECORD, m, &t)).header.status,
        status::NO_RECORDS
    );
    let whole = records(&ask(&s, &mad(METHOD_GET_TABLE, attr::PATH_RECORD, 0, &[0; 64])));
    assert!(whole.iter().all(|p| p.sgid_guid != g9 && p.dgid_guid != g9));
}

#[test]
fn switch_port_zero_limits_paths_to_and_from_the_switch_as_opensm_counts_it() {
    // ibsim's switch port 0: MTUCap 1024, NeighborMTU 256, 4x SDR. OpenSM 3.3.23 answered
    // `saquery -p --src-to-dst 12:2` (a CA to a switch) with MTU 1024 (0x83) and 10 Gb/s
    // (0x83) on such a fabric, CA to CA with 2048 / 40 Gb/s.
    let r = fat_tree();
    let mut s = r.subnet.clone();
    for i in 0..s.ports.len() {
        let p = &mut s.ports_mut()[i];
        if p.port_num == 0 {
            p.port_info[41] = (p.port_info[41] & 0xf0) | 3;
            p.port_info[36] = (1 << 4) | (p.port_info[36] & 0x0f);
            p.port_info[35] = (1 << 4) | 1;
        }
    }
    let sw_lid = r.lids.switch_lid[0] as u16;
    let (_, l0) = ep(&r, 0);
    for (slid, dlid) in [(l0, sw_lid), (sw_lid, l0)] {
        let (t, m) = Template {
            slid: Some(slid),
            dlid: Some(dlid),
            ..Template::default()
        }
        .image();
        let p = records(&ask(&s, &mad(METHOD_GET, attr::PATH_RECORD, m, &t)))[0];
        assert_eq!((p.mtu, p.rate), (3, 3), "{slid} -> {dlid}");
    }
    let (t, m) = Template {
        slid: Some(l0),
        dlid: Some(ep(&r, 9).1),
        ..Template::default()
    }
    .image();
    let p = records(&ask(&s, &mad(METHOD_GET, attr::PATH_RECORD, m, &t)))[0];
    assert_eq!((p.mtu, p.rate), (5, 7), "CA to CA does not cross a port 0");
    // Switch loopback: port 0's MTUCap (not its NeighborMTU), by a Get and in the whole table.
    let (t, m) = Template {
        slid: Some(sw_lid),
        dlid: Some(sw_lid),
        ..Template::default()
    }
    .image();
    let p = records(&ask(&s, &mad(METHOD_GET, attr::PATH_RECORD, m, &t)))[0];
    assert_eq!((p.mtu, p.rate, p.pkt_life), (3, 3, 0));
    let whole = records(&ask(&s, &mad(METHOD_GET_TABLE, attr::PATH_RECORD, 0, &[0; 64])));
    let w = whole.iter().find(|p| p.slid == sw_lid && p.dlid == sw_lid).unwrap();
    assert_eq!(*w, p);
    let w = whole.iter().find(|p| p.slid == l0 && p.dlid == sw_lid).unwrap();
    assert_eq!((w.mtu, w.rate), (3, 3));
}

#[test]
fn multipath_with_two_by_two_gids_and_two_paths_gives_a_disjoint_apm_pair() {
    let r = fat_tree();
    let (s0, s1, d0, d1) = (ep(&r, 0), ep(&r, 5), ep(&r, 9), ep(&r, 14));
    let mut data = vec![0u8; 24 + 4 * 16];
    data[5] = 2; // NumbPath
    data[15] = 2;
    data[16] = 2;
    for (i, g) in [s1.0, s0.0, d1.0, d0.0].into_iter().enumerate() {
        data[24 + 16 * i..40 + 16 * i].copy_from_slice(&gid(g));
    }
    let m = (1 << 19) | (1 << 20) | (1 << 6);
    let a = ask(&r.subnet, &mad(METHOD_GET_MULTI, attr::MULTI_PATH_RECORD, m, &data));
    assert_eq!(a.header.status, 0);
    let recs = records(&a);
    assert_eq!(recs.len(), 2);
    // One path from each source, to different destinations, at different LID offsets (with
    // LMC 1: one over the base LIDs, one over the escape LIDs, on the escape SL).
    let srcs: std::collections::HashSet<u64> = recs.iter().map(|p| p.sgid_guid).collect();
    let dsts: std::collections::HashSet<u64> = recs.iter().map(|p| p.dgid_guid).collect();
    assert_eq!(srcs, [s0.0, s1.0].into_iter().collect());
    assert_eq!(dsts, [d0.0, d1.0].into_iter().collect());
    let base = |g: u64| [s0, s1, d0, d1].into_iter().find(|e| e.0 == g).unwrap().1;
    let offsets: Vec<(u16, u16)> = recs
        .iter()
        .map(|p| (p.slid - base(p.sgid_guid), p.dlid - base(p.dgid_guid)))
        .collect();
    assert_ne!(offsets[0], offsets[1]);
    for (p, (so, dof)) in recs.iter().zip(&offsets) {
        assert_eq!(so, dof, "each path at equal offsets");
        assert_eq!(p.sl, if *dof == 1 { ESCAPE_SL } else { 0 });
    }
    // The same request with NumbPath 3 is the plain form: the first 3 paths of the pairs.
    data[5] = 3;
    let a = ask(&r.subnet, &mad(METHOD_GET_MULTI, attr::MULTI_PATH_RECORD, m, &data));
    assert_eq!(records(&a).len(), 3);
    assert!(records(&a).iter().all(|p| p.sgid_guid == s1.0 && p.dgid_guid == d1.0));
}

#[test]
fn tables_run_over_the_ports_in_opensm_order() {
    // `saquery -p` from OpenSM 3.3.23 as master under ibsim, on the file `fabricctl topo gen`
    // writes for this fabric, began: (DGID, SGID) = (0x0002c90000000000, 0x0002c90000000000),
    // then (0x0002c90000000000, 0x0002c90100000000): destinations outer, ports in the order of
    // the byte-reversed GUID (OpenSM's map compares network-order keys as host integers).
    let r = fat_tree();
    let whole = records(&ask(&r.subnet, &mad(METHOD_GET_TABLE, attr::PATH_RECORD, 0, &[0; 64])));
    let first: Vec<(u64, u64)> = whole.iter().take(2).map(|p| (p.dgid_guid, p.sgid_guid)).collect();
    // A Get with no end point answers the first of them.
    let get = records(&ask(&r.subnet, &mad(METHOD_GET, attr::PATH_RECORD, 0, &[0; 64])));
    assert_eq!(get, whole[..1].to_vec());
    assert_eq!(
        first,
        vec![
            (0x0002_c900_0000_0000, 0x0002_c900_0000_0000),
            (0x0002_c900_0000_0000, 0x0002_c901_0000_0000)
        ]
    );
    // The same order for the sources of one destination's table.
    let (t, m) = Template {
        dgid: Some(0x0002_c900_0000_0000),
        ..Template::default()
    }
    .image();
    let half = records(&ask(&r.subnet, &mad(METHOD_GET_TABLE, attr::PATH_RECORD, m, &t)));
    let n = whole
        .iter()
        .take_while(|p| p.dgid_guid == 0x0002_c900_0000_0000)
        .count();
    assert_eq!(half, whole[..n].to_vec());
}
