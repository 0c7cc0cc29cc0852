//! The `umad` driver against the real simulator: each test starts its own `ibsim` (unique
//! socket name, private directory, console on a pipe held open), runs `fabric-umad-probe`
//! under the umad2sim preload shim (discover → rank → LIDs → route → configure → LFT upload,
//! JSON on stdout), then checks the switches with `ibroute` / `ibtracert` / `smpquery` run under
//! the same simulator. Every wait has a deadline; the simulator is killed on drop.
//!
//! Needs `ibsim` (Debian `ibsim-utils`) and `infiniband-diags`; CI installs them, so a missing
//! tool fails the test.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fabric_ibsim_harness::{parse_ibroute, Ibsim, NET_2SW2PATH4HCA};
use fabric_topology::gen::generate_str;
use fabric_topology::ibnet::write;
use fabric_topology::{Fabric, Remote};
use serde_json::Value;

const PROBE: &str = env!("CARGO_BIN_EXE_fabric-umad-probe");

/// Starts the probe on `sim`; its stdout lines arrive on the returned channel.
fn probe(sim: &Ibsim, args: &[&str]) -> Probe {
    let mut child = sim
        .command(Path::new(PROBE))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn probe");
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().expect("stdout");
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let err = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx2.send(format!("stderr: {l}"));
        }
    });
    Probe { child, lines: rx }
}

struct Probe {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Probe {
    /// Next JSON line within `d` (stderr lines are collected into the panic message).
    fn next_json(&mut self, d: Duration) -> Value {
        let end = Instant::now() + d;
        let mut err = String::new();
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with("stderr: ") => err.push_str(&l),
                Ok(l) => return serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}")),
                Err(_) => panic!("probe printed nothing within {d:?}; stderr: {err}"),
            }
        }
    }
}

fn net_of(spec: &str) -> (Fabric, String) {
    let f = generate_str(spec, None).expect("generate");
    let t = write(&f);
    (f, t)
}

fn host_of(f: &Fabric) -> String {
    format!("H-{:016x}", f.end_port(fabric_topology::EndPortId(0)).node_guid)
}

/// `ibroute` of every switch shows exactly the LFT the probe wrote.
fn check_ibroute(sim: &Ibsim, out: &Value) {
    let lfts = out["lfts"].as_object().expect("lfts");
    let lids = out["switch_lids"].as_object().expect("switch_lids");
    assert!(!lfts.is_empty());
    for (guid, row) in lfts {
        let lid = lids[guid].as_u64().expect("lid");
        // By directed route: LID routing to a switch needs a route the engine may not provide on
        // a fabric that is not a fat-tree (the Debian example net).
        let path = out["switch_paths"][guid].as_str().expect("path");
        let (ok, text) = sim.tool("ibroute", &["-D", path]);
        assert!(ok, "ibroute {lid} failed:\n{text}");
        assert!(text.contains(&guid[2..]), "ibroute {lid} is not switch {guid}:\n{text}");
        let shown = parse_ibroute(&text);
        let want: BTreeMap<u64, u64> = row
            .as_array()
            .expect("row")
            .iter()
            .enumerate()
            .filter_map(|(l, p)| p.as_u64().filter(|&p| p != 255).map(|p| (l as u64, p)))
            .collect();
        assert_eq!(
            shown, want,
            "switch {guid} (LID {lid}): ibroute differs from what was written"
        );
    }
}

/// `ibtracert` from the SM's port to pseudo-random destinations, base and escape LIDs.
fn check_tracert(sim: &Ibsim, out: &Value, pairs: usize) {
    let eps = out["end_port_lids"].as_object().expect("end ports");
    let list: Vec<(String, u64, Option<u64>)> = eps
        .iter()
        .map(|(g, v)| (g.clone(), v[0].as_u64().expect("base"), v[1].as_u64()))
        .collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..pairs {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let a = &list[(x >> 33) as usize % list.len()];
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let b = &list[(x >> 33) as usize % list.len()];
        if a.0 == b.0 {
            continue;
        }
        for (sl, dl) in [(a.1, b.1), (a.2.unwrap_or(a.1), b.2.unwrap_or(b.1))] {
            let (ok, text) = sim.tool("ibtracert", &[&sl.to_string(), &dl.to_string()]);
            assert!(ok, "ibtracert {sl} {dl} failed:\n{text}");
            let dest_node = u64::from_str_radix(&b.0[2..], 16).expect("guid") - 1;
            assert!(
                text.lines().last().unwrap_or("").contains(&format!("{dest_node:016x}")),
                "ibtracert {sl} {dl} does not end at {}:\n{text}",
                b.0
            );
        }
    }
}

#[test]
fn generated_fat_tree_comes_up_and_switches_hold_the_written_lfts() {
    let (f, net) = net_of("PGFT(2;8,16;1,8;1,1)");
    let sim = Ibsim::start_temp("pgft", &net, host_of(&f));
    let mut p = probe(&sim, &[]);
    let out = p.next_json(Duration::from_secs(60));
    assert_eq!(out["switches"].as_u64(), Some(f.num_switches() as u64), "{out}");
    assert_eq!(out["end_ports"].as_u64(), Some(f.num_end_ports() as u64));
    assert_eq!(out["links"].as_u64(), Some(f.count_links().1 as u64));
    assert_eq!(out["failures"].as_u64(), Some(0));
    // The second upload of the same tables sends nothing.
    assert!(out["rewrite_ms"].as_f64().expect("ms") < out["lft_ms"].as_f64().expect("ms") + 1.0);
    eprintln!(
        "PGFT(2;8,16;1,8;1,1): discover {} ms, LIDs+activation {} ms, {} LFT blocks in {} ms, {} SMPs",
        out["discover_ms"], out["lids_ms"], out["blocks"], out["lft_ms"], out["smps"]
    );
    drop(p);
    check_ibroute(&sim, &out);
    check_tracert(&sim, &out, 12);
    let (ok, text) = sim.tool("smpquery", &["portinfo", &out["sm_lid"].to_string(), "1"]);
    assert!(ok && text.contains("LinkState:.......................Active"), "{text}");
    assert!(text.contains("LMC:.............................1"), "{text}");
}

#[test]
fn ibsim_example_net_comes_up() {
    let sim = Ibsim::start_temp("example", NET_2SW2PATH4HCA, "Hca1".to_string());
    let mut p = probe(&sim, &[]);
    let out = p.next_json(Duration::from_secs(30));
    assert_eq!(out["switches"].as_u64(), Some(2));
    assert_eq!(out["end_ports"].as_u64(), Some(4));
    assert_eq!(out["links"].as_u64(), Some(2));
    drop(p);
    check_ibroute(&sim, &out);
}

/// An inter-switch cable of the fabric (leaf GUID, leaf port).
fn some_uplink(f: &Fabric) -> (u64, u8) {
    for s in f.switches() {
        for (pn, p) in s.external_ports() {
            if let Remote::Switch { .. } = p.remote {
                return (s.guid, pn);
            }
        }
    }
    panic!("no inter-switch link");
}

#[test]
fn unlink_and_relink_are_detected_and_ports_reactivated() {
    let (f, net) = net_of("PGFT(2;4,4;1,2;1,1)");
    let mut sim = Ibsim::start_temp("link", &net, host_of(&f));
    let mut p = probe(&sim, &["--watch", "40", "--sweep-ms", "100"]);
    let out = p.next_json(Duration::from_secs(30));
    assert_eq!(out["failures"].as_u64(), Some(0), "{out}");
    let ready = p.next_json(Duration::from_secs(5));
    assert_eq!(ready["ready"], Value::Bool(true));
    let (sw, port) = some_uplink(&f);
    sim.console(&format!("Unlink \"S-{sw:016x}\"[{port}]"));
    let ev = p.next_json(Duration::from_secs(10));
    let s = ev["event"].as_str().expect("event").to_string();
    assert!(s.starts_with("link-down"), "{ev}");
    sim.console(&format!("ReLink \"S-{sw:016x}\"[{port}]"));
    let ev = p.next_json(Duration::from_secs(10));
    assert!(ev["event"].as_str().expect("event").starts_with("link-up"), "{ev}");
    // Give the activation a moment (it happens before the event is emitted).
    let lid = out["switch_lids"][format!("0x{sw:016x}")].as_u64().expect("lid");
    let (ok, text) = sim.tool("smpquery", &["portinfo", &lid.to_string(), &port.to_string()]);
    assert!(ok && text.contains("LinkState:.......................Active"), "{text}");
}

#[test]
fn error_injection_is_survived_through_retries() {
    let (f, net) = net_of("PGFT(2;4,4;1,2;1,1)");
    let mut sim = Ibsim::start_temp("err", &net, host_of(&f));
    // ibsim drops about one packet in 3 on the leaf port the SM's HCA is cabled to.
    let (leaf, leaf_port) = f.end_port(fabric_topology::EndPortId(0)).attach.expect("attached");
    let leaf_guid = f.switch(leaf).guid;
    sim.console(&format!("Error \"S-{leaf_guid:016x}\"[{leaf_port}] 3"));
    std::thread::sleep(Duration::from_millis(200));
    let mut p = probe(&sim, &["--retries", "20", "--timeout-ms", "50"]);
    let out = p.next_json(Duration::from_secs(60));
    assert_eq!(out["failures"].as_u64(), Some(0), "{out}");
    let retries = out["retries"].as_u64().expect("retries");
    eprintln!("error injection: {retries} retries over {} SMPs", out["smps"]);
    assert!(retries > 0, "{out}");
    drop(p);
    sim.console(&format!("Error \"S-{leaf_guid:016x}\"[{leaf_port}] 0"));
    check_ibroute(&sim, &out);
}
