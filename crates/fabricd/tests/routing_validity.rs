//! Issue #12, defect 3: a generation must be valid for every connected pair. On the default
//! simulator (the mock driver's `PGFT(2;18,36;1,18;1,1)`), leaf `S(0,0)` keeps only its up-link
//! on port 19 and leaf `S(0,1)` only the one on port 20: the two leaves share no spine, the
//! fabric stays connected (through the other leaves), but no up-down path joins them, so Dmodc
//! leaves their 2 × 18 × 18 base-LID pairs unreachable. The real daemon must notice it at every
//! generation, re-route those destinations by Up*/Down*, and say so in status, metrics and log;
//! the simulated switches (the mock's all-pairs walk through the installed tables) must show
//! every pair reachable over the base and the escape LIDs.

mod common;

use common::*;
use fabric_proto::v1 as pb;

/// The default simulator's generator (`config/fabricd.toml`, `deploy/run-sim.sh`).
const DEFAULT_SIM: &str = "PGFT(2;18,36;1,18;1,1)";

fn switch_guid(t: &pb::Topology, name: &str) -> u64 {
    t.switches
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no switch named {name:?}"))
        .guid
}

/// The value of an unlabelled sample `name` in an OpenMetrics text.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no sample {name} in:\n{text}"))
        .trim()
        .parse()
        .expect("number")
}

#[test]
fn still_connected_fabric_that_dmodc_cannot_route_gets_a_valid_fallback() {
    let dir = test_dir("routing_validity");
    let port = free_port();
    let mut opts = Opts::new(DEFAULT_SIM);
    opts.extra = format!("[prometheus]\nlisten = \"127.0.0.1:{port}\"\n");
    let d = Daemon::spawn(&dir, &opts, &[]);
    run_with_deadline(180, async {
        let mut c = d.ready().await;
        let before = status(&mut c).await;
        assert!(before.routing_valid, "complete fat-tree: {before:?}");
        assert_eq!(before.fallback_destinations, 0);
        assert!(before.routing_fallback_reason.is_empty());

        let t = topology(&mut c).await;
        let l00 = switch_guid(&t, "PGFT L0 S(0,0)");
        let l01 = switch_guid(&t, "PGFT L0 S(0,1)");
        // Physical faults, as a cable pulled: the mock's switches see the ports down.
        let mut downs: Vec<(u64, u32)> = (20..=36).map(|p| (l00, p)).collect();
        downs.extend(std::iter::once(19).chain(21..=36).map(|p| (l01, p)));
        let last = downs.len() - 1;
        let mut generation = 0;
        for (i, &(sw, p)) in downs.iter().enumerate() {
            let r = c
                .inject_fault(link_req(sw, p, false, true, i == last))
                .await
                .unwrap_or_else(|e| panic!("inject {sw:#x}[{p}]: {e}"))
                .into_inner();
            generation = r.generation;
        }
        let s = status(&mut c).await;
        assert_eq!(s.generation, generation);
        assert_eq!(s.pending_faults, 0, "{s:?}");
        assert_eq!(s.links_up, s.links - 34, "{s:?}");

        // What the switches hold: every pair reachable, base and escape LIDs.
        let base = verify(&mut c).await;
        assert!(base.pairs_checked >= 648 * 647, "{base:?}");
        assert_eq!(
            base.unreachable_count,
            0,
            "base LIDs: {:?}",
            &base.unreachable[..base.unreachable.len().min(5)]
        );
        let escape = c
            .verify_reachability(pb::VerifyReachabilityRequest { escape: true })
            .await
            .expect("VerifyReachability escape")
            .into_inner();
        assert_eq!(escape.unreachable_count, 0, "escape LIDs: {escape:?}");

        // Status names the fallback.
        assert!(s.routing_valid, "{s:?}");
        assert_eq!((s.unreachable_pairs, s.disconnected_pairs), (0, 0), "{s:?}");
        assert!(s.fallback_destinations >= 36, "{s:?}");
        let reason = &s.routing_fallback_reason;
        assert!(
            reason.starts_with("dmodc left 36 destinations unreachable from connected sources (648 pairs"),
            "{reason}"
        );
        assert!(reason.contains("Up*/Down*"), "{reason}");

        // Metrics.
        let m = http_get(port, "/metrics");
        assert_eq!(metric(&m, "fabricd_routing_valid"), 1.0, "{m}");
        assert_eq!(metric(&m, "fabricd_routing_unreachable_pairs"), 0.0);
        assert_eq!(metric(&m, "fabricd_routing_engine_unreachable_pairs"), 648.0);
        assert_eq!(
            metric(&m, "fabricd_routing_fallback_destinations"),
            s.fallback_destinations as f64
        );
        assert!(metric(&m, "fabricd_routing_fallbacks_total") >= 1.0);

        // The log: one WARN naming the engine, the counts and the fallback.
        let log = d.log_text();
        let warn = log
            .lines()
            .find(|l| l.contains("WARN") && l.contains("routing validity"))
            .unwrap_or_else(|| panic!("no routing validity WARN in the log:\n{log}"));
        for needle in [
            "engine=dmodc",
            "failed_destinations=36",
            "failed_pairs=648",
            "fallback=updown-",
            "valid=true",
        ] {
            assert!(warn.contains(needle), "{needle} missing from {warn}");
        }

        // Cables back: the engine's own routing again, no fallback.
        for (i, &(sw, p)) in downs.iter().enumerate() {
            c.inject_fault(link_req(sw, p, true, true, i == last))
                .await
                .unwrap_or_else(|e| panic!("inject up {sw:#x}[{p}]: {e}"));
        }
        let s = status(&mut c).await;
        assert!(
            s.routing_valid && s.fallback_destinations == 0 && s.routing_fallback_reason.is_empty(),
            "{s:?}"
        );
        assert_eq!(verify(&mut c).await.unreachable_count, 0);
        let m = http_get(port, "/metrics");
        assert_eq!(metric(&m, "fabricd_routing_fallback_destinations"), 0.0);
        assert_eq!(metric(&m, "fabricd_routing_engine_unreachable_pairs"), 0.0);
    });
}
