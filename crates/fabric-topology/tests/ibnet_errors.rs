//! Precise errors (file, line, reason) and tolerated oddities (warnings) of the topology reader.

use fabric_topology::ibnet::{parse, read_file, ParseError};
use fabric_topology::{NodeType, Remote, SwitchId};

/// A small valid file; the tests below break one line of it.
const BASE: &str = "\
switchguid=0x10
Switch\t4 \"S-0000000000000010\"\t\t# \"leaf\" base port 0 lid 1 lmc 0
[1]\t\"H-0000000000000100\"[1](101) \t\t# \"n0\" lid 2 4xQDR
[3]\t\"S-0000000000000020\"[1]\t\t# \"spine\" lid 3 4xQDR

switchguid=0x20
Switch\t4 \"S-0000000000000020\"\t\t# \"spine\" base port 0 lid 3 lmc 0
[1]\t\"S-0000000000000010\"[3]\t\t# \"leaf\" lid 1 4xQDR

caguid=0x100
Ca\t1 \"H-0000000000000100\"\t\t# \"n0\"
[1](101) \t\"S-0000000000000010\"[1]\t\t# lid 2 lmc 0 \"leaf\" lid 1 4xQDR
";

/// `BASE` with line `n` (1-based) replaced.
fn with_line(n: usize, text: &str) -> String {
    let mut lines: Vec<&str> = BASE.lines().collect();
    lines[n - 1] = text;
    lines.join("\n") + "\n"
}

fn err(text: &str) -> ParseError {
    match parse(text, "t.net") {
        Err(e) => e,
        Ok(p) => panic!(
            "expected an error, parsed {} switches; warnings {:?}",
            p.fabric.num_switches(),
            p.warnings
        ),
    }
}

fn check(text: &str, line: usize, reason: &str) {
    let e = err(text);
    assert_eq!(
        (e.file.as_str(), e.line, e.reason.as_str()),
        ("t.net", line, reason),
        "{e}"
    );
}

#[test]
fn base_is_valid() {
    let p = parse(BASE, "t.net").unwrap();
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert_eq!((p.fabric.num_switches(), p.fabric.num_end_ports()), (2, 1));
}

#[test]
fn bad_port_numbers() {
    check(
        &with_line(3, "[x]\t\"H-0000000000000100\"[1]"),
        3,
        "bad local port number `[x]`",
    );
    check(
        &with_line(3, "[]\t\"H-0000000000000100\"[1]"),
        3,
        "bad local port number `[]`",
    );
    check(
        &with_line(3, "[0]\t\"H-0000000000000100\"[1]"),
        3,
        "local port 0 is a switch's management port and cannot be cabled",
    );
    check(
        &with_line(3, "[1\t\"H-0000000000000100\"[1]"),
        3,
        "missing `]` after local port number",
    );
    check(
        &with_line(8, "[1]\t\"S-0000000000000010\"[-3]"),
        8,
        "bad remote port number `[-3]`",
    );
    check(
        &with_line(8, "[1]\t\"S-0000000000000010\"[1000]"),
        8,
        "remote port number 1000 out of range 1..=255",
    );
}

#[test]
fn port_beyond_the_port_count() {
    check(
        &with_line(4, "[5]\t\"S-0000000000000020\"[1]"),
        4,
        "port [5] out of range: Switch \"S-0000000000000010\" has 4 ports",
    );
    check(
        &with_line(12, "[2](102) \t\"S-0000000000000010\"[1]"),
        12,
        "port [2] out of range: Ca \"H-0000000000000100\" has 1 ports",
    );
    check(
        &with_line(8, "[1]\t\"S-0000000000000010\"[9]"),
        8,
        "remote port [9] out of range: Switch \"S-0000000000000010\" (line 2) has 4 ports",
    );
}

#[test]
fn unknown_keywords() {
    check(
        &with_line(4, "Swtich 4 \"x\""),
        4,
        "unknown keyword `Swtich` inside Switch record \"S-0000000000000010\" (expected a port line \
         `[n] \"remote\"[m]`, a `#` comment or a blank line)",
    );
    check(&with_line(6, "bogus line"), 6, "unknown keyword `bogus`");
    check(
        &with_line(6, "include \"other.net\""),
        6,
        "`include` lines are not supported: merge the included file into this one",
    );
    check(
        &with_line(3, "@1 \"alias\""),
        3,
        "ibsim port aliases (`@...`) are not supported",
    );
}

#[test]
fn quotes_and_ids() {
    check(
        &with_line(2, "Switch\t4 \"S-0000000000000010\t# \"leaf\""),
        2,
        "unexpected text `leaf\"` after node id (expected `# \"description\"`)",
    );
    check(
        &with_line(2, "Switch\t4 \"S-0000000000000010"),
        2,
        "unterminated quote in node id",
    );
    check(
        &with_line(2, "Switch\t4 \"S-0000000000000010\" # \"leaf"),
        2,
        "unterminated quote in node description",
    );
    check(
        &with_line(3, "[1]\t\"H-0000000000000100[1](101)"),
        3,
        "unterminated quote in remote node id",
    );
    check(&with_line(3, "[1]\t\"\"[1]"), 3, "empty remote node id");
    check(&with_line(2, "Switch\t4 \"\""), 2, "empty node id");
    check(
        &with_line(3, "[1]\tH-0000000000000100[1]"),
        3,
        "expected the quoted remote node id after port [1], found `H-0000000000000100[1]`",
    );
    check(
        &with_line(3, "[1]\t\"H-0000000000000999\"[1]"),
        3,
        "unknown node \"H-0000000000000999\": no Switch, Ca or Rt record has this id",
    );
    check(
        &with_line(7, "Switch\t4 \"S-0000000000000010\""),
        7,
        "duplicate node id \"S-0000000000000010\" (first record at line 2)",
    );
}

#[test]
fn headers() {
    check(
        &with_line(7, "Switch\t0 \"S-0000000000000020\""),
        7,
        "Switch port count 0 out of range 1..=255",
    );
    check(
        &with_line(11, "Ca\t256 \"H-0000000000000100\""),
        11,
        "Ca port count 256 out of range 1..=255",
    );
    check(
        &with_line(11, "Ca\tx \"H-0000000000000100\""),
        11,
        "expected the number of ports after `Ca`, found `x \"H-0000000000000100\"`",
    );
    check(
        &with_line(6, "switchguid=0xg"),
        6,
        "bad GUID value `0xg` after `switchguid`",
    );
    check(&with_line(10, "caguid"), 10, "expected `=` after `caguid`");
    check(&with_line(6, "vendid 0x2c9"), 6, "expected `=` after `vendid`");
}

#[test]
fn duplicates() {
    let dup_port = BASE.replace("[3]\t\"S-0000000000000020\"[1]", "[1]\t\"S-0000000000000020\"[1]");
    check(
        &dup_port,
        4,
        "port [1] of Switch \"S-0000000000000010\" listed twice (first at line 3)",
    );
    check(
        &with_line(6, "switchguid=0x10"),
        7,
        "duplicate switch GUID 0x0000000000000010 (also Switch \"S-0000000000000010\" at line 2)",
    );
    let text = format!("{BASE}\ncaguid=0x200\nCa\t1 \"H-0000000000000200\"\n[1](101) \t\"S-0000000000000010\"[2]\n");
    let text = text.replace(
        "[3]\t\"S-0000000000000020\"[1]",
        "[2]\t\"H-0000000000000200\"[1]\n[3]\t\"S-0000000000000020\"[1]",
    );
    let e = err(&text);
    assert_eq!(e.line, 17, "{e}");
    assert_eq!(
        e.reason,
        "duplicate end port GUID 0x0000000000000101 (also Ca \"H-0000000000000100\"[1], line 12)"
    );
    check(
        &with_line(8, "[1]\t\"S-0000000000000020\"[1]"),
        8,
        "port [1] is cabled to itself",
    );
}

#[test]
fn conflicting_link_records() {
    // Leaf [3] says spine [1]; spine [1] says leaf [4].
    let text = with_line(8, "[1]\t\"S-0000000000000010\"[4]");
    check(
        &text,
        4,
        "Switch \"S-0000000000000010\"[3] is cabled to Switch \"S-0000000000000020\"[1], but line 8 cables \
         Switch \"S-0000000000000020\"[1] to Switch \"S-0000000000000010\"[4]",
    );
    // The CA says it is on leaf [2]; leaf [1] says it holds the CA.
    let text = with_line(12, "[1](101) \t\"S-0000000000000010\"[2]");
    check(
        &text,
        3,
        "Switch \"S-0000000000000010\"[1] is cabled to Ca \"H-0000000000000100\"[1], but line 12 cables \
         Ca \"H-0000000000000100\"[1] to Switch \"S-0000000000000010\"[2]",
    );
}

#[test]
fn port_line_outside_a_record() {
    check(
        &format!("[1] \"x\"[1]\n{BASE}"),
        1,
        "port line before the first node record",
    );
    let text = BASE.replace("[3]\t\"S-0000000000000020\"[1]", "\n[3]\t\"S-0000000000000020\"[1]");
    check(
        &text,
        5,
        "port line outside a node record (a blank or other line ended the previous record)",
    );
}

#[test]
fn garbage_before_the_first_record_is_a_warning() {
    let text = format!("ibwarn: [1234] mad_rpc: _do_madrpc failed; dport (DR path slid 0; dlid 0; 0,1)\n{BASE}");
    let p = parse(&text, "t.net").unwrap();
    assert_eq!(
        p.warnings,
        vec![
            "t.net:1: ignored unrecognised line before the first node record: `ibwarn: [1234] mad_rpc: _do_madrpc \
              failed; dport (DR path sl...`"
                .to_string()
        ]
    );
}

#[test]
fn non_reciprocal_links_are_kept_with_a_warning() {
    // The spine forgets its line for the leaf, the CA record forgets its port line.
    let text = with_line(8, "# (no line)").replace(
        "[1](101) \t\"S-0000000000000010\"[1]\t\t# lid 2 lmc 0 \"leaf\" lid 1 4xQDR\n",
        "",
    );
    let p = parse(&text, "t.net").unwrap();
    assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
    let w0 = "t.net:3: non-reciprocal link: Switch \"S-0000000000000010\"[1] is cabled to Ca";
    assert!(p.warnings[0].starts_with(w0), "{}", p.warnings[0]);
    assert!(p.warnings[1].starts_with("t.net:4: non-reciprocal link"));
    let f = &p.fabric;
    assert_eq!(
        f.switch(SwitchId(1)).ports[1].remote,
        Remote::Switch {
            sw: SwitchId(0),
            port: 3
        }
    );
    assert_eq!(f.switch(SwitchId(1)).ports[1].speed.as_deref(), Some("4xQDR"));
    assert_eq!(
        f.end_port(f.end_port_by_guid(0x101).unwrap()).attach,
        Some((SwitchId(0), 1))
    );
    // Two one-sided claims on one port cannot both hold.
    let text = format!(
        "{BASE}\nSwitch 4 \"S-30\"\n[1] \"S-0000000000000020\"[2]\n\n\
         Switch 4 \"S-40\"\n[1] \"S-0000000000000020\"[2]\n"
    );
    let e = err(&text);
    assert_eq!(e.line, 18);
    assert!(e.reason.contains("is already cabled"), "{e}");
}

#[test]
fn self_loops_and_ca_to_ca_cables() {
    let text = format!(
        "{BASE}\nSwitch 4 \"S-30\" # \"loop\"\n[1] \"S-30\"[2]\n[2] \"S-30\"[1]\n[3] \"H-50\"[1]\n\n\
         Ca 2 \"H-40\"\n[1](41) \"H-50\"[1]\n[2](42) \"S-30\"[4]\n\nCa 1 \"H-50\"\n[1](51) \"H-40\"[1]\n"
    );
    // Conflict: the switch says H-50[1] is on its port [3], H-50 says it is cabled to H-40.
    let e = err(&text);
    assert_eq!(e.line, 17, "{e}");
    assert!(
        e.reason
            .starts_with("Switch \"S-30\"[3] is cabled to Ca \"H-50\"[1], but line 24 cables"),
        "{e}"
    );
    let text_ok = text.replace("[3] \"H-50\"[1]\n", "");
    let p = parse(&text_ok, "t.net").unwrap();
    let w: Vec<&str> = p.warnings.iter().map(String::as_str).collect();
    assert_eq!(w.len(), 4, "{w:#?}");
    // Warnings come in line order.
    assert!(
        w[0].starts_with("t.net:15: self-looped cable: Switch \"S-30\"[1] port [1] to port [2]"),
        "{}",
        w[0]
    );
    assert_eq!(
        w[1],
        "t.net:19: direct cable between Ca \"H-40\"[1] and Ca \"H-50\"[1] (no switch) skipped"
    );
    assert!(
        w[2].starts_with("t.net:20: non-reciprocal link: Ca \"H-40\"[2] is cabled to Switch \"S-30\"[4]"),
        "{}",
        w[2]
    );
    assert!(
        w[3].starts_with("t.net:22: Ca \"H-50\" has no port cabled to a switch"),
        "{}",
        w[3]
    );
    let f = &p.fabric;
    let lp = f.find_switch("loop").unwrap();
    assert_eq!(f.switch(lp).ports[1].remote, Remote::Switch { sw: lp, port: 2 });
    assert_eq!(f.switch(lp).ports[2].remote, Remote::Switch { sw: lp, port: 1 });
    assert!(f.port_groups(lp).is_empty());
    // H-40 port 2 (to the switch, one-sided) is an end port; H-40[1] <-> H-50[1] is skipped.
    assert_eq!(f.num_end_ports(), 2);
    let ep = f.end_port(f.end_port_by_guid(0x42).unwrap());
    assert_eq!((ep.port_num, ep.node_ports, ep.node_guid), (2, 2, 0x40));
}

#[test]
fn ibsim_style_file_gets_the_guids_ibsim_assigns() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ibsim/ibsim-style.net");
    let p = read_file(&path).unwrap();
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let f = &p.fabric;
    let sw: Vec<(u64, &str)> = f.switches().iter().map(|s| (s.guid, s.desc.as_str())).collect();
    assert_eq!(sw, vec![(0x200000, "SwA"), (0x200007, "SwB"), (0x200008, "SwC")]);
    let eps: Vec<(u64, u64, u8, NodeType)> = f
        .end_ports()
        .iter()
        .map(|e| (e.node_guid, e.port_guid, e.port_num, e.node_type))
        .collect();
    assert_eq!(
        eps,
        vec![
            (0x100000, 0x100001, 1, NodeType::Compute),
            (0x100004, 0x100006, 2, NodeType::Compute),
            (0, 1, 1, NodeType::Other)
        ]
    );
    // No '#' comment: the description is the node id. No speed trailers: no speed.
    assert_eq!(f.end_ports()[1].desc, "Ca2");
    assert!(f
        .switches()
        .iter()
        .flat_map(|s| s.ports.iter())
        .all(|p| p.speed.is_none()));
}

#[test]
fn ibsim_would_swallow_a_header_without_blank_line() {
    let text = BASE.replace("\nswitchguid=0x20\n", "\n");
    let text = text.replace("lid 3 4xQDR\n\n", "lid 3 4xQDR\n");
    let p = parse(&text, "t.net").unwrap();
    assert_eq!(p.fabric.num_switches(), 2);
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert!(
        p.warnings[0].starts_with("t.net:5: no blank line before this line: ibsim would"),
        "{}",
        p.warnings[0]
    );
}

#[test]
fn switch_referenced_before_its_record() {
    // BASE already references the spine (line 4) before its record (line 7); also reverse it.
    let parts: Vec<&str> = BASE.split("\n\n").collect();
    let text = format!("{}\n\n{}\n\n{}", parts[1], parts[0], parts[2]);
    let p = parse(&text, "t.net").unwrap();
    assert_eq!(p.fabric.switch(SwitchId(0)).guid, 0x20);
    assert_eq!(
        p.fabric.switch(SwitchId(0)).ports[1].remote,
        Remote::Switch {
            sw: SwitchId(1),
            port: 3
        }
    );
}

#[test]
fn port_guid_sources() {
    // No (guid) anywhere: node GUID + port number. Given only on the switch side: that one.
    let text = "Switch 4 \"S-10\"\n[1] \"H-100\"[1]\n[2] \"H-200\"[2](777)\n\nCa 1 \"H-100\"\n[1] \"S-10\"[1]\n\n\
                Ca 2 \"H-200\"\n[2] \"S-10\"[2]\n";
    let p = parse(text, "t.net").unwrap();
    let g: Vec<u64> = p.fabric.end_ports().iter().map(|e| e.port_guid).collect();
    assert_eq!(g, vec![0x101, 0x777]);
    // Both sides, disagreeing: the CA's own line wins, with a warning.
    let text = text.replace("[2] \"S-10\"[2]", "[2](778) \"S-10\"[2]");
    let p = parse(&text, "t.net").unwrap();
    assert_eq!(p.fabric.end_ports()[1].port_guid, 0x778);
    assert_eq!(p.warnings.len(), 1);
    assert!(p.warnings[0].starts_with("t.net:3: port GUID 0x0000000000000777 of Ca \"H-200\"[2] differs"));
}

#[test]
fn read_file_reports_line_of_invalid_utf8() {
    let dir = std::env::temp_dir().join(format!("fabricd-ibnet-utf8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.net");
    let mut bytes = BASE.as_bytes().to_vec();
    let at = BASE.find("\"leaf\"").unwrap() + 1;
    bytes[at] = 0xff;
    std::fs::write(&path, bytes).unwrap();
    let e = read_file(&path).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!((e.line, e.reason.as_str()), (2, "invalid UTF-8 text"));
    assert!(e.file.ends_with("bad.net"));
}
