//! Issue #19: the real daemon on the mock driver's built-in fabric generated from a direct
//! topology notation (`[driver.mock] generator = "SLIMFLY(5;4)"`, also a degraded Dragonfly and
//! a HyperX). Ranking finds no fat-tree: the topology-agnostic mode routes the base LIDs
//! with Up*/Down*, so every generation is valid; status and `fabricctl status` say
//! so, and the simulated switches reach every pair over the base and the escape LIDs.

mod common;

use std::time::Duration;

use common::*;

fn check(generator: &str, switches: usize, nodes: usize) {
    let dir = test_dir(&format!("direct-{}", generator.split('(').next().unwrap()));
    let d = Daemon::spawn(&dir, &Opts::new(generator), &[]);
    run_with_deadline(180, async {
        let mut c = d.ready().await;
        let s = wait_status(&d, &mut c, "first generation", Duration::from_secs(60), |s| {
            s.generation >= 1
        })
        .await;
        let t = topology(&mut c).await;
        assert_eq!((t.switches.len(), t.end_ports.len()), (switches, nodes), "{generator}");
        assert!(s.routing_valid, "{generator}: {s:?}\n{}", d.log_text());
        // No fat-tree: the topology-agnostic mode (`[routing] topology = "auto"`) routes the
        // base LIDs with Up*/Down* directly, and status says so.
        assert_eq!(s.topology_mode, "agnostic", "{generator}: {s:?}");
        assert!(!s.fat_tree_found, "{generator}: {s:?}");
        assert_eq!(s.routed_by, "updown", "{generator}: {s:?}");
        assert_eq!(s.fallback_destinations, 0, "{generator}: {s:?}");
        for escape in [false, true] {
            let r = c
                .verify_reachability(fabric_proto::v1::VerifyReachabilityRequest { escape })
                .await
                .expect("VerifyReachability")
                .into_inner();
            assert_eq!(r.unreachable_count, 0, "{generator} escape={escape}: {r:?}");
            assert!(r.pairs_checked > 0);
        }
        // `fabricctl status` on the same daemon.
        let socket = d.socket.display().to_string();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(fabricctl_binary())
                .args(["--socket", &socket, "status", "--json"])
                .output()
                .expect("run fabricctl")
        })
        .await
        .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert!(v["generation"].as_u64().unwrap() >= 1, "{v}");
        assert_eq!(v["routing_valid"], true, "{v}");
        assert_eq!(v["topology_mode"], "agnostic", "{v}");
    });
}

#[test]
fn mock_slim_fly_is_routed_valid_in_the_agnostic_mode() {
    // The paper's deployment: 50 switches, 200 end nodes.
    check("SLIMFLY(5;4)", 50, 200);
}

#[test]
fn mock_dragonfly_and_hyperx_are_routed_valid() {
    check("DRAGONFLY(2)", 36, 72);
    check("HYPERX(4,4;2)", 16, 32);
}
