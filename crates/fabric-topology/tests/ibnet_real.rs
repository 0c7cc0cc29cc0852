//! Real ibnetdiscover dumps (tests/data/real, sources in its README): counts, details, round trip.

use std::collections::HashSet;

use fabric_topology::ibnet::{parse, write, ParsedTopology};
use fabric_topology::{Fabric, NodeType, Remote, SwitchId};

const UFM: &str = include_str!("data/real/ibtopotool-ufm-lab-degraded.ibnet");
const LOGINOFF: &str = include_str!("data/real/loginoff-sx6036-fdr10-8sw.ibnet");
const JANUS: &str = include_str!("data/real/mlunacek-qdr-3xIS5600-214sw.ibnet");
const PSMN: &str = include_str!("data/real/psmn-x5-voltaire4036-qdr.ibnet");
const SWITCHIB: &str = include_str!("data/real/switchib-edr-6sw-flat.ibnet");

/// Counts taken from the README of the test data (not from the parser).
struct Expect {
    name: &'static str,
    text: &'static str,
    switches: usize,
    cas: usize,
    /// Switch-to-switch cables, self-loops included.
    sw_cables: usize,
    self_loops: usize,
    end_ports: usize,
}

const FILES: [Expect; 5] = [
    Expect {
        name: "ufm",
        text: UFM,
        switches: 2,
        cas: 6,
        sw_cables: 4,
        self_loops: 3,
        end_ports: 6,
    },
    Expect {
        name: "loginoff",
        text: LOGINOFF,
        switches: 8,
        cas: 144,
        sw_cables: 47,
        self_loops: 0,
        end_ports: 145,
    },
    Expect {
        name: "janus",
        text: JANUS,
        switches: 214,
        cas: 1356,
        sw_cables: 2812,
        self_loops: 0,
        end_ports: 1356,
    },
    Expect {
        name: "psmn",
        text: PSMN,
        switches: 11,
        cas: 89,
        sw_cables: 70,
        self_loops: 0,
        end_ports: 89,
    },
    Expect {
        name: "switchib",
        text: SWITCHIB,
        switches: 6,
        cas: 96,
        sw_cables: 48,
        self_loops: 0,
        end_ports: 96,
    },
];

/// (switch-to-switch cables, self-loops, switch ports cabled to an end port), counted per port.
fn cabling(f: &Fabric) -> (usize, usize, usize) {
    let (mut sw_ends, mut loops, mut eps) = (0, 0, 0);
    for (i, s) in f.switches().iter().enumerate() {
        for (pn, p) in s.external_ports() {
            match p.remote {
                Remote::Switch { sw, port } => {
                    sw_ends += 1;
                    if sw == SwitchId(i as u32) && port > pn {
                        loops += 1;
                    }
                }
                Remote::EndPort(_) => eps += 1,
                Remote::None => {}
            }
        }
    }
    (sw_ends / 2, loops, eps)
}

fn speeds(f: &Fabric, speed: &str) -> usize {
    f.switches()
        .iter()
        .flat_map(|s| s.ports.iter())
        .filter(|p| p.speed.as_deref() == Some(speed))
        .count()
}

fn parsed(e: &Expect) -> ParsedTopology {
    parse(e.text, e.name).unwrap_or_else(|err| panic!("{}: {err}", e.name))
}

#[test]
fn real_dumps_have_the_documented_counts() {
    for e in &FILES {
        let p = parsed(e);
        let f = &p.fabric;
        assert_eq!(f.num_switches(), e.switches, "{}", e.name);
        assert_eq!(f.num_end_ports(), e.end_ports, "{}", e.name);
        let nodes: HashSet<u64> = f.end_ports().iter().map(|ep| ep.node_guid).collect();
        assert_eq!(nodes.len(), e.cas, "{}", e.name);
        assert_eq!(cabling(f), (e.sw_cables, e.self_loops, e.end_ports), "{}", e.name);
        assert!(f
            .end_ports()
            .iter()
            .all(|ep| ep.attach.is_some() && ep.node_type == NodeType::Compute));
        let expected_warnings = if e.name == "ufm" { 1 + e.self_loops } else { 0 };
        assert_eq!(p.warnings.len(), expected_warnings, "{}: {:#?}", e.name, p.warnings);
    }
}

#[test]
fn ufm_capture_details() {
    let p = parsed(&FILES[0]);
    // The libibmad error line (line 1) is tolerated; the three self-loops are kept.
    assert!(
        p.warnings[0].starts_with("ufm:1: ignored unrecognised line"),
        "{}",
        p.warnings[0]
    );
    for (w, line) in p.warnings[1..].iter().zip([12, 15, 17]) {
        assert!(w.starts_with(&format!("ufm:{line}: self-looped cable")), "{w}");
    }
    let f = &p.fabric;
    let sib = f.find_switch("0xe41d2d030003e470").unwrap();
    assert_eq!(sib, SwitchId(0));
    let s = f.switch(sib);
    assert_eq!((s.nports, s.desc.as_str()), (36, "SwitchIB Mellanox Technologies"));
    assert_eq!(s.ports[19].remote, Remote::Switch { sw: sib, port: 21 });
    assert_eq!(s.ports[3].speed.as_deref(), Some("4xFDR"));
    let sx = f.switch(SwitchId(1));
    assert_eq!((sx.nports, sx.desc.as_str()), (12, "MF0;switch-de779e:SX6012/U1"));
    assert_eq!(sx.ports[8].speed.as_deref(), Some("4xSDR"));
    // Only live inter-switch link: SwitchIB[3] <-> SX6012[1] (self-loops are never live).
    assert_eq!(f.port_groups(sib).len(), 1);
    // The dual-port CA cabled on port 2 only.
    let ep = f.end_port(f.end_port_by_guid(0x2c903003421b2).unwrap());
    assert_eq!((ep.port_num, ep.node_ports, ep.node_guid), (2, 2, 0x2c903003421b0));
    assert_eq!(ep.desc, "r-ufm111 HCA-1");
    assert_eq!(ep.attach, Some((sib, 35)));
    // End-port order = CA record order.
    let order: Vec<u64> = f.end_ports().iter().map(|e| e.port_guid).collect();
    assert_eq!(
        order,
        vec![
            0x2c903003421b2,
            0xe41d2d030061f957,
            0x2c9030006ba5b,
            0x2c90300337141,
            0xe41d2d03005cf1f8,
            0x2c9030004e939
        ]
    );
}

/// Port GUIDs of the CA port lines, in file order, extracted with plain string operations.
fn ca_port_guids_in_file_order(text: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut in_ca = false;
    for line in text.lines() {
        if line.starts_with("Ca") {
            in_ca = true;
        } else if line.starts_with("Switch") || line.is_empty() || line.starts_with("vendid") {
            in_ca = false;
        } else if in_ca && line.starts_with('[') {
            let open = line.find('(').unwrap();
            let close = line.find(')').unwrap();
            out.push(u64::from_str_radix(&line[open + 1..close], 16).unwrap());
        }
    }
    out
}

#[test]
fn end_port_order_is_ca_record_order() {
    for e in &FILES {
        let p = parsed(e);
        let got: Vec<u64> = p.fabric.end_ports().iter().map(|ep| ep.port_guid).collect();
        assert_eq!(got, ca_port_guids_in_file_order(e.text), "{}", e.name);
    }
}

#[test]
fn loginoff_details() {
    let f = parsed(&FILES[1]).fabric;
    // ib1 has 4 uplinks to ib7 and only 3 to ib8 (the missing cable); the other leaves 4 and 4.
    let ib7 = f.find_switch("MF0;ib7:SX6036/U1").unwrap();
    let ib8 = f.find_switch("MF0;ib8:SX6036/U1").unwrap();
    for n in 1..=6 {
        let leaf = f.find_switch(&format!("MF0;ib{n}:SX6036/U1")).unwrap();
        let up: Vec<(SwitchId, usize)> = f.port_groups(leaf).iter().map(|g| (g.remote, g.ports.len())).collect();
        let to8 = if n == 1 { 3 } else { 4 };
        assert!(up.contains(&(ib7, 4)) && up.contains(&(ib8, to8)), "ib{n}: {up:?}");
    }
    // ib7 is a spine that also carries 3 hosts.
    assert_eq!(f.attached_end_ports(ib7).len(), 3);
    // 94 FDR10 switch-to-switch records, 145 QDR host links (switch side).
    assert_eq!(speeds(&f, "4xFDR10"), 94);
    assert_eq!(speeds(&f, "4xQDR"), 145);
    // One dual-port CA has both ports cabled.
    let both: Vec<_> = f.end_ports().iter().filter(|e| e.port_num == 2).collect();
    assert!(both.iter().any(|e| f
        .end_ports()
        .iter()
        .any(|o| o.node_guid == e.node_guid && o.port_num == 1)));
    assert!(f.end_ports().iter().all(|e| e.node_ports == 2));
}

#[test]
fn psmn_and_switchib_details() {
    let f = parsed(&FILES[3]).fabric;
    // 46 DDR host-link records = 23 host links, speed kept on the switch port.
    assert_eq!(speeds(&f, "4xDDR"), 23);
    assert_eq!(speeds(&f, "4xQDR"), 140 + 89 - 23);
    // Non-unique descriptions are fine; a user-set name with '#' inside the quotes is kept.
    assert!(f.switches().iter().any(|s| s.desc == "Voltaire 4036 # 4036-8C5C"));

    let f = parsed(&FILES[4]).fabric;
    // One leaf-spine cable runs at DDR: S-...8480[11] <-> S-...8200[11].
    assert_eq!(speeds(&f, "4xDDR"), 2);
    let a = f.find_switch("0xec0d9a0300ec8480").unwrap();
    let b = f.find_switch("0xec0d9a0300ec8200").unwrap();
    assert_eq!(f.switch(a).ports[11].remote, Remote::Switch { sw: b, port: 11 });
    assert_eq!(f.switch(a).ports[11].speed.as_deref(), Some("4xDDR"));
    // ConnectX-5: port GUID = node GUID.
    assert!(f.end_ports().iter().all(|e| e.port_guid == e.node_guid));
    // 2-level fat tree: 4 leaves with 24 hosts and 6 cables to each of 2 spines.
    let leaves: Vec<SwitchId> = f.switch_ids().filter(|&s| f.is_leaf(s)).collect();
    assert_eq!(leaves.len(), 4);
    for l in leaves {
        assert_eq!(f.attached_end_ports(l).len(), 24);
        let g: Vec<usize> = f.port_groups(l).iter().map(|g| g.ports.len()).collect();
        assert_eq!(g, vec![6, 6]);
    }
}

#[test]
fn janus_details() {
    let f = parsed(&FILES[2]).fabric;
    // The odd 32-port edge switch with 5 cabled ports.
    let s = f.switch(f.find_switch("0x0002c9020044f220").unwrap());
    assert_eq!(s.nports, 32);
    assert_eq!(s.external_ports().filter(|(_, p)| p.remote != Remote::None).count(), 5);
    assert_eq!(speeds(&f, "4xQDR"), 5624 + 1356);
    assert_eq!(f.count_links().1, 2812);
}

#[test]
fn write_then_parse_gives_the_same_fabric() {
    for e in &FILES {
        let p = parsed(e);
        let text = write(&p.fabric);
        let back = parse(&text, "written").unwrap_or_else(|err| panic!("{}: {err}", e.name));
        assert!(back.fabric == p.fabric, "{}: round trip differs", e.name);
        // Only the self-loops are still worth a warning.
        assert_eq!(back.warnings.len(), e.self_loops, "{}: {:#?}", e.name, back.warnings);
        // Idempotent text.
        assert_eq!(write(&back.fabric), text, "{}", e.name);
    }
}

#[test]
fn crlf_and_hca_spelling_are_accepted() {
    let text = LOGINOFF.replace('\n', "\r\n").replace("\nCa\t", "\nHca\t");
    let p = parse(&text, "crlf").unwrap();
    assert!(p.fabric == parsed(&FILES[1]).fabric);
}
