//! Issue #19, topology-agnostic mode with real parts: `fabricctl topo gen 'SLIMFLY(5;4)'` (the
//! Slim Fly paper's deployment, 50 switches and 200 end nodes) is the `ibsim` fabric, fabricd
//! runs the umad driver under the umad2sim shim. The daemon must program every switch; the
//! tables read back with `ibroute` (not the daemon's own view) must bring every source switch
//! to every end port's base and escape LID over the file's cables; status and
//! `fabricctl status --json` must report the agnostic mode and who routed it.
//!
//! Needs `ibsim` (ibsim-utils) and `ibroute` (infiniband-diags); a missing tool fails the test.

mod common;
mod umad_sim;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{run_with_deadline, test_dir, topology};
use fabric_ibsim_harness::Ibsim;
use fabric_proto::v1 as pb;
use umad_sim::tables::{end_port_lids, read_back, walk_all};
use umad_sim::{config, next_generation};

const SPEC: &str = "SLIMFLY(5;4)";

/// Runs the daemon with `[routing] topology = setting` on the generated Slim Fly; returns the
/// number of (source switch, switch LID) walks of the read-back tables that fail (management
/// traffic to the switches; the validity check and its fallback only cover end ports).
fn run(setting: &str) -> usize {
    let dir = test_dir(&format!("umad-slimfly-{setting}"));
    let (text, f, host) = umad_sim::generated_fabric(&dir, SPEC);
    assert_eq!((f.num_switches(), f.num_end_ports()), (50, 200));
    let sim = Ibsim::start(&dir, &text, host);
    let cfg = dir.join("fabricd.toml");
    std::fs::write(&cfg, config(&format!("[routing]\ntopology = \"{setting}\"\n"))).expect("write config");
    let env = sim.env();
    let d = umad_sim::spawn_daemon(&dir, &cfg, &env);
    let mut switch_bad = 0;
    run_with_deadline(58, async {
        let t0 = Instant::now();
        let mut c = d.ready().await;
        let s = next_generation(&d, &mut c, 0, Duration::from_secs(40)).await;
        eprintln!("{SPEC}: first generation installed {:?} after start", t0.elapsed());
        assert_eq!(s.driver, "umad");
        // Status: the agnostic mode, no fat-tree, Up*/Down* routed every destination.
        assert_eq!(s.topology_mode, "agnostic", "{s:?}");
        assert!(!s.fat_tree_found, "{s:?}");
        assert_eq!(s.topology_setting, setting);
        // "any": the engine is replaced; "auto": the computation found no fat-tree and routed
        // with Up*/Down* directly (no fallback needed).
        assert_eq!(s.routed_by, "updown", "{s:?}");
        assert_eq!(s.fallback_destinations, 0, "{s:?}");
        if setting == "any" {
            assert_eq!(s.engine, "updown", "{s:?}");
        }
        assert!(s.routing_valid && s.unreachable_pairs == 0, "{s:?}");
        assert!(
            d.log_text().contains("topology-agnostic mode"),
            "no mode warning in the log:\n{}",
            d.log_text()
        );
        let topo = topology(&mut c).await;
        assert_eq!(topo.end_ports.len(), 200);
        assert!(topo.end_ports.iter().all(|e| e.base_lid > 0 && e.escape_lid > 0));
        // Every LID an end port answers to, and its port GUID.
        let dests = end_port_lids(&topo);
        assert_eq!(dests.len(), 400);
        let lfts = c
            .get_lft(pb::GetLftRequest {
                switch: String::new(),
                format: pb::LftFormat::Raw as i32,
            })
            .await
            .expect("GetLft")
            .into_inner();
        assert_eq!(lfts.switches.len(), 50);
        let sim = &sim;
        let tables = read_back(sim, &f);
        assert!(
            tables.values().all(|t| t.len() >= dests.len()),
            "short tables read back"
        );
        let bad = walk_all(&f, &tables, &dests);
        assert!(
            bad.is_empty(),
            "{} (switch, LID) walks fail, e.g. {:?}",
            bad.len(),
            &bad[..bad.len().min(5)]
        );
        eprintln!(
            "{SPEC}: {} switch tables read back with ibroute, {} walks valid, {:?} after start",
            tables.len(),
            50 * dests.len(),
            t0.elapsed()
        );
        let switch_lids: HashMap<u64, u64> = lfts.switches.iter().map(|s| (u64::from(s.lid), s.guid)).collect();
        switch_bad = walk_all(&f, &tables, &switch_lids).len();
        eprintln!(
            "{SPEC} topology = {setting}: {switch_bad} of {} (switch, switch LID) walks fail",
            50 * 50
        );
        // `fabricctl status --json` on the same daemon.
        let socket = d.socket.display().to_string();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(common::fabricctl_binary())
                .args(["--socket", &socket, "status", "--json"])
                .output()
                .expect("run fabricctl")
        })
        .await
        .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(v["topology_mode"], "agnostic", "{v}");
        assert_eq!(v["fat_tree_found"], false, "{v}");
    });
    switch_bad
}

#[test]
fn umad_slim_fly_is_programmed_valid_in_the_agnostic_mode() {
    assert_eq!(run("auto"), 0, "switch LIDs unreachable with topology = \"auto\"");
}

#[test]
fn umad_slim_fly_forced_agnostic_mode_routes_every_lid_by_updown() {
    assert_eq!(run("any"), 0, "switch LIDs unreachable with topology = \"any\"");
}
