//! `fabricctl analyze --engine dfsssp` (virtual layers, checked per layer) and
//! `--engine layered:K` (the Slim Fly paper's layered multipath routing) on a ring, where
//! shortest paths need exactly two layers.

mod common;

use common::{fabricctl, json, TempDir};
use fabric_topology::{FabricBuilder, NodeType};

/// A ring of `n` switches, one end port each, as an ibnetdiscover file.
fn ring_file(dir: &TempDir, n: u32) -> String {
    let mut b = FabricBuilder::new();
    let s: Vec<_> = (0..n)
        .map(|i| b.add_switch(0x100 + u64::from(i), format!("r{i}"), 8).unwrap())
        .collect();
    for i in 0..n as usize {
        b.connect_switches(s[i], 1, s[(i + 1) % n as usize], 2).unwrap();
    }
    for (i, &sw) in s.iter().enumerate() {
        let e = b
            .add_end_port(
                0x1000 + i as u64,
                0x2000 + i as u64,
                format!("n{i}"),
                1,
                1,
                NodeType::Compute,
            )
            .unwrap();
        b.connect_end_port(e, sw, 5).unwrap();
    }
    let path = dir.file("ring.net");
    std::fs::write(&path, fabric_topology::ibnet::write(&b.build())).unwrap();
    path
}

#[test]
fn dfsssp_reports_its_virtual_layers() {
    let dir = TempDir::new("vl-dfsssp");
    let f = ring_file(&dir, 6);
    let v = json(&["analyze", &f, "--engine", "dfsssp", "--rp", "10", "--json"]);
    assert_eq!(v["valid"], true, "{v}");
    assert_eq!(v["deadlock_free"], true, "{v}");
    let l = &v["vl_layers"];
    assert_eq!(l["needed"], 2, "{v}");
    assert_eq!(l["max"], 7, "8 data VLs, one kept for the escape LIDs: {v}");
    assert!(
        l["acyclic_per_layer"].as_array().unwrap().iter().all(|x| x == true),
        "{v}"
    );
    assert_eq!(l["sls"][1], 2, "the escape SL 1 is skipped: {v}");
    // Other engines keep the single-VL check and report no layers.
    let u = json(&["analyze", &f, "--engine", "updown", "--rp", "10", "--json"]);
    assert!(u["vl_layers"].is_null());
    // Two data VLs with LMC 1 leave one base layer: not enough.
    let out = fabricctl(&["analyze", &f, "--engine", "dfsssp", "--max-vls", "2", "--json"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs 2 virtual layers"), "{err}");
}

#[test]
fn layered_k_reports_layers_paths_and_vls() {
    let dir = TempDir::new("vl-layered");
    let f = ring_file(&dir, 7);
    let v = json(&["analyze", &f, "--engine", "layered:3", "--rp", "10", "--json"]);
    assert_eq!(v["layers"], 3, "{v}");
    assert_eq!(v["lmc_needed"], 2, "{v}");
    assert!(
        v["valid_per_layer"].as_array().unwrap().iter().all(|x| x == true),
        "{v}"
    );
    assert!(v["paths"]["mean_distinct"].as_f64().unwrap() > 1.0, "{v}");
    assert!(v["vl_layers"]["needed"].as_u64().unwrap() >= 2, "{v}");
    assert!(
        v["vl_layers"]["acyclic_per_layer"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x == true),
        "{v}"
    );
}
