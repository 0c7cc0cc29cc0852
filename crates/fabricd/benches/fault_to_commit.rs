//! Benchmark: fault-to-commit latency and memory of the daemon with the simulated fabric at
//! zero latency (default: an 8640-node fabric; `--spec` for others, up to 65 536 nodes).
//!
//! Runs the daemon in-process (`fabricd::daemon::run`) on a temporary socket and state
//! directory, attaches `--subscribers` auto-acking `Subscribe` streams (each acks every Unpath
//! and Repath notice with `Ack`), then takes `--faults` different inter-switch links down one at
//! a time (physically, through the mock driver: the fault is *seen* when the driver reports it)
//! and back up, waiting for each commit. Reports, for the link-down faults: the daemon's own
//! fault-seen → routed and → committed latency (median, p99, max), the client-observed round
//! trip, the LFT blocks written per fault, and the process memory (VmRSS when the first
//! generation is installed, after the first fault, after the 10th and after the last; VmHWM
//! over the start and over the faults alone), the process CPU time (user + system, all threads)
//! of each fault's two generations (the figure to compare on a loaded machine), next to the LFT bytes of one table set
//! (switches × (top LID + 1)). The process is the daemon and the simulated fabric, which holds
//! its own copy of every switch's table.
//!
//! ```text
//! cargo bench -p fabricd --bench fault_to_commit [-- --spec 'PGFT(...)' --faults N --coalesce-ms MS
//!     --mode five-phase|direct --subscribers K --max-lid N --full-routing --verify|--no-verify]
//! ```
//!
//! `--verify` / `--no-verify`: trace every pair of end ports through the mock's tables after
//! the drill (`VerifyReachability`; quadratic: minutes at 35 000 nodes, so by default only up
//! to 10 000 end ports). The figures are printed before the verification.
//!
//! `--mode`: `five-phase` (the default configuration: LMC 1, the five-phase update from the
//! second generation on) or `direct` (`[update] five_phase = false`). `--max-lid`: the mock's
//! highest unicast address (`[driver.mock] max_lid`; 0xFFFFFF for 24-bit addresses, needed by
//! 65 536 end ports with LMC 1). Coalescing is set to 0 ms (a single fault starts its generation
//! at once); the deliberate debounce window of production configs adds to these numbers one for
//! one. `--full-routing`: `[routing] incremental = false` (every generation routed in full, the
//! baseline of the incremental re-routing).

use std::time::{Duration, Instant};

use fabric_proto::v1 as pb;
use fabric_topology::Remote;
use fabricd::config::Config;
use fabricd::daemon::{run, Control, RunOptions};
use fabricd::logging::LogHandle;
use fabricd::notify::Notifier;

struct Args {
    spec: String,
    faults: usize,
    coalesce_ms: u64,
    five_phase: bool,
    subscribers: usize,
    max_lid: Option<u32>,
    /// `[routing] incremental` (`--full-routing` sets it to false: the baseline).
    incremental: bool,
    /// Trace every pair after the drill (`None`: only up to [`VERIFY_MAX_NODES`] end ports).
    verify: Option<bool>,
}

/// Largest fabric (end ports) whose pairs are all traced after the drill by default.
const VERIFY_MAX_NODES: u32 = 10_000;

fn parse_u32(v: &str) -> Option<u32> {
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        spec: "PGFT(3;24,12,30;1,12,12;1,2,1)".into(),
        faults: 100,
        coalesce_ms: 0,
        five_phase: true,
        subscribers: 0,
        max_lid: None,
        incremental: true,
        verify: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--spec" => a.spec = it.next().unwrap_or(a.spec),
            "--faults" => a.faults = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.faults),
            "--coalesce-ms" => a.coalesce_ms = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.coalesce_ms),
            "--full-routing" => a.incremental = false,
            "--verify" => a.verify = Some(true),
            "--no-verify" => a.verify = Some(false),
            "--subscribers" => a.subscribers = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.subscribers),
            "--max-lid" => {
                let v = it.next().unwrap_or_default();
                a.max_lid = Some(parse_u32(&v).ok_or_else(|| anyhow::anyhow!("--max-lid {v:?}: not a number"))?);
            }
            "--mode" => match it.next().as_deref() {
                Some("five-phase") => a.five_phase = true,
                Some("direct") => a.five_phase = false,
                other => anyhow::bail!("--mode {other:?}: expected five-phase or direct"),
            },
            _ => {} // cargo bench passes --bench
        }
    }
    Ok(a)
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// This process's (VmRSS, VmHWM) in bytes, from `/proc/self/status`.
fn memory() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// CPU time this process used so far (user + system, all threads), seconds, from
/// `/proc/self/stat` (clock ticks of 10 ms): robust to a loaded machine where wall times are not.
fn cpu_seconds() -> f64 {
    let text = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) ends with ')'.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state.
    (tick(11) + tick(12)) / 100.0
}

/// Resets VmHWM to the current RSS (Linux `clear_refs` 5), so that the next reading is the peak
/// of what follows.
fn reset_hwm() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
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

/// Inter-switch links of the generated fabric from their lower end (the daemon generates the
/// same fabric, GUIDs included).
fn switch_links(spec: &str) -> anyhow::Result<Vec<(u64, u32)>> {
    let f = fabric_topology::gen::generate_str(spec, None)?;
    let mut links = Vec::new();
    for sw in f.switches() {
        for (port, p) in sw.external_ports() {
            if let Remote::Switch { sw: r, port: rp } = p.remote {
                let rg = f.switch(r).guid;
                if (sw.guid, port) < (rg, rp) {
                    links.push((sw.guid, u32::from(port)));
                }
            }
        }
    }
    Ok(links)
}

fn main() -> anyhow::Result<()> {
    let a = args()?;
    // `FAULT_TO_COMMIT_LOG=fabricd=debug`: the daemon's logs on stderr (e.g. the `routed`
    // line with the incremental routing's stages and rows copied).
    if let Ok(filter) = std::env::var("FAULT_TO_COMMIT_LOG") {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .init();
    }
    let dir = std::env::temp_dir().join(format!("fabricd-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let max_lid = a.max_lid.map(|m| format!("max_lid = {m}")).unwrap_or_default();
    let text = format!(
        r#"
[log]
level = "warn"
[grpc]
# Client and daemon share this process: on a loaded machine the keep-alive answers can be
# late by more than the default 20 s ping timeout, which resets the connection mid-drill.
idle_timeout_s = 3600
[driver.mock]
generator = "{}"
{max_lid}
[fault_injection]
enabled = true
allow_physical = true
[routing]
incremental = {incremental}
[update]
coalesce_ms = {c}
coalesce_max_ms = {c}
five_phase = {five}
"#,
        a.spec,
        c = a.coalesce_ms,
        five = a.five_phase,
        incremental = a.incremental,
    );
    let config = Config::parse(&text, "bench.toml")?;
    let socket = dir.join("s.sock");
    let sock = socket.to_str().unwrap_or_default().to_string();
    let links = switch_links(&a.spec)?;
    anyhow::ensure!(!links.is_empty(), "no inter-switch link");
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
            if daemon.is_finished() {
                daemon.await??;
                anyhow::bail!("the daemon stopped before its first generation");
            }
            anyhow::ensure!(t0.elapsed() < Duration::from_secs(600), "daemon not ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let ready = t0.elapsed();
        let mut subs = Vec::new();
        for i in 0..a.subscribers {
            subs.push(tokio::spawn(subscriber(sock.clone(), format!("bench-{i}"))));
        }
        while (c.get_status(pb::GetStatusRequest {}).await?.into_inner().subscribers as usize) < a.subscribers {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let s = c.get_status(pb::GetStatusRequest {}).await?.into_inner();
        let first = s.last_reroute.unwrap_or_default();
        let table_bytes = u64::from(s.switches) * (u64::from(s.top_lid) + 1);
        println!(
            "fabric {}: {} switches, {} nodes, {} links, top LID {} (LMC {}), {}, {} subscribers",
            a.spec,
            s.switches,
            s.nodes,
            s.links,
            s.top_lid,
            u8::from(s.dual_lids),
            if a.five_phase {
                "five-phase update"
            } else {
                "direct upload"
            },
            a.subscribers
        );
        println!(
            "first generation: compute {:.1} ms, upload {:.1} ms ({} blocks), ready after {:.2} s",
            first.compute_ms,
            first.upload_ms,
            first.blocks_written,
            ready.as_secs_f64()
        );
        let (rss_ready, hwm_start) = memory();
        reset_hwm();
        let step = (links.len() / a.faults.max(1)).max(1);
        let mut committed = Vec::new();
        let mut routed = Vec::new();
        let mut computed = Vec::new();
        let mut client = Vec::new();
        let mut blocks = Vec::new();
        let mut rss_after = Vec::new();
        let mut cpu = Vec::new();
        for i in 0..a.faults {
            let cpu0 = cpu_seconds();
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
                    anyhow::ensure!(s.missed_acks.is_empty(), "missed acks: {:?}", s.missed_acks);
                    let r = s.last_reroute.unwrap_or_default();
                    anyhow::ensure!(r.faults == 1, "expected one fault per generation, got {}", r.faults);
                    committed.push(r.committed_ms);
                    routed.push(r.routed_ms);
                    computed.push(r.compute_ms);
                    blocks.push(r.blocks_written as f64);
                    client.push(rtt);
                }
            }
            rss_after.push(memory().0);
            cpu.push((cpu_seconds() - cpu0) * 1e3);
        }
        let (rss_end, hwm_faults) = memory();
        for x in [
            &mut committed,
            &mut routed,
            &mut computed,
            &mut client,
            &mut blocks,
            &mut cpu,
        ] {
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
        row("compute (routing pool)", &computed);
        row("client inject -> commit", &client);
        row("process CPU per fault", &cpu);
        println!(
            "  LFT blocks written per fault: mean {mean_blocks:.1}, median {}, max {}",
            quantile(&blocks, 0.5),
            blocks.last().copied().unwrap_or(0.0)
        );
        let at = |n: usize| {
            rss_after
                .get(n.min(rss_after.len()).saturating_sub(1))
                .copied()
                .unwrap_or(0)
        };
        println!(
            "  memory: LFT table set {:.1} MiB (switches x (top LID + 1)); VmRSS ready {:.1} MiB, after fault 1 \
             {:.1}, 10 {:.1}, {} {:.1} MiB; VmHWM start {:.1} MiB, faults {:.1} MiB ({:.2} table sets)",
            mib(table_bytes),
            mib(rss_ready),
            mib(at(1)),
            mib(at(10)),
            rss_after.len(),
            mib(rss_end),
            mib(hwm_start),
            mib(hwm_faults),
            hwm_faults as f64 / table_bytes.max(1) as f64
        );
        if a.verify.unwrap_or(s.nodes <= VERIFY_MAX_NODES) {
            let v = c
                .verify_reachability(pb::VerifyReachabilityRequest { escape: false })
                .await?
                .into_inner();
            anyhow::ensure!(
                v.unreachable_count == 0,
                "{} pairs unreachable after the drill",
                v.unreachable_count
            );
            println!(
                "  reachability after the drill: {} pairs, 0 unreachable",
                v.pairs_checked
            );
        } else {
            println!("  reachability after the drill: not traced (--verify to trace every pair)");
        }
        tx.send(Control::Shutdown).await.ok();
        daemon.await??;
        for s in subs {
            s.abort();
        }
        anyhow::Ok(())
    })?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
