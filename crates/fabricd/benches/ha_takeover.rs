//! Benchmark: takeover time of high availability (issue 20) on the 8 640-node fabric.
//!
//! Starts a real `fabric-agent-sim` (`PGFT(3;24,12,30;1,12,12;1,2,1)`: 8 640 end ports, 864
//! switch agents, 24-bit addresses), a one-member etcd (`fabric_etcd_harness`) and two real
//! `fabricd` on the `oob` driver with `[ha]` (LMC 1, five-phase, metrics and health off). Then,
//! `--rounds` times (10 by default): `kill -9` of the leader, and the standby is watched
//! (`GetStatus` every 5 ms) until it is leader and then until it has committed its first
//! generation; the killed manager is restarted as the new standby before the next round.
//!
//! Takeover = kill → the standby's first committed generation. A thread polls the leader key
//! in etcd every 10 ms (etcd's JSON gateway, `POST /v3/kv/range`), which splits it into
//!
//! * the **lease wait**: kill → the leader key deleted (the lease of the dead leader expires at
//!   the etcd server, at most `lease_ttl_s` after its last keep-alive, plus etcd's expiry check);
//! * the **election**: key deleted → the standby's leader key created (its epoch);
//! * **takeover work**: the new key → generation committed: the shared state loaded from etcd,
//!   discovery (which fences every agent with the new epoch), the tables read back, routing, and
//!   the upload of the blocks that differ (none: the fabric did not change), with the daemon's
//!   own compute and upload times of that generation (`Status.last_reroute`).
//!
//! The read-back of every LFT block by the new leader (from its log's timestamps: `gRPC
//! listening` → `LFTs read back`) is printed apart. The time to the standby's status saying
//! leader is printed too (its leader server answers
//! once the state is loaded and the fabric discovered).
//!
//! Median, min and max of each are printed, with the load average. After the last round every
//! pair of end ports is traced through the agents' tables (`SimControl.VerifyAllPairs`).
//!
//! One etcd member, not three: the bench measures the managers' takeover path. etcd answers
//! the lease and the election the same way with one member; three members on the same two
//! cores would add their raft traffic to the CPU the managers and the 864 agents share (on
//! separate hosts the replication costs a round trip per write). The tests
//! (`tests/ha_*.rs`) run on three members.
//!
//! ```text
//! cargo bench -p fabricd --bench ha_takeover -- [--rounds 10] [--ttl 2] [--spec 'PGFT(...)'] [--keep]
//! ```

#[path = "support/mod.rs"]
mod support;

use support::{sim_binary, start_sim, Proc};

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use fabric_etcd_harness::EtcdCluster;
use fabric_oob::proto::sim_control_client::SimControlClient;
use fabric_oob::proto::VerifyAllPairsRequest;
use fabric_proto::v1 as pb;

const BASELINE: &str = "PGFT(3;24,12,30;1,12,12;1,2,1)";

struct Args {
    spec: String,
    rounds: usize,
    ttl_s: u64,
    /// Keep the directory (configs, managers' logs) after a successful run.
    keep: bool,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        spec: BASELINE.into(),
        rounds: 10,
        ttl_s: 2,
        keep: false,
    };
    let mut it = std::env::args().skip(1);
    let num = |v: Option<String>, name: &str| -> anyhow::Result<u64> {
        v.and_then(|v| v.parse().ok())
            .with_context(|| format!("{name} needs a number"))
    };
    while let Some(x) = it.next() {
        match x.as_str() {
            "--spec" => a.spec = it.next().context("--spec needs a generator string")?,
            "--rounds" => a.rounds = usize::try_from(num(it.next(), "--rounds")?)?,
            "--ttl" => a.ttl_s = num(it.next(), "--ttl")?,
            "--keep" => a.keep = true,
            _ => {} // cargo bench passes --bench
        }
    }
    ensure!(a.rounds >= 1 && a.ttl_s >= 1, "--rounds and --ttl must be at least 1");
    Ok(a)
}

/// The manager's HA role as `GetStatus` reports it, its epoch and the leader it knows.
fn ha(s: &pb::Status) -> (i32, u64, String) {
    s.ha.as_ref()
        .map_or((0, 0, String::new()), |h| (h.role, h.epoch, h.leader_node.clone()))
}

const LEADER: i32 = pb::HaRole::Leader as i32;
const STANDBY: i32 = pb::HaRole::Standby as i32;

/// One manager: its files, and its process while it runs.
struct Manager {
    name: String,
    dir: PathBuf,
    proc: Option<Proc>,
}

impl Manager {
    fn socket(&self) -> PathBuf {
        self.dir.join("fabricd.sock")
    }

    fn start(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("fabricd.log"))?;
        let child = Command::new(env!("CARGO_BIN_EXE_fabricd"))
            .arg("--config")
            .arg(self.dir.join("fabricd.toml"))
            .arg("--state-dir")
            .arg(self.dir.join("state"))
            .arg("--socket")
            .arg(self.socket())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("start fabricd")?;
        self.proc = Some(Proc(child));
        Ok(())
    }

    fn kill9(&mut self) {
        drop(self.proc.take());
    }

    async fn client(&self, within: Duration) -> anyhow::Result<fabric_proto::Client> {
        let t = Instant::now();
        let sock = self.socket();
        let sock = sock.to_str().context("socket path")?;
        loop {
            if let Ok(c) = fabric_proto::connect(sock).await {
                return Ok(c);
            }
            ensure!(
                t.elapsed() < within,
                "{}: socket not answering after {within:?}",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The read-back of the tables in this manager's last term, ms: from its last `gRPC
    /// listening` line (state loaded, fabric discovered) to the next `LFTs read back` line,
    /// by the logs' timestamps (RFC 3339, UTC).
    fn read_back_ms(&self) -> Option<f64> {
        let log = std::fs::read_to_string(self.dir.join("fabricd.log")).ok()?;
        let lines: Vec<&str> = log.lines().collect();
        let end = lines.iter().rposition(|l| l.contains("LFTs read back"))?;
        let start = lines[..end].iter().rposition(|l| l.contains("gRPC listening"))?;
        // `2026-11-27T04:52:46.898448Z ...`: seconds of the day.
        let secs = |l: &str| -> Option<f64> {
            let t = l.split_whitespace().next()?.split('T').nth(1)?.trim_end_matches('Z');
            let mut f = t.split(':');
            let (h, m, s): (f64, f64, f64) = (
                f.next()?.parse().ok()?,
                f.next()?.parse().ok()?,
                f.next()?.parse().ok()?,
            );
            Some(h * 3600.0 + m * 60.0 + s)
        };
        let d = secs(lines[end])? - secs(lines[start])?;
        Some(if d < 0.0 { d + 86_400.0 } else { d } * 1e3)
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("fabricd.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

/// Polls `m`'s status on `c` every 5 ms until `ok` holds. A call that fails or does not answer
/// within 2 s reconnects `c` (a standby's status-only server stops when it is elected; the
/// leader's server then answers on the same socket).
async fn until(
    m: &Manager,
    c: &mut fabric_proto::Client,
    what: &str,
    within: Duration,
    ok: impl Fn(&pb::Status) -> bool,
) -> anyhow::Result<pb::Status> {
    let t = Instant::now();
    let mut last = None;
    loop {
        match tokio::time::timeout(Duration::from_secs(2), c.get_status(pb::GetStatusRequest {})).await {
            Ok(Ok(s)) => {
                let s = s.into_inner();
                if ok(&s) {
                    return Ok(s);
                }
                last = Some(s);
            }
            _ => {
                let sock = m.socket();
                let sock = sock.to_str().context("socket path")?;
                if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(2), fabric_proto::connect(sock)).await {
                    *c = n;
                }
            }
        }
        ensure!(
            t.elapsed() < within,
            "{}: {what}: not within {within:?} (last status {last:?})",
            m.name
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn config(inventory: &Path, endpoints: &[String], name: &str, ttl_s: u64, socket: &Path) -> String {
    let eps: Vec<String> = endpoints.iter().map(|e| format!("\"{e}\"")).collect();
    format!(
        r#"
[log]
level = "info"
timestamps = true
[driver]
kind = "oob"
[driver.oob]
inventory = "{inv}"
request_timeout = "30s"
connect_timeout = "5s"
unreachable_deadline = "60s"
max_connections = 64
[routing]
lmc = 1
[update]
coalesce_ms = 0
coalesce_max_ms = 0
five_phase = true
upload_parallelism = 64
[metrics]
random_perms = 0
shifts = false
all_to_all = false
[health]
enabled = false
[ha]
etcd_endpoints = [{eps}]
key_prefix = "/fabricd-bench"
lease_ttl_s = {ttl_s}
node_name = "{name}"
advertise = "unix://{sock}"
request_timeout_ms = 1000
"#,
        inv = inventory.display(),
        eps = eps.join(", "),
        sock = socket.display(),
    )
}

/// The leader key's `create_revision` (the epoch), `Some(None)` when absent, `None` when etcd
/// did not answer: one `POST /v3/kv/range` on etcd's JSON gateway.
fn leader_key(port: u16, key: &str) -> Option<Option<u64>> {
    use base64::Engine as _;
    use std::io::Write as _;
    let body = format!(
        "{{\"key\":\"{}\"}}",
        base64::engine::general_purpose::STANDARD.encode(key)
    );
    let mut s =
        std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    write!(
        s,
        "POST /v3/kv/range HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let json = out.split("\r\n\r\n").nth(1)?;
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.get("header")?;
    Some(
        v.get("kvs")
            .and_then(|k| k.get(0))
            .and_then(|k| k.get("create_revision"))
            .and_then(|r| r.as_str().and_then(|r| r.parse().ok()).or_else(|| r.as_u64())),
    )
}

/// Polls the leader key every 10 ms in a thread; every change (absent, or a new epoch) is sent
/// with its instant. Stops when the receiver is dropped.
fn watch_leader_key(port: u16, key: String) -> std::sync::mpsc::Receiver<(Instant, Option<u64>)> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut last: Option<Option<u64>> = None;
        loop {
            if let Some(now) = leader_key(port, &key) {
                if last != Some(now) {
                    last = Some(now);
                    if tx.send((Instant::now(), now)).is_err() {
                        return;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    rx
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn summary(v: &[f64]) -> String {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let median = if s.is_empty() {
        0.0
    } else if s.len() % 2 == 1 {
        s[s.len() / 2]
    } else {
        (s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0
    };
    format!(
        "median {median:>7.0}  min {:>7.0}  max {:>7.0}",
        s.first().copied().unwrap_or(0.0),
        s.last().copied().unwrap_or(0.0)
    )
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() -> anyhow::Result<()> {
    let a = args()?;
    let sim_bin = sim_binary()?;
    println!(
        "ha takeover bench: {}, {} rounds, lease TTL {} s, 1 etcd member; load {}",
        a.spec,
        a.rounds,
        a.ttl_s,
        load()
    );
    let dir = std::env::temp_dir().join(format!("fabricd-ha-takeover-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let inventory = dir.join("agents.inv");
    let sim = start_sim(&sim_bin, &a.spec, &inventory)?;
    let etcd = EtcdCluster::start(1);
    let mut managers = Vec::new();
    for n in ["a", "b"] {
        let mdir = dir.join(n);
        std::fs::create_dir_all(&mdir)?;
        std::fs::set_permissions(&mdir, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
        let name = format!("mgr-{n}");
        let m = Manager {
            dir: mdir,
            name,
            proc: None,
        };
        std::fs::write(
            m.dir.join("fabricd.toml"),
            config(&inventory, &etcd.endpoints(), &m.name, a.ttl_s, &m.socket()),
        )?;
        managers.push(m);
    }
    let inv = fabric_oob::Inventory::read_file(&inventory)?;
    let control = format!("http://{}", inv.control.context("inventory without !control")?);

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let r = rt.block_on(async {
        let bring_up = Duration::from_secs(900);
        let t = Instant::now();
        managers[0].start()?;
        let mut c0 = managers[0].client(bring_up).await?;
        let s = until(&managers[0], &mut c0, "first leader, generation 1", bring_up, |s| {
            ha(s).0 == LEADER && s.generation >= 1 && s.phase == pb::Phase::Idle as i32
        })
        .await?;
        println!(
            "bring-up: {} switches, {} nodes; mgr-a leader with generation {} after {:.1} s",
            s.switches,
            s.nodes,
            s.generation,
            t.elapsed().as_secs_f64()
        );
        managers[1].start()?;
        let mut c1 = managers[1].client(bring_up).await?;
        until(&managers[1], &mut c1, "mgr-b standby", bring_up, |s| {
            let (role, _, leader) = ha(s);
            role == STANDBY && leader == "mgr-a"
        })
        .await?;

        let key_events = watch_leader_key(etcd.members()[0].client_port, "/fabricd-bench/leader".to_string());
        let (mut total, mut expiry, mut election, mut work, mut to_status, mut compute, mut upload) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut read_back = Vec::new();
        let mut leader = 0;
        let mut generation = s.generation;
        for round in 1..=a.rounds {
            let standby = 1 - leader;
            let mut c = managers[standby].client(Duration::from_secs(10)).await?;
            while key_events.try_recv().is_ok() {}
            let t0 = Instant::now();
            managers[leader].kill9();
            let s = until(&managers[standby], &mut c, "standby leader", Duration::from_secs(60), |s| ha(s).0 == LEADER).await?;
            let t_role = t0.elapsed();
            let epoch = ha(&s).1;
            let s = until(&managers[standby], &mut c, "first generation of the new leader", Duration::from_secs(600), |s| {
                s.generation > generation
            })
            .await?;
            let t_commit = t0.elapsed();
            ensure!(s.last_error.is_empty(), "round {round}: {}", s.last_error);
            generation = s.generation;
            // The leader key: deleted (lease expired), then created by the standby (its epoch).
            let (mut gone, mut elected) = (None, None);
            while let Ok((at, state)) = key_events.try_recv() {
                match state {
                    None if gone.is_none() => gone = Some(at.duration_since(t0)),
                    Some(e) if e == epoch && elected.is_none() => elected = Some(at.duration_since(t0)),
                    _ => {}
                }
            }
            let elected = elected.with_context(|| format!("round {round}: the leader key of epoch {epoch} was not seen"))?;
            // A deletion between two polls may be missed: the election then bounds it.
            let gone = gone.unwrap_or(elected);
            let r = s.last_reroute.unwrap_or_default();
            let rb = managers[standby].read_back_ms().unwrap_or(f64::NAN);
            println!(
                "round {round:>2}: {} epoch {epoch}: key deleted {:.0} ms, elected {:.0} ms, status leader {:.0} ms, \
                 generation {} committed {:.0} ms after the kill (read-back {rb:.0} ms, compute {:.0} ms, upload {:.0} ms, \
                 {} blocks); load {}",
                managers[standby].name,
                ms(gone),
                ms(elected),
                ms(t_role),
                s.generation,
                ms(t_commit),
                r.compute_ms,
                r.upload_ms,
                r.blocks_written,
                load()
            );
            read_back.push(rb);
            total.push(ms(t_commit));
            expiry.push(ms(gone));
            election.push(ms(elected) - ms(gone));
            work.push(ms(t_commit) - ms(elected));
            to_status.push(ms(t_role));
            compute.push(r.compute_ms as f64);
            upload.push(r.upload_ms as f64);
            // The killed manager comes back as the standby of the new leader.
            managers[leader].start()?;
            let new_leader = managers[standby].name.clone();
            let mut ck = managers[leader].client(bring_up).await?;
            until(&managers[leader], &mut ck, "restarted manager standby", bring_up, |s| {
                let (role, e, l) = ha(s);
                role == STANDBY && l == new_leader && e == epoch
            })
            .await?;
            leader = standby;
        }
        println!("takeover over {} rounds (lease TTL {} s), ms:", a.rounds, a.ttl_s);
        println!("  kill -9 -> first committed generation   {}", summary(&total));
        println!("  lease wait (kill -> leader key deleted)  {}", summary(&expiry));
        println!("  election (deleted -> new leader key)     {}", summary(&election));
        println!("  state + discovery + routing + upload     {}", summary(&work));
        println!("    of which reading the tables back       {}", summary(&read_back));
        println!("    of which compute (daemon)              {}", summary(&compute));
        println!("    of which upload (daemon)               {}", summary(&upload));
        println!("  (kill -> the standby's status says leader {})", summary(&to_status));
        let mut ctl = SimControlClient::connect(control.clone())
            .await?
            .max_decoding_message_size(64 << 20);
        let t = Instant::now();
        let v = ctl
            .verify_all_pairs(VerifyAllPairsRequest { use_escape: false })
            .await?
            .into_inner();
        ensure!(v.unreachable_count == 0, "{} pairs unreachable after the rounds", v.unreachable_count);
        println!(
            "after the rounds: all {} pairs reachable through the agents' tables ({:.1} s); load {}",
            v.pairs_checked,
            t.elapsed().as_secs_f64(),
            load()
        );
        anyhow::Ok(())
    });
    if let Err(e) = &r {
        for m in &managers {
            eprintln!("{} log tail:\n{}", m.name, m.log_tail());
        }
        eprintln!("bench files kept in {}", dir.display());
        return Err(anyhow::anyhow!("{e:#}"));
    }
    drop(managers);
    drop(etcd);
    drop(sim);
    if a.keep {
        println!("files kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
