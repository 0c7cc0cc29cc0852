//! The writer and the reader against the real simulator: write a fabric, load it into `ibsim`,
//! discover it with `ibnetdiscover` (through the umad2sim preload shim), read the discovery back
//! and compare with the original.
//!
//! Needs `ibsim` (Debian `ibsim-utils`) and `ibnetdiscover` (`infiniband-diags`). CI installs them,
//! so a missing tool fails the test instead of skipping it.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::time::Duration;

use fabric_ibsim_harness::{find_tool, wait_with_deadline, Ibsim, SHIM};
use fabric_topology::gen::generate_str;
use fabric_topology::ibnet::{parse, read_file, write};
use fabric_topology::{Fabric, FabricBuilder, NodeType, Remote, SwitchId};

const DISCOVER_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs ibnetdiscover against the simulator and returns its output (stdout only: its
/// warnings go to stderr, shown when it fails).
fn discover(sim: &Ibsim) -> String {
    let tool = find_tool("ibnetdiscover");
    assert!(
        Path::new(SHIM).is_file(),
        "the umad2sim shim {SHIM} is missing (apt-get install ibsim-utils)"
    );
    let out_path = sim.dir().join("discovered.ibnet");
    let err_path = sim.dir().join("ibnetdiscover.err");
    // SIM_HOST unset: ibnetdiscover attaches to ibsim's default node, whatever the net file.
    let mut child = sim
        .command(&tool)
        .env_remove("SIM_HOST")
        .stdout(File::create(&out_path).expect("create output"))
        .stderr(File::create(&err_path).expect("create stderr"))
        .spawn()
        .expect("start ibnetdiscover");
    let status = wait_with_deadline(&mut child, DISCOVER_TIMEOUT, "ibnetdiscover");
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert!(status.success(), "ibnetdiscover failed ({status}):\n{err}");
    std::fs::read_to_string(&out_path).expect("read ibnetdiscover output")
}

/// Writes `text` as a net file, runs ibsim on it and returns what ibnetdiscover sees. ibsim must
/// not complain (`can't`, `bad `) while loading it; with `clean`, not even warn.
fn round_trip_through_ibsim(text: &str, tag: &str, clean: bool) -> Fabric {
    // The default node is used (see `discover`), so no host is named.
    let sim = Ibsim::start_temp(&format!("ibnet-{tag}"), text, String::new());
    let log = sim.startup_log();
    assert!(
        !log.contains("can't") && !log.contains("bad "),
        "ibsim complained:\n{log}"
    );
    if clean {
        let parsing = &log[..log.find("Network simulator ready.").unwrap_or(log.len())];
        assert!(
            !parsing.contains("ibwarn"),
            "ibsim warned while loading the written file:\n{parsing}"
        );
    }
    let out = discover(&sim);
    drop(sim);
    let p = parse(&out, &format!("ibnetdiscover({tag})")).unwrap_or_else(|e| panic!("{e}\n{out}"));
    let unexpected: Vec<&String> = p.warnings.iter().filter(|w| !w.contains("self-looped cable")).collect();
    assert!(unexpected.is_empty(), "{unexpected:#?}");
    p.fabric
}

/// A switch port's remote (by GUID) and speed.
type CanonPort = (String, Option<String>);
/// A switch: port count, description, cabled ports.
type CanonSwitch = (u8, String, BTreeMap<u8, CanonPort>);
/// An end port: node GUID, port number, node ports, node type, description, (switch GUID, port).
type CanonEndPort = (u64, u8, u8, NodeType, String, Option<(u64, u8)>);

/// Everything the file format carries, keyed by GUID (ids and record order differ after discovery).
#[derive(Debug, PartialEq, Eq)]
struct Canon {
    /// switch GUID -> (nports, desc, port -> (remote, speed)).
    switches: BTreeMap<u64, CanonSwitch>,
    /// port GUID -> (node GUID, port number, node ports, node type, desc, (switch GUID, port)).
    end_ports: BTreeMap<u64, CanonEndPort>,
}

fn canon(f: &Fabric, speed: impl Fn(Option<&str>) -> Option<String>) -> Canon {
    let mut switches = BTreeMap::new();
    for s in f.switches() {
        let mut ports = BTreeMap::new();
        for (pn, p) in s.external_ports() {
            let remote = match p.remote {
                Remote::None => continue,
                Remote::Switch { sw, port } => format!("switch {:#x}[{port}]", f.switch(sw).guid),
                Remote::EndPort(ep) => format!("end port {:#x}", f.end_port(ep).port_guid),
            };
            ports.insert(pn, (remote, speed(p.speed.as_deref())));
        }
        switches.insert(s.guid, (s.nports, s.desc.clone(), ports));
    }
    let end_ports = f
        .end_ports()
        .iter()
        .map(|e| {
            let attach = e.attach.map(|(sw, p)| (f.switch(sw).guid, p));
            (
                e.port_guid,
                (
                    e.node_guid,
                    e.port_num,
                    e.node_ports,
                    e.node_type,
                    e.desc.clone(),
                    attach,
                ),
            )
        })
        .collect();
    Canon { switches, end_ports }
}

fn same(s: Option<&str>) -> Option<String> {
    s.map(str::to_string)
}

/// 2-level fat tree: 8 leaves x 4 nodes, 4 spines, 2 parallel cables per leaf-spine pair; plus a
/// dual-port CA on two leaves, a router, a DDR cable and a self-looped cable.
fn small_fat_tree() -> Fabric {
    let mut b = FabricBuilder::new();
    let leaves: Vec<SwitchId> = (0..8)
        .map(|i| {
            b.add_switch(0x0002_c900_0000_1000 + i, format!("leaf {i}"), 16)
                .unwrap()
        })
        .collect();
    let spines: Vec<SwitchId> = (0..4)
        .map(|i| {
            b.add_switch(0x0002_c900_0000_2000 + i, format!("spine {i}"), 18)
                .unwrap()
        })
        .collect();
    for (l, &leaf) in leaves.iter().enumerate() {
        for (s, &spine) in spines.iter().enumerate() {
            for k in 0..2u8 {
                let lp = 5 + 2 * s as u8 + k;
                let sp = 1 + 2 * l as u8 + k;
                b.connect_switches(leaf, lp, spine, sp).unwrap();
                let speed = if (l, s, k) == (3, 1, 0) { "4xDDR" } else { "4xQDR" };
                b.switch_mut(leaf).ports[lp as usize].speed = Some(speed.into());
                b.switch_mut(spine).ports[sp as usize].speed = Some(speed.into());
            }
        }
    }
    b.connect_switches(spines[0], 17, spines[0], 18).unwrap();
    b.switch_mut(spines[0]).ports[17].speed = Some("4xQDR".into());
    b.switch_mut(spines[0]).ports[18].speed = Some("4xQDR".into());
    for (l, &leaf) in leaves.iter().enumerate() {
        for p in 1..=4u8 {
            let node = 0x0002_c900_0010_0000 + 0x100 * (4 * l as u64 + u64::from(p));
            let ep = b
                .add_end_port(
                    node + 1,
                    node,
                    format!("node{:02} HCA-1", 4 * l + p as usize),
                    1,
                    1,
                    NodeType::Compute,
                )
                .unwrap();
            b.connect_end_port(ep, leaf, p).unwrap();
            b.switch_mut(leaf).ports[p as usize].speed = Some("4xEDR".into());
        }
    }
    // A dual-port CA cabled to leaves 0 and 1 (ports 13).
    let node = 0x0002_c900_0020_0000;
    for (port, leaf) in [(1u8, leaves[0]), (2, leaves[1])] {
        let ep = b
            .add_end_port(node + u64::from(port), node, "io01 mlx5_0", port, 2, NodeType::Compute)
            .unwrap();
        b.connect_end_port(ep, leaf, 13).unwrap();
        b.switch_mut(leaf).ports[13].speed = Some("4xEDR".into());
    }
    // A router on leaf 7: ibsim runs router links at SDR whatever the file says.
    let ep = b
        .add_end_port(
            0x0002_c900_0030_0001,
            0x0002_c900_0030_0000,
            "gateway",
            1,
            1,
            NodeType::Other,
        )
        .unwrap();
    b.connect_end_port(ep, leaves[7], 14).unwrap();
    b.switch_mut(leaves[7]).ports[14].speed = Some("4xSDR".into());
    b.build()
}

#[test]
fn builder_fat_tree_survives_ibsim() {
    let f = small_fat_tree();
    let got = round_trip_through_ibsim(&write(&f), "builder", true);
    assert_eq!(got.num_switches(), 12);
    assert_eq!(got.num_end_ports(), 8 * 4 + 2 + 1);
    assert_eq!(canon(&got, same), canon(&f, same));
}

#[test]
fn generated_pgft_survives_ibsim() {
    // 8 leaves x 4 nodes, 4 spines, 2 parallel cables between each leaf and spine.
    let f = generate_str("PGFT(2;4,8;1,4;1,2)", None).expect("generate");
    assert_eq!((f.num_switches(), f.num_end_ports(), f.count_links().0), (12, 32, 64));
    let got = round_trip_through_ibsim(&write(&f), "pgft", true);
    // The generator leaves speeds unknown; the writer writes them as 4xQDR.
    assert_eq!(canon(&got, same), canon(&f, |s| Some(s.unwrap_or("4xQDR").to_string())));
}

#[test]
fn ibsim_style_file_gets_the_guids_ibsim_assigns() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ibsim/ibsim-style.net");
    let f = read_file(&path).expect("parse").fabric;
    let text = std::fs::read_to_string(&path).expect("read");
    let got = round_trip_through_ibsim(&text, "style", false);
    // No speed trailers: ibsim runs every link at its default, 4xSDR.
    assert_eq!(canon(&got, same), canon(&f, |s| Some(s.unwrap_or("4xSDR").to_string())));
}

#[test]
fn real_dump_written_back_survives_ibsim() {
    let text = include_str!("data/real/loginoff-sx6036-fdr10-8sw.ibnet");
    let f = parse(text, "loginoff").expect("parse").fabric;
    let got = round_trip_through_ibsim(&write(&f), "loginoff", true);
    // ibsim does not emulate Mellanox FDR10; such links come up as QDR.
    let fdr10_as_qdr = |s: Option<&str>| {
        s.map(|s| {
            if s == "4xFDR10" {
                "4xQDR".to_string()
            } else {
                s.to_string()
            }
        })
    };
    assert_eq!(canon(&got, same), canon(&f, fdr10_as_qdr));
}
