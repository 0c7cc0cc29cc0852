//! The `saquery` parser on output captured from `saquery` (infiniband-diags) against OpenSM
//! 3.3.23 as master under ibsim, on the PGFT(2;16,16;1,8;1,1) fat-tree with `lmc 1`
//! (`tests/data/saquery/<name>.txt`, one file per command; the command is in each test).

use fabric_ibsim_harness::saquery::{parse_saquery, real_records, record_size, SaqueryRecord};

fn sample(name: &str) -> Vec<SaqueryRecord> {
    let path = format!("{}/tests/data/saquery/{name}.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    parse_saquery(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `saquery NR 2`: one CA port.
#[test]
fn node_record_by_lid() {
    let r = sample("nr_lid");
    assert_eq!(r.len(), 1);
    let n = &r[0];
    assert_eq!(n.kind, "NodeRecord");
    assert_eq!(n.n("lid"), 2);
    assert_eq!(n.get("node_type"), Some("Channel Adapter"));
    assert_eq!(n.n("num_ports"), 1);
    assert_eq!(n.n("node_guid"), 0x0002_c980_0000_0000);
    assert_eq!(n.n("port_guid"), 0x0002_c980_0000_0001);
    assert_eq!(n.n("port_num"), 1);
    assert_eq!(n.get("NodeDescription"), Some("n(0,0)"));
    assert_eq!(n.fields.len(), 15, "{:?}", n.fields);
    assert!(!n.is_padding());
}

/// `saquery` (the NodeRecord table): only the first segment arrives under the shim, one record.
#[test]
fn node_record_table_is_its_first_segment() {
    let r = sample("nr_table");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].get("node_type"), Some("Switch"));
    assert_eq!(r[0].n("num_ports"), 24);
    assert_eq!(r[0].n("port_num"), 0);
    assert_eq!(r[0].get("NodeDescription"), Some("PGFT L0 S(0,0)"));
}

/// `saquery PIR 2` (a CA) and `saquery PIR 4/1` (a leaf's port 1).
#[test]
fn port_info_records() {
    let r = sample("pir_lid");
    assert_eq!(r.len(), 1);
    let p = &r[0];
    assert_eq!(p.kind, "PortInfoRecord");
    assert_eq!(
        (p.n("EndPortLid"), p.n("PortNum"), p.n("Lid"), p.n("SMLid")),
        (2, 1, 2, 2)
    );
    assert_eq!(p.n("LMC"), 1);
    assert_eq!(p.get("Mkey"), Some("<not displayed>"));
    assert_eq!(p.get("LinkState"), Some("Active"));
    assert_eq!(p.get("LinkWidthActive"), Some("4X"));
    assert_eq!(p.get("LinkSpeedActive"), Some("10.0 Gbps"));
    assert_eq!(p.n("CapMask"), 0x50c04a);
    let flags = p.get("CapMask.flags").expect("capability flags");
    assert!(flags.starts_with("IsSM,IsTrapSupported,"), "{flags}");
    assert_eq!(
        p.get("CapabilityMask2.flags"),
        Some("IsLinkWidth2xSupported,IsLinkSpeedHDRSupported")
    );
    let r = sample("pir_lid_port");
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].n("EndPortLid"), r[0].n("PortNum"), r[0].n("LocalPort")),
        (4, 1, 1)
    );
    assert_eq!(r[0].get("PhysLinkState"), Some("LinkUp"));
}

/// `saquery SWIR` (the table): 8 slots of 24 bytes, the 8th past the 168 valid bytes.
#[test]
fn switch_info_table_is_cut_at_the_valid_bytes() {
    let r = sample("swir_table");
    assert_eq!(r.len(), 8);
    assert_eq!(record_size("SwitchInfoRecord"), Some(24));
    let lids: Vec<u64> = real_records(r).iter().map(|s| s.n("LID")).collect();
    assert_eq!(lids, vec![4, 5, 6, 7, 518, 519, 520]);
}

/// `saquery SWIR 4`.
#[test]
fn switch_info_record() {
    let r = sample("swir_lid");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].kind, "SwitchInfoRecord");
    assert_eq!(r[0].n("LID"), 4);
    assert_eq!(r[0].n("LinearFDBCap"), 0x7800);
    assert_eq!(r[0].n("LinearFDBTop"), 0x219);
    assert_eq!(r[0].n("LifeTimeValue/PortStateChange/OpSL2VL"), 0x90);
}

/// `saquery -x` (the LinkRecord table: 25 records of 8 bytes in the first segment) and
/// `saquery LR 4/1`.
#[test]
fn link_records() {
    let r = sample("lr");
    assert_eq!(r.len(), 25);
    assert!(r.iter().all(|l| l.kind == "LinkRecord"));
    // 21 real records (168 bytes), then garbage: FromLID 0, 9472, 128, 0.
    let ports: Vec<u64> = r.iter().take(21).map(|l| l.n("FromPort")).collect();
    assert_eq!(ports, (1..=21).collect::<Vec<u64>>());
    assert_eq!(r[21].n("FromLID"), 0);
    assert_eq!(r[22].n("FromLID"), 9472);
    let real = real_records(r);
    assert_eq!(real.len(), 21);
    assert!(real.iter().all(|l| l.n("FromLID") == 4 && l.n("ToPort") == 1));
    let r = sample("lr_from");
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].n("FromLID"), r[0].n("FromPort"), r[0].n("ToLID"), r[0].n("ToPort")),
        (4, 1, 2, 1)
    );
}

/// `saquery LFTR 4/0`: 64 entries of block 0.
#[test]
fn lft_record() {
    let r = sample("lftr_lid");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].kind, "LFT Record");
    assert_eq!((r[0].n("LID"), r[0].n("Block")), (4, 0));
    let entries: Vec<u64> = (0..64).map(|l| r[0].n(&format!("lft[{l}]"))).collect();
    assert_eq!(&entries[..6], &[255, 255, 1, 1, 0, 17]);
    assert_eq!(entries[63], 22);
    assert_eq!(r[0].fields.len(), 2 + 64);
}

/// `saquery GIR 2`: two blocks of the CA's GUID table fill the first segment.
#[test]
fn guid_info_records() {
    let r = sample("gir_lid");
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].kind, "GUIDInfo Record");
    assert_eq!((r[0].n("LID"), r[0].n("Block")), (2, 0));
    assert_eq!(r[0].n("GUID 0"), 0x0002_c980_0000_0001);
    assert_eq!(r[1].n("Block"), 1);
    assert_eq!(r[1].n("GUID 0"), 0);
}

/// `saquery SMIR`.
#[test]
fn sm_info_record() {
    let r = sample("smir");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].kind, "SMInfoRecord");
    assert_eq!(r[0].n("LID"), 2);
    assert_eq!(r[0].n("GUID"), 0x0002_c980_0000_0001);
    assert_eq!((r[0].n("Priority"), r[0].n("SMState")), (15, 3));
}

/// `saquery -g`: OpenSM's IPoIB broadcast group.
#[test]
fn multicast_group() {
    let r = sample("mcmr");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].kind, "MCMemberRecord group");
    assert_eq!(r[0].get("MGID"), Some("ff12:401b:ffff::ffff:ffff"));
    assert_eq!(r[0].n("Mlid"), 0xc000);
    assert_eq!(r[0].n("pkey"), 0xffff);
}

/// `saquery --src-to-dst 2:8` and `3:9` (escape LIDs with LMC 1): one record each; `saquery
/// --sgid-to-dgid`: OpenSM's two paths in a full segment, the third slot is padding.
#[test]
fn path_records() {
    let r = sample("pr_lid");
    assert_eq!(r.len(), 1);
    let p = &r[0];
    assert_eq!(p.kind, "PathRecord");
    assert_eq!((p.n("slid"), p.n("dlid")), (2, 8));
    assert_eq!(p.get("sgid"), Some("fe80::2:c980:0:1"));
    assert_eq!(p.get("dgid"), Some("fe80::2:c980:0:101"));
    assert_eq!(
        (p.n("hop_flow_raw"), p.n("num_path_revers"), p.n("pkey")),
        (0, 0x80, 0xffff)
    );
    assert_eq!((p.n("mtu"), p.n("rate"), p.n("pkt_life")), (0x84, 0x87, 0x92));
    let r = sample("pr_escape");
    assert_eq!((r.len(), r[0].n("slid"), r[0].n("dlid")), (1, 3, 9));
    let r = sample("pr_gid");
    assert_eq!(r.len(), 3);
    let real: Vec<(u64, u64)> = r
        .iter()
        .filter(|p| !p.is_padding())
        .map(|p| (p.n("slid"), p.n("dlid")))
        .collect();
    assert_eq!(real, vec![(2, 12), (3, 13)]);
    // The third slot is past the 168 valid bytes: garbage that happens to have LIDs 0.
    assert!(r[2].is_padding());
    assert_eq!(real_records(r).len(), 2);
}

/// `saquery -c`: the SA's ClassPortInfo.
#[test]
fn class_port_info() {
    let r = sample("cpi");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].kind, "SA ClassPortInfo");
    assert_eq!((r[0].n("Base version"), r[0].n("Class version")), (1, 2));
    assert_eq!(r[0].n("Capability mask"), 0x2602);
    assert_eq!(r[0].n("Redirect QKey"), 0x8001_0000);
    assert_eq!(r[0].get("Redirect GID"), Some("::"));
}

/// No records (`saquery NR 1` on a fabric without LID 1, `saquery -S` without services):
/// `saquery` prints nothing and exits 0.
#[test]
fn nothing_printed_is_no_record() {
    assert_eq!(parse_saquery("").expect("parses"), vec![]);
}

/// An error status (what `saquery SMIR` printed while fabricd answered every SA query 0x000C)
/// and a timeout are errors naming the line, not records.
#[test]
fn error_statuses_and_timeouts_are_errors() {
    let e = parse_saquery(
        "ERROR: Query result returned 0x000c,  (; ; MAD Method/Attribute combination is not supported)\n",
    )
    .unwrap_err();
    assert!(e.contains("line 1") && e.contains("0x000c"), "{e}");
    let e = parse_saquery("ibwarn: [19585] sa_query: umad_recv failed: attr 0x35: Connection timed out\n\nQuery SA failed: Connection timed out\n")
        .unwrap_err();
    assert!(e.contains("line 1"), "{e}");
}

/// `saquery -S` after `fabric-saquery sr-register --id 0x1000000000000abc --name umad-sa-accept
/// --lease 3600` from the same host: one 176-byte record in one MAD, kept whole.
#[test]
fn service_record() {
    let r = sample("sr");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].kind, "ServiceRecord");
    assert_eq!(r[0].n("ServiceID"), 0x1000_0000_0000_0abc);
    assert_eq!(r[0].get("ServiceGID"), Some("fe80::2:c980:0:301"));
    assert_eq!(r[0].get("ServiceName"), Some("umad-sa-accept"));
    assert_eq!((r[0].n("ServiceP_Key"), r[0].n("ServiceLease")), (0xffff, 3600));
    assert_eq!(r[0].get("ServiceKey"), Some("<not displayed>"));
    assert_eq!(real_records(r).len(), 1);
}

/// `saquery -I` after `fabric-saquery subscribe --trap 65` from the same host.
#[test]
fn inform_info_record() {
    let r = sample("iir");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].kind, "InformInfoRecord");
    assert_eq!(r[0].get("SubscriberGID"), Some("fe80::2:c980:0:301"));
    assert_eq!(
        (r[0].n("trap_num"), r[0].n("subscribe"), r[0].n("is_generic")),
        (65, 1, 1)
    );
    assert_eq!(r[0].n("lid_range_begin"), 65535);
    assert_eq!(real_records(r).len(), 1);
}
