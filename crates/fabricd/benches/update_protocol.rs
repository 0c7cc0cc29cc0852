//! Benchmark: overhead of the five-phase update. Fault-to-commit latency on an 8640-node
//! fabric, (a) with the five-phase update and 64 auto-acking gRPC subscribers, (b) with a
//! direct upload (`[update] five_phase = false`, same LIDs and tables, no subscriber).
//!
//! Runs the daemon in-process (`fabricd::daemon::run`) with the mock driver at zero latency,
//! takes `--faults` different links down one at a time (physically, waiting for each commit)
//! and back up, and reports the daemon's fault-seen → committed latency of the link-down
//! generations for both modes and their ratio.
//!
//! ```text
//! cargo bench -p fabricd --bench update_protocol [-- --spec 'PGFT(...)' --faults N --subscribers K]
//! ```

use std::time::{Duration, Instant};

use fabric_proto::v1 as pb;
use fabricd::config::Config;
use fabricd::daemon::{run, Control, RunOptions};
use fabricd::logging::LogHandle;
use fabricd::notify::Notifier;

struct Args {
    spec: String,
    faults: usize,
    subscribers: usize,
}

fn args() -> Args {
    let mut a = Args {
        spec: "PGFT(3;24,12,30;1,12,12;1,2,1)".into(),
        faults: 20,
        subscribers: 64,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--spec" => a.spec = it.next().unwrap_or(a.spec),
            "--faults" => a.faults = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.faults),
            "--subscribers" => a.subscribers = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.subscribers),
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

/// One auto-acking subscriber: acks every Unpath / Repath notice at once.
async fn subscriber(socket: String, name: String) -> anyhow::Result<()> {
    let mut c = fabric_proto::connect(&socket).await?;
    let mut s = c
        .subscribe(pb::SubscribeRequest {
            name,
            end_ports: Vec::new(),
        })
        .await?
        .into_inner();
    let mut first = true;
    while let Some(n) = s.message().await? {
        let ackable = n.phase == pb::Phase::Unpath as i32 || n.phase == pb::Phase::Repath as i32;
        if ackable && !first {
            c.ack(pb::AckRequest {
                subscriber_id: n.subscriber_id,
                generation: n.generation,
                phase: n.phase,
            })
            .await?;
        }
        first = false;
    }
    Ok(())
}

/// Committed latencies (ms) of `faults` link-down generations, and the blocks written.
fn measure(a: &Args, five_phase: bool) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let dir = std::env::temp_dir().join(format!("fabricd-bench-up-{}-{five_phase}", std::process::id()));
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
coalesce_ms = 0
coalesce_max_ms = 0
five_phase = {five_phase}
"#,
        a.spec
    );
    let config = Config::parse(&text, "bench.toml")?;
    let socket = dir.join("s.sock");
    let sock = socket.to_str().unwrap_or_default().to_string();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let out = rt.block_on(async {
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
            if let Ok(mut c) = fabric_proto::connect(&sock).await {
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
        let nsubs = if five_phase { a.subscribers } else { 0 };
        let mut subs = Vec::new();
        for i in 0..nsubs {
            subs.push(tokio::spawn(subscriber(sock.clone(), format!("bench-{i}"))));
        }
        while (c.get_status(pb::GetStatusRequest {}).await?.into_inner().subscribers as usize) < nsubs {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let t = c.get_topology(pb::GetTopologyRequest {}).await?.into_inner();
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
        let step = (links.len() / a.faults.max(1)).max(1);
        let mut committed = Vec::new();
        let mut blocks = Vec::new();
        for i in 0..a.faults {
            let (sw, port) = links[(i * step) % links.len()];
            for up in [false, true] {
                c.inject_fault(pb::InjectFaultRequest {
                    kind: pb::FaultKind::Link as i32,
                    up,
                    switch: format!("0x{sw:016x}"),
                    port,
                    node: String::new(),
                    physical: true,
                    wait: true,
                })
                .await?;
                if !up {
                    let s = c.get_status(pb::GetStatusRequest {}).await?.into_inner();
                    anyhow::ensure!(s.missed_acks.is_empty(), "missed acks: {:?}", s.missed_acks);
                    let r = s.last_reroute.unwrap_or_default();
                    committed.push(r.committed_ms);
                    blocks.push(r.blocks_written as f64);
                }
            }
        }
        let v = c
            .verify_reachability(pb::VerifyReachabilityRequest { escape: false })
            .await?
            .into_inner();
        anyhow::ensure!(v.unreachable_count == 0, "{} pairs unreachable", v.unreachable_count);
        tx.send(Control::Shutdown).await.ok();
        daemon.await??;
        for s in subs {
            s.abort();
        }
        anyhow::Ok((committed, blocks))
    })?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

fn main() -> anyhow::Result<()> {
    let a = args();
    println!(
        "fabric {}, {} link-down faults each followed by its link-up",
        a.spec, a.faults
    );
    let mut rows = Vec::new();
    for five_phase in [true, false] {
        let (mut c, mut b) = measure(&a, five_phase)?;
        c.sort_by(f64::total_cmp);
        b.sort_by(f64::total_cmp);
        let name = if five_phase {
            format!("five-phase, {} auto-ack subscribers", a.subscribers)
        } else {
            "direct upload".to_string()
        };
        println!(
            "  {name:<38} fault -> committed median {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms  blocks/fault median {}",
            quantile(&c, 0.5),
            quantile(&c, 0.99),
            c.last().copied().unwrap_or(0.0),
            quantile(&b, 0.5)
        );
        rows.push(quantile(&c, 0.5));
    }
    if let [fp, direct] = rows[..] {
        println!("  ratio five-phase / direct (median): {:.2}", fp / direct.max(1e-9));
    }
    Ok(())
}
