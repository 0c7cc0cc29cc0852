//! The port-health monitor end to end, on the real `fabricd` with the mock driver: port errors
//! injected through the drill RPC show as rising counters and rates in `GetHealth` and in
//! Prometheus; with `action = "isolate"` (applied by a SIGHUP reload) the port's link is
//! isolated and the next generation routes around it (the installed LFTs never forward through
//! it; every pair still reaches its destination); the isolation survives a restart; the real
//! `fabricctl health clear` restores it. Needs the mock's simulated counters
//! (`read_port_counters`, `add_port_errors`).

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{
    fabricctl_binary, free_port, http_get, lfts, run_with_deadline, status, test_dir, topology, verify, wait_status,
    Daemon, Opts,
};
use fabric_proto::v1 as pb;
use fabric_proto::Client;

const SMALL: &str = "PGFT(2;4,6;1,3;1,1)";

fn config_text(prom: u16, action: &str, fault_injection: bool) -> String {
    let mut opts = Opts::new(SMALL);
    opts.fault_injection = fault_injection;
    opts.extra = format!(
        "[prometheus]\nlisten = \"127.0.0.1:{prom}\"\n\n[health]\ninterval_s = 1\naction = \"{action}\"\n\
         thresholds = {{ symbol_errors = 10.0, rcv_errors = 5.0 }}\nmetrics_top_ports = 5\n"
    );
    opts.config_text()
}

async fn health(c: &mut Client) -> pb::HealthReport {
    c.get_health(pb::GetHealthRequest { all: true, limit: 0 })
        .await
        .expect("GetHealth")
        .into_inner()
}

fn port_of(r: &pb::HealthReport, switch: u64, port: u32) -> Option<&pb::PortHealth> {
    r.ports.iter().find(|p| p.switch_guid == switch && p.port == port)
}

fn counter(p: &pb::PortHealth, name: &str) -> Option<pb::CounterValue> {
    p.counters.iter().find(|c| c.counter == name).cloned()
}

/// Polls GetHealth until `ok` holds for the port (returns the report) or 20 s pass.
async fn wait_health(
    d: &Daemon,
    c: &mut Client,
    what: &str,
    ok: impl Fn(&pb::HealthReport) -> bool,
) -> pb::HealthReport {
    let t = std::time::Instant::now();
    loop {
        let r = health(c).await;
        if ok(&r) {
            return r;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{what}: not within 20 s; report {:?}; log:\n{}",
            (r.counters_note, r.refused, r.isolated, r.ports.first()),
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn inject(c: &mut Client, switch: u64, port: u32, name: &str, n: u64) {
    c.inject_port_errors(pb::InjectPortErrorsRequest {
        switch: format!("0x{switch:016x}"),
        port,
        node: String::new(),
        counters: HashMap::from([(name.to_string(), n)]),
    })
    .await
    .expect("InjectPortErrors");
}

async fn reload(d: &Daemon, text: &str) {
    let before = d.log_text().matches("configuration reloaded").count();
    std::fs::write(&d.config, text).expect("write config");
    d.signal(1);
    let t = std::time::Instant::now();
    while d.log_text().matches("configuration reloaded").count() == before {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "reload not applied; log:\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether some LFT entry of `switch` forwards out of `port`.
fn forwards_through(l: &HashMap<u64, Vec<u8>>, switch: u64, port: u32) -> bool {
    l.get(&switch).is_some_and(|t| t.iter().any(|&p| u32::from(p) == port))
}

async fn fabricctl(socket: &std::path::Path, args: &[&str]) -> (bool, String) {
    let mut all = vec!["--socket".to_string(), socket.display().to_string()];
    all.extend(args.iter().map(ToString::to_string));
    let o = tokio::task::spawn_blocking(move || {
        std::process::Command::new(fabricctl_binary())
            .args(&all)
            .output()
            .expect("run fabricctl")
    })
    .await
    .expect("fabricctl task");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

#[test]
fn port_errors_are_seen_isolated_routed_around_persisted_and_cleared() {
    run_with_deadline(240, async {
        let dir = test_dir("health-isolate");
        let prom = free_port();
        let cfg_path = dir.join("fabricd.toml");
        std::fs::write(&cfg_path, config_text(prom, "report", true)).unwrap();
        let mut d = Daemon::spawn_with_config(&dir, &cfg_path, &[]);
        let mut c = d.ready().await;
        // A leaf up-link (leaves have 3: isolating one keeps the fabric whole).
        let t = topology(&mut c).await;
        let (sw, port) = common::switch_links(&t)[0];
        let remote = t
            .switches
            .iter()
            .find(|s| s.guid == sw)
            .and_then(|s| s.ports.iter().find(|p| p.port == port))
            .map(|p| (p.remote_guid, p.remote_port))
            .expect("the link's other end");
        let (_, before) = lfts(&mut c).await;
        assert!(forwards_through(&before, sw, port), "the up-link is used before");

        // Report: the counter rises and its rate shows; the port is a warning, not isolated.
        tokio::task::spawn_blocking(fabricctl_binary)
            .await
            .expect("build fabricctl");
        wait_health(&d, &mut c, "a first poll", |r| {
            r.polls >= 1 && port_of(r, sw, port).is_some()
        })
        .await;
        inject(&mut c, sw, port, "symbol_errors", 300).await;
        wait_health(&d, &mut c, "the rate of the injected errors", |r| {
            port_of(r, sw, port)
                .and_then(|p| counter(p, "symbol_errors"))
                .is_some_and(|v| v.value == 300 && v.has_rate && v.rate > 10.0)
        })
        .await;
        // Errors keep coming (100 every 200 ms) while the report is checked.
        let mut drill = d.client().await;
        let injector = tokio::spawn(async move {
            loop {
                inject(&mut drill, sw, port, "symbol_errors", 100).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        let r = wait_health(&d, &mut c, "a rising counter", |r| {
            port_of(r, sw, port)
                .and_then(|p| counter(p, "symbol_errors"))
                .is_some_and(|v| v.value > 300 && v.has_rate && v.rate > 10.0)
        })
        .await;
        assert!(r.counters_note.is_empty(), "{}", r.counters_note);
        let p = port_of(&r, sw, port).unwrap();
        assert_eq!(p.state, pb::PortHealthState::Warning as i32, "{p:?}");
        assert!(p.reason.contains("symbol_errors"), "{}", p.reason);
        assert_eq!(r.ports[0].switch_guid, sw, "the worst port comes first");
        let metrics = http_get(prom, "/metrics");
        assert!(
            metrics.contains("fabricd_health_port_error_rate{") && metrics.contains("counter=\"symbol_errors\""),
            "{metrics}"
        );
        assert!(metrics.contains("fabricd_fabric_switches{state=\"up\"}"), "{metrics}");
        assert!(metrics.contains("fabricd_health_isolated_links 0"), "{metrics}");
        assert_eq!(status(&mut c).await.virtual_faults, 0, "report does not isolate");
        // The table puts it first.
        let (ok, text) = fabricctl(&d.socket, &["health"]).await;
        assert!(
            ok && text.contains("warning") && text.contains("symbol_errors"),
            "{text}"
        );

        injector.abort();
        // Isolate (SIGHUP): the next errors isolate the link and the next generation avoids it.
        reload(&d, &config_text(prom, "isolate", true)).await;
        let g0 = status(&mut c).await.generation;
        inject(&mut c, sw, port, "symbol_errors", 300).await;
        let r = wait_health(&d, &mut c, "the isolation", |r| r.isolated.len() == 1).await;
        let iso = &r.isolated[0];
        assert_eq!(iso.cause, "symbol_errors");
        assert!(iso.value > 10.0 && (iso.threshold - 10.0).abs() < 1e-9, "{iso:?}");
        assert_eq!(
            port_of(&r, sw, port).map(|p| p.state),
            Some(pb::PortHealthState::Isolated as i32)
        );
        wait_status(
            &d,
            &mut c,
            "a generation without the link",
            Duration::from_secs(20),
            |s| s.generation > g0 && s.virtual_faults == 1 && s.phase == pb::Phase::Idle as i32,
        )
        .await;
        let (_, after) = lfts(&mut c).await;
        assert!(!forwards_through(&after, sw, port), "the isolated link is not used");
        assert!(!forwards_through(&after, remote.0, remote.1), "nor from its other end");
        let v = verify(&mut c).await;
        assert_eq!(v.unreachable_count, 0, "every pair still reaches: {:?}", v.unreachable);
        let metrics = http_get(prom, "/metrics");
        assert!(metrics.contains("fabricd_health_isolated_links 1"), "{metrics}");
        assert!(metrics.contains("fabricd_health_isolations_total 1"), "{metrics}");
        let (ok, text) = fabricctl(&d.socket, &["health", "report"]).await;
        assert!(
            ok && text.contains("isolated links") && text.contains("symbol_errors"),
            "{text}"
        );

        // A restart keeps it (health.json and the virtual fault).
        d.signal(15);
        assert_eq!(d.wait_exit(Duration::from_secs(30)), Some(0));
        let d = Daemon::spawn_with_config(&dir, &cfg_path, &[]);
        let mut c = d.ready().await;
        let r = health(&mut c).await;
        assert_eq!(r.isolated.len(), 1, "the isolation is loaded at start");
        assert_eq!(status(&mut c).await.virtual_faults, 1);
        let (_, l) = lfts(&mut c).await;
        assert!(!forwards_through(&l, sw, port), "still avoided after the restart");

        // fabricctl health clear brings it back through a new generation.
        let g1 = status(&mut c).await.generation;
        let key = format!("0x{sw:016x}:{port}");
        let (ok, text) = fabricctl(&d.socket, &["health", "clear", &key]).await;
        assert!(ok && text.contains("isolation cleared"), "{text}");
        wait_status(&d, &mut c, "the link back", Duration::from_secs(20), |s| {
            s.generation > g1 && s.virtual_faults == 0 && s.phase == pb::Phase::Idle as i32
        })
        .await;
        let (_, back) = lfts(&mut c).await;
        assert!(forwards_through(&back, sw, port), "the link is used again");
        let r = wait_health(&d, &mut c, "a poll after the restart", |r| r.polls >= 1).await;
        assert!(r.isolated.is_empty());
        let (ok, json) = fabricctl(&d.socket, &["health", "--json", "--all"]).await;
        assert!(ok, "{json}");
        let v: serde_json::Value = serde_json::from_str(&json).expect("health --json");
        assert_eq!(v["summary"]["isolated_links"], 0);
        assert!(v["ports"].as_array().is_some_and(|a| !a.is_empty()));
    });
}

#[test]
fn the_drill_is_refused_without_fault_injection_and_names_bad_input() {
    run_with_deadline(120, async {
        let dir = test_dir("health-refused");
        let prom = free_port();
        let cfg_path = dir.join("fabricd.toml");
        std::fs::write(&cfg_path, config_text(prom, "isolate", false)).unwrap();
        let d = Daemon::spawn_with_config(&dir, &cfg_path, &[]);
        let mut c = d.ready().await;
        let t = topology(&mut c).await;
        let (sw, port) = common::switch_links(&t)[0];
        let e = c
            .inject_port_errors(pb::InjectPortErrorsRequest {
                switch: format!("0x{sw:016x}"),
                port,
                node: String::new(),
                counters: HashMap::from([("symbol_errors".to_string(), 5)]),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e}");
        assert!(e.message().contains("fault injection is disabled"), "{e}");
        let e = c
            .clear_health(pb::ClearHealthRequest {
                all: false,
                switch: "no-such-switch".into(),
                port: 1,
                node: String::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound, "{e}");
        assert!(e.message().contains("no-such-switch"), "{e}");
        let r = wait_health(&d, &mut c, "a first poll", |r| r.polls >= 1).await;
        assert!(r.enabled);
        assert!(r.summary.is_some_and(|s| s.switches_up == t.switches.len() as u64));
    });
}

#[test]
fn a_flapping_link_is_isolated_from_the_link_events_alone() {
    run_with_deadline(120, async {
        let dir = test_dir("health-flap");
        let prom = free_port();
        let cfg_path = dir.join("fabricd.toml");
        let text =
            config_text(prom, "isolate", true).replace("[health]\n", "[health]\nflap_count = 3\nflap_window_s = 60\n");
        std::fs::write(&cfg_path, text).unwrap();
        let d = Daemon::spawn_with_config(&dir, &cfg_path, &[]);
        let mut c = d.ready().await;
        let t = topology(&mut c).await;
        let (sw, port) = common::switch_links(&t)[1];
        let mut g = 0;
        for _ in 0..3 {
            for up in [false, true] {
                g = c
                    .inject_fault(common::link_req(sw, port, up, true, true))
                    .await
                    .expect("physical link flap")
                    .into_inner()
                    .generation;
            }
        }
        let r = wait_health(&d, &mut c, "the flapping link isolated", |r| r.isolated.len() == 1).await;
        let iso = &r.isolated[0];
        assert_eq!(iso.cause, "flapping", "{iso:?}");
        assert!(iso.reason.contains("3 link-downs within 60 s"), "{}", iso.reason);
        let p = port_of(&r, sw, port).expect("the port is listed");
        assert_eq!(p.state, pb::PortHealthState::Isolated as i32, "{p:?}");
        assert!(p.flaps >= 3, "{p:?}");
        assert!(r
            .summary
            .is_some_and(|s| s.flapping_ports >= 1 && s.isolated_links == 1));
        wait_status(&d, &mut c, "the generation without it", Duration::from_secs(20), |s| {
            s.generation >= g && s.virtual_faults == 1 && s.pending_faults == 0 && s.phase == pb::Phase::Idle as i32
        })
        .await;
        let (_, l) = lfts(&mut c).await;
        assert!(!forwards_through(&l, sw, port), "the flapping link is not used");
    });
}
