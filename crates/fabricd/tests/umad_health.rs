//! Port health under the real `ibsim` (issue 18's acceptance), fabricd on the umad driver:
//! the simulator's port counters are raised on one leaf up-link with ibsim's console
//! (`PerformanceSet "S-<guid>"[port] PortCounters.SymbolErrorCounter=N`, what `perfquery`
//! reads too); the daemon reads them with PerfMgt MADs, `fabricctl health --json` shows the
//! counter rising with its rate, Prometheus exports the rate, the `isolate` policy isolates
//! the link, the next generation's tables read back with `ibroute` no longer forward through
//! either end, and `fabricctl health clear` brings the original tables back.
//!
//! Needs `ibsim` (ibsim-utils) and infiniband-diags (`ibroute`, `perfquery`).

mod common;
mod umad_sim;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{fabricctl_binary, free_port, http_get, run_with_deadline, status, test_dir, topology, Daemon};
use fabric_ibsim_harness::{parse_ibroute, Ibsim};
use fabric_proto::v1 as pb;
use serde_json::Value;
use umad_sim::{config, next_generation};

/// 4 leaves of 4 end ports, 2 spines: every leaf has two up-links (one may be isolated).
const SPEC: &str = "PGFT(2;4,4;1,2;1,1)";

/// `fabricctl --socket S ARGS...`: (success, stdout, stderr).
async fn fabricctl(d: &Daemon, args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["--socket".to_string(), d.socket.display().to_string()];
    all.extend(args.iter().map(ToString::to_string));
    let o = tokio::task::spawn_blocking(move || {
        std::process::Command::new(fabricctl_binary())
            .args(&all)
            .output()
            .expect("run fabricctl")
    })
    .await
    .expect("fabricctl task");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The port's entry of `fabricctl health --all --json`.
async fn port_json(d: &Daemon, switch: u64, port: u32) -> Option<Value> {
    let (ok, out, err) = fabricctl(d, &["health", "--all", "--json"]).await;
    assert!(ok, "fabricctl health --json: {err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    v["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"] == format!("0x{switch:016x}[{port}]"))
        .cloned()
}

fn symbol_errors(p: &Value) -> Option<(u64, Option<f64>)> {
    let c = &p["counters"]["symbol_errors"];
    Some((c["value"].as_u64()?, c["rate"].as_f64()))
}

/// Every switch's LFT read back from the simulator with `ibroute` (LID -> port); `None` when
/// a read failed (a MAD lost while the tables change: the caller reads again).
fn try_read_back(sim: &Ibsim, t: &pb::Topology) -> Option<BTreeMap<u64, BTreeMap<u64, u64>>> {
    let mut out = BTreeMap::new();
    for s in &t.switches {
        let (ok, text) = sim.tool("ibroute", &["-n", &s.lid.to_string()]);
        if !ok {
            return None;
        }
        out.insert(s.guid, parse_ibroute(&text));
    }
    Some(out)
}

/// The LID of the simulator's default host port (where the tools run).
fn sim_lid(sim: &Ibsim) -> u32 {
    let (_, text) = sim.tool("smpquery", &["-D", "portinfo", "0", "1"]);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("Lid:")
                .map(|v| v.trim_start_matches('.').trim().parse().unwrap_or(0))
        })
        .unwrap_or(0)
}

/// [`try_read_back`] until it succeeds (10 s at most).
async fn read_back(sim: &Ibsim, t: &pb::Topology) -> BTreeMap<u64, BTreeMap<u64, u64>> {
    let t0 = Instant::now();
    loop {
        if let Some(tables) = try_read_back(sim, t) {
            return tables;
        }
        if t0.elapsed() > Duration::from_secs(10) {
            let mut why = String::new();
            for s in &t.switches {
                let (ok, text) = sim.tool("ibroute", &["-n", &s.lid.to_string()]);
                if !ok {
                    let (_, trace) = sim.tool("ibtracert", &[&sim_lid(sim).to_string(), &s.lid.to_string()]);
                    why += &format!("switch 0x{:016x} LID {}: {text}\nibtracert: {trace}\n", s.guid, s.lid);
                }
            }
            panic!("ibroute keeps failing:\n{why}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn forwards_through(tables: &BTreeMap<u64, BTreeMap<u64, u64>>, switch: u64, port: u32) -> bool {
    tables
        .get(&switch)
        .is_some_and(|t| t.values().any(|&p| p == u64::from(port)))
}

#[test]
fn rising_port_counters_under_ibsim_are_seen_isolated_routed_around_and_cleared() {
    let dir = test_dir("umad-health");
    let f = fabric_topology::gen::generate_str(SPEC, None).expect("generate");
    let host = format!("H-{:016x}", f.end_port(fabric_topology::EndPortId(0)).node_guid);
    let mut sim = Ibsim::start(&dir, &fabric_topology::ibnet::write(&f), host);
    let prom = free_port();
    let extra = format!(
        "[prometheus]\nlisten = \"127.0.0.1:{prom}\"\n\n[health]\ninterval_s = 1\naction = \"isolate\"\n\
         thresholds = {{ symbol_errors = 20.0 }}\n"
    );
    std::fs::write(dir.join("fabricd.toml"), config(&extra)).expect("write config");
    let env = sim.env();
    let d = umad_sim::spawn_daemon(&dir, &dir.join("fabricd.toml"), &env);
    run_with_deadline(150, async {
        let mut c = d.ready().await;
        let s0 = next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        let topo = topology(&mut c).await;
        let original = read_back(&sim, &topo).await;
        // An up-link of a leaf other than the tools' host's (a leaf-spine link isolated on the
        // host's own leaf leaves that spine's LID without an up*/down* path from the host, so
        // `ibroute` could not read the spine): (leaf GUID, port) and the spine's end.
        let tools_host = f.end_port(fabric_topology::EndPortId(0));
        let (leaf, port, spine, spine_port) = topo
            .switches
            .iter()
            .filter(|s| s.level == Some(0))
            .filter(|s| {
                !s.ports
                    .iter()
                    .any(|p| p.remote_guid == tools_host.node_guid || p.remote_guid == tools_host.port_guid)
            })
            .flat_map(|s| s.ports.iter().map(move |p| (s, p)))
            .find(|(_, p)| p.remote_kind == pb::RemoteKind::Switch as i32)
            .map(|(s, p)| (s.guid, p.port, p.remote_guid, p.remote_port))
            .expect("a leaf up-link");
        assert!(
            forwards_through(&original, leaf, port),
            "the up-link carries routes before"
        );
        let node = format!("S-{leaf:016x}");

        // Below the threshold: the counter is read as ibsim holds it, the port stays ok.
        sim.set_port_counter(&node, port as u8, "SymbolErrorCounter", 3);
        let t = Instant::now();
        let first = loop {
            if let Some(p) = port_json(&d, leaf, port).await {
                if symbol_errors(&p).is_some_and(|(v, _)| v == 3) {
                    break p;
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "counter 3 never read; log:\n{}",
                d.log_text()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_ne!(first["state"], "isolated", "{first}");
        let perf = sim.perfquery(
            sim.host(),
            topo.switches.iter().find(|s| s.guid == leaf).expect("leaf").lid as u16,
            port as u8,
            false,
        );
        assert_eq!(perf.get("SymbolErrorCounter"), Some(&3), "perfquery agrees: {perf:?}");

        // Rising fast: the counter rises in `fabricctl health`, with a rate over the threshold,
        // and the policy isolates the link.
        let mut value = 3u64;
        let mut seen: Vec<u64> = vec![3];
        let mut rate_seen = 0.0f64;
        let mut prom_rate_seen = false;
        let t = Instant::now();
        loop {
            value = (value + 400).min(60_000);
            sim.set_port_counter(&node, port as u8, "SymbolErrorCounter", value);
            if let Some(p) = port_json(&d, leaf, port).await {
                if let Some((v, r)) = symbol_errors(&p) {
                    if seen.last() != Some(&v) {
                        seen.push(v);
                    }
                    rate_seen = rate_seen.max(r.unwrap_or(0.0));
                }
                let label = format!("port=\"0x{leaf:016x}[{port}]\"");
                prom_rate_seen |= http_get(prom, "/metrics").lines().any(|l| {
                    l.starts_with("fabricd_health_port_error_rate{")
                        && l.contains(&label)
                        && l.contains("counter=\"symbol_errors\"")
                        && l.rsplit(' ')
                            .next()
                            .and_then(|v| v.parse::<f64>().ok())
                            .is_some_and(|v| v > 20.0)
                });
                if p["state"] == "isolated" && seen.len() >= 3 && prom_rate_seen {
                    break;
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(40),
                "not isolated within 40 s (values seen {seen:?}); log:\n{}",
                d.log_text()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "rising: {seen:?}");
        assert!(rate_seen > 20.0, "a rate over the threshold was shown: {rate_seen}");
        let metrics = http_get(prom, "/metrics");
        assert!(metrics.contains("fabricd_health_isolated_links 1"), "{metrics}");
        assert!(metrics.contains("fabricd_health_isolations_total 1"), "{metrics}");
        assert!(
            metrics.contains("fabricd_health_error_rate{counter=\"symbol_errors\"}"),
            "{metrics}"
        );

        // The next generation routes around it: read back from the switches.
        let t = Instant::now();
        let routed = loop {
            let s = status(&mut c).await;
            if s.generation > s0.generation && s.pending_faults == 0 && s.phase == pb::Phase::Idle as i32 {
                let tables = read_back(&sim, &topology(&mut c).await).await;
                if !forwards_through(&tables, leaf, port) && !forwards_through(&tables, spine, spine_port) {
                    break tables;
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "the isolated link is still routed; log:\n{}",
                d.log_text()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_ne!(routed, original);
        let (ok, report, err) = fabricctl(&d, &["health", "report"]).await;
        assert!(ok && report.contains("symbol_errors"), "{report}{err}");

        // Cleared (the counter no longer rises): the link carries its routes again, the
        // original tables are back.
        let g = status(&mut c).await.generation;
        let (ok, out, err) = fabricctl(&d, &["health", "clear", &format!("0x{leaf:016x}:{port}")]).await;
        assert!(ok, "health clear: {out}{err}");
        next_generation(&d, &mut c, g, Duration::from_secs(20)).await;
        let t = Instant::now();
        loop {
            let tables = read_back(&sim, &topology(&mut c).await).await;
            if tables == original {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "tables not restored; log:\n{}",
                d.log_text()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // The monitor reads the port again at its next poll: ok, not isolated.
        let t = Instant::now();
        loop {
            let p = port_json(&d, leaf, port).await;
            if p.as_ref()
                .is_some_and(|p| p["state"] == "ok" && symbol_errors(p).is_some())
            {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(10), "port not back to ok: {p:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let metrics = http_get(prom, "/metrics");
        assert!(metrics.contains("fabricd_health_isolated_links 0"), "{metrics}");
    });
}
