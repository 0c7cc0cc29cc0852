//! Data VL plans under the real simulator (issue #19, "program SL-to-VL tables through the umad
//! driver"): the probe (`fabric-umad-probe --data-vls N`, under the umad2sim shim) brings the
//! fabric up and calls `SouthboundDriver::program_data_vls` with the identity plan of N VLs;
//! the tests read every switch's and CA's SLtoVLMappingTable back with `smpquery sl2vl`
//! (infiniband-diags) and the ports' OperationalVLs with `smpquery portinfo`.
//!
//! ibsim 0.10 reports VLCap = VL0-7 (8 data VLs) on every switch and CA port, and its
//! SLtoVLMappingTable starts as SL i → VL i (SL 15 → VL 7): the identity plan's SLs 4..15 (VL 0)
//! differ from it, so a table the driver did not write shows.
//!
//! Needs `ibsim` (Debian `ibsim-utils`) and `infiniband-diags`; CI installs them.

mod common;

use fabric_ibsim_harness::{parse_smpquery_fields, Ibsim};
use fabric_topology::gen::generate_str;
use fabric_topology::ibnet::write;
use fabric_topology::{fmt_guid, Fabric, Remote};

use common::run_probe;

const SPEC: &str = "PGFT(2;4,4;1,2;1,1)";

/// `smpquery sl2vl` rows (in port, out port, VL of SL 0..15) of the node at LID `lid` (a switch:
/// every input port towards output port `out`).
fn sl2vl(sim: &Ibsim, lid: u64, out: Option<u8>) -> Vec<(u8, u8, Vec<u8>)> {
    let mut args = vec!["sl2vl".to_string(), lid.to_string()];
    args.extend(out.map(|o| o.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, text) = sim.tool("smpquery", &args);
    assert!(ok, "smpquery {args:?} failed:\n{text}");
    // "ports: in  3, out 20: | 0| 1| 0| ..."
    let rows: Vec<(u8, u8, Vec<u8>)> = text
        .lines()
        .filter_map(|l| {
            let (inp, rest) = l.strip_prefix("ports: in")?.split_once(", out")?;
            let (o, rest) = rest.split_once(':')?;
            let vls = rest
                .split('|')
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(|v| v.parse().expect("VL"))
                .collect();
            Some((inp.trim().parse().ok()?, o.trim().parse().ok()?, vls))
        })
        .collect();
    assert!(!rows.is_empty(), "no table in:\n{text}");
    rows
}

/// The simulator node of the fabric's first end port (where the probe runs).
fn host_of(f: &Fabric) -> String {
    format!("H-{:016x}", f.end_port(fabric_topology::EndPortId(0)).node_guid)
}

/// `smpquery portinfo` field `name` of port `port` at LID `lid`.
fn port_field(sim: &Ibsim, lid: u64, port: u8, name: &str) -> String {
    let (ok, text) = sim.tool("smpquery", &["portinfo", &lid.to_string(), &port.to_string()]);
    assert!(ok, "smpquery portinfo {lid} {port} failed:\n{text}");
    parse_smpquery_fields(&text)
        .get(name)
        .cloned()
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

/// SL i on VL i for i < n, every other SL on VL 0 (`DataVlPlan::identity(n)`).
fn identity(n: u8) -> Vec<u8> {
    (0..16u8).map(|sl| if sl < n { sl } else { 0 }).collect()
}

#[test]
fn identity_plan_of_four_vls_reads_back_with_smpquery() {
    let f = generate_str(SPEC, None).expect("generate");
    let sim = Ibsim::start_temp("data-vls", &write(&f), host_of(&f));
    let out = run_probe(&sim, &["--data-vls", "4"]);
    assert_eq!(out["failures"].as_u64(), Some(0), "{out}");
    let dv = &out["data_vls"];
    assert_eq!(dv["ok"].as_bool(), Some(true), "{dv}");
    assert_eq!(dv["capacity"].as_u64(), Some(8), "ibsim: VLCap VL0-7 everywhere: {dv}");
    let want = identity(4);
    // Every CA port: one table; brought up with OperationalVLs = VLCap.
    let eps = out["end_port_lids"].as_object().expect("end ports");
    assert_eq!(eps.len(), f.num_end_ports());
    for e in f.end_ports() {
        let lid = eps[&fmt_guid(e.port_guid)][0].as_u64().expect("base LID");
        let rows = sl2vl(&sim, lid, None);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].2, want, "CA port {} SL-to-VL", fmt_guid(e.port_guid));
        assert_eq!(port_field(&sim, lid, e.port_num, "OperVLs"), "VL0-7");
    }
    // Every switch: every cabled input port towards every cabled output port.
    let lids = out["switch_lids"].as_object().expect("switch LIDs");
    let mut checked = 0;
    for s in f.switches() {
        let lid = lids[&fmt_guid(s.guid)].as_u64().expect("switch LID");
        let cabled: Vec<u8> = s
            .external_ports()
            .filter(|(_, p)| p.remote != Remote::None)
            .map(|(n, _)| n)
            .collect();
        for &o in &cabled {
            for (inp, got_out, vls) in sl2vl(&sim, lid, Some(o)) {
                assert_eq!(got_out, o);
                if inp != o && cabled.contains(&inp) {
                    assert_eq!(vls, want, "switch {} in {inp} out {o}", fmt_guid(s.guid));
                    checked += 1;
                }
            }
        }
        assert_eq!(port_field(&sim, lid, cabled[0], "OperVLs"), "VL0-7");
    }
    let pairs: usize = f
        .switches()
        .iter()
        .map(|s| {
            let n = s.external_ports().filter(|(_, p)| p.remote != Remote::None).count();
            n * (n - 1)
        })
        .sum();
    assert_eq!(checked, pairs, "every (input, output) pair of cabled ports was read");
}

#[test]
fn a_plan_beyond_vlcap_is_refused_naming_guid_and_port() {
    let f = generate_str(SPEC, None).expect("generate");
    let sim = Ibsim::start_temp("data-vls-9", &write(&f), host_of(&f));
    let out = run_probe(&sim, &["--data-vls", "9"]);
    let dv = &out["data_vls"];
    assert_eq!(dv["ok"].as_bool(), Some(false), "{dv}");
    assert_eq!(dv["capacity"].as_u64(), Some(8), "{dv}");
    let err = dv["error"].as_str().expect("error");
    let guid = dv["guid"].as_str().expect("GUID of the refusing port");
    let port = dv["port"].as_u64().expect("port of the refusing port");
    assert!(
        err.starts_with(&format!(
            "data VL plan refused: {guid} port {port}: the plan needs 9 data VLs"
        )),
        "{err}"
    );
    assert!(err.contains("operates 8 (VLCap VL0-7)"), "{err}");
    // The GUID is a node of the fabric.
    let known = f.switches().iter().any(|s| fmt_guid(s.guid) == guid)
        || f.end_ports().iter().any(|e| fmt_guid(e.port_guid) == guid);
    assert!(known, "{guid} is not in the fabric");
    // Nothing was written: the CAs keep the simulator's initial table (SL i → VL i).
    let eps = out["end_port_lids"].as_object().expect("end ports");
    let lid = eps.values().next().expect("an end port")[0].as_u64().expect("LID");
    let rows = sl2vl(&sim, lid, None);
    let initial: Vec<u8> = (0..15).chain([7]).collect();
    assert_eq!(rows[0].2, initial, "a refused plan writes no table");
}
