//! Port counters through the `umad` driver against the real simulator: each test starts its own
//! `ibsim`, runs `fabric-umad-probe --counters` under the umad2sim shim (discover, LIDs,
//! routes, then PerfMgt reads of every switch port and end port, again for every line written
//! to its stdin) and checks the readings against what ibsim was told (console `PerformanceSet`,
//! `Error`) and against `perfquery` run on another simulated host.
//!
//! Needs `ibsim` (Debian `ibsim-utils`) and `infiniband-diags`; CI installs them, so a missing
//! tool fails the test.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fabric_ibsim_harness::Ibsim;
use fabric_southbound::Counter;
use fabric_topology::gen::generate_str;
use fabric_topology::{fmt_guid, EndPortId, Fabric, Remote};
use serde_json::Value;

const PROBE: &str = env!("CARGO_BIN_EXE_fabric-umad-probe");

/// The probe with `--counters`: its stdout lines on a channel, its stdin to ask for readings.
struct Probe {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Probe {
    fn start(sim: &Ibsim, args: &[&str]) -> Probe {
        let mut child = sim
            .command(Path::new(PROBE))
            .arg("--counters")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn probe");
        let (tx, lines) = mpsc::channel();
        for (tag, s) in [
            (
                "",
                Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
            ),
            ("stderr: ", Box::new(child.stderr.take().expect("stderr"))),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for l in BufReader::new(s).lines().map_while(Result::ok) {
                    let _ = tx.send(format!("{tag}{l}"));
                }
            });
        }
        let stdin = child.stdin.take().expect("stdin");
        Probe { child, stdin, lines }
    }

    /// Next JSON line within `d` (stderr lines go into the panic message).
    fn next_json(&mut self, d: Duration) -> Value {
        let end = Instant::now() + d;
        let mut err = String::new();
        loop {
            match self.lines.recv_timeout(end.saturating_duration_since(Instant::now())) {
                Ok(l) if l.starts_with("stderr: ") => err.push_str(&format!("{l}\n")),
                Ok(l) => return serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}")),
                Err(_) => panic!("probe printed nothing within {d:?}; stderr:\n{err}"),
            }
        }
    }

    /// A fresh reading of every port.
    fn read(&mut self) -> Reading {
        writeln!(self.stdin, "read").expect("write to the probe");
        Reading(self.next_json(Duration::from_secs(30)))
    }
}

/// One `--counters` line.
struct Reading(Value);

impl Reading {
    fn port(&self, key: &str) -> &serde_json::Map<String, Value> {
        self.0["counters"][key]
            .as_object()
            .unwrap_or_else(|| panic!("no counters for {key}: errors {}", self.0["errors"]))
    }
    fn get(&self, key: &str, c: Counter) -> u64 {
        self.port(key)[c.name()].as_u64().expect("counter value")
    }
    fn error_total(&self, key: &str) -> u64 {
        Counter::ERRORS.iter().map(|&c| self.get(key, c)).sum()
    }
    fn keys(&self) -> Vec<String> {
        self.0["counters"]
            .as_object()
            .expect("counters")
            .keys()
            .cloned()
            .collect()
    }
    fn errors(&self) -> &serde_json::Map<String, Value> {
        self.0["errors"].as_object().expect("errors")
    }
}

/// `perfquery`'s name of each counter.
const PERFQUERY_NAMES: [(Counter, &str); 17] = [
    (Counter::SymbolErrors, "SymbolErrorCounter"),
    (Counter::LinkErrorRecovery, "LinkErrorRecoveryCounter"),
    (Counter::LinkDowned, "LinkDownedCounter"),
    (Counter::RcvErrors, "PortRcvErrors"),
    (Counter::RcvRemotePhysicalErrors, "PortRcvRemotePhysicalErrors"),
    (Counter::RcvSwitchRelayErrors, "PortRcvSwitchRelayErrors"),
    (Counter::XmitDiscards, "PortXmitDiscards"),
    (Counter::XmitConstraintErrors, "PortXmitConstraintErrors"),
    (Counter::RcvConstraintErrors, "PortRcvConstraintErrors"),
    (Counter::LocalLinkIntegrityErrors, "LocalLinkIntegrityErrors"),
    (Counter::ExcessiveBufferOverrunErrors, "ExcessiveBufferOverrunErrors"),
    (Counter::Vl15Dropped, "VL15Dropped"),
    (Counter::XmitWait, "PortXmitWait"),
    (Counter::XmitData, "PortXmitData"),
    (Counter::RcvData, "PortRcvData"),
    (Counter::XmitPackets, "PortXmitPkts"),
    (Counter::RcvPackets, "PortRcvPkts"),
];

const FABRIC: &str = "PGFT(2;4,4;1,2;1,1)";

fn fabric() -> (Fabric, String) {
    let f = generate_str(FABRIC, None).expect("generate");
    let t = fabric_topology::ibnet::write(&f);
    (f, t)
}

/// ibsim node id of a switch or a CA of a generated net.
fn switch_node(g: u64) -> String {
    format!("S-{g:016x}")
}
fn host_node(f: &Fabric, e: u32) -> String {
    format!("H-{:016x}", f.end_port(EndPortId(e)).node_guid)
}

/// The port key of the probe's JSON for a switch port.
fn key(switch: u64, port: u8) -> String {
    format!("{}[{port}]", fmt_guid(switch))
}

/// The first uplink of the leaf the manager's CA (end port 0) is cabled to: (spine GUID, spine
/// port). Every packet from the manager to that spine enters it there.
fn spine_port_facing_the_manager(f: &Fabric) -> (u64, u8) {
    let (leaf, _) = f.end_port(EndPortId(0)).attach.expect("attached");
    f.switch(leaf)
        .external_ports()
        .find_map(|(_, p)| match p.remote {
            Remote::Switch { sw, port } => Some((f.switch(sw).guid, port)),
            _ => None,
        })
        .expect("an uplink")
}

/// A host on another leaf than the manager's (perfquery runs there).
fn other_host(f: &Fabric) -> String {
    let (leaf, _) = f.end_port(EndPortId(0)).attach.expect("attached");
    let e = (0..f.num_end_ports() as u32)
        .find(|&e| f.end_port(EndPortId(e)).attach.is_some_and(|(l, _)| l != leaf))
        .expect("a host on another leaf");
    host_node(f, e)
}

fn switch_lid(out: &Value, g: u64) -> u16 {
    out["switch_lids"][fmt_guid(g)].as_u64().expect("switch LID") as u16
}

#[test]
fn every_port_is_read_and_each_field_matches_perfquery() {
    let (f, net) = fabric();
    let mut sim = Ibsim::start_temp("counters", &net, host_node(&f, 0));
    let mut p = Probe::start(&sim, &[]);
    let out = p.next_json(Duration::from_secs(60));
    assert_eq!(out["failures"].as_u64(), Some(0), "{out}");
    let first = Reading(p.next_json(Duration::from_secs(30)));
    assert!(first.errors().is_empty(), "unread ports: {}", first.0["errors"]);
    let mut want: Vec<String> = f
        .switches()
        .iter()
        .flat_map(|s| s.external_ports().map(move |(pn, _)| key(s.guid, pn)))
        .collect();
    want.extend(f.end_ports().iter().map(|e| fmt_guid(e.port_guid)));
    want.sort();
    assert_eq!(first.keys(), want, "every switch port and end port, once");
    // Traffic flowed: the manager's port and its leaf port counted the sweep's MADs.
    let sm = fmt_guid(f.end_port(EndPortId(0)).port_guid);
    assert!(first.get(&sm, Counter::XmitPackets) > 0 && first.get(&sm, Counter::RcvData) > 0);
    eprintln!(
        "{} ports read in {:.1} ms ({} PerfMgt MADs)",
        want.len(),
        first.0["ms"].as_f64().unwrap_or(0.0),
        first.0["perf_sent"]
    );

    // Every error counter (and XmitWait) of one switch port set through the simulator's PMA,
    // values above a field's width saturated by ibsim.
    let (spine, port) = spine_port_facing_the_manager(&f);
    let set: [(Counter, u64, u64); 13] = [
        (Counter::SymbolErrors, 70_000, 0xffff),
        (Counter::LinkErrorRecovery, 7, 7),
        (Counter::LinkDowned, 300, 0xff),
        (Counter::RcvErrors, 11, 11),
        (Counter::RcvRemotePhysicalErrors, 1000, 1000),
        (Counter::RcvSwitchRelayErrors, 2000, 2000),
        (Counter::XmitDiscards, 13, 13),
        (Counter::XmitConstraintErrors, 14, 14),
        (Counter::RcvConstraintErrors, 15, 15),
        (Counter::LocalLinkIntegrityErrors, 20, 0xf),
        (Counter::ExcessiveBufferOverrunErrors, 9, 9),
        (Counter::Vl15Dropped, 17, 17),
        (Counter::XmitWait, 12_345, 12_345),
    ];
    let names: BTreeMap<Counter, &str> = PERFQUERY_NAMES.into_iter().collect();
    for (c, v, _) in set {
        sim.set_port_counter(&switch_node(spine), port, names[&c], v);
    }
    let r = p.read();
    let pq = sim.perfquery(&other_host(&f), switch_lid(&out, spine), port, false);
    let pqx = sim.perfquery(&other_host(&f), switch_lid(&out, spine), port, true);
    let k = key(spine, port);
    for (c, v, want) in set {
        assert_eq!(r.get(&k, c), want, "{c:?} set to {v} on {k}");
        assert_eq!(pq[names[&c]], want, "perfquery {} of {k}", names[&c]);
    }
    // Data and packet counters: the 64-bit extended ones (ibsim's PMA advertises them), read
    // before perfquery's, which the traffic since can only have raised.
    for c in [
        Counter::XmitData,
        Counter::RcvData,
        Counter::XmitPackets,
        Counter::RcvPackets,
    ] {
        let (ours, theirs) = (r.get(&k, c), pqx[names[&c]]);
        assert!(
            ours > 0 && ours <= theirs,
            "{c:?} of {k}: driver {ours}, perfquery -x {theirs}"
        );
    }
    // An end port the same way (its own LID and port number).
    let e = f.end_port(EndPortId(1));
    let lid = out["end_port_lids"][fmt_guid(e.port_guid)][0].as_u64().expect("LID") as u16;
    sim.set_port_counter(&host_node(&f, 1), e.port_num, "PortXmitDiscards", 321);
    let r = p.read();
    let pq = sim.perfquery(&other_host(&f), lid, e.port_num, false);
    assert_eq!(r.get(&fmt_guid(e.port_guid), Counter::XmitDiscards), 321);
    assert_eq!(pq["PortXmitDiscards"], 321);
    assert!(r.errors().is_empty(), "{}", r.0["errors"]);
}

#[test]
fn error_injection_raises_the_receive_errors_of_that_port_only() {
    let (f, net) = fabric();
    let mut sim = Ibsim::start_temp("counters-err", &net, host_node(&f, 0));
    // Light sweeps every 100 ms carry SMPs into the spine; retries ride out the drops.
    let mut p = Probe::start(&sim, &["--sweep-ms", "100", "--retries", "10", "--timeout-ms", "50"]);
    let out = p.next_json(Duration::from_secs(60));
    assert_eq!(out["failures"].as_u64(), Some(0), "{out}");
    let _ = p.next_json(Duration::from_secs(30));
    let before = p.read();
    assert!(before.errors().is_empty(), "{}", before.0["errors"]);
    let (spine, port) = spine_port_facing_the_manager(&f);
    let k = key(spine, port);
    sim.set_error_rate(&switch_node(spine), port, 30);
    std::thread::sleep(Duration::from_millis(1500));
    let during = p.read();
    sim.set_error_rate(&switch_node(spine), port, 0);
    let after = p.read();
    for r in [&during, &after] {
        assert!(r.errors().is_empty(), "a port went unread: {}", r.0["errors"]);
    }
    let rose = after.get(&k, Counter::RcvErrors) - before.get(&k, Counter::RcvErrors);
    assert!(rose > 0, "PortRcvErrors of {k} did not rise");
    assert!(during.get(&k, Counter::RcvErrors) <= after.get(&k, Counter::RcvErrors));
    // Only there, and only that counter.
    assert_eq!(
        after.error_total(&k) - before.error_total(&k),
        rose,
        "{k}: another error counter rose"
    );
    for other in before.keys().into_iter().filter(|o| *o != k) {
        assert_eq!(
            after.error_total(&other),
            before.error_total(&other),
            "error counters of {other} changed"
        );
    }
    // perfquery reads the same count once the injection stopped.
    let pq = sim.perfquery(&other_host(&f), switch_lid(&out, spine), port, false);
    assert_eq!(
        pq["PortRcvErrors"],
        after.get(&k, Counter::RcvErrors),
        "perfquery of {k}"
    );
    eprintln!(
        "Error \"{}\"[{port}] 30 for 1.5 s: PortRcvErrors +{rose}; {} PerfMgt MADs, {} re-sent",
        switch_node(spine),
        after.0["perf_sent"],
        after.0["perf_retries"]
    );
}

#[test]
fn a_removed_cable_raises_the_transmit_discards_where_routed_mads_meet_it() {
    let (f, net) = fabric();
    let mut sim = Ibsim::start_temp("counters-unlink", &net, host_node(&f, 0));
    let mut p = Probe::start(&sim, &["--sweep-ms", "100"]);
    let out = p.next_json(Duration::from_secs(60));
    assert_eq!(out["failures"].as_u64(), Some(0), "{out}");
    let _ = p.next_json(Duration::from_secs(30));
    let before = p.read();
    // The manager's leaf side of its first uplink: the PerfMgt MADs to that spine's LID leave
    // there (the probe does not reroute), and ibsim discards them once the cable is gone.
    let (leaf, _) = f.end_port(EndPortId(0)).attach.expect("attached");
    let (up, spine) = f
        .switch(leaf)
        .external_ports()
        .find_map(|(pn, p)| match p.remote {
            Remote::Switch { sw, .. } => Some((pn, sw)),
            _ => None,
        })
        .expect("an uplink");
    let leaf_guid = f.switch(leaf).guid;
    sim.console_checked(&format!("Unlink \"{}\"[{up}]", switch_node(leaf_guid)));
    std::thread::sleep(Duration::from_millis(500));
    let after = p.read();
    let k = key(leaf_guid, up);
    let rose = after.get(&k, Counter::XmitDiscards) - before.get(&k, Counter::XmitDiscards);
    assert!(rose > 0, "PortXmitDiscards of {k} did not rise");
    assert_eq!(
        after.error_total(&k) - before.error_total(&k),
        rose,
        "{k}: only PortXmitDiscards"
    );
    assert_eq!(
        after.get(&k, Counter::LinkDowned),
        before.get(&k, Counter::LinkDowned),
        "ibsim does not count LinkDowned on Unlink"
    );
    // The LFTs still send some LIDs over the missing cable (the probe does not reroute): those
    // ports, the spine's among them, are reported unread one by one; the rest is read.
    let spine_key = key(f.switch(spine).guid, 1);
    assert!(after.errors().contains_key(&spine_key), "{}", after.0["errors"]);
    assert!(after.keys().len() + after.errors().len() == before.keys().len());
    eprintln!(
        "Unlink \"{}\"[{up}]: PortXmitDiscards +{rose}; unread ports: {}",
        switch_node(leaf_guid),
        after.errors().len()
    );
}
