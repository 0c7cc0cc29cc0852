//! Acceptance of the Subnet Administration (issue 14) under the real `ibsim` with the umad2sim
//! shim, on a PGFT fat-tree of 256 CAs and 24 switches (`support::SPEC`), LMC 1:
//!
//! * **OpenSM 3.3.23 baseline** (`opensm_answers_saquery_and_its_paths_follow_its_tables`):
//!   OpenSM master, `saquery` for NodeRecord, PortInfoRecord, SwitchInfoRecord, LinkRecord,
//!   LFTRecord, GUIDInfoRecord, SMInfoRecord, ServiceRecord, InformInfoRecord, MCMemberRecord
//!   groups and PathRecords (`--src-to-dst` base and escape LIDs, `--sgid-to-dgid`); every
//!   answer checked against the model and against the LFTs read back from the switches with
//!   `ibroute` (a PathRecord must be a path those tables deliver: an independent hop-by-hop
//!   walk), complete and after a cable is unlinked. Prints how long each command takes.
//! * **fabricd against OpenSM** (`fabricd_answers_saquery_like_opensm_complete_and_with_a_cable_removed`):
//!   the same commands on the same fabric file with fabricd (umad driver) as master; the
//!   answers equal OpenSM's field by field once LIDs are named by the GUID owning them (the LID
//!   plans differ) and routing-dependent fields are left to the walk (paths, LFT blocks).
//! * **Whole tables** through the project's own client `fabric-saquery` (user-space RMPP): the
//!   NodeRecord table has every node, the PathRecord table from one source a path to every
//!   reachable destination.
//! * **Registrations**: a ServiceRecord and an InformInfo subscription survive `kill -9` of
//!   fabricd and a restart on the same state directory; the subscriber gets the GID-out-of-
//!   service Report (trap 65) when another host's port goes down.
//! * **Malformed MADs**: bad attribute, bad component mask, truncated template, wrong method →
//!   an error status each, counted in the daemon's metrics; fabricd keeps answering and routing.
//!
//! Under the shim every `saquery` query is a GetTable and a multi-segment answer arrives as its
//! first segment only (`fabric_ibsim_harness::saquery`): single records and the first records
//! of a table are compared; whole tables go through `fabric-saquery`.
//!
//! The fabricd tests need the SA of issue 14 (records, paths, registry, the umad SA agent with
//! RMPP, the daemon wiring, `fabric-saquery`); they fail until those are merged.
//!
//! Needs `ibsim` (ibsim-utils), the umad2sim shim, `opensm` and infiniband-diags (`saquery`,
//! `ibroute`); a missing one fails the test with an installation hint.

mod common;
#[path = "umad_sa/mod.rs"]
mod support;
mod umad_sim;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{http_get, link_req, run_with_deadline, status, test_dir};
use fabric_ibsim_harness::saquery::{gid, opensm_version, parse_saquery, saquery, OpenSm};
use fabric_ibsim_harness::{find_tool, Ibsim, SHIM};
use fabric_sa::wire::{attr, status as sa_status, METHOD_GET, METHOD_GET_TABLE, METHOD_SET};
use fabric_topology::{EndPortId, Fabric, Guid};
use support::{
    attach, collect, differences, fabric, fabric_saquery, host, leaf_uplink, names_port, pairs, read_lfts, read_lids,
    sa_error_counters, spawn_fabric_saquery, tool_port, walk, Answers, PREFIX,
};
use umad_sim::{config, next_generation};

/// Fails the test (never skips it) when a tool or the shim is missing.
fn require_tools() {
    assert!(
        Path::new(SHIM).is_file(),
        "the umad2sim shim {SHIM} is not installed (apt-get install libumad2sim0 ibsim-utils)"
    );
    for t in ["ibsim", "opensm", "saquery", "ibroute"] {
        find_tool(t);
    }
    // Built (when stale) here, before any deadline runs: the first `fabric-saquery` run of a
    // test would otherwise include a nested `cargo build` of fabric-umad-probe, minutes on a
    // loaded machine after a change to fabric-sa or fabric-umad.
    support::fabric_saquery_binary();
}

/// The record kinds both managers must answer identically (after LID naming).
const COMPARED: &[&str] = &[
    "NodeRecord",
    "PortInfoRecord",
    "SwitchInfoRecord",
    "LinkRecord",
    "GUIDInfoRecord",
    "SMInfoRecord",
    "SR (-S)",
    "IIR (-I)",
    "PathRecord",
    "PathRecord by GID",
];

/// LIDs, tables read back and every `saquery` answer of the manager on `sm` (end port 0), from
/// the tool port, with the switch ports in `dead` unlinked.
fn answers(sim: &Ibsim, f: &Fabric, dead: &BTreeSet<(Guid, u8)>) -> Answers {
    let tool = tool_port(f);
    let th = host(f, tool);
    let lids = read_lids(sim, &th);
    let lfts = read_lfts(sim, &th, f, tool, dead);
    let sm = f.end_port(EndPortId(0)).port_guid;
    collect(sim, tool, f, &lids, &lfts, dead, sm, &pairs(f, 6))
}

/// The leaf uplink the tests unlink, both ends as (switch GUID, port).
fn unlinked(f: &Fabric) -> (String, BTreeSet<(Guid, u8)>) {
    let (leaf, p, spine, q) = leaf_uplink(f);
    let (lg, sg) = (f.switch(leaf).guid, f.switch(spine).guid);
    (
        format!("Unlink \"S-{lg:016x}\"[{p}]"),
        BTreeSet::from([(lg, p), (sg, q)]),
    )
}

/// OpenSM as master on end port 0 of a fresh simulator of `f`: its answers complete, then with
/// a leaf uplink unlinked.
fn opensm_answers(dir: &Path, f: &Fabric) -> (Answers, Answers) {
    let mut sim = Ibsim::start(dir, &fabric_topology::ibnet::write(f), host(f, EndPortId(0)));
    let mut osm = OpenSm::start(&sim, dir, sim.host(), &[("lmc", "1")]);
    let t0 = Instant::now();
    osm.wait_subnet_up(Duration::from_secs(30));
    eprintln!("{} up after {:?}", opensm_version(), t0.elapsed());
    let complete = answers(&sim, f, &BTreeSet::new());
    eprintln!("{}", complete.timing_table("OpenSM, complete fabric"));
    let (cmd, dead) = unlinked(f);
    let ups = osm.count_in_log("SUBNET UP");
    sim.console(&cmd);
    osm.wait_for_count("SUBNET UP", ups, Duration::from_secs(30));
    let degraded = answers(&sim, f, &dead);
    eprintln!("{}", degraded.timing_table("OpenSM, one cable unlinked"));
    (complete, degraded)
}

/// Waits until the SA on the simulator answers `saquery SMIR` (fabricd serves once its first
/// generation is installed).
fn wait_sa(sim: &Ibsim, host: &str, within: Duration) {
    let t0 = Instant::now();
    loop {
        let r = saquery(sim, host, &["SMIR"]);
        if r.ok && parse_saquery(&r.text).is_ok_and(|v| !v.is_empty()) {
            return;
        }
        assert!(
            t0.elapsed() < within,
            "the SA does not answer saquery SMIR within {within:?}:\n{}",
            r.text
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// fabricd (umad driver) on end port 0 of a fresh simulator of `f`, in `dir`, with `extra`
/// configuration.
fn start_fabricd(dir: &Path, f: &Fabric, extra: &str) -> (Ibsim, common::Daemon) {
    let sim = Ibsim::start(dir, &fabric_topology::ibnet::write(f), host(f, EndPortId(0)));
    let cfg = dir.join("fabricd.toml");
    std::fs::write(&cfg, config(extra)).expect("write config");
    let env = sim.env();
    let d = umad_sim::spawn_daemon(dir, &cfg, &env);
    (sim, d)
}

#[test]
fn opensm_answers_saquery_and_its_paths_follow_its_tables() {
    require_tools();
    let dir = test_dir("umad-sa-opensm");
    let f = fabric();
    let (complete, degraded) = opensm_answers(&dir, &f);
    for a in [&complete, &degraded] {
        assert_eq!(
            a.records["NodeRecord"].len(),
            f.num_switches().div_ceil(3) + f.num_end_ports().div_ceil(32)
        );
        assert_eq!(a.paths.len(), 12);
        // OpenSM creates the IPoIB broadcast group itself.
        assert_eq!(
            a.records["MCMR groups (-g)"].len(),
            1,
            "{:?}",
            a.records["MCMR groups (-g)"]
        );
    }
    // The unlinked cable: its LinkRecord is gone, its port is down, nothing else changed
    // in the records that do not depend on routing.
    let diff = differences(
        &complete,
        &degraded,
        &["NodeRecord", "SwitchInfoRecord", "GUIDInfoRecord"],
        10,
    );
    assert!(diff.is_empty(), "{diff:#?}");
    let (_, dead) = unlinked(&f);
    let (lg, p) = *dead
        .iter()
        .find(|(g, _)| *g == f.switch(attach(&f, EndPortId(0)).0).guid)
        .expect("leaf end");
    let key = format!("0x{lg:016x}/{p}");
    assert!(complete.records["LinkRecord"].contains_key(&key));
    assert!(!degraded.records["LinkRecord"].contains_key(&key));
}

#[test]
fn fabricd_answers_saquery_like_opensm_complete_and_with_a_cable_removed() {
    require_tools();
    let dir = test_dir("umad-sa-compare");
    let f = fabric();
    let (osm_complete, osm_degraded) = opensm_answers(&dir.join("opensm-run").tap_mkdir(), &f);
    let fd_dir = dir.join("fabricd-run").tap_mkdir();
    let (mut sim, d) = start_fabricd(&fd_dir, &f, "");
    let th = host(&f, tool_port(&f));
    run_with_deadline(100, async {
        let mut c = d.ready().await;
        let s = next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        wait_sa(&sim, &th, Duration::from_secs(20));
        let complete = answers(&sim, &f, &BTreeSet::new());
        eprintln!("{}", complete.timing_table("fabricd, complete fabric"));
        let diff = differences(&osm_complete, &complete, COMPARED, 40);
        assert!(
            diff.is_empty(),
            "fabricd and OpenSM differ (complete fabric):\n{diff:#?}"
        );

        let (cmd, dead) = unlinked(&f);
        sim.console(&cmd);
        next_generation(&d, &mut c, s.generation, Duration::from_secs(20)).await;
        let degraded = answers(&sim, &f, &dead);
        eprintln!("{}", degraded.timing_table("fabricd, one cable unlinked"));
        let diff = differences(&osm_degraded, &degraded, COMPARED, 40);
        assert!(
            diff.is_empty(),
            "fabricd and OpenSM differ (one cable unlinked):\n{diff:#?}"
        );
    });
}

/// `mkdir -p` returning the path.
trait TapMkdir {
    fn tap_mkdir(self) -> std::path::PathBuf;
}
impl TapMkdir for std::path::PathBuf {
    fn tap_mkdir(self) -> std::path::PathBuf {
        std::fs::create_dir_all(&self).unwrap_or_else(|e| panic!("create {}: {e}", self.display()));
        self
    }
}

/// Bytes `at..at+8` of a record image as a big-endian u64.
fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
/// Bytes `at..at+2` of a record image as a big-endian u16.
fn be16(b: &[u8], at: usize) -> u64 {
    u64::from(u16::from_be_bytes([b[at], b[at + 1]]))
}

#[test]
fn fabricd_whole_tables_through_fabric_saquery() {
    require_tools();
    let dir = test_dir("umad-sa-tables");
    let f = fabric();
    let (sim, d) = start_fabricd(&dir, &f, "");
    let tool = tool_port(&f);
    let th = host(&f, tool);
    run_with_deadline(100, async {
        let mut c = d.ready().await;
        next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        wait_sa(&sim, &th, Duration::from_secs(20));
        let lids = read_lids(&sim, &th);
        let lfts = read_lfts(&sim, &th, &f, tool, &BTreeSet::new());

        // NodeRecord table: one record per CA port and per switch (IBA 15.2.5.2: LID 0..2,
        // NodeInfo 4..44 with NodeGUID at +12 and PortGUID at +20, NodeDescription 44..108).
        let t0 = Instant::now();
        let nr = fabric_saquery(&sim, &th, &["nr"], Duration::from_secs(20));
        assert!(nr.ok, "fabric-saquery nr failed:\n{}\n{}", nr.stdout, nr.stderr);
        assert_eq!(nr.status(), 0);
        let records = nr.raw_records();
        let whole: Vec<&Vec<u8>> = records.iter().filter(|(_, w)| *w).map(|(r, _)| r).collect();
        eprintln!(
            "NodeRecord table: {} records ({} whole under the shim) in {:?}",
            records.len(),
            whole.len(),
            t0.elapsed()
        );
        let want: BTreeSet<Guid> = f
            .switches()
            .iter()
            .map(|s| s.guid)
            .chain(f.end_ports().iter().map(|e| e.port_guid))
            .collect();
        assert_eq!(records.len(), want.len(), "one NodeRecord per node port");
        // The shim loses 24 bytes of every MAD: about a third of the 112-byte records arrive
        // whole; each of those is a distinct node at its own LID.
        assert!(
            whole.len() * 5 >= want.len(),
            "only {} of {} records whole",
            whole.len(),
            want.len()
        );
        let mut seen = BTreeSet::new();
        for r in &whole {
            let port = be64(r, 24);
            assert!(want.contains(&port), "NodeRecord of unknown port 0x{port:016x}");
            assert!(seen.insert(port), "two NodeRecords of port 0x{port:016x}");
            assert_eq!(
                lids.owner.get(&be16(r, 0)),
                Some(&port),
                "NodeRecord LID of 0x{port:016x}"
            );
        }

        // PathRecord table from one source: a path to every destination LID, each delivered by
        // the installed tables (IBA 15.2.5.16: DLID 40..42, SLID 42..44).
        let src = f.end_port(tool).port_guid;
        let slid = lids.base(src);
        let t0 = Instant::now();
        let pr = fabric_saquery(&sim, &th, &["pr", "--slid", &slid.to_string()], Duration::from_secs(30));
        assert!(
            pr.ok,
            "fabric-saquery pr --slid {slid} failed:\n{}\n{}",
            pr.stdout, pr.stderr
        );
        assert_eq!(pr.status(), 0);
        let paths = pr.raw_records();
        eprintln!(
            "PathRecord table from LID {slid}: {} records in {:?}",
            paths.len(),
            t0.elapsed()
        );
        let mut reached = BTreeSet::new();
        for (p, _) in paths.iter().filter(|(_, whole)| *whole) {
            assert_eq!(be16(p, 42), slid, "a path from another source in the table from {slid}");
            let dlid = be16(p, 40);
            walk(&f, &lfts, &lids, &BTreeSet::new(), tool, dlid)
                .unwrap_or_else(|e| panic!("PathRecord {slid} -> {dlid} answered, the tables lose it: {e}"));
            assert!(reached.insert(dlid), "two PathRecords {slid} -> {dlid}");
        }
        // One path per reachable destination LID (the table's size), the whole ones among them;
        // the source's own LIDs included (a path from a port to itself is legit: OpenSM's
        // `pr_rcv_process_world` answers it too).
        let destinations = lids
            .owner
            .iter()
            .filter(|(l, _)| walk(&f, &lfts, &lids, &BTreeSet::new(), tool, **l).is_ok())
            .count();
        assert_eq!(
            paths.len(),
            destinations,
            "PathRecords from {slid}: one per reachable LID"
        );
        assert!(
            reached.len() * 3 >= destinations,
            "only {} whole PathRecords",
            reached.len()
        );
    });
}

#[test]
fn registrations_survive_kill9_and_a_gid_out_report_reaches_the_subscriber() {
    require_tools();
    let dir = test_dir("umad-sa-registry");
    let f = fabric();
    let (mut sim, d) = start_fabricd(&dir, &f, "");
    let tool = tool_port(&f);
    let th = host(&f, tool);
    let tg = f.end_port(tool).port_guid;
    // The subscriber: a process of its own on another CA of the tools' leaf (two processes
    // attached as one simulated node would share its QP1).
    let subscriber = EndPortId(tool.0 + 1);
    assert_eq!(attach(&f, subscriber).0, attach(&f, tool).0);
    let sub_host = host(&f, subscriber);
    let sg = f.end_port(subscriber).port_guid;
    // The victim: a CA on a third leaf.
    let victim = f
        .end_port_ids()
        .find(|&e| attach(&f, e).0 != attach(&f, tool).0 && attach(&f, e).0 != attach(&f, EndPortId(0)).0)
        .expect("a third leaf");
    let vg = f.end_port(victim).port_guid;
    const SERVICE_ID: u64 = 0x1000_0000_0000_0abc;
    let service_gid = gid(PREFIX, tg);
    run_with_deadline(120, async {
        let mut c = d.ready().await;
        next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        wait_sa(&sim, &th, Duration::from_secs(20));

        let reg = fabric_saquery(
            &sim,
            &th,
            &[
                "sr-register",
                "--id",
                &format!("0x{SERVICE_ID:016x}"),
                "--name",
                "umad-sa-accept",
                "--gid",
                &service_gid,
                "--lease",
                "3600",
            ],
            Duration::from_secs(10),
        );
        assert!(
            reg.ok && reg.status() == 0,
            "sr-register:\n{}\n{}",
            reg.stdout,
            reg.stderr
        );
        // The subscriber waits for Reports of trap 65 (GID out of service).
        let (mut sub, sub_out, sub_err) = spawn_fabric_saquery(
            &sim,
            &sub_host,
            &["subscribe", "--trap", "65", "--wait-report", "90"],
            "subscriber",
        );
        let t0 = Instant::now();
        loop {
            let iir = saquery(&sim, &th, &["-I"]);
            if iir.ok && names_port(&iir.text, sg) {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "no InformInfoRecord of subscriber 0x{sg:016x}:\n{}\nsubscriber: {}",
                iir.text,
                std::fs::read_to_string(&sub_err).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        // kill -9 and a restart on the same state directory.
        let mut d = d;
        d.kill9();
        let cfg = dir.join("fabricd.toml");
        let env = sim.env();
        let d2 = umad_sim::spawn_daemon(&dir, &cfg, &env);
        let mut c2 = d2.client().await;
        wait_sa(&sim, &th, Duration::from_secs(30));
        let sr = fabric_saquery(&sim, &th, &["sr"], Duration::from_secs(10));
        assert!(
            sr.ok && sr.status() == 0,
            "sr after restart:\n{}\n{}",
            sr.stdout,
            sr.stderr
        );
        // IBA 15.2.5.14: ServiceID 0..8, ServiceGID 8..24, ServiceName 48..112.
        let found = sr
            .delivered_records()
            .into_iter()
            .any(|r| r.len() >= 112 && be64(&r, 0) == SERVICE_ID && r[48..112].starts_with(b"umad-sa-accept"));
        assert!(found, "the ServiceRecord did not survive kill -9:\n{}", sr.stdout);
        let shown = saquery(&sim, &th, &["-S"]).real_records();
        assert!(
            shown
                .iter()
                .any(|r| r.num("ServiceID").ok() == Some(SERVICE_ID) && r.get("ServiceName") == Some("umad-sa-accept")),
            "saquery -S after restart: {shown:?}"
        );
        let iir = saquery(&sim, &th, &["-I"]);
        assert!(
            names_port(&iir.text, sg),
            "the subscription did not survive kill -9:\n{}",
            iir.text
        );

        // The victim's port goes down: its GID leaves service, the subscriber gets the Report.
        let s = status(&mut c2).await;
        let (leaf, port) = attach(&f, victim);
        sim.console(&format!("Unlink \"S-{:016x}\"[{port}]", f.switch(leaf).guid));
        let t0 = Instant::now();
        loop {
            let text = std::fs::read_to_string(&sub_out).unwrap_or_default();
            if names_port(&text, vg) {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "no Report naming 0x{vg:016x} within 30 s (daemon generation {}):\n{text}\nstderr:\n{}",
                s.generation,
                std::fs::read_to_string(&sub_err).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let _ = sub.kill();
        let _ = sub.wait();
    });
}

/// One malformed request sent with `fabric-saquery raw`: method, attribute, component mask, a
/// template of `data_len` zero bytes, and the statuses it may get.
struct Malformed {
    what: &'static str,
    method: u8,
    attr: u16,
    mask: u64,
    data_len: usize,
    /// Bytes of the MAD put on the wire when fewer than 256.
    mad_bytes: Option<usize>,
    expected: &'static [u16],
}

#[test]
fn malformed_sa_mads_get_error_statuses_are_counted_and_routing_goes_on() {
    require_tools();
    let dir = test_dir("umad-sa-malformed");
    let f = fabric();
    let port = common::free_port();
    let (sim, d) = start_fabricd(
        &dir,
        &f,
        &format!("[prometheus]\nlisten = \"127.0.0.1:{port}\"\n[fault_injection]\nenabled = true\n"),
    );
    let tool = tool_port(&f);
    let th = host(&f, tool);
    run_with_deadline(100, async {
        let mut c = d.ready().await;
        let s = next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        wait_sa(&sim, &th, Duration::from_secs(20));
        let (errors0, _) = sa_error_counters(&http_get(port, "/metrics"));
        let cases = [
            // An attribute the SA does not know.
            Malformed {
                what: "bad attribute",
                method: METHOD_GET_TABLE,
                attr: 0x7777,
                mask: 0,
                data_len: 0,
                mad_bytes: None,
                expected: &[sa_status::UNSUPPORTED_METHOD_ATTR],
            },
            // A NodeRecord mask bit beyond the record's components.
            Malformed {
                what: "bad component mask",
                method: METHOD_GET_TABLE,
                attr: attr::NODE_RECORD,
                mask: 1 << 40,
                data_len: 108,
                mad_bytes: None,
                expected: &[sa_status::REQ_INVALID],
            },
            // A PathRecord Get selecting SGID and DGID in a MAD cut after 20 bytes of template
            // (the GIDs are at 8..40). Under the shim the SA may get the MAD padded with zeros:
            // then the GIDs are zero (an invalid GID, or no record).
            Malformed {
                what: "truncated template",
                method: METHOD_GET,
                attr: attr::PATH_RECORD,
                mask: 0x0c,
                data_len: 20,
                mad_bytes: Some(56 + 20),
                expected: &[sa_status::REQ_INVALID, sa_status::INVALID_GID, sa_status::NO_RECORDS],
            },
            // Set on a read-only record.
            Malformed {
                what: "wrong method (Set NodeRecord)",
                method: METHOD_SET,
                attr: attr::NODE_RECORD,
                mask: 0,
                data_len: 108,
                mad_bytes: None,
                expected: &[sa_status::UNSUPPORTED_METHOD_ATTR],
            },
            // A method the class does not have.
            Malformed {
                what: "unknown method",
                method: 0x33,
                attr: attr::NODE_RECORD,
                mask: 0,
                data_len: 0,
                mad_bytes: None,
                expected: &[sa_status::UNSUPPORTED_METHOD, sa_status::UNSUPPORTED_METHOD_ATTR],
            },
        ];
        for m in &cases {
            let method = format!("0x{:02x}", m.method);
            let attribute = format!("0x{:04x}", m.attr);
            let mask = format!("0x{:016x}", m.mask);
            let data = "00".repeat(m.data_len);
            let mut args = vec!["raw", "--method", &method, "--attr", &attribute, "--mask", &mask];
            if m.data_len > 0 {
                args.extend(["--data", data.as_str()]);
            }
            let mad_bytes = m.mad_bytes.map(|n| n.to_string());
            if let Some(n) = &mad_bytes {
                args.extend(["--mad-bytes", n.as_str()]);
            }
            let r = fabric_saquery(&sim, &th, &args, Duration::from_secs(10));
            let st = r.status() as u16;
            assert!(
                m.expected.contains(&st),
                "{}: status 0x{st:04x}, expected one of {:04x?}:\n{}\n{}",
                m.what,
                m.expected,
                r.stdout,
                r.stderr
            );
        }
        // Counted.
        let t0 = Instant::now();
        loop {
            let (errors, _) = sa_error_counters(&http_get(port, "/metrics"));
            if errors >= errors0 + cases.len() as u64 {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "SA error answers counted {errors}, were {errors0} before {} malformed requests:\n{}",
                cases.len(),
                http_get(port, "/metrics")
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Still answering, still routing: a virtual link fault commits a new generation.
        let lids = read_lids(&sim, &th);
        let g0 = f.end_port(EndPortId(0)).port_guid;
        let nr = saquery(&sim, &th, &["NR", &lids.base(g0).to_string()]).real_records();
        assert_eq!(nr.len(), 1, "NodeRecord after the malformed MADs: {nr:?}");
        let (leaf, p, _, _) = leaf_uplink(&f);
        c.inject_fault(link_req(f.switch(leaf).guid, u32::from(p), false, false, true))
            .await
            .expect("inject a link fault after the malformed MADs");
        let s1 = next_generation(&d, &mut c, s.generation, Duration::from_secs(20)).await;
        assert!(s1.generation > s.generation);
    });
}

/// A fabricd pair (priority 12 master on end port 0, priority 5 standby on the last one): the
/// standby does not answer SA queries sent to its own LID while the master does; after
/// `kill -9` of the master the standby takes over and answers at once, from the first query.
#[test]
fn a_standby_fabricd_does_not_answer_sa_queries_and_answers_at_once_after_a_takeover() {
    require_tools();
    let dir = test_dir("umad-sa-standby");
    let f = fabric();
    let (a_ep, b_ep) = (EndPortId(0), EndPortId(f.end_ports().len() as u32 - 1));
    let th = host(&f, tool_port(&f));
    let sim = Ibsim::start(&dir, &fabric_topology::ibnet::write(&f), host(&f, a_ep));
    let (dir_a, dir_b) = (dir.join("a").tap_mkdir(), dir.join("b").tap_mkdir());
    for (d, prio) in [(&dir_a, 12), (&dir_b, 5)] {
        let cfg = config("").replace(
            "window = 16",
            &format!("window = 16\nsm_priority = {prio}\nsm_poll_interval_ms = 100\nsm_poll_retries = 3"),
        );
        std::fs::write(d.join("fabricd.toml"), cfg).expect("write config");
    }
    let host_b = host(&f, b_ep);
    let env_b: Vec<(&str, &str)> = sim
        .env()
        .into_iter()
        .map(|(k, v)| if k == "SIM_HOST" { (k, host_b.as_str()) } else { (k, v) })
        .collect();
    let mut a = umad_sim::spawn_daemon(&dir_a, &dir_a.join("fabricd.toml"), &sim.env());
    run_with_deadline(120, async {
        let mut ca = a.ready().await;
        next_generation(&a, &mut ca, 0, Duration::from_secs(30)).await;
        wait_sa(&sim, &th, Duration::from_secs(20));
        let b = umad_sim::spawn_daemon(&dir_b, &dir_b.join("fabricd.toml"), &env_b);
        let a_guid = f.end_port(a_ep).port_guid;
        let line = format!("standby: subnet manager 0x{a_guid:016x} (priority 12) is master");
        let t0 = Instant::now();
        while !b.log_text().contains(&line) {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "B did not stand by:\n{}",
                b.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let lids = read_lids(&sim, &th);
        let (lid_a, lid_b) = (lids.base(a_guid), lids.base(f.end_port(b_ep).port_guid));
        let smir = |sm_lid: u64| {
            let sm_lid = sm_lid.to_string();
            fabric_saquery(
                &sim,
                &th,
                &["--sm-lid", &sm_lid, "--timeout-ms", "300", "smir"],
                Duration::from_secs(20),
            )
        };
        let r = smir(lid_a);
        assert!(
            r.ok && r.status() == 0,
            "the master does not answer:\n{}\n{}",
            r.stdout,
            r.stderr
        );
        let r = smir(lid_b);
        assert!(!r.ok, "the standby answered an SA query:\n{}", r.stdout);
        assert!(!b.log_text().contains("generation committed"), "{}", b.log_text());

        drop(ca);
        a.kill9();
        let mut cb = b.ready().await;
        next_generation(&b, &mut cb, 0, Duration::from_secs(30)).await;
        assert!(b.log_text().contains("taking the subnet over"), "{}", b.log_text());
        // The first query after the takeover is answered, by the new master, at its own LID
        // (the clients' MasterSMLID now points there).
        let r = saquery(&sim, &th, &["SMIR"]);
        let records = parse_saquery(&r.text).unwrap_or_else(|e| panic!("saquery SMIR: {e}:\n{}", r.text));
        assert!(
            r.ok && !records.is_empty(),
            "saquery SMIR after the takeover:\n{}",
            r.text
        );
        let r = smir(lid_b);
        assert!(
            r.ok && r.status() == 0,
            "the new master does not answer:\n{}\n{}",
            r.stdout,
            r.stderr
        );
    });
}
