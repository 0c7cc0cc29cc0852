//! `fabric-saquery` against a real SA: OpenSM 3.3.23 as master of a simulated fat-tree (ibsim,
//! umad2sim shim), queried from another CA by `fabric-saquery` and by infiniband-diags'
//! `saquery`, whose answers must agree field by field:
//!
//! * `fabric-saquery nr <lid>` = `saquery NR <lid>` (every NodeRecord field), switches and CAs;
//! * `fabric-saquery pr --slid A --dlid B` = `saquery --src-to-dst A:B` (every PathRecord field),
//!   and `fabric-saquery mpr --sgid G --dgid H` (GetMulti) = `saquery --sgid-to-dgid G-H`;
//! * a one-record GetTable from OpenSM (SMInfoRecord table, PathRecord by LIDs) is read as an
//!   RMPP answer: under the shim OpenSM's GetTableResp arrives without its kernel-made segment
//!   header (RMPP ACTIVE only, see `fabric_umad::client`), and the client returns its records;
//! * ServiceRecord Set / GetTable / Delete and InformInfo Set are answered with status 0;
//! * a multi-segment RMPP table (from `fabric-saquery serve-table`, a test SA sending as the
//!   kernel does) is reassembled through the simulator, ACKs going back to the SA's LID.
//!
//! Each test starts its own ibsim and OpenSM; the tools attach to a CA of another leaf. Needs
//! `ibsim`, the umad2sim shim, `opensm` and `saquery`; a missing one fails the test.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fabric_ibsim_harness::saquery::OpenSm;
use fabric_ibsim_harness::{find_tool, wait_with_deadline, Ibsim, TempDir, SHIM};
use fabric_topology::{EndPortId, Fabric};
use serde_json::Value;

const SAQUERY: &str = env!("CARGO_BIN_EXE_fabric-saquery");
const SPEC: &str = "PGFT(2;4,4;1,2;1,1)";

/// OpenSM's LIDs (its `guid2lid` cache): port GUID → base LID.
fn opensm_lids(osm: &OpenSm) -> BTreeMap<u64, u16> {
    let cache = osm.dir().join("guid2lid");
    let t0 = Instant::now();
    while !cache.is_file() {
        assert!(t0.elapsed() < Duration::from_secs(10), "OpenSM wrote no guid2lid");
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = std::fs::read_to_string(&cache).expect("guid2lid");
    fabric_routing::Guid2Lid::parse(&text, "opensm guid2lid")
        .expect("parse OpenSM's guid2lid")
        .iter()
        .map(|(g, min, _)| (g, u16::try_from(min).expect("LID fits 16 bits")))
        .collect()
}

struct Setup {
    f: Fabric,
    sim: Ibsim,
    osm: OpenSm,
    /// The node the tools attach to.
    tool_host: String,
    _dir: TempDir,
}

fn setup(tag: &str) -> Setup {
    assert!(Path::new(SHIM).is_file(), "the umad2sim shim {SHIM} is not installed");
    for t in ["ibsim", "opensm", "saquery"] {
        find_tool(t);
    }
    let dir = TempDir::new(tag);
    let f = fabric_topology::gen::generate_str(SPEC, None).expect("generate");
    let host = |e: u32| format!("H-{:016x}", f.end_port(EndPortId(e)).node_guid);
    let last = f.end_ports().len() as u32 - 1;
    let sim = Ibsim::start(dir.path(), &fabric_topology::ibnet::write(&f), host(last));
    let mut osm = OpenSm::start(&sim, dir.path(), &host(0), &[]);
    osm.wait_subnet_up(Duration::from_secs(30));
    Setup {
        tool_host: host(last),
        f,
        sim,
        osm,
        _dir: dir,
    }
}

impl Setup {
    /// `fabric-saquery args` on the tool host: its one JSON document.
    fn fsq(&self, args: &[&str]) -> Value {
        let out = self.sim.dir().join(format!("fsq-{}.out", std::process::id()));
        let file = std::fs::File::create(&out).expect("create output");
        let err = file.try_clone().expect("dup");
        let mut c = self
            .sim
            .command(Path::new(SAQUERY))
            .args(args)
            .env("SIM_HOST", &self.tool_host)
            .stdout(file)
            .stderr(err)
            .spawn()
            .expect("spawn fabric-saquery");
        let ok = wait_with_deadline(&mut c, Duration::from_secs(20), &format!("fabric-saquery {args:?}")).success();
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        assert!(ok, "fabric-saquery {args:?} failed:\n{text}");
        let line = text
            .lines()
            .find(|l| l.starts_with('{'))
            .unwrap_or_else(|| panic!("no JSON:\n{text}"));
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// `fabric-saquery args` that must fail: its stderr.
    fn fsq_fails(&self, args: &[&str]) -> String {
        let out = self
            .sim
            .command(Path::new(SAQUERY))
            .args(args)
            .env("SIM_HOST", &self.tool_host)
            .env("RUST_BACKTRACE", "0")
            .output()
            .expect("run fabric-saquery");
        assert!(!out.status.success(), "fabric-saquery {args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).to_string()
    }

    /// `saquery args` on the tool host: the `name....value` lines of its first record dump.
    fn saquery(&self, args: &[&str]) -> BTreeMap<String, String> {
        let (ok, text) = self.sim.tool_on(&self.tool_host, "saquery", args);
        assert!(ok, "saquery {args:?} failed:\n{text}");
        let mut m = BTreeMap::new();
        for l in text.lines().skip_while(|l| !l.contains("dump:")).skip(1) {
            if l.contains("dump:") {
                break;
            }
            let t = l.trim();
            if let Some(i) = t.find("..") {
                let name = t[..i].to_string();
                let value = t[i..].trim_start_matches('.').trim().to_string();
                m.insert(name, value);
            }
        }
        assert!(!m.is_empty(), "saquery {args:?} printed no record:\n{text}");
        m
    }
}

fn bytes(v: &Value, i: usize) -> Vec<u8> {
    let h = v["raw_records_hex"][i]
        .as_str()
        .unwrap_or_else(|| panic!("no record {i}: {v}"));
    (0..h.len())
        .step_by(2)
        .map(|k| u8::from_str_radix(&h[k..k + 2], 16).expect("hex"))
        .collect()
}

fn be(b: &[u8]) -> u64 {
    b.iter().fold(0, |a, &x| (a << 8) | u64::from(x))
}

/// A number as `saquery` prints it (decimal or `0x` hex, either case).
fn num(s: &str) -> u64 {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap_or_else(|_| panic!("{s:?} is not hex")),
        None => s.parse().unwrap_or_else(|_| panic!("{s:?} is not a number")),
    }
}

/// The NodeRecord image (LID @0, NodeInfo @4, NodeDescription @44) as `saquery` names its
/// fields.
fn node_record_fields(r: &[u8]) -> BTreeMap<String, String> {
    let node_type = match r[6] {
        1 => "Channel Adapter".to_string(),
        2 => "Switch".to_string(),
        3 => "Router".to_string(),
        t => format!("{t}"),
    };
    let desc = String::from_utf8_lossy(&r[44..108]).trim_end_matches('\0').to_string();
    let n = |a: usize, b: usize| be(&r[a..b]).to_string();
    [
        ("lid", n(0, 2)),
        ("reserved", n(2, 4)),
        ("base_version", n(4, 5)),
        ("class_version", n(5, 6)),
        ("node_type", node_type),
        ("num_ports", n(7, 8)),
        ("sys_guid", n(8, 16)),
        ("node_guid", n(16, 24)),
        ("port_guid", n(24, 32)),
        ("partition_cap", n(32, 34)),
        ("device_id", n(34, 36)),
        ("revision", n(36, 40)),
        ("port_num", n(40, 41)),
        ("vendor_id", n(41, 44)),
        ("NodeDescription", desc),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The PathRecord image (IBA 15.2.5.16) as `saquery` names its fields.
fn path_record_fields(r: &[u8]) -> BTreeMap<String, String> {
    let gid = |a: usize| {
        let o: [u8; 16] = r[a..a + 16].try_into().expect("16 bytes");
        std::net::Ipv6Addr::from(o).to_string()
    };
    let n = |a: usize, b: usize| be(&r[a..b]).to_string();
    let qos_sl = be(&r[52..54]);
    [
        ("service_id", n(0, 8)),
        ("dgid", gid(8)),
        ("sgid", gid(24)),
        ("dlid", n(40, 42)),
        ("slid", n(42, 44)),
        ("hop_flow_raw", n(44, 48)),
        ("tclass", n(48, 49)),
        ("num_path_revers", n(49, 50)),
        ("pkey", n(50, 52)),
        ("qos_class", (qos_sl >> 4).to_string()),
        ("sl", (qos_sl & 0xf).to_string()),
        ("mtu", n(54, 55)),
        ("rate", n(55, 56)),
        ("pkt_life", n(56, 57)),
        ("preference", n(57, 58)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Compares our decode with `saquery`'s dump: numbers numerically, text as text.
fn assert_same(what: &str, ours: &BTreeMap<String, String>, theirs: &BTreeMap<String, String>) {
    for (k, v) in ours {
        let t = theirs
            .get(k)
            .unwrap_or_else(|| panic!("{what}: saquery printed no {k:?}: {theirs:?}"));
        let same = match (
            v.parse::<u64>(),
            t.starts_with("0x") || t.chars().all(|c| c.is_ascii_digit()),
        ) {
            (Ok(n), true) => n == num(t),
            _ => v == t,
        };
        assert!(same, "{what}: {k}: fabric-saquery {v:?}, saquery {t:?}");
    }
}

/// The decoded PathRecord (`records[0]`) against `saquery`'s dump of the same path.
fn assert_decoded_path(v: &Value, theirs: &BTreeMap<String, String>) {
    let rec = &v["records"][0];
    let field = |k: &str| rec[k].as_u64().unwrap_or_else(|| panic!("decoded {k}: {v}"));
    for k in [
        "service_id",
        "dlid",
        "slid",
        "tclass",
        "pkey",
        "qos_class",
        "sl",
        "preference",
    ] {
        assert_eq!(field(k), num(&theirs[k]), "decoded PathRecord {k}: {v}");
    }
    // saquery prints MTU, rate and packet lifetime as their whole byte (selector in the top
    // two bits).
    for k in ["mtu", "rate", "pkt_life"] {
        let byte = field(&format!("{k}_selector")) << 6 | field(k);
        assert_eq!(byte, num(&theirs[k]), "decoded PathRecord {k} and its selector: {v}");
    }
    for k in ["dgid", "sgid"] {
        let d: std::net::Ipv6Addr = rec[k]
            .as_str()
            .and_then(|g| g.parse().ok())
            .unwrap_or_else(|| panic!("decoded {k}: {v}"));
        let t: std::net::Ipv6Addr = theirs[k].parse().unwrap_or_else(|_| panic!("saquery {k}: {theirs:?}"));
        assert_eq!(d, t, "decoded PathRecord {k}");
    }
}

#[test]
fn node_records_by_lid_equal_saquery_for_switches_and_cas() {
    let s = setup("fsq-nr");
    let lids = opensm_lids(&s.osm);
    // Two CAs (one on the SM's leaf, one elsewhere) and two switches.
    let mut pick: Vec<u16> = Vec::new();
    for e in [1u32, 9] {
        pick.push(lids[&s.f.end_port(EndPortId(e)).port_guid]);
    }
    let sws = s.f.switches();
    for sw in [&sws[0], &sws[sws.len() - 1]] {
        pick.push(lids[&sw.guid]);
    }
    for lid in pick {
        let v = s.fsq(&["nr", &lid.to_string()]);
        assert_eq!(v["status"], 0, "{v}");
        assert_eq!(v["method"], "GetResp", "{v}");
        assert_eq!(v["raw_records_hex"].as_array().map(Vec::len), Some(1), "{v}");
        let ours = node_record_fields(&bytes(&v, 0));
        assert_eq!(ours["lid"], lid.to_string());
        let theirs = s.saquery(&["NR", &lid.to_string()]);
        assert_same(&format!("NodeRecord of LID {lid}"), &ours, &theirs);
        // The decoded record (`records`) carries the same fields as saquery prints them.
        let rec = &v["records"][0];
        for k in [
            "lid",
            "num_ports",
            "sys_guid",
            "node_guid",
            "port_guid",
            "device_id",
            "port_num",
        ] {
            let d = rec[k].as_u64().unwrap_or_else(|| panic!("decoded {k}: {v}"));
            assert_eq!(d, num(&theirs[k]), "decoded NodeRecord {k} of LID {lid}");
        }
        assert_eq!(
            rec["node_description"].as_str(),
            Some(theirs["NodeDescription"].as_str()),
            "{v}"
        );
    }
}

#[test]
fn path_records_by_lids_equal_saquery_src_to_dst() {
    let s = setup("fsq-pr");
    let lids = opensm_lids(&s.osm);
    let ca = |e: u32| lids[&s.f.end_port(EndPortId(e)).port_guid];
    // Same leaf, across the spines, and back.
    for (a, b) in [(ca(0), ca(1)), (ca(2), ca(13)), (ca(13), ca(2))] {
        let v = s.fsq(&["pr", "--slid", &a.to_string(), "--dlid", &b.to_string()]);
        assert_eq!(v["status"], 0, "{v}");
        assert_eq!(v["method"], "GetTableResp", "{v}");
        // A one-record GetTable from OpenSM: RMPP, under the shim without its segment header.
        assert_eq!(v["rmpp"], true, "{v}");
        assert_eq!(v["unsegmented"], true, "{v}");
        assert_eq!(v["raw_records_hex"].as_array().map(Vec::len), Some(1), "{v}");
        let ours = path_record_fields(&bytes(&v, 0));
        assert_eq!(
            (ours["slid"].as_str(), ours["dlid"].as_str()),
            (a.to_string().as_str(), b.to_string().as_str())
        );
        let theirs = s.saquery(&["--src-to-dst", &format!("{a}:{b}")]);
        assert_same(&format!("PathRecord {a} -> {b}"), &ours, &theirs);
        assert_decoded_path(&v, &theirs);
    }
    // MultiPathRecord (GetMulti, sent as one RMPP segment) between two port GIDs: the path
    // equals `saquery --sgid-to-dgid`'s PathRecord.
    let gid = |e: u32| {
        std::net::Ipv6Addr::from((0xfe80u128 << 112) | u128::from(s.f.end_port(EndPortId(e)).port_guid)).to_string()
    };
    let (sg, dg) = (gid(2), gid(13));
    let v = s.fsq(&["mpr", "--sgid", &sg, "--dgid", &dg]);
    assert_eq!(
        (v["method"].as_str(), v["status"].as_u64()),
        (Some("GetMultiResp"), Some(0)),
        "{v}"
    );
    assert_eq!(v["raw_records_hex"].as_array().map(Vec::len), Some(1), "{v}");
    let ours = path_record_fields(&bytes(&v, 0));
    let theirs = s.saquery(&["--sgid-to-dgid", &format!("{sg}-{dg}")]);
    assert_same(&format!("MultiPathRecord {sg} -> {dg}"), &ours, &theirs);
    // A MultiPath answer decodes as PathRecord.
    assert_decoded_path(&v, &theirs);
}

#[test]
fn one_record_tables_registrations_and_subscriptions_are_answered() {
    let s = setup("fsq-misc");
    let lids = opensm_lids(&s.osm);
    let sm_lid = lids[&s.f.end_port(EndPortId(0)).port_guid];
    // SMInfoRecord table: the one SM, OpenSM's port.
    let v = s.fsq(&["smir"]);
    assert_eq!(
        (v["status"].as_u64(), v["rmpp"].as_bool()),
        (Some(0), Some(true)),
        "{v}"
    );
    assert_eq!(v["sm_lid"].as_u64(), Some(u64::from(sm_lid)), "{v}");
    let recs = v["raw_records_hex"].as_array().expect("records");
    assert_eq!(recs.len(), 1, "{v}");
    let r = bytes(&v, 0);
    assert_eq!(be(&r[0..2]), u64::from(sm_lid), "SMInfoRecord LID");
    assert_eq!(be(&r[4..12]), s.f.end_port(EndPortId(0)).port_guid, "SMInfoRecord GUID");
    // ClassPortInfo: a Get answered with one MAD.
    let v = s.fsq(&["classportinfo"]);
    assert_eq!(
        (v["status"].as_u64(), v["rmpp"].as_bool()),
        (Some(0), Some(false)),
        "{v}"
    );
    // A ServiceRecord registered, found, deleted.
    let v = s.fsq(&[
        "sr-register",
        "--id",
        "0x1234",
        "--name",
        "fabric-saquery-test",
        "--lease",
        "60",
    ]);
    assert_eq!(
        (v["method"].as_str(), v["status"].as_u64()),
        (Some("GetResp"), Some(0)),
        "{v}"
    );
    let v = s.fsq(&["sr"]);
    assert_eq!(v["status"], 0, "{v}");
    let r = bytes(&v, 0);
    assert_eq!(be(&r[0..8]), 0x1234, "ServiceID: {v}");
    assert!(
        String::from_utf8_lossy(&r[48..112]).starts_with("fabric-saquery-test"),
        "{v}"
    );
    let v = s.fsq(&["sr-delete", "--id", "0x1234"]);
    assert_eq!(
        (v["method"].as_str(), v["status"].as_u64()),
        (Some("DeleteResp"), Some(0)),
        "{v}"
    );
    // InformInfo subscription to trap 64 and its removal.
    let v = s.fsq(&["subscribe", "--trap", "64"]);
    assert_eq!(
        (v["attribute"].as_str(), v["status"].as_u64()),
        (Some("InformInfo"), Some(0)),
        "{v}"
    );
    let v = s.fsq(&["subscribe", "--trap", "64", "--unsubscribe"]);
    assert_eq!(v["status"], 0, "{v}");
    // `raw` builds the same Get as `nr`: same record.
    let lid_hex = format!("{sm_lid:04x}");
    let v = s.fsq(&[
        "raw", "--method", "1", "--attr", "0x11", "--mask", "1", "--data", &lid_hex,
    ]);
    assert_eq!(v["status"], 0, "{v}");
    assert_eq!(
        v["raw_records_hex"],
        s.fsq(&["nr", &sm_lid.to_string()])["raw_records_hex"],
        "{v}"
    );
    // The CA by name (the shim's is ibsim0), a CA that does not exist, a bad GID.
    let v = s.fsq(&["--ca", "ibsim0", "nr", &sm_lid.to_string()]);
    assert_eq!(v["status"], 0, "{v}");
    let e = s.fsq_fails(&["--ca", "mlx9_9", "nr"]);
    assert!(e.contains("no umad device of CA \"mlx9_9\""), "{e}");
    let e = s.fsq_fails(&["pr", "--dgid", "fe80::zz"]);
    assert!(e.contains("fe80::zz"), "{e}");
    // The bench: threads sharing one agent, and processes on two nodes (an agent each).
    let v = s.fsq(&["bench", "--queries", "40", "--clients", "2", "--max-probe-lid", "40"]);
    let b = &v["bench"];
    assert_eq!(
        (b["queries"].as_u64(), b["errors"].as_u64()),
        (Some(40), Some(0)),
        "{v}"
    );
    assert_eq!(b["ca_lids"].as_u64(), Some(s.f.end_ports().len() as u64), "{v}");
    let other = format!("H-{:016x}", s.f.end_port(EndPortId(5)).node_guid);
    let hosts = format!("{},{other}", s.tool_host);
    let v = s.fsq(&[
        "bench",
        "--queries",
        "40",
        "--processes",
        "2",
        "--hosts",
        &hosts,
        "--max-probe-lid",
        "40",
    ]);
    let b = &v["bench"];
    assert_eq!(
        (b["processes"].as_u64(), b["queries"].as_u64()),
        (Some(2), Some(40)),
        "{v}"
    );
    assert_eq!(
        (b["answered"].as_u64(), b["errors"].as_u64()),
        (Some(40), Some(0)),
        "{v}"
    );
    assert!(b["p99_us"].as_u64() >= b["p50_us"].as_u64(), "{v}");
    // A Get of a record that does not exist: ERR_NO_RECORDS, printed like any answer.
    let v = s.fsq(&["nr", "999"]);
    assert_eq!(v["status"].as_u64(), Some(0x0300), "{v}");
}

/// A subscriber of trap 65 (GID out of service) gets OpenSM's Report when a CA's link goes
/// down, answers it (ReportResp) and prints it as a JSON line with the GID of the port.
#[test]
fn a_trap_65_subscriber_gets_the_report_when_a_port_goes_down() {
    let mut s = setup("fsq-report");
    let mut child = s
        .sim
        .command(Path::new(SAQUERY))
        .args(["subscribe", "--trap", "65", "--wait-report", "25"])
        .env("SIM_HOST", &s.tool_host)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fabric-saquery subscribe");
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
    let next = |within: Duration| -> Value {
        let end = Instant::now() + within;
        let mut err = String::new();
        loop {
            match rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
                Ok(l) if l.starts_with("stderr: ") => err.push_str(&l),
                Ok(l) => return serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}")),
                Err(_) => panic!("nothing from fabric-saquery subscribe within {within:?}; stderr: {err}"),
            }
        }
    };
    let v = next(Duration::from_secs(15));
    assert_eq!(
        (v["attribute"].as_str(), v["status"].as_u64()),
        (Some("InformInfo"), Some(0)),
        "{v}"
    );
    // A CA on another leaf than OpenSM's and the subscriber's goes down.
    let victim = s.f.end_port(EndPortId(6));
    s.sim.console(&format!("Unlink \"H-{:016x}\"[1]", victim.node_guid));
    let r = next(Duration::from_secs(20));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        (r["method"].as_str(), r["trap_number"].as_u64()),
        (Some("Report"), Some(65)),
        "{r}\n{}",
        s.osm.log_text()
    );
    let want = format!("fe80000000000000{:016x}", victim.port_guid);
    assert_eq!(r["gid_hex"].as_str(), Some(want.as_str()), "{r}");
}

/// The table `serve-table` sends (record `i`: `i` in two bytes, then bytes `i + j`).
fn served_table(records: usize, size: usize) -> Vec<u8> {
    let mut d = vec![0u8; records * size];
    for (i, r) in d.chunks_exact_mut(size).enumerate() {
        for (j, b) in r.iter_mut().enumerate() {
            *b = (i + j) as u8;
        }
        r[0..2].copy_from_slice(&(i as u16).to_be_bytes());
    }
    d
}

/// The client's RMPP through the real simulator: a test SA (`serve-table`, on a CA of its
/// own, `issm` open) answers GetTable with 16 segments (window of one, then the client's), the
/// client ACKs to its LID and reassembles; every byte the shim delivers equals the table, the
/// 24 bytes a MAD it does not deliver are reported. Then a one-segment table (FIRST|LAST).
#[test]
fn a_multi_segment_table_is_reassembled_through_the_simulator() {
    let s = setup("fsq-rmpp");
    let sa_host = format!("H-{:016x}", s.f.end_port(EndPortId(8)).node_guid);
    for (records, segments) in [(50usize, 16u64), (2, 1)] {
        let mut sa = s
            .sim
            .command(Path::new(SAQUERY))
            .args(["serve-table", "--records", &records.to_string(), "--seconds", "15"])
            .env("SIM_HOST", &sa_host)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn serve-table");
        let mut lines = BufReader::new(sa.stdout.take().expect("stdout")).lines();
        let ready: Value = serde_json::from_str(&lines.next().expect("ready line").expect("read")).expect("json");
        let sa_lid = ready["lid"].as_u64().expect("lid").to_string();
        let v = s.fsq(&["--sm-lid", &sa_lid, "pr"]);
        let _ = sa.kill();
        let _ = sa.wait();
        assert_eq!(
            (v["status"].as_u64(), v["rmpp"].as_bool()),
            (Some(0), Some(true)),
            "{v}"
        );
        assert_eq!(
            (v["segments"].as_u64(), v["unsegmented"].as_bool()),
            (Some(segments), Some(false)),
            "{v}"
        );
        let recs = v["raw_records_hex"].as_array().expect("records");
        assert_eq!(recs.len(), records, "{v}");
        let want = served_table(records, 64);
        let lost: Vec<(usize, usize)> = v["undelivered_ranges"]
            .as_array()
            .expect("ranges")
            .iter()
            .map(|r| (r[0].as_u64().unwrap() as usize, r[1].as_u64().unwrap() as usize))
            .collect();
        let expect_lost: Vec<(usize, usize)> = (0..segments as usize)
            .map(|k| (k * 200 + 176, (k * 200 + 200).min(want.len())))
            .filter(|(a, b)| a < b)
            .collect();
        assert_eq!(lost, expect_lost, "the shim delivers 232 bytes of each MAD");
        let mut checked = 0;
        for i in 0..records {
            let got = bytes(&v, i);
            for (j, b) in got.iter().enumerate() {
                let at = i * 64 + j;
                if !lost.iter().any(|&(a, z)| (a..z).contains(&at)) {
                    assert_eq!(*b, want[at], "record {i} byte {j}");
                    checked += 1;
                }
            }
        }
        assert!(
            checked >= want.len() * 8 / 10,
            "only {checked} of {} bytes checked",
            want.len()
        );
    }
}
