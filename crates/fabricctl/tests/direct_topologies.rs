//! Direct topologies (issue #19) through the real `fabricctl` binary: `topo gen` of Slim Fly,
//! Dragonfly, HyperX and RRG notations (complete and degraded), `analyze` of a Slim Fly with
//! today's fat-tree engines, and `validate --expected NOTATION` finding a miswired Slim Fly
//! (two cables swapped, one missing) offline and against a running mock `fabricd` (Slim Fly
//! paper §3.4).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{fabricctl, fabricd_binary, json, ok, TempDir};
use fabric_topology::gen::generate_str;
use fabric_topology::ibnet;

const SF: &str = "SLIMFLY(5;4)";

#[test]
fn gen_writes_every_direct_kind_with_closed_form_counts() {
    let d = TempDir::new("direct-gen");
    // (spec, switches, nodes, cables)
    for (spec, sw, nodes, links) in [
        (SF, 50, 200, 175),
        ("SLIMFLY(7)", 98, 98 * 6, 98 * 11 / 2),
        ("DRAGONFLY(2)", 36, 72, 9 * 6 + 9 * 4 * 2 / 2),
        ("HYPERX(4,4;2)", 16, 32, 16 * 6 / 2),
        ("RRG(20,4,2;5)", 20, 40, 40),
    ] {
        let f = d.file("t.topo");
        ok(&["topo", "gen", spec, "-o", &f]);
        let v = json(&["topo", "info", &f, "--json"]);
        assert_eq!(
            (v["switches"].as_u64(), v["nodes"].as_u64()),
            (Some(sw), Some(nodes)),
            "{spec}: {v}"
        );
        assert_eq!(v["links"].as_u64(), Some(links), "{spec}: {v}");
    }
    // Degraded: two switches (with their 4 nodes each) and 5 more cables removed.
    let f = d.file("deg.topo");
    ok(&[
        "topo",
        "gen",
        SF,
        "-o",
        &f,
        "--remove-switches",
        "2",
        "--remove-links",
        "5",
        "--seed",
        "4",
    ]);
    let v = json(&["topo", "info", &f, "--json"]);
    assert_eq!((v["switches"].as_u64(), v["nodes"].as_u64()), (Some(48), Some(192)));
    let links = v["links"].as_u64().unwrap();
    assert!((175 - 14 - 5..=175 - 13 - 5).contains(&links), "{links}");
    // Bad parameters: a clear error, no file.
    let out = fabricctl(&["topo", "gen", "SLIMFLY(6)", "-o", &d.file("bad.topo")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("q = 6 is not a prime power"), "{err}");
    assert!(!std::path::Path::new(&d.file("bad.topo")).exists());
}

/// Today's engines on a Slim Fly: ranking finds no fat-tree (every switch is a leaf), Dmodc's
/// base routes are checked and the invalid ones re-routed by the Up*/Down* fallback
/// (`updown-spliced`), so the tables are valid and deadlock-free.
#[test]
fn analyze_slim_fly_falls_back_to_updown_and_is_valid() {
    let d = TempDir::new("direct-analyze");
    let f = d.file("sf.topo");
    ok(&["topo", "gen", SF, "-o", &f]);
    let v = json(&["analyze", &f, "--rp", "20", "--json"]);
    assert_eq!(v["switches"], 50);
    assert_eq!(v["nodes"], 200);
    assert_eq!(v["valid"], true, "{v}");
    assert_eq!(v["unreachable_pairs"], 0, "{v}");
    assert_eq!(v["deadlock_free"], true, "{v}");
    // Every switch has end nodes, so ranking puts them all on level 0: Dmodc has no up port and
    // leaves every destination unreachable from the other switches; Up*/Down* re-routes all.
    let fb = &v["routing_fallback"];
    assert!(fb["fallback"].as_str().unwrap().starts_with("updown"), "{v}");
    assert_eq!(fb["engine_failed_destinations"], 200, "{v}");
    assert_eq!(fb["fallback_destinations"], 200, "{v}");
    assert!(fb["reason"].as_str().unwrap().contains("unreachable"), "{v}");
    assert_eq!(v["unrouted_pairs"], 0, "{v}");
}

/// The expected report lines of the miswired Slim Fly (`fabricctl validate` text output).
fn miswired_sf_file(path: &str) -> Vec<String> {
    let full = generate_str(SF, None).unwrap();
    // Rack 0 intra-group cable (0,0,0)–(0,0,1) swapped with (1,1,3)–(0,2,0) (rack 1 to rack 2);
    // (0,4,2)–(1,4,1) (rack 4's port toward rack 4) missing.
    let bad = fabric_topology::gen::recable(
        &full,
        [("SLIMFLY S(0,0,0)", 5), ("SLIMFLY S(1,1,3)", 9)],
        Some(("SLIMFLY S(0,4,2)", 11)),
    )
    .unwrap();
    std::fs::write(path, ibnet::write(&bad)).unwrap();
    let sw = |name: &str| {
        let s = full.switch(full.find_switch(name).unwrap());
        format!("switch \"{}\" ({})", s.desc, fabric_topology::fmt_guid(s.guid))
    };
    let (a, b) = (sw("SLIMFLY S(0,0,0)"), sw("SLIMFLY S(0,0,1)"));
    let (c, dd) = (sw("SLIMFLY S(1,1,3)"), sw("SLIMFLY S(0,2,0)"));
    let (e, f) = (sw("SLIMFLY S(0,4,2)"), sw("SLIMFLY S(1,4,1)"));
    // (0,0,1)'s port to (0,0,0) is X's index of −1 = 4 (port 6); (0,2,0) reaches rack 1 on port 8;
    // (1,4,1) reaches rack 4 on port 11.
    let mut lines = vec![
        format!("missing: {e} port 11 <-> {f} port 11"),
        format!("miswired: {a} port 5 goes to {dd} port 8 (expected {b} port 6)"),
        format!("miswired: {b} port 6 goes to {c} port 9 (expected {a} port 5)"),
        format!("miswired: {c} port 9 goes to {b} port 6 (expected {dd} port 8)"),
        format!("miswired: {dd} port 8 goes to {a} port 5 (expected {c} port 9)"),
    ];
    lines.sort();
    lines
}

fn report_lines(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("missing: ") || l.starts_with("miswired: ") || l.starts_with("extra: "))
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

#[test]
fn validate_against_a_notation_finds_the_miswired_slim_fly() {
    let d = TempDir::new("direct-validate");
    let bad = d.file("bad.topo");
    let want = miswired_sf_file(&bad);
    let good = d.file("good.topo");
    ok(&["topo", "gen", SF, "-o", &good]);
    // The generated file against its notation: clean.
    let out = ok(&["validate", "--expected", SF, "--actual", &good]);
    assert!(out.trim_end().ends_with(": clean"), "{out}");
    let out = fabricctl(&["validate", "--expected", SF, "--actual", &bad]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(report_lines(&text), want, "{text}");
    assert!(text.contains("1 missing, 0 extra, 4 miswired"), "{text}");
    // A bad notation (and no such file) is an error naming both readings.
    let out = fabricctl(&["validate", "--expected", "SLIMFLY(6)", "--actual", &bad]);
    assert!(!matches!(out.status.code(), Some(0 | 1)));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no such file") && err.contains("q = 6 is not a prime power"),
        "{err}"
    );
}

struct Daemon(Child);
impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The mock daemon runs the miswired Slim Fly from a file; `fabricctl validate --expected
/// SLIMFLY(5;4)` against the live topology reports exactly the two swapped and the missing cable.
#[test]
fn validate_live_mock_daemon_on_a_miswired_slim_fly() {
    let d = TempDir::new("direct-live");
    let bad = d.file("bad.topo");
    let want = miswired_sf_file(&bad);
    let config = d.file("fabricd.toml");
    std::fs::write(
        &config,
        format!("[log]\ntimestamps = false\n[driver.mock]\ntopology_file = \"{bad}\"\n[update]\ncoalesce_ms = 10\ncoalesce_max_ms = 100\n[metrics]\nrandom_perms = 2\n"),
    )
    .unwrap();
    let socket = d.file("s.sock");
    let log = std::fs::File::create(d.file("fabricd.log")).unwrap();
    let _daemon = Daemon(
        Command::new(fabricd_binary())
            .args([
                "--config",
                &config,
                "--state-dir",
                &d.file("state"),
                "--socket",
                &socket,
            ])
            .env_remove("NOTIFY_SOCKET")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start fabricd"),
    );
    let t = Instant::now();
    loop {
        let out = fabricctl(&["--socket", &socket, "status", "--json"]);
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
            if v["generation"].as_u64().unwrap_or(0) >= 1 {
                break;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "fabricd not ready: {}",
            std::fs::read_to_string(d.file("fabricd.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = fabricctl(&["--socket", &socket, "validate", "--expected", SF]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(report_lines(&text), want, "{text}");
}
