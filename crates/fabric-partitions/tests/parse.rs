//! Parser tests: the opensm(8) examples, tricky syntax, every error with its position.

use fabric_partitions::{
    fmt_mgid, parse, IpoibGroup, MemberSpec, Membership, PartitionConfig, DEFAULT_PKEY, IPOIB_BROADCAST_QKEY,
};

fn ok(text: &str) -> PartitionConfig {
    match parse(text, "p.conf") {
        Ok(c) => c,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

fn err(text: &str) -> (u32, u32, String) {
    match parse(text, "p.conf") {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(e) => {
            assert_eq!(e.to_string(), format!("p.conf:{}:{}: {}", e.line, e.column, e.message));
            (e.line, e.column, e.message)
        }
    }
}

fn specs(c: &PartitionConfig, pkey: u16) -> Vec<(MemberSpec, Membership)> {
    c.partition(pkey)
        .unwrap()
        .members
        .iter()
        .map(|m| (m.spec, m.membership))
        .collect()
}

#[test]
fn default_partition_is_always_first_with_builtin_members() {
    let c = ok("");
    assert_eq!(c.partitions.len(), 1);
    assert_eq!(c.partitions[0].pkey, DEFAULT_PKEY);
    assert_eq!(c.partitions[0].name, "Default");
    assert_eq!(
        specs(&c, DEFAULT_PKEY),
        vec![
            (MemberSpec::All, Membership::Limited),
            (MemberSpec::SelfPort, Membership::Full)
        ]
    );
    assert!(
        c.ipoib_groups().is_empty(),
        "no file statement: no broadcast group (OpenSM with a file)"
    );
}

#[test]
fn opensm_default_config() {
    let c = PartitionConfig::default_opensm();
    assert_eq!(c.partitions.len(), 1);
    let members = specs(&c, 0x7fff);
    assert_eq!(members.last(), Some(&(MemberSpec::All, Membership::Full)));
    let groups = c.ipoib_groups();
    assert_eq!(groups, vec![IpoibGroup::with_defaults(0x7fff, "Default")]);
    let g = &groups[0];
    assert_eq!(
        (g.pkey, g.mtu, g.rate, g.sl, g.scope, g.qkey),
        (0xffff, 4, 3, 0, 2, 0x0B1B)
    );
    assert_eq!(fmt_mgid(&g.broadcast_mgid()), "ff12:401b:ffff::ffff:ffff");
    assert_eq!(fmt_mgid(&g.ipv6_all_nodes_mgid()), "ff12:601b:ffff::1");
    // RFC 5952, as inet_ntop (saquery) prints: the longest zero run, a lone zero kept.
    assert_eq!(fmt_mgid(&[0; 16]), "::");
    let mut m = [0u8; 16];
    m[0] = 0xff;
    m[1] = 0x12;
    assert_eq!(fmt_mgid(&m), "ff12::");
    m[15] = 1;
    assert_eq!(fmt_mgid(&m), "ff12::1");
    let all: [u8; 16] = [0, 1, 0, 0, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7];
    assert_eq!(fmt_mgid(&all), "1:0:2:3:4:5:6:7");
    let two: [u8; 16] = [0, 1, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3];
    assert_eq!(fmt_mgid(&two), "1:0:0:2::3");
    assert_eq!(g.mgids(), vec![g.broadcast_mgid()]);
}

#[test]
fn man_page_examples() {
    let text = "\
Default=0x7fff : ALL, SELF=full ;
Default=0x7fff : ALL, ALL_SWITCHES=full, SELF=full ;

NewPartition , ipoib : 0x123456=full, 0x3456789034=limi, 0x2134af2306 ;

YetAnotherOne = 0x300 : SELF=full ;
YetAnotherOne = 0x300 : ALL=limited ;

ShareIO = 0x80 , defmember=full : 0x123451, 0x123452;
# 0x123453, 0x123454 will be limited
ShareIO = 0x80 : 0x123453, 0x123454, 0x123455=full;
ShareIO = 0x80 , defmember=full : 0x123459, 0x12345a;
ShareIO = 0x80 , defmember=full : 0x12345b, 0x12345c=limited, 0x12345d;
";
    let c = ok(text);
    // Default + NewPartition (generated P_Key 1) + YetAnotherOne + ShareIO.
    assert_eq!(c.partitions.len(), 4);
    let d = specs(&c, 0x7fff);
    assert_eq!(d.len(), 2 + 2 + 3);
    assert_eq!(d[5], (MemberSpec::AllSwitches, Membership::Full));
    let np = c.partitions.iter().find(|p| p.name == "NewPartition").unwrap();
    assert_eq!(np.pkey, 1, "first generated P_Key");
    assert_eq!(
        specs(&c, 1),
        vec![
            (MemberSpec::Guid(0x123456), Membership::Full),
            (MemberSpec::Guid(0x3456789034), Membership::Limited),
            (MemberSpec::Guid(0x2134af2306), Membership::Limited),
        ]
    );
    assert_eq!(
        c.partition(1).unwrap().ipoib,
        vec![IpoibGroup::with_defaults(1, "NewPartition")]
    );
    assert_eq!(c.partition(0x300).unwrap().members.len(), 2, "two statements merged");
    let share = specs(&c, 0x80);
    let full: Vec<bool> = share.iter().map(|(_, m)| m.is_full()).collect();
    // defmember=full: 51 52 full; no defmember: 53 54 limited, 55 full; 59 5a full; 5b full,
    // 5c limited, 5d full.
    assert_eq!(
        full,
        vec![true, true, false, false, true, true, true, true, false, true]
    );
}

#[test]
fn man_page_mgid_example_is_refused_clearly() {
    let (line, col, msg) =
        err("Default=0x7fff,ipoib:\n        mgid=ff12:401b::0707,sl=1 # random IPv4 group\n ALL=full;");
    assert_eq!((line, col), (2, 9));
    assert!(msg.contains("mgid"), "{msg}");
}

#[test]
fn members_span_lines_and_statements_share_lines() {
    let c = ok("A=0x10 :\n  0x1,\n  0x2=full , # comment, 0x99\n\n 0x3 ; B=0x11:ALL_CAS=full;C=0x12:;");
    assert_eq!(
        specs(&c, 0x10),
        vec![
            (MemberSpec::Guid(1), Membership::Limited),
            (MemberSpec::Guid(2), Membership::Full),
            (MemberSpec::Guid(3), Membership::Limited),
        ]
    );
    assert_eq!(specs(&c, 0x11), vec![(MemberSpec::AllCas, Membership::Full)]);
    assert!(specs(&c, 0x12).is_empty(), "an empty member list is allowed");
}

#[test]
fn pkey_rules() {
    // Bit 15 stripped; decimal and octal accepted as strtoul(.., 0).
    let c = ok("A=0x8001:ALL; B=32770:ALL; C=010:ALL; 0x20:ALL;");
    let keys: Vec<(String, u16)> = c.partitions.iter().map(|p| (p.name.clone(), p.pkey)).collect();
    assert_eq!(
        keys,
        vec![
            ("Default".into(), 0x7fff),
            ("A".into(), 1),
            ("B".into(), 2),
            ("C".into(), 8),
            ("0020".into(), 0x20)
        ]
    );
    // The full-form default P_Key is the default partition.
    let c = ok("Default=0xffff, ipoib : ALL=full;");
    assert_eq!(c.partitions.len(), 1);
    assert_eq!(c.ipoib_groups()[0].pkey, 0xffff);
    // Without a P_Key: found by name, else generated skipping used ones.
    let c = ok("X=0x1:ALL; Y:ALL; Default:SELF=full; Y:0x5;");
    assert_eq!(c.partitions.iter().find(|p| p.name == "Y").unwrap().pkey, 2);
    assert_eq!(c.partition(2).unwrap().members.len(), 2);
    assert_eq!(c.partition(0x7fff).unwrap().members.len(), 3);
    let (_, col, msg) = err("A=0x8000 : ALL;");
    assert_eq!(col, 3);
    assert!(msg.contains("invalid P_Key"), "{msg}");
    assert!(err("A=0 : ALL;").2.contains("invalid P_Key"));
    assert!(err("A=0x10000 : ALL;").2.contains("16 bits"));
    assert!(err("A=0x1g : ALL;").2.contains("bad P_Key"));
    assert!(err("A= : ALL;").2.contains("missing P_Key"));
}

#[test]
fn duplicate_pkeys() {
    // Same name: merged (OpenSM's split definitions); an unnamed restatement merges too.
    let c = ok("A=0x10:0x1; A=0x10:0x2; =0x10:0x3; 0x10:0x4;");
    assert_eq!(c.partition(0x10).unwrap().members.len(), 4);
    assert_eq!(c.partition(0x10).unwrap().name, "A");
    let (line, col, msg) = err("A=0x10 : ALL;\n\n  B=0x8010 : ALL;");
    assert_eq!((line, col), (3, 3));
    assert!(msg.contains("'A' (line 1)"), "{msg}");
    let msg = err("Storage=0x7fff : ALL;").2;
    assert!(msg.contains("'Default' (built in)"), "{msg}");
}

#[test]
fn flags() {
    let c =
        ok("P=0x42, ipoib, mtu=5, rate=7, sl=3, scope=5, scope=2, Q_Key=0x12345678, TClass=32, FlowLabel=0x12 : ALL;");
    let g = c.ipoib_groups();
    assert_eq!(g.len(), 2, "one group per scope");
    assert_eq!(g.iter().map(|g| g.scope).collect::<Vec<_>>(), vec![2, 5]);
    for g in &g {
        assert_eq!(
            (g.pkey, g.mtu, g.rate, g.sl, g.qkey, g.tclass, g.flow_label),
            (0x8042, 5, 7, 3, 0x12345678, 32, 0x12)
        );
    }
    assert_eq!(fmt_mgid(&g[1].broadcast_mgid()), "ff15:401b:8042::ffff:ffff");
    // Man-page spellings and OpenSM's abbreviations.
    let c = ok("P=0x42, ipoib, qkey=7, tclass=1, m=2, r=3, sc=8, defm=f, i : 0x9;");
    let g = &c.ipoib_groups()[0];
    assert_eq!((g.qkey, g.tclass, g.mtu, g.rate, g.scope), (7, 1, 2, 3, 8));
    assert_eq!(specs(&c, 0x42), vec![(MemberSpec::Guid(9), Membership::Full)]);
    // Q_Key 0 means the IPoIB default; no ipoib flag, no group.
    let c = ok("P=0x42, ipoib, Q_Key=0 : ALL; Q=0x43, mtu=5 : ALL;");
    assert_eq!(c.ipoib_groups().len(), 1);
    assert_eq!(c.ipoib_groups()[0].qkey, IPOIB_BROADCAST_QKEY);
    // The first statement's parameters win for a scope.
    let c = ok("P=0x42, ipoib, mtu=5 : ALL; P=0x42, ipoib, mtu=2 : 0x1; P=0x42, ipoib, scope=8, mtu=1 : ;");
    let mtus: Vec<(u8, u8)> = c.ipoib_groups().iter().map(|g| (g.scope, g.mtu)).collect();
    assert_eq!(mtus, vec![(2, 5), (8, 1)]);
    // indx0 and defmember=both.
    let c = ok("P=0x42, indx0, defmember=both : 0x1, 0x2=limited;");
    let m = &c.partition(0x42).unwrap().members;
    assert!(m.iter().all(|m| m.indx0));
    assert_eq!(
        (m[0].membership, m[1].membership),
        (Membership::Both, Membership::Limited)
    );
}

#[test]
fn flag_errors() {
    let cases: &[(&str, u32, &str)] = &[
        ("P=0x1, bogus : ALL;", 8, "unknown partition flag 'bogus'"),
        ("P=0x1, mtu=6 : ALL;", 12, "bad value '6' of flag 'mtu'"),
        ("P=0x1, mtu=0 : ALL;", 8, "mtu 0"),
        ("P=0x1, mtu : ALL;", 8, "needs a value"),
        ("P=0x1, rate=1 : ALL;", 8, "rate 1"),
        ("P=0x1, sl=16 : ALL;", 11, "flag 'sl'"),
        ("P=0x1, scope=0 : ALL;", 8, "scope 0"),
        ("P=0x1, scope=x : ALL;", 14, "flag 'scope'"),
        ("P=0x1, TClass=256 : ALL;", 15, "flag 'TClass'"),
        ("P=0x1, Q_Key=0x100000000 : ALL;", 14, "flag 'Q_Key'"),
        ("P=0x1, FlowLabel=0x100000 : ALL;", 18, "flag 'FlowLabel'"),
        ("P=0x1, ipoib=1 : ALL;", 14, "takes no value"),
        ("P=0x1, defmember=most : ALL;", 18, "unknown membership 'most'"),
        ("P=0x1, , ipoib : ALL;", 8, "empty partition flag"),
        ("P=0x1, indx : ALL;", 8, "unknown partition flag 'indx'"),
    ];
    for (text, col, what) in cases {
        let (line, c, msg) = err(text);
        assert_eq!((line, c), (1, *col), "{text}: {msg}");
        assert!(msg.contains(what), "{text}: {msg}");
    }
}

#[test]
fn member_keywords_and_errors() {
    let c =
        ok("P=0x1 : ALL=full, ALL_CAS, ALL_SWITCHES=both, ALL_ROUTERS, SELF=l, NONE, 12345, 0x0002c903000a0b0c=f,;");
    assert_eq!(
        specs(&c, 1),
        vec![
            (MemberSpec::All, Membership::Full),
            (MemberSpec::AllCas, Membership::Limited),
            (MemberSpec::AllSwitches, Membership::Both),
            (MemberSpec::AllRouters, Membership::Limited),
            (MemberSpec::SelfPort, Membership::Limited),
            (MemberSpec::Guid(12345), Membership::Limited),
            (MemberSpec::Guid(0x0002c903000a0b0c), Membership::Full),
        ]
    );
    let cases: &[(&str, u32, u32, &str)] = &[
        ("P=0x1 : 0xzz;", 1, 9, "bad port GUID '0xzz'"),
        ("P=0x1 : 0x0;", 1, 9, "GUID 0"),
        ("P=0x1 : 0002c903;", 1, 9, "bad port GUID"),
        ("P=0x1 : 0x1=half;", 1, 13, "unknown membership 'half'"),
        ("P=0x1 : 0x1=;", 1, 13, "missing membership"),
        ("P=0x1 : =full;", 1, 9, "without a port"),
        ("P=0x1 : 0x10000000000000000;", 1, 9, "bad port GUID"),
        ("P=0x1 : ALL\nQ=0x2 : ALL;", 2, 7, "line 1"),
        ("P=0x1 ALL;", 1, 1, "missing ':'"),
        ("P=0x1 :\n ALL", 1, 1, "missing ';'"),
        ("  ;", 1, 3, "';' without a statement"),
        ("P=0x1 : ALL;;", 1, 13, "';' without a statement"),
        ("P=0x1,\n ipoib : ALL;", 1, 1, "missing ':'"),
    ];
    for (text, line, col, what) in cases {
        let (l, c, msg) = err(text);
        assert_eq!((l, c), (*line, *col), "{text}: {msg}");
        assert!(msg.contains(what), "{text}: {msg}");
    }
}

#[test]
fn columns_count_characters() {
    let (line, col, _) = err("Pé=0x1 : 0xé;");
    assert_eq!((line, col), (1, 10));
}

#[test]
fn crlf_and_tabs() {
    let c = ok("P=0x1,\tipoib\t:\r\n\t0x1=full,\r\n\t0x2 ;\r\n");
    assert_eq!(specs(&c, 1).len(), 2);
    assert_eq!(c.ipoib_groups().len(), 1);
}

#[test]
fn at_most_32767_partitions() {
    // Every 15-bit P_Key but 0x7fff generated, then one more.
    let mut text: String = (1..0x7fff).map(|i| format!("N{i} : ;\n")).collect();
    let c = ok(&text);
    assert_eq!(c.partitions.len(), 0x7fff);
    assert_eq!(c.partitions.last().unwrap().pkey, 0x7ffe);
    text.push_str("Last : ;\n");
    let (line, col, msg) = err(&text);
    assert_eq!((line, col), (0x7fff, 1));
    assert!(msg.contains("no P_Key left"), "{msg}");
}
