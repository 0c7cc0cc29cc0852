//! End-to-end tests of the offline `fabricctl` subcommands: they run the real binary.

mod common;

use common::{fabricctl, json, ok, TempDir};
use std::path::Path;

#[test]
fn gen_then_info_reports_closed_form_counts() {
    let d = TempDir::new("gen");
    let f = d.file("p.topo");
    ok(&["topo", "gen", "PGFT(3;4,4,6;1,4,4;1,1,1)", "-o", &f]);
    let v = json(&["topo", "info", &f, "--json"]);
    // nodes = 4*4*6; switches per level = (4*6, 4*6, 4*4); cables = 96 + 96.
    assert_eq!(v["nodes"], 96);
    assert_eq!(v["switches"], 64);
    assert_eq!(v["levels"], serde_json::json!([24, 24, 16]));
    assert_eq!(v["leaves"], 24);
    assert_eq!(v["links"], 192);
    assert_eq!(v["diagnostics"], serde_json::json!([]));
}

#[test]
fn degraded_gen_removes_links_and_stays_ranked() {
    let d = TempDir::new("deg");
    let f = d.file("p.topo");
    ok(&[
        "topo",
        "gen",
        "PGFT(2;8,16;1,8;1,1)",
        "-o",
        &f,
        "--remove-links",
        "10",
        "--seed",
        "7",
    ]);
    let v = json(&["topo", "info", &f, "--json"]);
    assert_eq!(v["links"], 8 * 16 - 10);
    assert_eq!(v["levels"], serde_json::json!([16, 8]));
}

#[test]
fn analyze_dmodc_on_constant_bisection_tree_is_shift_optimal() {
    let d = TempDir::new("ana");
    let f = d.file("k.topo");
    ok(&["topo", "gen", "KARY(4,3)", "-o", &f]);
    let v = json(&["analyze", &f, "--engine", "dmodc", "--rp", "10", "--json"]);
    for key in [
        "valid",
        "unreachable_pairs",
        "deadlock_free",
        "mu_sp",
        "mu_rp",
        "mu_a2a",
        "xi",
        "nu",
        "route_ms",
    ] {
        assert!(v.get(key).is_some(), "missing key {key} in {v}");
    }
    assert_eq!(v["valid"], true);
    assert_eq!(v["deadlock_free"], true);
    assert_eq!(v["unreachable_pairs"], 0);
    assert_eq!(v["mu_sp"], 1);
    for key in ["median", "q1", "q39"] {
        assert!(v["mu_rp"][key].as_f64().unwrap() >= 1.0);
    }
}

/// `analyze` reports the estimated `mu_rp` floor next to the measured distribution: on a
/// complete fat-tree Dmodc sits on it, with cables removed the floor moves up.
#[test]
fn analyze_reports_the_mu_rp_floor() {
    let d = TempDir::new("floor");
    let (full, cut) = (d.file("full.topo"), d.file("cut.topo"));
    let spec = "PGFT(3;6,6,8;1,6,6;1,1,1)";
    ok(&["topo", "gen", spec, "-o", &full]);
    ok(&["topo", "gen", spec, "--remove-links", "40", "--seed", "2", "-o", &cut]);
    let a = json(&["analyze", &full, "--rp", "800", "--no-a2a", "--json"]);
    let b = json(&["analyze", &cut, "--rp", "800", "--no-a2a", "--json"]);
    let floor_median = a["mu_rp_floor"]["median"].as_u64().unwrap();
    assert!(floor_median >= 2, "{a}");
    assert!(
        (a["mu_rp"]["median"].as_f64().unwrap() - floor_median as f64).abs() <= 1.0,
        "{a}"
    );
    let share = |v: &serde_json::Value, what: &str, k: u64| v[what]["p_at_least"][k.to_string()].as_f64().unwrap();
    let k = floor_median + 1;
    // Measured and estimated P(mu >= k) agree on the complete fabric (Dmodc is the floor's routing).
    assert!(
        (share(&a, "mu_rp", k) - share(&a, "mu_rp_floor", k)).abs() < 0.12,
        "{a}"
    );
    // 40 of 288 cables gone: less capacity for the same traffic.
    assert!(share(&b, "mu_rp_floor", k) > share(&a, "mu_rp_floor", k), "{a}\n{b}");
    let text = ok(&["analyze", &cut, "--rp", "50", "--no-a2a"]);
    assert!(text.contains("mu_rp_floor        median"), "{text}");
    // The port where the worst shift peaks: a real switch of the file, on an inter-switch link.
    let w = &b["mu_sp_worst"];
    assert!(w["shift"].as_u64().unwrap() >= 1, "{b}");
    assert!(["up", "down"].contains(&w["direction"].as_str().unwrap()), "{b}");
    assert!(w["level"].as_u64().unwrap() <= 2, "{b}");
    let guid = w["switch"]
        .as_str()
        .unwrap()
        .trim_start_matches("0x")
        .trim_start_matches('0');
    let topo = std::fs::read_to_string(&cut).unwrap();
    assert!(topo.contains(&format!("switchguid=0x{guid}")), "{guid} not in the file");
    assert!(text.contains(&format!("(shift {}, at ", w["shift"])), "{text}");
}

#[test]
fn route_writes_opensm_dump_and_guid2lid() {
    let d = TempDir::new("route");
    let f = d.file("p.topo");
    let dump = d.file("lfts.dump");
    let g2l = d.file("guid2lid");
    ok(&["topo", "gen", "PGFT(2;4,8;1,4;1,1)", "-o", &f]);
    ok(&[
        "route",
        &f,
        "--engine",
        "dmodc",
        "--lft-out",
        &dump,
        "--guid2lid-out",
        &g2l,
    ]);
    let text = std::fs::read_to_string(&dump).unwrap();
    // 12 switches, one header per switch.
    assert_eq!(text.matches("Unicast lids [0-").count(), 12, "{text}");
    assert_eq!(text.matches(" lids dumped").count(), 12);
    let g = std::fs::read_to_string(&g2l).unwrap();
    // 32 end ports + 12 switches, one record each.
    assert_eq!(g.lines().filter(|l| l.starts_with("0x")).count(), 44);
    // Routing again with the LIDs kept gives the same tables.
    let dump2 = d.file("lfts2.dump");
    ok(&[
        "route",
        &f,
        "--engine",
        "dmodc",
        "--guid2lid",
        &g2l,
        "--lft-out",
        &dump2,
    ]);
    assert_eq!(text, std::fs::read_to_string(&dump2).unwrap());
}

#[test]
fn malformed_topology_file_names_file_and_line() {
    let d = TempDir::new("bad");
    let f = d.file("bad.topo");
    std::fs::write(
        &f,
        "Switch 4 \"S-1\"\n[1] \"H-2\"[1]\n[9] \"S-1\"[1]\nbogus line here\n",
    )
    .unwrap();
    let out = fabricctl(&["topo", "info", &f]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{f}:")), "error should name the file: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn unknown_engine_and_bad_spec_are_clear_errors() {
    let d = TempDir::new("eng");
    let f = d.file("p.topo");
    ok(&["topo", "gen", "PGFT(2;2,4;1,2;1,1)", "-o", &f]);
    let out = fabricctl(&["analyze", &f, "--engine", "nosuch"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nosuch"));
    let out = fabricctl(&["topo", "gen", "PGFT(3;18,9;1,9,18;1,2,1)"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("expected 3 values for m, got 2"), "{err}");
    assert!(!Path::new(&d.file("none")).exists());
}

/// Every real cluster dump (copied into fabric-topology's test data, sources in its README)
/// parses and ranks: every switch gets a level; irregularities come out as diagnostics.
#[test]
fn real_dumps_parse_and_rank_with_precise_diagnostics() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fabric-topology/tests/data/real");
    let cases = [
        ("mlunacek-qdr-3xIS5600-214sw.ibnet", 214, 1356),
        ("loginoff-sx6036-fdr10-8sw.ibnet", 8, 145),
        ("psmn-x5-voltaire4036-qdr.ibnet", 11, 89),
        ("switchib-edr-6sw-flat.ibnet", 6, 96),
        ("ibtopotool-ufm-lab-degraded.ibnet", 2, 6),
    ];
    for (name, switches, nodes) in cases {
        let f = dir.join(name).display().to_string();
        let v = json(&["topo", "info", &f, "--json"]);
        assert_eq!(v["switches"], switches, "{name}");
        assert_eq!(v["nodes"], nodes, "{name}");
        let ranked: u64 = v["levels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .sum();
        assert_eq!(ranked, switches as u64, "{name}: every switch ranked");
    }
    let f = dir.join("ibtopotool-ufm-lab-degraded.ibnet").display().to_string();
    let v = json(&["topo", "info", &f, "--json"]);
    let diags: Vec<String> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_string())
        .collect();
    for (a, b) in [(1, 2), (19, 21), (29, 30)] {
        let want = format!("0xe41d2d030003e470[{a}]: cable loops back to port {b}");
        assert!(
            diags.iter().any(|d| d.starts_with(&want)),
            "missing {want:?} in {diags:#?}"
        );
    }
    assert!(
        diags.iter().any(|d| d.contains(":1: ignored unrecognised line")),
        "{diags:#?}"
    );
}

fn fails(args: &[&str]) -> String {
    let out = fabricctl(args);
    assert!(!out.status.success(), "fabricctl {args:?} should fail");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// `analyze --lfts DUMP --guid2lid LIDS` analyses tables read back from a fabric. Tables that
/// `route` wrote give exactly the metrics of routing the file (two independent paths: routed in
/// memory vs. parsed from text with the LIDs rebuilt from the guid2lid records), with LMC 1 and
/// LMC 0; a table with one leaf's entries removed is reported invalid.
#[test]
fn analyze_lfts_read_back_matches_routing_and_detects_holes() {
    let d = TempDir::new("lfts");
    let f = d.file("p.topo");
    ok(&["topo", "gen", "PGFT(2;4,8;1,4;1,1)", "-o", &f]);
    let keys = [
        "valid",
        "deadlock_free",
        "mu_sp",
        "mu_rp",
        "mu_a2a",
        "xi",
        "nu",
        "unreachable_pairs",
    ];
    for lmc in ["1", "0"] {
        let dump = d.file(&format!("lfts{lmc}.dump"));
        let g2l = d.file(&format!("g2l{lmc}"));
        ok(&["route", &f, "--lmc", lmc, "--lft-out", &dump, "--guid2lid-out", &g2l]);
        let routed = json(&["analyze", &f, "--lmc", lmc, "--rp", "20", "--seed", "3", "--json"]);
        let read = json(&[
            "analyze",
            &f,
            "--lfts",
            &dump,
            "--guid2lid",
            &g2l,
            "--rp",
            "20",
            "--seed",
            "3",
            "--json",
        ]);
        for k in keys {
            assert_eq!(read[k], routed[k], "LMC {lmc}: {k} differs: {read} vs {routed}");
        }
        assert_eq!(read["lmc"].as_u64(), Some(lmc.parse().unwrap()));
        assert_eq!(read["engine"], serde_json::Value::Null);
        assert_eq!(read["route_ms"], serde_json::Value::Null);
        // 32 end ports x 2^lmc LIDs + 12 switch LIDs.
        assert_eq!(
            read["top_lid"].as_u64(),
            Some(32 * (1 + lmc.parse::<u64>().unwrap()) + 12)
        );
        assert_eq!(read["valid"], true);
    }
    // Remove, in the first switch section (a leaf), the entry of one base LID (even, LMC 1) that
    // the leaf forwards upwards (port >= 5; its own nodes are on ports 1..=4): the pairs from
    // that leaf's 4 end ports to that destination become unreachable, nothing else.
    let dump = d.file("lfts1.dump");
    let g2l = d.file("g2l1");
    let text = std::fs::read_to_string(&dump).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let lid_of = |l: &str| u32::from_str_radix(l.split_whitespace().next()?.strip_prefix("0x")?, 16).ok();
    let victim = lines
        .iter()
        .position(|l| {
            l.contains("Channel Adapter")
                && lid_of(l).is_some_and(|lid| lid % 2 == 0)
                && l.split_whitespace()
                    .nth(1)
                    .and_then(|p| p.parse::<u8>().ok())
                    .is_some_and(|p| p >= 5)
        })
        .expect("an upward entry");
    assert_eq!(
        lines[..victim].iter().filter(|l| l.starts_with("Unicast")).count(),
        1,
        "in the first section"
    );
    lines.remove(victim);
    let holed = d.file("holed.dump");
    std::fs::write(&holed, lines.join("\n") + "\n").unwrap();
    let v = json(&[
        "analyze",
        &f,
        "--lfts",
        &holed,
        "--guid2lid",
        &g2l,
        "--rp",
        "5",
        "--json",
    ]);
    assert_eq!(v["valid"], false, "{v}");
    assert_eq!(v["unreachable_pairs"], 4, "{v}");

    // Errors: --lfts needs --guid2lid; a missing record and a wrong switch LID are named.
    let err = fails(&["analyze", &f, "--lfts", &dump]);
    assert!(err.contains("--guid2lid"), "{err}");
    let g = std::fs::read_to_string(&g2l).unwrap();
    let first = g.lines().next().unwrap();
    let guid = first.split_whitespace().next().unwrap();
    let short = d.file("short.g2l");
    std::fs::write(&short, g.lines().skip(1).collect::<Vec<_>>().join("\n") + "\n").unwrap();
    let err = fails(&["analyze", &f, "--lfts", &dump, "--guid2lid", &short]);
    assert!(err.contains("no LID recorded") && err.contains(guid), "{err}");
    // Shift every LID by 1000: the dump's switch headers no longer match.
    let shifted: String = g
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let n = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).unwrap() + 1000;
            format!("{} {:#06x} {:#06x}\n", w[0], n(w[1]), n(w[2]))
        })
        .collect();
    let moved = d.file("moved.g2l");
    std::fs::write(&moved, shifted).unwrap();
    let err = fails(&["analyze", &f, "--lfts", &dump, "--guid2lid", &moved]);
    assert!(err.contains("in the dump but"), "{err}");
}

/// `analyze --jobs` prints each job's own metrics; `--job-aware` routes on NIDs re-indexed by
/// job (thesis Alg. 4). On the thesis' G_3 (`XGFT(3;4,4,6;1,2,2)`) the storage nodes (port 4 of
/// every leaf) as one job: under Dmodc its shifts all climb to one top switch (mu 4), grouped
/// they spread; every pair stays routed either way.
#[test]
fn analyze_jobs_and_job_aware_routing() {
    let dir = TempDir::new("jobs");
    let topo = dir.file("g3.topo");
    ok(&["topo", "gen", "XGFT(3;4,4,6;1,2,2)", "-o", &topo]);
    let storage: Vec<String> = (0..6)
        .flat_map(|c| (0..4).map(move |b| format!("n(3,{b},{c})")))
        .collect();
    let jobs = dir.file("jobs.txt");
    std::fs::write(
        &jobs,
        format!(
            "# the storage nodes\nstorage: {}\ntwo: \"n(0,0,0)\" n(0,0,1)\n",
            storage.join(" ")
        ),
    )
    .unwrap();
    let run = |aware: bool| {
        let mut args = vec![
            "analyze",
            topo.as_str(),
            "--rp",
            "5",
            "--no-a2a",
            "--jobs",
            jobs.as_str(),
            "--json",
        ];
        if aware {
            args.push("--job-aware");
        }
        json(&args)
    };
    let (plain, aware) = (run(false), run(true));
    for (v, flag) in [(&plain, false), (&aware, true)] {
        assert_eq!(v["job_aware"], flag);
        assert_eq!(v["valid"], true);
        let j = v["jobs"].as_array().unwrap();
        assert_eq!(j.len(), 2, "{v}");
        assert_eq!(j[0]["name"], "storage");
        assert_eq!(j[0]["end_ports"], 24);
        assert_eq!(j[0]["unrouted_pairs"], 0);
        assert_eq!(j[1]["end_ports"], 2);
        // The job's all-to-all crosses switch-to-switch ports (its nodes sit on 24 leaves).
        assert!(j[0]["effective_xi"].as_u64().unwrap() >= 1);
    }
    let mu = |v: &serde_json::Value| v["jobs"][0]["mu_sp"].as_u64().unwrap();
    assert_eq!(mu(&plain), 4, "{plain}");
    assert!(mu(&aware) < mu(&plain), "job-aware {} vs {}", mu(&aware), mu(&plain));
    // The text form names the jobs too.
    let text = ok(&[
        "analyze",
        &topo,
        "--rp",
        "5",
        "--no-a2a",
        "--jobs",
        &jobs,
        "--job-aware",
    ]);
    assert!(text.contains("job_aware          true"), "{text}");
    assert!(text.contains("storage: 24 end ports, mu_sp"), "{text}");

    // Bad jobs files: file and line, and what is wrong.
    let bad = |body: &str, want: &str| {
        std::fs::write(&jobs, body).unwrap();
        let err = fails(&["analyze", &topo, "--rp", "5", "--no-a2a", "--jobs", &jobs]);
        assert!(err.contains(&format!("{jobs}:")) && err.contains(want), "{err}");
    };
    bad("a: n(0,0,0)\nb: n(9,9,9)\n", ":2: job \"b\": no end port \"n(9,9,9)\"");
    bad("a n(0,0,0)\n", ":1: expected `NAME: PORT PORT ...`");
    bad("a: n(0,0,0)\na: n(1,0,0)\n", ":2: job \"a\" is listed twice");
    bad("a: \"n(0,0,0)\n", ":1: job \"a\": unterminated quote");
    bad("a:\n", ":1: job \"a\" lists no end port");
    // --job-aware needs jobs.
    let err = fails(&["analyze", &topo, "--job-aware"]);
    assert!(err.contains("--jobs"), "{err}");
}

/// Issue #12 defect 3, offline: `analyze` and `route` check every connected pair and fall back
/// to Up*/Down* for what the engine leaves unreachable, the same way as the daemon. Two leaves
/// that share no spine (L0 only on S0, L1 only on S1) are connected through L2 but not up-down
/// connected: Dmodc alone leaves their 2 × 2 × 2 pairs unreachable.
#[test]
fn route_and_analyze_fall_back_to_updown_for_what_dmodc_leaves_unreachable() {
    let d = TempDir::new("fallback");
    let topo = d.file("split.net");
    let mut text = String::new();
    for (leaf, spines) in [("L0", &["S0"][..]), ("L1", &["S1"][..]), ("L2", &["S0", "S1"][..])] {
        text.push_str(&format!("Switch 8 \"{leaf}\"\n"));
        for n in 0..2 {
            text.push_str(&format!("[{}] \"{leaf}n{n}\"[1]\n", n + 1));
        }
        for s in spines {
            text.push_str(&format!(
                "[{}] \"{s}\"[{}]\n",
                5 + s[1..].parse::<u32>().unwrap(),
                leaf[1..].parse::<u32>().unwrap() + 1
            ));
        }
        text.push('\n');
    }
    for (spine, leaves) in [("S0", &["L0", "L2"][..]), ("S1", &["L1", "L2"][..])] {
        text.push_str(&format!("Switch 8 \"{spine}\"\n"));
        for l in leaves {
            text.push_str(&format!(
                "[{}] \"{l}\"[{}]\n",
                l[1..].parse::<u32>().unwrap() + 1,
                5 + spine[1..].parse::<u32>().unwrap()
            ));
        }
        text.push('\n');
    }
    for leaf in ["L0", "L1", "L2"] {
        for n in 0..2 {
            text.push_str(&format!("Ca 1 \"{leaf}n{n}\"\n[1] \"{leaf}\"[{}]\n\n", n + 1));
        }
    }
    std::fs::write(&topo, text).unwrap();
    let v = json(&["analyze", &topo, "--engine", "dmodc", "--rp", "4", "--json"]);
    assert_eq!(v["valid"], true, "{v}");
    assert_eq!(v["unreachable_pairs"], 0, "{v}");
    assert_eq!(v["deadlock_free"], true, "{v}");
    let fb = &v["routing_fallback"];
    assert_eq!(fb["engine_failed_destinations"], 4, "{v}");
    assert_eq!(fb["engine_unreachable_pairs"], 8, "{v}");
    assert!(fb["fallback"].as_str().unwrap().starts_with("updown-"), "{v}");
    assert!(
        fb["reason"].as_str().unwrap().starts_with("dmodc left 4 destinations"),
        "{v}"
    );
    // `route` writes the repaired tables and says so on stderr.
    let dump = d.file("lfts.dump");
    let out = fabricctl(&["route", &topo, "--engine", "dmodc", "--lft-out", &dump]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: routing validity: dmodc left 4 destinations"),
        "{err}"
    );
}

/// A routed fabric for the hostile-input tests: (dir, topology, dump, guid2lid, dump text,
/// guid2lid text).
fn routed_fixture(tag: &str) -> (TempDir, String, String, String, String, String) {
    let d = TempDir::new(tag);
    let f = d.file("p.topo");
    ok(&["topo", "gen", "PGFT(2;2,2;1,2;1,1)", "-o", &f]);
    let dump = d.file("lfts.dump");
    let g2l = d.file("guid2lid");
    ok(&["route", &f, "--lft-out", &dump, "--guid2lid-out", &g2l]);
    let dump_text = std::fs::read_to_string(&dump).unwrap();
    let g2l_text = std::fs::read_to_string(&g2l).unwrap();
    (d, f, dump, g2l, dump_text, g2l_text)
}

// Numbers and bytes from files are checked before they are trusted (issue #12, defect 9): each
// is an error naming the file and line (or the flag), never a panic or an allocation of the
// claimed size.

/// A dump header claiming LIDs up to 2^32 - 1 (was: a 103 GB allocation).
#[test]
fn analyze_lfts_with_a_huge_lid_range_is_refused_on_its_line() {
    let (d, f, _dump, g2l, dump_text, _) = routed_fixture("hugelid");
    let huge = d.file("huge.dump");
    let first = dump_text.lines().next().unwrap();
    let top = first.split(']').next().unwrap().trim_start_matches("Unicast lids [0-");
    let mut text = String::from("\n");
    text.push_str(&dump_text.replacen(&format!("[0-{top}]"), "[0-4294967295]", 1));
    std::fs::write(&huge, text).unwrap();
    let err = fails(&["analyze", &f, "--lfts", &huge, "--guid2lid", &g2l]);
    assert!(
        err.contains(&format!("{huge}:2: LID 4294967295 is above the highest LID")),
        "{err}"
    );
    // Within 24 bits but above --max-lid (0xBFFF): refused before the tables are allocated.
    std::fs::write(&huge, dump_text.replacen(&format!("[0-{top}]"), "[0-16777215]", 1)).unwrap();
    let err = fails(&["analyze", &f, "--lfts", &huge, "--guid2lid", &g2l]);
    assert!(
        err.contains(&format!("{huge}:1: LID 16777215 is above the highest LID 0xbfff")),
        "{err}"
    );
}

/// `--rp` near 2^64 (was: a capacity-overflow panic).
#[test]
fn analyze_rp_beyond_the_cap_is_a_usage_error() {
    let d = TempDir::new("rpcap");
    let f = d.file("p.topo");
    ok(&["topo", "gen", "PGFT(2;2,2;1,2;1,1)", "-o", &f]);
    let out = fabricctl(&["analyze", &f, "--rp", "18446744073709551615", "--no-a2a"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(2), "usage error: {err}");
    assert!(err.contains("--rp") && err.contains("100000"), "{err}");
}

/// Invalid UTF-8 in a dump or a guid2lid (was: "stream did not contain valid UTF-8", no line).
#[test]
fn analyze_names_the_line_of_invalid_utf8() {
    let (d, f, dump, g2l, dump_text, g2l_text) = routed_fixture("utf8");
    let bad = d.file("bad.dump");
    let mut bytes: Vec<u8> = Vec::new();
    for (i, l) in dump_text.lines().enumerate() {
        bytes.extend_from_slice(l.as_bytes());
        if i == 2 {
            bytes.extend_from_slice(b" \xff\xfe");
        }
        bytes.push(b'\n');
    }
    std::fs::write(&bad, bytes).unwrap();
    let err = fails(&["analyze", &f, "--lfts", &bad, "--guid2lid", &g2l]);
    assert!(err.contains(&format!("{bad}:3: invalid UTF-8 text")), "{err}");
    let bad_g = d.file("bad.guid2lid");
    let mut bytes = b"# LIDs\n\xc3\x28 0x1 0x1\n".to_vec();
    bytes.extend_from_slice(g2l_text.as_bytes());
    std::fs::write(&bad_g, bytes).unwrap();
    let err = fails(&["analyze", &f, "--lfts", &dump, "--guid2lid", &bad_g]);
    assert!(err.contains(&format!("{bad_g}:2: invalid UTF-8 text")), "{err}");
}

/// A guid2lid with a LID recorded twice or above --max-lid (was: rewritten without a word).
#[test]
fn guid2lid_with_duplicate_or_out_of_range_lids_is_refused_not_rewritten() {
    let (d, f, dump, g2l, _, g2l_text) = routed_fixture("g2ldup");
    let lines: Vec<&str> = g2l_text.lines().collect();
    let lid_of_first = lines[0].split_whitespace().nth(1).unwrap();
    let dup = d.file("dup.guid2lid");
    let mut text = g2l_text.clone();
    text.push_str(&format!("0x00000000deadbeef {lid_of_first} {lid_of_first}\n"));
    std::fs::write(&dup, &text).unwrap();
    let n = lines.len() + 1;
    for args in [
        vec![
            "route",
            f.as_str(),
            "--guid2lid",
            dup.as_str(),
            "--guid2lid-out",
            g2l.as_str(),
        ],
        vec![
            "analyze",
            f.as_str(),
            "--lfts",
            dump.as_str(),
            "--guid2lid",
            dup.as_str(),
        ],
    ] {
        let err = fails(&args);
        assert!(
            err.contains(&format!("{dup}:{n}: LID")) && err.contains("is already recorded for"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(std::fs::read_to_string(&g2l).unwrap(), g2l_text, "nothing rewritten");
    let high = d.file("high.guid2lid");
    std::fs::write(&high, format!("{g2l_text}0x00000000deadbeef 0xc000 0xc001\n")).unwrap();
    let err = fails(&["route", &f, "--guid2lid", &high, "--guid2lid-out", &g2l]);
    assert!(
        err.contains(&format!(
            "{high}: 0x00000000deadbeef has LIDs 0xc000..0xc001, above the highest usable LID 0xbfff"
        )),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&g2l).unwrap(), g2l_text, "nothing rewritten");
}

/// Not a regular file: refused, not read (was: reading /dev/zero until memory ran out).
#[test]
fn inputs_that_are_not_regular_files_are_refused() {
    let (_d, f, _, g2l, _, _) = routed_fixture("devzero");
    let err = fails(&["analyze", &f, "--lfts", "/dev/zero", "--guid2lid", &g2l]);
    assert!(err.contains("/dev/zero: not a regular file"), "{err}");
    let err = fails(&["topo", "info", "/dev/zero"]);
    assert!(err.contains("/dev/zero") && err.contains("not a regular file"), "{err}");
}

#[test]
fn a_closed_stdout_ends_topo_gen_quietly() {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fabricctl"))
        .args(["topo", "gen", "PGFT(3;18,9,36;1,9,18;1,2,1)"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start fabricctl");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("read");
    // The reader is dropped: the rest of the (large) file meets a closed pipe (`| head -1`).
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(first.starts_with('#'), "{first}");
    assert!(
        out.status.success() && !err.contains("panicked"),
        "{:?}: {err}",
        out.status
    );
}

/// `--lft-out` naming a FIFO (as `/dev/null` or `/dev/stdout` name devices) writes into it: the
/// atomic write's rename must not replace a special file by a regular one (run as root,
/// `--lft-out /dev/null` replaced the machine's `/dev/null`).
#[test]
fn route_writes_into_a_fifo_without_replacing_it() {
    use std::os::unix::fs::FileTypeExt as _;
    use std::time::{Duration, Instant};
    let d = TempDir::new("fifo");
    let f = d.file("p.topo");
    let fifo = d.file("lfts.fifo");
    let got = d.file("got.dump");
    let dump = d.file("lfts.dump");
    ok(&["topo", "gen", "PGFT(2;4,8;1,4;1,1)", "-o", &f]);
    ok(&["route", &f, "--engine", "dmodc", "--lft-out", &dump]);
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo {fifo}");
    // The reader blocks in open() until a writer opens the FIFO itself.
    let mut reader = std::process::Command::new("sh")
        .args(["-c", &format!("exec cat '{fifo}' > '{got}'")])
        .spawn()
        .unwrap();
    ok(&["route", &f, "--engine", "dmodc", "--lft-out", &fifo]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let finished = loop {
        if let Some(status) = reader.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = reader.kill();
            let _ = reader.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(kind.is_fifo(), "{fifo} is no longer a FIFO: {kind:?}");
    assert!(finished.is_some_and(|s| s.success()), "the reader never got the dump");
    assert_eq!(
        std::fs::read_to_string(&got).unwrap(),
        std::fs::read_to_string(&dump).unwrap()
    );
}
