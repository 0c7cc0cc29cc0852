//! `tests/opensm-compare.sh` (fabricd vs OpenSM under ibsim) on a tiny fat-tree: one row per
//! subnet manager with numbers, LID counts and SMP counts that agree with first principles, in
//! well under a minute.
//!
//! Needs `ibsim` (ibsim-utils), the umad2sim shim, `opensm` and infiniband-diags; the script
//! fails with an installation hint when they are missing. The daemon is another package's binary:
//! it is built (a no-op when fresh) next to this test's `fabricctl`, and the script is given that
//! directory so that it does not start a nested release build.

mod common;

use common::fabricd_binary;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Cells of the Markdown rows of the first table whose first cell starts with `prefix`.
fn rows<'a>(table: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    table
        .lines()
        .take_while(|l| {
            !l.starts_with("SMPs by attribute")
                && !l.starts_with("fabricd's escape VL")
                && !l.starts_with("Routing computation")
        })
        .filter(|l| l.starts_with("| ") && !l.starts_with("| SM "))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect::<Vec<_>>())
        .filter(|c| c[0].starts_with(prefix))
        .collect()
}

#[test]
fn opensm_compare_prints_one_row_per_subnet_manager() {
    let fabricd = fabricd_binary();
    let bin_dir = fabricd.parent().expect("bin dir").to_path_buf();
    let fabricctl = Path::new(env!("CARGO_BIN_EXE_fabricctl"));
    assert_eq!(
        fabricctl.parent(),
        Some(bin_dir.as_path()),
        "fabricctl and fabricd side by side"
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/opensm-compare.sh");
    let out_path = std::env::temp_dir().join(format!("opensm-compare-{}.out", std::process::id()));
    let err_path = out_path.with_extension("err");
    let t0 = Instant::now();
    let mut child = Command::new("bash")
        .arg(&script)
        .args([
            "--spec",
            "PGFT(2;4,8;1,4;1,1)",
            "--rp",
            "10",
            "--timeout",
            "40",
            "--bin-dir",
        ])
        .arg(&bin_dir)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).expect("out"))
        .stderr(std::fs::File::create(&err_path).expect("err"))
        .spawn()
        .expect("run tests/opensm-compare.sh");
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(150) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "opensm-compare.sh did not finish within 150 s:\n{}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = std::fs::read_to_string(&out_path).unwrap_or_default();
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    let _ = std::fs::remove_file(&err_path);
    assert!(status.success(), "opensm-compare.sh failed ({status}):\n{err}\n{out}");
    eprintln!("{out}\n(took {:.1} s)", t0.elapsed().as_secs_f64());

    // 4 leaves x 8 = 32 end ports, 8 leaves + 4 spines.
    let (nodes, switches) = (32u64, 12u64);
    for (prefix, top_lid) in [
        ("OpenSM -R ftree", nodes + switches),
        ("OpenSM -R updn", nodes + switches),
        ("OpenSM -R minhop", nodes + switches),
        // LMC 1: a base and an escape LID per end port.
        ("fabricd", 2 * nodes + switches),
    ] {
        let r = rows(&out, prefix);
        assert_eq!(r.len(), 1, "one row for {prefix}:\n{out}");
        let c = &r[0];
        assert_eq!(c.len(), 12, "{c:?}");
        // VLs: OpenSM's fat-tree engines use one; fabricd's Dmodc the data VL and the escape VL.
        let vls: u64 = c[2].parse().expect("VLs");
        assert_eq!(vls, if prefix == "fabricd" { 2 } else { 1 }, "{prefix}: {c:?}");
        let ms: f64 = c[3].parse().expect("ms");
        let smps: u64 = c[4].parse().expect("SMPs");
        assert!(ms > 0.0 && ms < 40_000.0, "{prefix}: {ms} ms");
        // At least one NodeInfo per node and one LFT block per switch.
        assert!(smps >= nodes + 2 * switches, "{prefix}: {smps} SMPs");
        assert_eq!(c[5].parse::<u64>().expect("top LID"), top_lid, "{prefix}: {c:?}");
        assert_eq!(c[6], "yes", "{prefix}: every pair routed: {c:?}");
        let mu_sp: u64 = c[7].parse().expect("mu_sp");
        assert!(mu_sp >= 1, "{prefix}: {c:?}");
        if prefix == "OpenSM -R ftree" || prefix == "fabricd" {
            // Fat-tree routing and Dmodc are shift-optimal on a full two-level PGFT.
            assert_eq!(mu_sp, 1, "{prefix}: {c:?}");
        }
        let rp: f64 = c[8].parse().expect("mu_rp median");
        assert!(rp >= 1.0, "{prefix}: {c:?}");
        let nu: f64 = c[11].parse().expect("nu");
        // Every path has 2 node-switch edges, plus 0 or 2 switch-switch edges.
        assert!((2.0..=4.0).contains(&nu), "{prefix}: {c:?}");
    }
    // The routing-time table: one row per manager, each time read from that run (OpenSM's log
    // windows of the timed run and of a re-sweep, fabricd's compute_ms), ratios against fabricd.
    let route: Vec<Vec<&str>> = out
        .lines()
        .skip_while(|l| !l.starts_with("Routing computation"))
        .take_while(|l| !l.starts_with("fabricd's escape VL"))
        .filter(|l| l.starts_with("| ") && !l.starts_with("| SM ") && !l.starts_with("|---"))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    assert_eq!(route.len(), 5, "{out}");
    assert_eq!(route[3][0], "fabricd", "{route:?}");
    assert_eq!(route[4][0], "fabricd, engines only", "{route:?}");
    // fabricd's re-sweep is a forced full recomputation (`fabricctl reroute --wait`); the
    // engines-only row has none.
    assert_eq!(route[4][3], "-", "the engines-only row has no re-sweep: {route:?}");
    let fd_ms: f64 = route[3][2].parse().expect("fabricd route ms");
    let fd_re: f64 = route[3][3].parse().expect("fabricd re-sweep ms");
    assert!(fd_re > 0.0 && fd_re < 10_000.0, "{route:?}");
    // The engines run inside the generation's computation (same generation, one run).
    let engines_ms: f64 = route[4][2].parse().expect("fabricd engines ms");
    assert!(
        engines_ms <= fd_ms + 0.01,
        "engines {engines_ms} ms within compute {fd_ms} ms"
    );
    // Both times are printed to 0.01 ms, the ratio to 0.1.
    let check_ratio = |ms: f64, base: f64, ratio: &str, r: &Vec<&str>| {
        let ratio: f64 = ratio.parse().unwrap_or_else(|_| panic!("ratio: {r:?}"));
        let lo = (ms - 0.005) / (base + 0.005) - 0.051;
        let hi = (ms + 0.005) / (base - 0.005).max(1e-9) + 0.051;
        assert!((lo..=hi).contains(&ratio), "{r:?} vs {base}");
    };
    for r in &route {
        assert_eq!(r.len(), 7, "{r:?}");
        let ms: f64 = r[2].parse().unwrap_or_else(|_| panic!("route ms: {r:?}"));
        assert!(ms > 0.0 && ms < 10_000.0, "{r:?}");
        check_ratio(ms, fd_ms, r[4], r);
        if r[0] != "fabricd, engines only" {
            let re: f64 = r[3].parse().unwrap_or_else(|_| panic!("re-sweep ms: {r:?}"));
            assert!(re > 0.0 && re < 10_000.0, "{r:?}");
            // Re-sweep against fabricd's first generation, and like for like.
            check_ratio(re, fd_ms, r[5], r);
            check_ratio(re, fd_re, r[6], r);
        }
    }
    // fabricd's escape VL table: the SL-to-VL tables come after the first generation, and
    // fabricd's own SMP counters agree with the simulator's log.
    let vl: Vec<Vec<&str>> = out
        .lines()
        .skip_while(|l| !l.starts_with("fabricd's escape VL"))
        .take_while(|l| !l.starts_with("SMPs by attribute"))
        .filter(|l| l.starts_with("| fabricd"))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    assert_eq!(vl.len(), 1, "{out}");
    let v = &vl[0];
    assert_eq!(v.len(), 7, "{v:?}");
    let (up, ready): (f64, f64) = (v[1].parse().expect("ms"), v[2].parse().expect("ms"));
    assert!(ready >= up, "escape VL ready ({ready} ms) after programmed ({up} ms)");
    let n = |i: usize| v[i].parse::<u64>().unwrap_or_else(|_| panic!("{v:?}"));
    assert_eq!(n(3), n(4), "SMPs to programmed: ibsim vs fabricd's own count: {v:?}");
    assert_eq!(
        n(5),
        n(6),
        "SMPs to escape VL ready: ibsim vs fabricd's own count: {v:?}"
    );
    assert!(n(5) > n(3), "{v:?}");
    assert_eq!(n(3), rows(&out, "fabricd")[0][4].parse::<u64>().unwrap());
    // The per-attribute breakdown (from other ibsim log lines) adds up to the SMP count, and
    // every SM wrote at least one LFT block per switch; fabricd's SL-to-VL Sets all come after
    // its first generation (one per linked input/output port pair of every switch, port 0 of
    // the generated enhanced port 0 included, and one per CA port).
    let attrs: Vec<Vec<&str>> = out
        .lines()
        .skip_while(|l| !l.starts_with("SMPs by attribute"))
        .filter(|l| l.starts_with("| ") && !l.starts_with("| SM "))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    assert_eq!(attrs.len(), 5, "{out}");
    for a in &attrs {
        let total: u64 = a[1..].iter().map(|v| v.parse::<u64>().expect("count")).sum();
        let lft: u64 = a[8].parse().unwrap();
        assert!(lft >= switches, "{a:?}");
        let sl2vl: u64 = a[6].parse().unwrap();
        if a[0] == "fabricd, to escape VL ready" {
            assert_eq!(total, n(5), "{a:?} vs {v:?}");
            // 8 leaves (4 down + 4 up ports) and 4 spines (8 down), every port linked: inputs
            // 0..=8, outputs 1..=8, input != output on each of the 12 switches.
            let pairs = switches * (9 * 8 - 8);
            assert_eq!(sl2vl, pairs + nodes, "{a:?}");
            continue;
        }
        let row = &rows(&out, a[0])[0];
        assert_eq!(total, row[4].parse::<u64>().unwrap(), "{a:?} vs {row:?}");
        assert_eq!(sl2vl, 0, "no SL-to-VL before programmed: {a:?}");
    }
}
