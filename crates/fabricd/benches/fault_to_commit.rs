//! Benchmark: fault-to-commit latency of the daemon on an 8640-node fabric with the simulated
//! fabric at zero latency.
//!
//! Runs the daemon in-process (`fabricd::daemon::run`) on a temporary socket and state
//! directory, then takes 100 different links down one at a time (physically, through the mock
//! driver: the fault is *seen* when the driver reports it) and back up, waiting for each commit.
//! Reports, for the 100 link-down faults: the daemon's own fault-seen → committed latency
//! (median, p99, max), the client-observed round trip, and LFT blocks written per fault.
//!
//! ```text
//! cargo bench -p fabricd --bench fault_to_commit [-- --spec 'PGFT(...)' --faults N --coalesce-ms MS]
//! ```
//!
//! Coalescing is set to 0 ms (a single fault starts its generation at once); the deliberate
//! debounce window of production configs adds to these numbers one for one.

use std::time::{Duration, Instant};

use fabric_proto::v1 as pb;
use fabricd::config::Config;
use fabricd::daemon::{run, Control, RunOptions};
use fabricd::logging::LogHandle;
use fabricd::notify::Notifier;

struct Args {
    spec: String,
    faults: usize,
    coalesce_ms: u64,
}

fn args() -> Args {
    let mut a = Args {
        spec: "PGFT(3;24,12,30;1,12,12;1,2,1)".into(),
        faults: 100,
        coalesce_ms: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--spec" => a.spec = it.next().unwrap_or(a.spec),
            "--faults" => a.faults = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.faults),
            "--coalesce-ms" => a.coalesce_ms = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.coalesce_ms),
            _ => {} // cargo bench passes --bench
        }
    }
    a
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() -> anyhow::Result<()> {
    let a = args();
    let dir = std::env::temp_dir().join(format!("fabricd-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let text = format!(
        r#"
[log]
level = "warn"
[driver.mock]
generator = "{}"
[fault_injection]
enabled = true
allow_physical = true
[update]
coalesce_ms = {c}
coalesce_max_ms = {c}
"#,
        a.spec,
        c = a.coalesce_ms
    );
    let config = Config::parse(&text, "bench.toml")?;
    let socket = dir.join("s.sock");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let opts = RunOptions {
            config_path: None,
            config,
            state_dir: Some(dir.join("state")),
            socket: Some(socket.clone()),
            log: LogHandle::noop(),
            notifier: Notifier::default(),
        };
        let t0 = Instant::now();
        let daemon = tokio::spawn(run(opts, rx));
        let mut c = loop {
            if let Ok(mut c) = fabric_proto::connect(socket.to_str().unwrap_or_default()).await {
                if c.get_status(pb::GetStatusRequest {})
                    .await
                    .map(|s| s.into_inner().generation)
                    .unwrap_or(0)
                    >= 1
                {
                    break c;
                }
            }
            anyhow::ensure!(t0.elapsed() < Duration::from_secs(300), "daemon not ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let s = c.get_status(pb::GetStatusRequest {}).await?.into_inner();
        let first = s.last_reroute.unwrap_or_default();
        println!(
            "fabric {}: {} switches, {} nodes, {} links, top LID {}",
            a.spec, s.switches, s.nodes, s.links, s.top_lid
        );
        println!(
            "first generation: compute {:.1} ms, upload {:.1} ms ({} blocks), ready after {:.2} s",
            first.compute_ms,
            first.upload_ms,
            first.blocks_written,
            t0.elapsed().as_secs_f64()
        );
        let t = c.get_topology(pb::GetTopologyRequest {}).await?.into_inner();
        // Inter-switch links from their lower end, spread over the fabric.
        let mut links = Vec::new();
        for sw in &t.switches {
            for p in &sw.ports {
                if p.remote_kind == pb::RemoteKind::Switch as i32 && (sw.guid, p.port) < (p.remote_guid, p.remote_port)
                {
                    links.push((sw.guid, p.port));
                }
            }
        }
        anyhow::ensure!(!links.is_empty(), "no inter-switch link");
        let step = (links.len() / a.faults).max(1);
        let mut committed = Vec::new();
        let mut routed = Vec::new();
        let mut client = Vec::new();
        let mut blocks = Vec::new();
        for i in 0..a.faults {
            let (sw, port) = links[(i * step) % links.len()];
            for up in [false, true] {
                let req = pb::InjectFaultRequest {
                    kind: pb::FaultKind::Link as i32,
                    up,
                    switch: format!("0x{sw:016x}"),
                    port,
                    node: String::new(),
                    physical: true,
                    wait: true,
                };
                let t = Instant::now();
                c.inject_fault(req).await?;
                let rtt = t.elapsed().as_secs_f64() * 1e3;
                if !up {
                    let s = c.get_status(pb::GetStatusRequest {}).await?.into_inner();
                    let r = s.last_reroute.unwrap_or_default();
                    anyhow::ensure!(r.faults == 1, "expected one fault per generation, got {}", r.faults);
                    committed.push(r.committed_ms);
                    routed.push(r.routed_ms);
                    blocks.push(r.blocks_written as f64);
                    client.push(rtt);
                }
            }
        }
        let v = c
            .verify_reachability(pb::VerifyReachabilityRequest { escape: false })
            .await?
            .into_inner();
        anyhow::ensure!(
            v.unreachable_count == 0,
            "{} pairs unreachable after the drill",
            v.unreachable_count
        );
        for x in [&mut committed, &mut routed, &mut client, &mut blocks] {
            x.sort_by(f64::total_cmp);
        }
        let mean_blocks = blocks.iter().sum::<f64>() / blocks.len().max(1) as f64;
        println!(
            "{} single link-down faults (coalesce {} ms), each followed by its link-up:",
            a.faults, a.coalesce_ms
        );
        let row = |name: &str, v: &[f64]| {
            println!(
                "  {name:<28} median {:>7.2} ms   p99 {:>7.2} ms   max {:>7.2} ms",
                quantile(v, 0.5),
                quantile(v, 0.99),
                v.last().copied().unwrap_or(0.0)
            );
        };
        row("fault seen -> routed", &routed);
        row("fault seen -> committed", &committed);
        row("client inject -> commit", &client);
        println!(
            "  LFT blocks written per fault: mean {mean_blocks:.1}, median {}, max {}",
            quantile(&blocks, 0.5),
            blocks.last().copied().unwrap_or(0.0)
        );
        println!(
            "  reachability after the drill: {} pairs, 0 unreachable",
            v.pairs_checked
        );
        tx.send(Control::Shutdown).await.ok();
        daemon.await??;
        anyhow::Ok(())
    })?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
