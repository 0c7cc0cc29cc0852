//! Multicast forwarding tables, P_Key tables and M_Key under the real simulator: the probe
//! (`fabric-umad-probe --tables SEED`, under the umad2sim shim) brings the fabric up, writes MFT
//! and P_Key blocks through the driver and reads them back through it; the tests then read the
//! switches and ports with `ibroute -M` and `smpquery` and compare with what was written.
//!
//! Needs `ibsim` (Debian `ibsim-utils`) and `infiniband-diags`; CI installs them.

mod common;

use fabric_ibsim_harness::{parse_ibroute_mcast, parse_smpquery_fields, parse_smpquery_pkeys, Ibsim};
use fabric_topology::gen::generate_str;
use fabric_topology::ibnet::write;
use serde_json::Value;

use common::run_probe;

/// The members' P_Key (the probe's `tables::MEMBER_PKEY`).
const MEMBER_PKEY: u16 = 0x8001;

/// `ibroute -M` of every switch shows exactly the MLIDs and ports written (MLIDs written with
/// an empty mask are not shown).
fn check_mfts(sim: &Ibsim, out: &Value) {
    let mfts = out["tables"]["mfts"].as_object().expect("mfts");
    assert_eq!(mfts.len(), out["switch_paths"].as_object().expect("paths").len());
    for (guid, mlids) in mfts {
        let path = out["switch_paths"][guid].as_str().expect("path");
        let (ok, text) = sim.tool("ibroute", &["-M", "-D", path]);
        assert!(
            ok && text.contains(&guid[2..]),
            "ibroute -M {path} ({guid}) failed:\n{text}"
        );
        let shown = parse_ibroute_mcast(&text);
        let want: std::collections::BTreeMap<u64, Vec<u32>> = mlids
            .as_object()
            .expect("mlids")
            .iter()
            .map(|(m, ports)| {
                let m = u64::from_str_radix(&m[2..], 16).expect("mlid");
                let p: Vec<u32> = ports
                    .as_array()
                    .expect("ports")
                    .iter()
                    .map(|p| p.as_u64().expect("port") as u32)
                    .collect();
                (m, p)
            })
            .filter(|(_, p)| !p.is_empty())
            .collect();
        assert!(!want.is_empty(), "switch {guid}: the probe wrote no MLID");
        assert_eq!(shown, want, "switch {guid}: ibroute -M differs from what was written");
    }
}

/// `smpquery pkeys` shows the members' P_Key on the members only, the default partition on
/// every CA port, and the enforcement table on the switch ports cabled to members.
fn check_pkeys(sim: &Ibsim, out: &Value) {
    let members: Vec<&str> = out["tables"]["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| m.as_str().expect("guid"))
        .collect();
    let eps = out["end_port_lids"].as_object().expect("end ports");
    assert!(!members.is_empty() && members.len() < eps.len());
    for (guid, lids) in eps {
        let lid = lids[0].as_u64().expect("base LID").to_string();
        let (ok, text) = sim.tool("smpquery", &["pkeys", &lid]);
        assert!(ok, "smpquery pkeys {lid} ({guid}) failed:\n{text}");
        let keys = parse_smpquery_pkeys(&text);
        assert_eq!(keys.first(), Some(&0xffff), "{guid}: default partition lost:\n{text}");
        assert_eq!(
            keys.contains(&MEMBER_PKEY),
            members.contains(&guid.as_str()),
            "{guid}: P_Key {MEMBER_PKEY:#06x} on members only:\n{text}"
        );
    }
    let enforced = out["tables"]["enforced"].as_array().expect("enforced");
    assert!(!enforced.is_empty());
    for e in enforced {
        let (guid, port) = (e[0].as_str().expect("guid"), e[1].as_u64().expect("port").to_string());
        let path = out["switch_paths"][guid].as_str().expect("path");
        let (ok, text) = sim.tool("smpquery", &["-D", "pkeys", path, &port]);
        assert!(ok, "smpquery pkeys {path} {port} failed:\n{text}");
        assert_eq!(
            &parse_smpquery_pkeys(&text)[..2],
            &[0xffff, MEMBER_PKEY],
            "switch {guid} port {port}:\n{text}"
        );
    }
}

#[test]
fn mft_and_pkey_tables_read_back_with_ibroute_and_smpquery() {
    // Leaves of 16 ports: MFT positions 0 and 1 (port 16 is bit 0 of position 1).
    let f = generate_str("PGFT(2;8,4;1,8;1,1)", None).expect("generate");
    let sim = Ibsim::start_temp("tables", &write(&f), host_of(&f));
    let out = run_probe(&sim, &["--tables", "11"]);
    assert_eq!(out["failures"].as_u64(), Some(0), "{out}");
    assert!(out["tables"]["mft_blocks"].as_u64() > Some(0));
    check_mfts(&sim, &out);
    check_pkeys(&sim, &out);
}

/// The simulator node of the fabric's first end port (where the probe runs).
fn host_of(f: &fabric_topology::Fabric) -> String {
    format!("H-{:016x}", f.end_port(fabric_topology::EndPortId(0)).node_guid)
}

/// ibsim 0.10 keeps no M_Key: its PortInfo Set handler ignores the M_Key, protect bits and
/// lease fields (they read back 0, 0 and 4089) and it checks no SMP's M_Key, so a Set without
/// the key is obeyed. This test records that (if it starts failing, the simulator enforces
/// M_Key and this becomes the acceptance test: the unkeyed Set must then be refused), and that
/// the driver with protection configured still brings the fabric up and writes every table.
#[test]
fn ibsim_keeps_no_m_key_and_the_keyed_driver_still_manages() {
    let f = generate_str("PGFT(2;4,4;1,2;1,1)", None).expect("generate");
    let sim = Ibsim::start_temp("mkey", &write(&f), host_of(&f));
    let out = run_probe(
        &sim,
        &[
            "--tables",
            "5",
            "--m-key",
            "0x1234abcd",
            "--m-key-protect",
            "3",
            "--m-key-lease",
            "60",
        ],
    );
    assert_eq!(out["failures"].as_u64(), Some(0), "{out}");
    check_mfts(&sim, &out);
    check_pkeys(&sim, &out);
    // Every managed port: switch port 0 and every CA port, read with the key (-y) and shown
    // with -K: the simulator stored none of the protection the driver wrote.
    let mut shown = Vec::new();
    for path in out["switch_paths"].as_object().expect("paths").values() {
        let (ok, text) = sim.tool(
            "smpquery",
            &["-K", "-y", "0x1234abcd", "-D", "portinfo", path.as_str().unwrap(), "0"],
        );
        assert!(ok, "{text}");
        shown.push(parse_smpquery_fields(&text));
    }
    for lids in out["end_port_lids"].as_object().expect("end ports").values() {
        let lid = lids[0].as_u64().expect("LID").to_string();
        let (ok, text) = sim.tool("smpquery", &["-K", "-y", "0x1234abcd", "portinfo", &lid]);
        assert!(ok, "{text}");
        shown.push(parse_smpquery_fields(&text));
    }
    assert_eq!(shown.len(), f.num_switches() + f.num_end_ports());
    for f in &shown {
        assert_eq!(
            (f["Mkey"].as_str(), f["ProtectBits"].as_str()),
            ("0x0000000000000000", "0"),
            "ibsim now stores M_Key: turn this test into the M_Key acceptance test ({f:?})"
        );
    }
    // A Set without the key is obeyed: a switch's LID moved and moved back by a second
    // "manager" (ibportstate, no -y).
    let (guid, path) = out["switch_paths"]
        .as_object()
        .expect("paths")
        .iter()
        .next()
        .expect("a switch");
    let path = path.as_str().expect("path");
    let lid = out["switch_lids"][guid].as_u64().expect("LID");
    for to in [lid + 100, lid] {
        let (ok, text) = sim.tool("ibportstate", &["-D", path, "0", "lid", &to.to_string()]);
        assert!(
            ok && text.contains("After PortInfo set"),
            "unkeyed Set refused?\n{text}"
        );
        let (ok, text) = sim.tool("smpquery", &["-D", "portinfo", path, "0"]);
        assert!(ok, "{text}");
        assert_eq!(parse_smpquery_fields(&text)["Lid"], to.to_string(), "{text}");
    }
}
