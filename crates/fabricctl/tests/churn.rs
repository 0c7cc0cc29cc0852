//! `fabricctl churn`: LFT blocks rewritten by single cable faults (issue 16, minimal churn).

mod common;

use common::{fabricctl, json, ok, TempDir};

const PGFT: &str = "PGFT(3;4,4,6;1,4,4;1,1,1)";

fn generated(d: &TempDir) -> String {
    let f = d.file("p.topo");
    ok(&["topo", "gen", PGFT, "-o", &f]);
    f
}

/// Random faults alternate between the cable classes (leaf–level 1, level 1–level 2), are
/// distinct and the same for the same seed.
#[test]
fn drawn_faults_cover_both_cable_classes_and_follow_the_seed() {
    let d = TempDir::new("list");
    let f = generated(&d);
    let list = json(&["churn", &f, "--faults", "6", "--seed", "3", "--list"]);
    let faults = list.as_array().unwrap();
    assert_eq!(faults.len(), 6);
    let classes: Vec<(u64, u64)> = faults
        .iter()
        .map(|c| (c["lo"]["level"].as_u64().unwrap(), c["hi"]["level"].as_u64().unwrap()))
        .collect();
    assert_eq!(classes, vec![(0, 1), (1, 2), (0, 1), (1, 2), (0, 1), (1, 2)]);
    let keys: std::collections::HashSet<String> = faults
        .iter()
        .map(|c| format!("{}[{}]", c["lo"]["guid"], c["lo"]["port"]))
        .collect();
    assert_eq!(keys.len(), 6, "distinct cables: {faults:?}");
    assert_eq!(list, json(&["churn", &f, "--faults", "6", "--seed", "3", "--list"]));
    assert_ne!(list, json(&["churn", &f, "--faults", "6", "--seed", "4", "--list"]));
}

/// Every fault rewrites at least the blocks that held an entry on the dead port (on its two
/// switches), and no more blocks than the tables have; the summary is the mean and max of the
/// rows.
#[test]
fn churn_counts_at_least_the_forced_blocks() {
    let d = TempDir::new("dmodc");
    let f = generated(&d);
    for lmc in ["0", "1"] {
        let v = json(&[
            "churn", &f, "--engine", "dmodc", "--faults", "4", "--lmc", lmc, "--json",
        ]);
        assert_eq!(v["lmc"].as_u64().unwrap().to_string(), lmc);
        let total = v["total_blocks"].as_u64().unwrap();
        let rows = v["faults"].as_array().unwrap();
        assert_eq!(rows.len(), 4);
        let mut sum = 0;
        let mut max = 0;
        for r in rows {
            let (b, forced) = (r["blocks"].as_u64().unwrap(), r["forced_blocks"].as_u64().unwrap());
            assert!(forced >= 2, "both end switches used the dead port: {r}");
            assert!(b >= forced && b <= total, "{r}");
            assert!(r["switches"].as_u64().unwrap() >= 2, "{r}");
            assert!(r["entries"].as_u64().unwrap() >= b, "{r}");
            sum += b;
            max = max.max(b);
        }
        assert_eq!(v["blocks_max"].as_u64().unwrap(), max);
        assert!((v["blocks_mean"].as_f64().unwrap() - sum as f64 / 4.0).abs() < 1e-9);
    }
}

/// A named fault is measured alone, by either of its ends; the same cable from both ends gives
/// the same churn.
#[test]
fn a_named_fault_by_either_end_gives_the_same_churn() {
    let d = TempDir::new("named");
    let f = generated(&d);
    let list = json(&["churn", &f, "--faults", "1", "--list"]);
    let c = &list[0];
    let lo = format!("{}[{}]", c["lo"]["guid"].as_str().unwrap(), c["lo"]["port"]);
    let hi = format!("{}:{}", c["hi"]["guid"].as_str().unwrap(), c["hi"]["port"]);
    let a = json(&["churn", &f, "--engine", "updown", "--fault", &lo, "--json"]);
    let b = json(&["churn", &f, "--engine", "updown", "--fault", &hi, "--json"]);
    assert_eq!(a["faults"].as_array().unwrap().len(), 1);
    assert_eq!(a["faults"], b["faults"]);
}

#[test]
fn bad_faults_and_engines_are_clear_errors() {
    let d = TempDir::new("bad");
    let f = generated(&d);
    let out = fabricctl(&["churn", &f, "--fault", "0xdeadbeef[1]"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no switch"), "{err}");
    let out = fabricctl(&["churn", &f, "--fault", "nonsense"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected SWITCH[PORT]"));
    let out = fabricctl(&["churn", &f, "--engine", "frobnicate"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown routing engine"));
}
