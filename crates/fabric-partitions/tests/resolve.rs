//! Resolution on a generated fat-tree: GUID lists, ALL_CAS, SELF, limited/full, shared ports,
//! indx0, previous indices, capacities, enforcement tables.

use fabric_partitions::{
    blocks, parse, resolve, resolve_with, PartitionConfig, PartitionTables, ResolveIssue, ResolveOptions,
};
use fabric_topology::gen::generate_str;
use fabric_topology::{Fabric, Guid};

/// XGFT(2;4,4;1,2): 16 end ports on 4 leaves, 2 top switches.
fn fabric() -> Fabric {
    generate_str("XGFT(2;4,4;1,2)", None).unwrap()
}

fn g(f: &Fabric, i: usize) -> Guid {
    f.end_ports()[i].port_guid
}

fn run(f: &Fabric, text: &str, sm: Option<Guid>) -> PartitionTables {
    resolve(&parse(text, "t.conf").unwrap(), f, sm)
}

#[test]
fn no_file_everyone_full_in_default() {
    let f = fabric();
    let t = resolve(&PartitionConfig::default_opensm(), &f, Some(g(&f, 0)));
    for ep in f.end_ports() {
        assert_eq!(t.table(ep.port_guid), Some(&[0xffff][..]));
    }
    for sw in f.switches() {
        assert_eq!(t.table(sw.guid), Some(&[0xffff][..]), "switch management port 0");
    }
    assert_eq!(t.ipoib_groups().len(), 1);
    assert_eq!(t.members(0x7fff).len(), 16 + 6);
}

#[test]
fn file_without_default_statement_leaves_ports_limited() {
    let f = fabric();
    let sm = g(&f, 3);
    let t = run(&f, "Part=0x10 : ALL_CAS ;", Some(sm));
    assert_eq!(t.table(sm), Some(&[0xffff, 0x0010][..]));
    assert_eq!(t.table(g(&f, 0)), Some(&[0x7fff, 0x0010][..]));
    assert_eq!(
        t.table(f.switches()[0].guid),
        Some(&[0x7fff][..]),
        "ALL_CAS leaves out switches"
    );
    // Limited-limited: no path; the SM (full in Default) reaches everyone.
    assert_eq!(t.shared_pkey(g(&f, 0), g(&f, 1)), None);
    assert_eq!(t.shared_pkey(g(&f, 0), sm), Some(0x7fff));
    assert_eq!(t.path_pkey(g(&f, 0), sm), Some(0x7fff));
    assert_eq!(t.path_pkey(sm, g(&f, 0)), Some(0xffff));
    assert!(t.ipoib_groups().is_empty());
}

#[test]
fn partitions_sharing_ports() {
    let f = fabric();
    let sm = g(&f, 15);
    let (g0, g1, g2, g3, g4) = (g(&f, 0), g(&f, 1), g(&f, 2), g(&f, 3), g(&f, 4));
    let text = format!(
        "Default=0x7fff, ipoib : ALL=full ;\n\
         Compute=0x10, ipoib, mtu=5 : ALL_CAS ;   # limited\n\
         Storage=0x20, defmember=full : {g0:#x}, {g1:#x},\n    SELF ;\n\
         Mixed=0x30 : {g2:#x}=full, {g3:#x}, {g4}=full, ALL_SWITCHES ;\n"
    );
    let t = run(&f, &text, Some(sm));
    assert_eq!(t.table(g0), Some(&[0xffff, 0x0010, 0x8020][..]));
    assert_eq!(t.table(sm), Some(&[0xffff, 0x0010, 0x8020][..]));
    assert_eq!(t.table(g3), Some(&[0xffff, 0x0010, 0x0030][..]));
    assert_eq!(t.table(g(&f, 9)), Some(&[0xffff, 0x0010][..]));
    for sw in f.switches() {
        assert_eq!(t.table(sw.guid), Some(&[0xffff, 0x0030][..]));
    }
    assert_eq!(t.members(0x8020), {
        let mut m = vec![(g0, true), (g1, true), (sm, true)];
        m.sort();
        m
    });
    // Compute is limited-only: it never carries a path; Default does.
    assert_eq!(t.shared_pkey(g(&f, 5), g(&f, 6)), Some(0x7fff));
    assert!(!t.shares_pkey(g(&f, 5), g(&f, 6), 0x10));
    assert!(t.shares_pkey(g0, g1, 0x8020));
    // Storage and Default shared: OpenSM's map order (byte-swapped) meets 0x0020 first.
    assert_eq!(t.shared_pkeys(g0, g1), vec![0x20, 0x7fff]);
    assert_eq!(t.shared_pkey(g0, g1), Some(0x20));
    assert_eq!(t.shared_pkey(g3, g2), Some(0x30));
    assert_eq!(t.shared_pkey(g2, g3), Some(0x30));
    // Enforcement: the leaf port facing an end port holds that port's table.
    for ep in f.end_ports() {
        let (sw, port) = ep.attach.unwrap();
        assert_eq!(t.switch_port_table(f.switch(sw).guid, port), t.table(ep.port_guid));
    }
    assert_eq!(t.switch_port_tables().count(), 16);
    let groups: Vec<(u16, u8)> = t.ipoib_groups().iter().map(|g| (g.pkey, g.mtu)).collect();
    assert_eq!(groups, vec![(0xffff, 4), (0x8010, 5)]);
    assert!(t.issues().is_empty(), "{:?}", t.issues());
}

#[test]
fn later_entries_override_earlier_ones() {
    let f = fabric();
    let g0 = g(&f, 0);
    // ALL (limited) after the GUID: the GUID ends limited, as OpenSM's "will overwrite".
    let t = run(
        &f,
        &format!("P=0x40 : {g0:#x}=full, ALL ; Q=0x41 : ALL, {g0:#x}=full ;"),
        None,
    );
    assert_eq!(t.table(g0), Some(&[0x7fff, 0x0040, 0x8041][..]));
    // A restated Default=limited takes the SM port down to limited too (OpenSM does the same).
    let sm = g(&f, 1);
    let t = run(&f, "Default=0x7fff : ALL=limited ;", Some(sm));
    assert_eq!(t.table(sm), Some(&[0x7fff][..]));
}

#[test]
fn indx0_and_previous_indices() {
    let f = fabric();
    let g0 = g(&f, 0);
    let t = run(&f, &format!("P=0x10, indx0 : {g0:#x}=full ;"), None);
    assert_eq!(t.table(g0), Some(&[0x8010, 0x7fff][..]));
    assert_eq!(t.table(g(&f, 1)), Some(&[0x7fff][..]));

    let opts = ResolveOptions::default();
    let a = parse(
        &format!("Default=0x7fff:ALL=full; A=0x10:{g0:#x}; B=0x20:{g0:#x}=full;"),
        "a",
    )
    .unwrap();
    let ta = resolve_with(&a, &f, None, &opts, None);
    assert_eq!(ta.table(g0), Some(&[0xffff, 0x0010, 0x8020][..]));
    // A new partition with a smaller P_Key: without previous tables it sorts in, with them the
    // kept P_Keys keep their index and the new one takes the first free entry.
    let b = parse(
        &format!("Default=0x7fff:ALL=full; A=0x10:{g0:#x}; B=0x20:{g0:#x}=full; C=0x5:{g0:#x};"),
        "b",
    )
    .unwrap();
    assert_eq!(
        resolve(&b, &f, None).table(g0),
        Some(&[0xffff, 0x0005, 0x0010, 0x8020][..])
    );
    let tb = resolve_with(&b, &f, None, &opts, Some(&ta));
    assert_eq!(tb.table(g0), Some(&[0xffff, 0x0010, 0x8020, 0x0005][..]));
    // A partition leaves: a free entry stays where it was, the next new one fills it.
    let c = parse(
        &format!("Default=0x7fff:ALL=full; B=0x20:{g0:#x}=full; C=0x5:{g0:#x};"),
        "c",
    )
    .unwrap();
    let tc = resolve_with(&c, &f, None, &opts, Some(&tb));
    assert_eq!(tc.table(g0), Some(&[0xffff, 0, 0x8020, 0x0005][..]));
    let d = parse(
        &format!("Default=0x7fff:ALL=full; B=0x20:{g0:#x}=full; C=0x5:{g0:#x}=full; D=0x6:{g0:#x};"),
        "d",
    )
    .unwrap();
    let td = resolve_with(&d, &f, None, &opts, Some(&tc));
    assert_eq!(td.table(g0), Some(&[0xffff, 0x0006, 0x8020, 0x8005][..]));
    // indx0 moves a kept P_Key to index 0 and the one there to a free entry.
    let e = parse(
        &format!("Default=0x7fff:ALL=full; B=0x20,indx0:{g0:#x}=full; C=0x5:{g0:#x};"),
        "e",
    )
    .unwrap();
    let te = resolve_with(&e, &f, None, &opts, Some(&tc));
    assert_eq!(te.table(g0), Some(&[0x8020, 0xffff, 0, 0x0005][..]));
}

#[test]
fn capacities_and_issues() {
    let f = fabric();
    let g0 = g(&f, 0);
    let mut text = String::new();
    for k in 1..=40u16 {
        text.push_str(&format!("P{k}={k:#x} : {g0:#x}=full ;\n"));
    }
    let cfg = parse(&text, "t").unwrap();
    let t = resolve(&cfg, &f, None);
    let table = t.table(g0).unwrap();
    assert_eq!(table.len(), 32);
    assert_eq!(table[0], 0x7fff);
    let dropped: Vec<u16> = (32..=40).map(|k| 0x8000 | k).collect();
    assert!(t.issues().contains(&ResolveIssue::TableFull {
        port_guid: g0,
        capacity: 32,
        dropped
    }));
    let opts = ResolveOptions {
        partition_cap: 64,
        enforcement_cap: 32,
    };
    let t = resolve_with(&cfg, &f, None, &opts, None);
    assert_eq!(t.table(g0).unwrap().len(), 41);
    let (sw, port) = f.end_ports()[0].attach.unwrap();
    let switch_guid = f.switch(sw).guid;
    assert_eq!(t.switch_port_table(switch_guid, port), None);
    assert!(t.issues().contains(&ResolveIssue::NotEnforced {
        switch_guid,
        port,
        needed: 41,
        capacity: 32
    }));
    assert_eq!(t.switch_port_tables().count(), 15);
    let t = resolve_with(
        &cfg,
        &f,
        None,
        &ResolveOptions {
            partition_cap: 64,
            enforcement_cap: 0,
        },
        None,
    );
    assert_eq!(t.switch_port_tables().count(), 0, "no enforcement");

    let t = run(&f, "A=0x10, ipoib : 0x1234 ; B=0x11, ipoib : ; C=0x12 : SELF ;", None);
    assert!(t.issues().contains(&ResolveIssue::UnknownGuid {
        pkey: 0x10,
        guid: 0x1234,
        line: 1
    }));
    assert!(t.issues().contains(&ResolveIssue::EmptyPartition {
        pkey: 0x11,
        name: "B".into()
    }));
    assert!(t
        .issues()
        .contains(&ResolveIssue::SelfWithoutSmPort { pkey: 0x12, line: 1 }));
    assert!(t.ipoib_groups().is_empty(), "groups of empty partitions are dropped");
    assert_eq!(t.partitions().iter().map(|p| p.pkey).collect::<Vec<_>>(), vec![0x7fff]);
}

#[test]
fn blocks_are_zero_padded() {
    assert_eq!(blocks(&[]), vec![[0u16; 32]]);
    let table: Vec<u16> = (1..=33).collect();
    let b = blocks(&table);
    assert_eq!(b.len(), 2);
    assert_eq!(b[0][31], 32);
    assert_eq!(b[1][0], 33);
    assert!(b[1][1..].iter().all(|&e| e == 0));
}

/// Timing on the 8640-end-port fat-tree: `cargo test -p fabric-partitions --test resolve --
/// --ignored --nocapture measure`.
#[test]
#[ignore = "measurement"]
fn measure_8640_end_ports() {
    use std::time::Instant;
    let f = generate_str("XGFT(3;24,18,20;1,6,18)", None).unwrap();
    assert_eq!(f.num_end_ports(), 8640);
    // Default for all, 100 tenants of 86 ports each (full), every port also limited in storage.
    let mut text = String::from("Default=0x7fff, ipoib : ALL=full ;\nStorage=0x7000, ipoib : ALL_CAS=limited ;\n");
    for k in 0..100usize {
        text.push_str(&format!("T{k}={:#x}, ipoib, defmember=full :", k + 1));
        for i in 0..86 {
            text.push_str(&format!(" {:#x},", f.end_ports()[k * 86 + i].port_guid));
        }
        text.push_str(" SELF ;\n");
    }
    let _warm = parse(&text, "big.conf").unwrap();
    let t0 = Instant::now();
    let cfg = parse(&text, "big.conf").unwrap();
    let t1 = Instant::now();
    let tables = resolve(&cfg, &f, Some(f.end_ports()[0].port_guid));
    let t2 = Instant::now();
    let prev = resolve_with(&cfg, &f, None, &ResolveOptions::default(), Some(&tables));
    let t3 = Instant::now();
    assert_eq!(tables.partitions().len(), 102);
    assert!(prev
        .issues()
        .iter()
        .all(|i| !matches!(i, ResolveIssue::TableFull { .. })));
    println!(
        "{} bytes, {} ports: parse {:?}, resolve {:?}, resolve with previous tables {:?}",
        text.len(),
        tables.port_tables().count(),
        t1 - t0,
        t2 - t1,
        t3 - t2
    );
}

#[test]
fn issues_name_their_port_and_pkey() {
    let issue = ResolveIssue::UnknownGuid {
        pkey: 0x10,
        guid: 0x1234,
        line: 3,
    };
    assert_eq!(
        issue.to_string(),
        "line 3: port 0x0000000000001234 of P_Key 0x0010 is not in the fabric"
    );
    let issue = ResolveIssue::TableFull {
        port_guid: 1,
        capacity: 32,
        dropped: vec![0x8021],
    };
    assert!(issue.to_string().contains("left out [8021]"), "{issue}");
}
