//! Benchmark: the daemon at scale on the `oob` driver, against the agent simulator.
//!
//! For each fabric (the 8 640-node baseline `PGFT(3;24,12,30;1,12,12;1,2,1)` first, then every
//! `--spec`) and each update mode, it starts a real `fabric-agent-sim` process (one gRPC agent
//! per switch on loopback, 24-bit addresses) and a real `fabricd` process on the `oob` driver
//! (LMC 1, coalescing 0 ms, metrics and port health off), attaches `--subscribers` auto-acking
//! gRPC subscribers (`Subscribe` + `Ack`), then takes `--faults` different switch-to-switch
//! cables down one at a time **in the simulator** (`SimControl.Command("link-down ...")`: the
//! driver sees the fault on the agent's port-event stream) and back up, waiting for each
//! commit (`WatchEvents`). It reports:
//!
//! * bring-up: simulator ready, daemon discovered + routed + programmed (generation 1), the
//!   first generation's compute and upload times and blocks;
//! * per link-down fault: the daemon's fault-seen → committed latency (p50 / p99 / max), its
//!   routed and upload parts, the client's command → commit-notice time, LFT blocks written,
//!   and (five-phase) the time spent in each phase as seen from the `PhaseChanged` notices;
//! * per fault and its repair (both generations): the CPU time (user + system) of the daemon
//!   and of the simulator, from `/proc/PID/stat`;
//! * peak RSS (`VmHWM`) of the daemon and of the simulator.
//!
//! ```text
//! cargo bench -p fabricd --bench oob_scale -- [--spec 'PGFT(4;18,3,18,36;1,3,18,18;1,6,1,1)']...
//!     [--faults 100] [--subscribers 16] [--mode five-phase|direct|both] [--no-baseline]
//!     [--upload-parallelism N] [--max-connections N] [--verify] [--full-routing]
//! ```
//!
//! `--verify` traces every pair of end ports through the agents' tables after bring-up and
//! after the drill (minutes on the large fabrics; the baseline is always verified).
//!
//! `OOB_SCALE_LOG=FILTER` (e.g. `fabricd=debug`) sets the daemon's log filter and keeps its
//! state directory and log (path printed on stderr); the PIDs of the daemon and the simulator
//! are printed on stderr as soon as they start (for `perf record -p`). The daemon's VmHWM is
//! reset (`/proc/PID/clear_refs`) once generation 1 is installed, so that the peak reported
//! after the faults is the faults' own, also in LFT table sets (switches x (top LID + 1) bytes).

#[path = "support/mod.rs"]
mod support;

use support::{sim_binary, start_sim, Proc};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use fabric_oob::proto::sim_control_client::SimControlClient;
use fabric_oob::proto::{CommandRequest, VerifyAllPairsRequest};
use fabric_proto::v1 as pb;
use pb::fabric_notice::Notice;

const BASELINE: &str = "PGFT(3;24,12,30;1,12,12;1,2,1)";

struct Args {
    specs: Vec<String>,
    baseline: bool,
    faults: usize,
    subscribers: usize,
    modes: Vec<bool>,
    upload_parallelism: usize,
    max_connections: usize,
    verify: bool,
    /// `[routing] incremental` (`--full-routing`: false, the baseline).
    incremental: bool,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        specs: Vec::new(),
        baseline: true,
        faults: 100,
        subscribers: 16,
        modes: vec![true, false],
        upload_parallelism: 64,
        max_connections: 64,
        verify: false,
        incremental: true,
    };
    let mut it = std::env::args().skip(1);
    let num = |v: Option<String>, name: &str| -> anyhow::Result<usize> {
        v.and_then(|v| v.parse().ok())
            .with_context(|| format!("{name} needs a number"))
    };
    while let Some(x) = it.next() {
        match x.as_str() {
            "--spec" => a.specs.push(it.next().context("--spec needs a generator string")?),
            "--no-baseline" => a.baseline = false,
            "--faults" => a.faults = num(it.next(), "--faults")?,
            "--subscribers" => a.subscribers = num(it.next(), "--subscribers")?,
            "--upload-parallelism" => a.upload_parallelism = num(it.next(), "--upload-parallelism")?,
            "--max-connections" => a.max_connections = num(it.next(), "--max-connections")?,
            "--verify" => a.verify = true,
            "--full-routing" => a.incremental = false,
            "--mode" => {
                a.modes = match it.next().as_deref() {
                    Some("five-phase") => vec![true],
                    Some("direct") => vec![false],
                    Some("both") => vec![true, false],
                    other => bail!("--mode five-phase|direct|both, not {other:?}"),
                }
            }
            _ => {} // cargo bench passes --bench
        }
    }
    Ok(a)
}

/// `VmHWM` and `VmRSS` of a process, MiB.
fn rss_mib(pid: u32) -> (f64, f64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// CPU time (user + system) a process has used so far, seconds (`/proc/PID/stat`, clock ticks
/// of 1/100 s).
fn cpu_s(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (in parentheses, which may hold spaces): utime and stime
    // are fields 14 and 15 of the line, 12 and 13 after it.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest.split_whitespace().map(|x| x.parse().unwrap_or(0.0)).collect();
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn stats(v: &mut [f64]) -> String {
    v.sort_by(f64::total_cmp);
    format!(
        "p50 {:>8.1}  p99 {:>8.1}  max {:>8.1}",
        quantile(v, 0.5),
        quantile(v, 0.99),
        v.last().copied().unwrap_or(0.0)
    )
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

/// What one fabric in one mode measured.
struct Run {
    label: String,
    lines: Vec<String>,
}

fn config(inventory: &Path, five_phase: bool, a: &Args) -> String {
    format!(
        r#"
[log]
level = "{log}"
timestamps = true
[driver]
kind = "oob"
[driver.oob]
inventory = "{inv}"
request_timeout = "30s"
connect_timeout = "5s"
unreachable_deadline = "60s"
max_connections = {mc}
[routing]
lmc = 1
incremental = {incr}
[update]
coalesce_ms = 0
coalesce_max_ms = 0
five_phase = {five_phase}
upload_parallelism = {up}
unpath_deadline_ms = 30000
repath_deadline_ms = 30000
[fault_injection]
enabled = true
allow_physical = true
[metrics]
random_perms = 0
shifts = false
all_to_all = false
[health]
enabled = false
"#,
        inv = inventory.display(),
        mc = a.max_connections,
        up = a.upload_parallelism,
        incr = a.incremental,
        log = log_filter().unwrap_or_else(|| "info".into()),
    )
}

/// `OOB_SCALE_LOG`: the daemon's log filter (its log and state directory are then kept).
fn log_filter() -> Option<String> {
    std::env::var("OOB_SCALE_LOG").ok().filter(|v| !v.is_empty())
}

/// Resets a process's VmHWM to its current RSS (Linux `clear_refs` 5).
fn reset_hwm(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

/// Waits for the next `GenerationCommitted` after `after`, noting the phase changes seen on the
/// way (instant of each); fails on an abort.
async fn next_commit(
    events: &mut tonic::Streaming<pb::FabricNotice>,
    after: u64,
    phases: &mut Vec<(i32, Instant)>,
) -> anyhow::Result<pb::GenerationCommitted> {
    loop {
        let n = tokio::time::timeout(Duration::from_secs(600), events.message())
            .await
            .context("no commit within 600 s")??
            .context("WatchEvents ended")?;
        match n.notice {
            Some(Notice::GenerationCommitted(g)) if g.generation > after => return Ok(g),
            Some(Notice::PhaseChanged(p)) => phases.push((p.phase, Instant::now())),
            Some(Notice::UpdateAborted(u)) => bail!("generation {} aborted: {}", u.generation, u.reason),
            Some(Notice::AcksMissed(m)) => bail!("acks missed in generation {}: {:?}", m.generation, m.subscribers),
            Some(Notice::Lagged(k)) => bail!("WatchEvents lagged ({k} notices dropped)"),
            _ => {}
        }
    }
}

fn phase_name(p: i32) -> &'static str {
    match pb::Phase::try_from(p) {
        Ok(pb::Phase::Prepare) => "prepare",
        Ok(pb::Phase::Unpath) => "unpath",
        Ok(pb::Phase::Update) => "update",
        Ok(pb::Phase::Repath) => "repath",
        Ok(pb::Phase::Commit) => "commit",
        Ok(pb::Phase::Idle) => "idle",
        _ => "other",
    }
}

fn measure(spec: &str, five_phase: bool, a: &Args, sim_bin: &Path, verify: bool) -> anyhow::Result<Run> {
    let mode = if five_phase {
        format!("five-phase, {} subscribers", a.subscribers)
    } else {
        format!("direct, {} subscribers", a.subscribers)
    };
    let label = format!("{spec} [{mode}]");
    let mut lines = Vec::new();
    let dir = std::env::temp_dir().join(format!("fabricd-oob-scale-{}-{five_phase}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let inventory = dir.join("agents.inv");

    let t0 = Instant::now();
    let sim = start_sim(sim_bin, spec, &inventory)?;
    let sim_ready = t0.elapsed().as_secs_f64();
    let sim_pid = sim.0.id();
    let (sim_hwm0, _) = rss_mib(sim_pid);

    let cfg = dir.join("fabricd.toml");
    std::fs::write(&cfg, config(&inventory, five_phase, a))?;
    let socket = dir.join("fabricd.sock");
    let log = std::fs::File::create(dir.join("fabricd.log"))?;
    let t1 = Instant::now();
    let daemon = Proc(
        Command::new(env!("CARGO_BIN_EXE_fabricd"))
            .arg("--config")
            .arg(&cfg)
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("start fabricd")?,
    );
    let daemon_pid = daemon.0.id();
    eprintln!(
        "{label}: daemon pid {daemon_pid}, simulator pid {sim_pid}, state {}",
        dir.display()
    );
    let sock = socket.to_str().unwrap_or_default().to_string();
    let inv = fabric_oob::Inventory::read_file(&inventory)?;
    let control = format!("http://{}", inv.control.context("inventory without !control")?);

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let r = rt.block_on(async {
        let mut c = loop {
            if let Ok(mut c) = fabric_proto::connect(&sock).await {
                if let Ok(s) = c.get_status(pb::GetStatusRequest {}).await {
                    if s.into_inner().generation >= 1 {
                        break c;
                    }
                }
            }
            ensure!(t1.elapsed() < Duration::from_secs(900), "daemon not ready after 900 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let daemon_ready = t1.elapsed().as_secs_f64();
        let s = c.get_status(pb::GetStatusRequest {}).await?.into_inner();
        let first = s.last_reroute.unwrap_or_default();
        let (d_hwm0, _) = rss_mib(daemon_pid);
        // One LFT table set: switches x (top LID + 1) bytes.
        let table_set_mib = f64::from(s.switches) * (f64::from(s.top_lid) + 1.0) / (1024.0 * 1024.0);
        reset_hwm(daemon_pid);
        let (d_cpu0, s_cpu0) = (cpu_s(daemon_pid), cpu_s(sim_pid));
        let (s_hwm1, _) = rss_mib(sim_pid);
        lines.push(format!(
            "fabric: {} switches, {} nodes, {} links, top LID {} (LMC {})",
            s.switches, s.nodes, s.links, s.top_lid, s.lmc
        ));
        lines.push(format!(
            "bring-up: simulator ready {sim_ready:.2} s (RSS {sim_hwm0:.0} MiB); daemon generation 1 after \
             {daemon_ready:.2} s (compute {:.0} ms, upload {:.0} ms, {} blocks); peak RSS daemon {d_hwm0:.0} MiB, \
             simulator {s_hwm1:.0} MiB",
            first.compute_ms, first.upload_ms, first.blocks_written
        ));
        lines.push(format!(
            "bring-up CPU: daemon {d_cpu0:.1} s, simulator {s_cpu0:.1} s (since each process started)"
        ));
        let mut ctl = SimControlClient::connect(control.clone())
            .await?
            .max_decoding_message_size(64 << 20);
        if verify {
            let t = Instant::now();
            let v = ctl
                .verify_all_pairs(VerifyAllPairsRequest { use_escape: false })
                .await?
                .into_inner();
            ensure!(
                v.unreachable_count == 0,
                "{} pairs unreachable after bring-up",
                v.unreachable_count
            );
            lines.push(format!(
                "simulator: all {} pairs reachable through the agents' tables ({:.1} s)",
                v.pairs_checked,
                t.elapsed().as_secs_f64()
            ));
        }

        let mut subs = Vec::new();
        for i in 0..a.subscribers {
            subs.push(tokio::spawn(subscriber(sock.clone(), format!("bench-{i}"))));
        }
        let t = Instant::now();
        while (c.get_status(pb::GetStatusRequest {}).await?.into_inner().subscribers as usize) < a.subscribers {
            ensure!(t.elapsed() < Duration::from_secs(60), "subscribers not registered");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut events = c.watch_events(pb::WatchEventsRequest {}).await?.into_inner();
        let topo = c.get_topology(pb::GetTopologyRequest {}).await?.into_inner();
        let mut links = Vec::new();
        for sw in &topo.switches {
            for p in &sw.ports {
                if p.remote_kind == pb::RemoteKind::Switch as i32 && (sw.guid, p.port) < (p.remote_guid, p.remote_port)
                {
                    links.push((sw.guid, p.port));
                }
            }
        }
        ensure!(!links.is_empty(), "no inter-switch link");
        let step = (links.len() / a.faults.max(1)).max(1);
        let mut generation = s.generation;
        let (mut committed, mut routed, mut upload, mut client, mut blocks) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // CPU seconds of each process over a fault and its repair (both generations).
        let (mut cpu_daemon, mut cpu_sim) = (Vec::new(), Vec::new());
        let mut in_phase: std::collections::BTreeMap<i32, Vec<f64>> = Default::default();
        for i in 0..a.faults {
            let (sw, port) = links[(i * step) % links.len()];
            let (d0, s0) = (cpu_s(daemon_pid), cpu_s(sim_pid));
            for up in [false, true] {
                let cmd = format!("{} 0x{sw:016x} {port}", if up { "link-up" } else { "link-down" });
                let mut phases = Vec::new();
                let t = Instant::now();
                ctl.command(CommandRequest { line: cmd.clone() })
                    .await
                    .with_context(|| format!("sim command {cmd}"))?;
                let g = next_commit(&mut events, generation, &mut phases).await?;
                let done = Instant::now();
                generation = g.generation;
                if up {
                    cpu_daemon.push(cpu_s(daemon_pid) - d0);
                    cpu_sim.push(cpu_s(sim_pid) - s0);
                    continue;
                }
                let r = g.timings.unwrap_or_default();
                ensure!(r.faults == 1, "{cmd}: {} faults in one generation", r.faults);
                committed.push(r.committed_ms);
                routed.push(r.routed_ms);
                upload.push(r.upload_ms);
                blocks.push(r.blocks_written as f64);
                client.push(done.duration_since(t).as_secs_f64() * 1e3);
                for (k, w) in phases.iter().enumerate() {
                    let end = phases.get(k + 1).map_or(done, |n| n.1);
                    in_phase
                        .entry(w.0)
                        .or_default()
                        .push(end.duration_since(w.1).as_secs_f64() * 1e3);
                }
            }
        }
        let s = c.get_status(pb::GetStatusRequest {}).await?.into_inner();
        ensure!(s.missed_acks.is_empty(), "missed acks: {:?}", s.missed_acks);
        ensure!(s.last_error.is_empty(), "last error: {}", s.last_error);
        lines.push(format!(
            "{} link-down faults in the simulator (each followed by its link-up), ms:",
            committed.len()
        ));
        lines.push(format!(
            "  fault seen -> committed (daemon)   {}",
            stats(&mut committed)
        ));
        lines.push(format!("  fault seen -> routed (daemon)      {}", stats(&mut routed)));
        lines.push(format!("  upload (daemon)                    {}", stats(&mut upload)));
        lines.push(format!("  sim command -> commit notice       {}", stats(&mut client)));
        for v in [&mut cpu_daemon, &mut cpu_sim] {
            v.iter_mut().for_each(|x| *x *= 1e3);
        }
        lines.push(format!(
            "  CPU daemon per fault (down + up)   {}",
            stats(&mut cpu_daemon)
        ));
        lines.push(format!("  CPU simulator per fault (down + up) {}", stats(&mut cpu_sim)));
        for (p, v) in &mut in_phase {
            lines.push(format!("  in phase {:<25} {}", phase_name(*p), stats(v)));
        }
        let mean = blocks.iter().sum::<f64>() / blocks.len().max(1) as f64;
        lines.push(format!(
            "  LFT blocks per fault: mean {mean:.0}, {}",
            stats(&mut blocks)
        ));
        if verify {
            let v = ctl
                .verify_all_pairs(VerifyAllPairsRequest { use_escape: false })
                .await?
                .into_inner();
            ensure!(
                v.unreachable_count == 0,
                "{} pairs unreachable after the drill",
                v.unreachable_count
            );
            lines.push(format!("  after the drill: all {} pairs reachable", v.pairs_checked));
        }
        let (d_hwm, d_rss) = rss_mib(daemon_pid);
        let (s_hwm, s_rss) = rss_mib(sim_pid);
        lines.push(format!(
            "peak RSS over the faults: daemon {d_hwm:.0} MiB ({:.2} LFT table sets of {table_set_mib:.0} MiB; now \
             {d_rss:.0}); simulator {s_hwm:.0} MiB (now {s_rss:.0}, whole run)",
            d_hwm / table_set_mib.max(1e-9)
        ));
        for s in subs {
            s.abort();
        }
        anyhow::Ok(())
    });
    // SIGTERM lets the daemon finish cleanly; the drop kills it otherwise.
    let _ = Command::new("kill").arg(daemon_pid.to_string()).status();
    drop(daemon);
    drop(sim);
    if let Err(e) = r {
        let log = std::fs::read_to_string(dir.join("fabricd.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        eprintln!("{label}: daemon log tail:");
        for l in tail.iter().rev() {
            eprintln!("  {l}");
        }
        return Err(e.context(label));
    }
    if log_filter().is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(Run { label, lines })
}

fn main() -> anyhow::Result<()> {
    let a = args()?;
    let sim_bin = sim_binary()?;
    let mut specs = Vec::new();
    if a.baseline {
        specs.push(BASELINE.to_string());
    }
    specs.extend(a.specs.iter().cloned());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "oob scale bench: {} faults, {} subscribers, upload_parallelism {}, max_connections {}; load {}",
        a.faults,
        a.subscribers,
        a.upload_parallelism,
        a.max_connections,
        load.trim()
    );
    for spec in &specs {
        for &five_phase in &a.modes {
            let verify = a.verify || spec == BASELINE;
            let run = measure(spec, five_phase, &a, &sim_bin, verify)?;
            println!("{}", run.label);
            for l in &run.lines {
                println!("  {l}");
            }
            let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            println!("  load after: {}", load.trim());
        }
    }
    Ok(())
}
