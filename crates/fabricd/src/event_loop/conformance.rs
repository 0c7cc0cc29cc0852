//! Conformance tests of the event loop as data (holo's pattern): every directory
//! `crates/fabricd/tests/data/loop/NN-name/` holds an `input` script and the `expected` record
//! of what the loop did. The harness runs the script against a real [`EventLoop`] over the
//! `mock` driver ([`MockFabric`]) in paused tokio time and compares its record with `expected`
//! line by line (a mismatch names the case and the first differing line).
//!
//! **Regenerate** the `expected` files after an intended change of behaviour with
//! `FABRICD_REGENERATE=1 cargo test -p fabricd --lib conformance`, then review the diff.
//! `FABRICD_CONFORMANCE_CASE=<part of a name>` runs only the matching cases.
//!
//! # The input script
//!
//! One step per line; `#` starts a comment. Switches are named `L<level>_<i>` (the `i`-th
//! switch of that level in id order; `S<id>` when the description has no level), end ports
//! `N<id>`, switch ports `L0_0[3]`; GUIDs in recorded text are replaced by these names.
//!
//! * `fabric SPEC` — the simulated fabric (generator notation) and a fresh state directory;
//! * `settings key=value ...` — loop settings (`coalesce_ms`, `coalesce_max_ms` (defaults to
//!   `coalesce_ms`), `five_phase`, `unpath_deadline_ms`, `repath_deadline_ms` (defaults to the
//!   unpath one), `missed_ack_policy=proceed|abort`, `failed_generation_backoff_ms`,
//!   `upload_retries`, `fault_injection=on|off`); after `start` they are sent as a reload;
//! * `mock latency DURATION` / `mock max-parallel N` / `mock fail-writes all|SWITCH...` /
//!   `mock heal` — behaviour of the simulated switches;
//! * `start`, `crash` (the process dies: the runtime and every task of the loop are dropped,
//!   the switches keep what they hold), `restart` (a new loop on the same state directory and
//!   fabric, after a new discovery), `shutdown`;
//! * `inject EVENT TARGET [wait] [physical]` (EVENT: `link-down`, `link-up`, `switch-down`,
//!   `switch-up`, `node-down`, `node-up`), `reroute [resync] [wait]`, `clear-job ID`,
//!   `subscribe NAME`, `ack NAME unpath|repath` (the last notice of that phase), `unsubscribe
//!   NAME` (the stream closes), `driver EVENT TARGET` (a physical change the mock reports);
//! * `advance DURATION`, `expect-quiet DURATION` (advance; nothing may be recorded meanwhile),
//!   `until CONDITION` (`idle`, `generation N`, `phase P`, `pending N`, `restarts N`,
//!   `replies`, `NAME got unpath|repath`, `stopped`; at most 120 s of simulated time);
//! * `check` — a summary of the fabric computed from the loop's snapshot, the mock's tables and
//!   the state directory.
//!
//! # The record
//!
//! Each step is echoed (`> step`), followed by what was seen while it ran: `Notice`s of the
//! broadcast, `UpdateNotice`s per subscriber, replies to requests (accepted / error text), and
//! `check` summaries. No wall-clock duration is recorded.
//!
//! # Determinism
//!
//! Time is paused (tokio's `start_paused`), and the routing pool is a rayon pool whose only
//! worker is the test thread itself (`use_current_thread`): a computation runs when the harness
//! yields to rayon, at its next 1 ms tick, never in parallel with the loop (`routing hold` keeps
//! them queued, as a busy pool would). Uploads, deadlines and backoffs are tokio timers. The
//! state-directory writes run on `spawn_blocking`: tokio does not advance paused time while one
//! runs, and the runtime has one blocking thread, so the harness waits for them (a no-op blocking
//! task queued behind) before it looks. Each case runs twice; the two records must be equal.
//! Lines seen at one look are recorded in a fixed order (broadcast notices, subscribers by name,
//! replies in request order), so the record does not depend on task scheduling.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use fabric_ranking::RankOptions;
use fabric_routing::{EngineKind, Guid2Lid, Lfts};
use fabric_southbound::{MockConfig, MockFabric, SouthboundDriver};
use fabric_topology::{fmt_guid, Fabric, Guid, PortNum};
use fabric_update::{DeadlinePolicy, SubscriberId};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::Instant;

use super::Event as Request;
use super::UpdateNotice;
use super::{
    EventLoop, FaultAccepted, FaultRequest, FaultTarget, LoopError, LoopInit, LoopIo, LoopParams, LoopSettings,
};
use crate::compute::{compute, ComputeInput};
use crate::config::{FaultInjectionConfig, UpdateConfig};
use crate::notify::Notifier;
use crate::persist::StateDir;
use crate::state::{Notice, Phase, Published};
use crate::telemetry::Telemetry;

/// Simulated time between two looks of the harness at the loop.
const TICK: Duration = Duration::from_millis(1);
/// Longest simulated wait of one `until` step.
const UNTIL_LIMIT: Duration = Duration::from_secs(120);

thread_local! {
    /// The routing pool: one worker, the test thread itself (rayon leaks such a registry, so
    /// there is one per thread, shared by every case run on it).
    static POOL: Arc<rayon::ThreadPool> = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .use_current_thread()
            .build()
            .expect("a rayon pool on the test thread"),
    );
}

/// Readable names of the switches and end ports of the simulated fabric.
struct Names {
    switches: Vec<String>,
    end_ports: Vec<String>,
    /// `fmt_guid` text → name, longest first.
    guids: Vec<(String, String)>,
}

impl Names {
    fn new(f: &Fabric) -> Names {
        let mut per_level: BTreeMap<String, usize> = BTreeMap::new();
        let switches: Vec<String> = f
            .switches()
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let level = s
                    .desc
                    .split_whitespace()
                    .find(|t| t.len() > 1 && t.starts_with('L') && t[1..].bytes().all(|b| b.is_ascii_digit()));
                match level {
                    Some(l) => {
                        let n = per_level.entry(l.to_string()).or_default();
                        *n += 1;
                        format!("{l}_{}", *n - 1)
                    }
                    None => format!("S{i}"),
                }
            })
            .collect();
        let end_ports: Vec<String> = (0..f.num_end_ports()).map(|i| format!("N{i}")).collect();
        let mut guids = Vec::new();
        for (s, name) in f.switches().iter().zip(&switches) {
            guids.push((fmt_guid(s.guid), name.clone()));
        }
        for (e, name) in f.end_ports().iter().zip(&end_ports) {
            guids.push((fmt_guid(e.port_guid), name.clone()));
            if e.node_guid != e.port_guid {
                guids.push((fmt_guid(e.node_guid), format!("{name}-node")));
            }
        }
        Names {
            switches,
            end_ports,
            guids,
        }
    }

    /// `text` with every GUID of the fabric replaced by its name.
    fn scrub(&self, text: &str) -> String {
        if !text.contains("0x") {
            return text.to_string();
        }
        let mut s = text.to_string();
        for (hex, name) in &self.guids {
            s = s.replace(hex.as_str(), name);
        }
        s
    }

    fn switch(&self, f: &Fabric, name: &str) -> Result<Guid, String> {
        lookup(&self.switches, name, "switch", |i| f.switches()[i].guid)
    }

    fn end_port(&self, f: &Fabric, name: &str) -> Result<Guid, String> {
        lookup(&self.end_ports, name, "end port", |i| f.end_ports()[i].port_guid)
    }

    /// `L0_0[3]` (a switch port), `L1_0` (a switch) or `N4` (an end port), as an event.
    fn event(&self, f: &Fabric, kind: &str, target: &str) -> Result<FaultRequestTarget, String> {
        let (up, what) = match kind.rsplit_once('-') {
            Some((what, "down")) => (false, what),
            Some((what, "up")) => (true, what),
            _ => return Err(format!("unknown event `{kind}` (link-down, switch-up, node-down, ...)")),
        };
        let target = match what {
            "link" => {
                let (sw, port) = target
                    .strip_suffix(']')
                    .and_then(|t| t.split_once('['))
                    .ok_or_else(|| format!("`{target}` is not a switch port like L0_0[3]"))?;
                let port: PortNum = port.parse().map_err(|_| format!("bad port number in `{target}`"))?;
                FaultTarget::Link {
                    switch: self.switch(f, sw)?,
                    port,
                }
            }
            "switch" => FaultTarget::Switch(self.switch(f, target)?),
            "node" => FaultTarget::Node(self.end_port(f, target)?),
            _ => return Err(format!("unknown event `{kind}`")),
        };
        Ok(FaultRequestTarget { target, up })
    }
}

/// The GUID written as `0x...`, or the GUID of the item named `name` in `names`.
fn lookup(names: &[String], name: &str, what: &str, guid_of: impl Fn(usize) -> Guid) -> Result<Guid, String> {
    if let Some(g) = fabric_topology::parse_guid(name) {
        return Ok(g);
    }
    let i = names.iter().position(|n| n == name);
    i.map(guid_of).ok_or_else(|| format!("unknown {what} name `{name}`"))
}

/// A parsed fault target with its direction.
struct FaultRequestTarget {
    target: FaultTarget,
    up: bool,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (n, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map(|i| s.split_at(i))
        .ok_or_else(|| format!("`{s}` has no unit (ms, s)"))?;
    let n: u64 = n.parse().map_err(|_| format!("bad duration `{s}`"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        _ => Err(format!("bad duration unit in `{s}` (ms, s)")),
    }
}

fn parse_phase(s: &str) -> Result<Phase, String> {
    Phase::ALL
        .into_iter()
        .find(|p| p.name() == s)
        .ok_or_else(|| format!("unknown phase `{s}`"))
}

fn default_settings() -> LoopSettings {
    LoopSettings {
        update: UpdateConfig {
            coalesce_ms: 0,
            coalesce_max_ms: 0,
            ..UpdateConfig::default()
        },
        engine: EngineKind::Dmodc,
        validate: true,
        job_aware: false,
        rank_options: Arc::new(RankOptions::default()),
        fault_injection: FaultInjectionConfig {
            enabled: true,
            allow_physical: true,
        },
    }
}

/// Applies `key=value` pairs to `s`.
fn apply_settings(s: &mut LoopSettings, pairs: &[&str]) -> Result<(), String> {
    let (mut coalesce_max, mut repath) = (None, None);
    for pair in pairs {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("`{pair}` is not key=value"))?;
        let num = || v.parse::<u64>().map_err(|_| format!("{k}: `{v}` is not a number"));
        let flag = || match v {
            "true" | "on" => Ok(true),
            "false" | "off" => Ok(false),
            _ => Err(format!("{k}: `{v}` is not true/false")),
        };
        let u = &mut s.update;
        match k {
            "coalesce_ms" => u.coalesce_ms = num()?,
            "coalesce_max_ms" => coalesce_max = Some(num()?),
            "five_phase" => u.five_phase = flag()?,
            "unpath_deadline_ms" => u.unpath_deadline_ms = num()?,
            "repath_deadline_ms" => repath = Some(num()?),
            "failed_generation_backoff_ms" => u.failed_generation_backoff_ms = num()?,
            "upload_retries" => u.upload_retries = num()? as u32,
            "missed_ack_policy" => {
                u.missed_ack_policy = match v {
                    "proceed" => DeadlinePolicy::Proceed,
                    "abort" => DeadlinePolicy::Abort,
                    _ => return Err(format!("missed_ack_policy: `{v}` is not proceed/abort")),
                }
            }
            "fault_injection" => s.fault_injection.enabled = flag()?,
            _ => return Err(format!("unknown setting `{k}`")),
        }
    }
    let u = &mut s.update;
    u.coalesce_max_ms = coalesce_max.unwrap_or(u.coalesce_ms);
    u.repath_deadline_ms = repath.unwrap_or(u.unpath_deadline_ms);
    Ok(())
}

/// What survives a crash: the simulated fabric, the state directory, the record.
struct World {
    names: Names,
    mock: Arc<MockFabric>,
    dir: tempfile::TempDir,
    settings: LoopSettings,
    pool: Arc<rayon::ThreadPool>,
    /// `routing hold`: computations stay queued (the routing pool is busy).
    hold: bool,
    out: Vec<String>,
}

/// A subscriber of the five-phase update.
struct Subscriber {
    id: SubscriberId,
    rx: mpsc::Receiver<UpdateNotice>,
    /// Generation of the last notice received per phase (what `ack` acks).
    last: HashMap<Phase, u64>,
    /// Phases of notices received and not yet waited for by `until NAME got PHASE`.
    fresh: BTreeSet<Phase>,
}

/// A request whose reply has not come yet.
struct Pending {
    label: String,
    rx: PendingReply,
}

enum PendingReply {
    Fault(oneshot::Receiver<Result<FaultAccepted, LoopError>>),
    Generation(oneshot::Receiver<Result<u64, LoopError>>),
    Unit(oneshot::Receiver<Result<(), LoopError>>),
}

impl PendingReply {
    /// The reply as text, once it came (a dropped reply channel is recorded as such).
    fn answer(&mut self) -> Option<String> {
        fn text<T>(
            r: Result<Result<T, LoopError>, oneshot::error::TryRecvError>,
            ok: impl Fn(T) -> String,
        ) -> Option<String> {
            match r {
                Ok(Ok(v)) => Some(ok(v)),
                Ok(Err(e)) => Some(loop_error(&e)),
                Err(oneshot::error::TryRecvError::Empty) => None,
                Err(oneshot::error::TryRecvError::Closed) => Some("dropped without a reply".into()),
            }
        }
        match self {
            PendingReply::Fault(rx) => text(rx.try_recv(), |a| {
                format!("accepted {} (generation {})", a.event, a.generation)
            }),
            PendingReply::Generation(rx) => text(rx.try_recv(), |g| format!("ok (generation {g})")),
            PendingReply::Unit(rx) => text(rx.try_recv(), |()| "ok".to_string()),
        }
    }
}

fn loop_error(e: &LoopError) -> String {
    let kind = match e {
        LoopError::InvalidArgument(_) => "invalid argument",
        LoopError::FailedPrecondition(_) => "failed precondition",
        LoopError::NotFound(_) => "not found",
        LoopError::Internal(_) => "internal",
        LoopError::ShuttingDown => "shutting down",
    };
    format!("error ({kind}): {e}")
}

fn notice_text(n: &Notice) -> String {
    match n {
        Notice::TopologyChange { event, physical } => format!(
            "notice: topology change {event} ({})",
            if *physical { "physical" } else { "virtual" }
        ),
        Notice::PhaseChanged { generation, phase } => format!("notice: generation {generation} phase {phase}"),
        Notice::GenerationCommitted { generation, timings } => format!(
            "notice: generation {generation} committed (changes {}, blocks written {}, retries {})",
            timings.faults, timings.blocks_written, timings.retries
        ),
        Notice::AcksMissed {
            generation,
            subscribers,
        } => format!(
            "notice: generation {generation} acks missed: {}",
            subscribers.join(", ")
        ),
        Notice::UpdateAborted { generation, reason } => format!("notice: generation {generation} aborted: {reason}"),
        Notice::UpdateRestarted {
            generation,
            attempt,
            reason,
        } => format!("notice: generation {generation} restarted (attempt {attempt}): {reason}"),
    }
}

/// One process of the daemon: a runtime and the loop running on it.
struct Process {
    rt: tokio::runtime::Runtime,
    lp: LoopHandle,
}

/// What the harness holds of a running loop.
struct LoopHandle {
    tx: mpsc::Sender<Request>,
    published: Arc<ArcSwap<Published>>,
    notices: broadcast::Receiver<Notice>,
    task: tokio::task::JoinHandle<()>,
    subscribers: BTreeMap<String, Subscriber>,
    pending: Vec<Pending>,
}

impl Process {
    /// A loop over the mock fabric (discovered again) and the state directory, as the daemon
    /// starts one.
    fn start(w: &World) -> Result<Process, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .max_blocking_threads(1)
            .build()
            .map_err(|e| format!("runtime: {e}"))?;
        let dir = StateDir::open(w.dir.path()).map_err(|e| e.to_string())?;
        let guid2lid = dir.load_guid2lid().map_err(|e| e.to_string())?;
        let virtual_faults = dir.load_virtual_faults().map_err(|e| e.to_string())?;
        let jobs = dir.load_jobs().map_err(|e| e.to_string())?;
        let mock = w.mock.clone();
        let (settings, pool) = (w.settings.clone(), w.pool.clone());
        let lp = rt.block_on(async move {
            let physical = Arc::new(mock.discover().await.map_err(|e| e.to_string())?);
            let published = Arc::new(ArcSwap::from_pointee(Published {
                cabling: physical.clone(),
                current: None,
                phase: Phase::Idle,
                phase_generation: 0,
                pending_faults: 0,
                last_error: String::new(),
                discarded_generations: 0,
                jobs: Arc::new(jobs.clone()),
                engine: String::new(),
                job_aware: false,
                driver: "mock",
                lmc: 1,
                started: Instant::now(),
                virtual_faults: 0,
                subscribers: 0,
                missed_acks: Vec::new(),
                update_restarts: Vec::new(),
                installation: Default::default(),
            }));
            let (notices, watch) = broadcast::channel(4096);
            let driver: Arc<dyn SouthboundDriver> = mock;
            let (lp, tx) = EventLoop::new(
                LoopParams {
                    settings,
                    lmc: 1,
                    max_lid: 0xBFFF,
                    driver_name: "mock",
                },
                LoopIo {
                    driver,
                    state_dir: dir,
                    pool,
                    published: published.clone(),
                    notices,
                    telemetry: Telemetry::new(),
                    notifier: Notifier::default(),
                    watchdog: None,
                    on_ready: None,
                },
                LoopInit {
                    physical,
                    guid2lid,
                    jobs,
                    virtual_faults,
                },
            );
            Ok::<_, String>(LoopHandle {
                tx,
                published,
                notices: watch,
                task: tokio::spawn(lp.run()),
                subscribers: BTreeMap::new(),
                pending: Vec::new(),
            })
        })?;
        Ok(Process { rt, lp })
    }

    /// kill -9: every task of the process is dropped (queued computations are thrown away); the
    /// switches keep what they hold and the state directory what was written.
    fn crash(self, w: &World) {
        drop(self.lp);
        self.rt.shutdown_timeout(Duration::from_secs(10));
        while w.pool.yield_local() == Some(rayon::Yield::Executed) {}
    }
}

/// Lets the tasks woken at this instant (upload latencies, deadlines) run, with the state
/// directory writes they start: there is one blocking thread, so a no-op blocking task queued
/// behind them ends after them.
async fn settle() {
    for _ in 0..2 {
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
        let _ = tokio::task::spawn_blocking(|| ()).await;
    }
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

impl LoopHandle {
    /// One tick: simulated time goes on by [`TICK`], queued computations run, arrivals are
    /// recorded.
    async fn tick(&mut self, w: &mut World) {
        while !w.hold && w.pool.yield_local() == Some(rayon::Yield::Executed) {}
        // The results go back to the loop and everything they cause runs before time moves on.
        tokio::time::sleep(TICK).await;
        settle().await;
        self.drain(w);
    }

    /// Records what arrived since the last look: notices, subscriber notices, then replies.
    fn drain(&mut self, w: &mut World) {
        loop {
            match self.notices.try_recv() {
                Ok(n) => w.out.push(w.names.scrub(&notice_text(&n))),
                Err(broadcast::error::TryRecvError::Lagged(k)) => w.out.push(format!("! {k} notices lost")),
                Err(_) => break,
            }
        }
        for (name, s) in self.subscribers.iter_mut() {
            while let Ok(n) = s.rx.try_recv() {
                s.last.insert(n.phase, n.generation);
                s.fresh.insert(n.phase);
                w.out.push(format!(
                    "{name} <- generation {} {} (ack within {} ms)",
                    n.generation, n.phase, n.deadline_ms
                ));
            }
        }
        let names = &w.names;
        let out = &mut w.out;
        self.pending.retain_mut(|p| match p.rx.answer() {
            Some(a) => {
                out.push(names.scrub(&format!("reply to `{}`: {a}", p.label)));
                false
            }
            None => true,
        });
    }

    /// Sends a request (its reply, when it has one, is recorded when it comes).
    fn send(&mut self, label: &str, req: Request, reply: Option<PendingReply>) -> Result<(), String> {
        self.tx
            .try_send(req)
            .map_err(|e| format!("the loop does not take requests: {e}"))?;
        if let Some(rx) = reply {
            self.pending.push(Pending {
                label: label.to_string(),
                rx,
            });
        }
        Ok(())
    }

    /// Whether the condition of an `until` step holds.
    fn holds(&mut self, cond: &[&str]) -> Result<bool, String> {
        let p = self.published.load();
        let whole = cond.join(" ");
        let arg = |i: usize| -> Result<&str, String> {
            cond.get(i)
                .copied()
                .ok_or_else(|| format!("`until {whole}` lacks an argument"))
        };
        let num =
            |i: usize| -> Result<usize, String> { arg(i)?.parse().map_err(|_| format!("`{whole}`: not a number")) };
        Ok(match arg(0)? {
            "idle" => p.phase == Phase::Idle && p.pending_faults == 0 && p.generation() > 0,
            "generation" => p.generation() == num(1)? as u64,
            "phase" => p.phase == parse_phase(arg(1)?)?,
            "pending" => p.pending_faults == num(1)?,
            "restarts" => p.update_restarts.len() == num(1)?,
            "replies" => self.pending.is_empty(),
            "stopped" => self.task.is_finished(),
            name => {
                if arg(1)? != "got" {
                    return Err(format!("`until {whole}`: expected `{name} got PHASE`"));
                }
                let phase = parse_phase(arg(2)?)?;
                let s = self
                    .subscribers
                    .get_mut(name)
                    .ok_or_else(|| format!("unknown condition or subscriber `{name}`"))?;
                s.fresh.remove(&phase)
            }
        })
    }

    /// Runs one step that needs the loop.
    async fn exec(&mut self, w: &mut World, line: &str, words: &[&str]) -> Result<(), String> {
        let f = w.mock.cabling().clone();
        match words[0] {
            "inject" => {
                if words.len() < 3 {
                    return Err("inject EVENT TARGET [wait] [physical]".into());
                }
                let t = w.names.event(&f, words[1], words[2])?;
                let mut req = FaultRequest {
                    target: t.target,
                    up: t.up,
                    physical: false,
                    wait: false,
                };
                for &flag in &words[3..] {
                    match flag {
                        "wait" => req.wait = true,
                        "physical" => req.physical = true,
                        _ => return Err(format!("unknown inject flag `{flag}`")),
                    }
                }
                let (reply, rx) = oneshot::channel();
                self.send(line, Request::Inject { req, reply }, Some(PendingReply::Fault(rx)))?;
            }
            "reroute" => {
                let (mut resync, mut wait) = (false, false);
                for &flag in &words[1..] {
                    match flag {
                        "resync" => resync = true,
                        "wait" => wait = true,
                        _ => return Err(format!("unknown reroute flag `{flag}`")),
                    }
                }
                let (reply, rx) = oneshot::channel();
                let req = Request::Reroute {
                    resync,
                    wait,
                    reply: Some(reply),
                };
                self.send(line, req, Some(PendingReply::Generation(rx)))?;
            }
            "clear-job" => {
                let id = words.get(1).ok_or("clear-job ID")?.to_string();
                let (reply, rx) = oneshot::channel();
                self.send(line, Request::ClearJob { id, reply }, Some(PendingReply::Unit(rx)))?;
            }
            "subscribe" => {
                let name = words.get(1).ok_or("subscribe NAME")?.to_string();
                let (notices, nrx) = mpsc::channel(64);
                let (reply, mut rx) = oneshot::channel();
                let req = Request::Subscribe {
                    name: name.clone(),
                    ports: Vec::new(),
                    notices,
                    reply,
                };
                // The id is needed for the acks: wait for the reply here.
                self.send(line, req, None)?;
                let id = loop {
                    self.tick(w).await;
                    match rx.try_recv() {
                        Ok(r) => break r,
                        Err(oneshot::error::TryRecvError::Empty) => {}
                        Err(e) => return Err(format!("subscribe: {e}")),
                    }
                };
                match id {
                    Ok(id) => {
                        w.out.push(format!("reply to `{line}`: subscribed"));
                        let (last, fresh) = (HashMap::new(), BTreeSet::new());
                        self.subscribers.insert(
                            name,
                            Subscriber {
                                id,
                                rx: nrx,
                                last,
                                fresh,
                            },
                        );
                    }
                    Err(e) => w.out.push(format!("reply to `{line}`: {}", loop_error(&e))),
                }
            }
            "ack" => {
                let (name, phase) = match words {
                    [_, n, p] => (*n, parse_phase(p)?),
                    _ => return Err("ack NAME unpath|repath".into()),
                };
                let s = self
                    .subscribers
                    .get(name)
                    .ok_or(format!("unknown subscriber `{name}`"))?;
                let generation = *s
                    .last
                    .get(&phase)
                    .ok_or(format!("{name} has received no {phase} notice to ack"))?;
                let (reply, rx) = oneshot::channel();
                let req = Request::Ack {
                    subscriber: s.id,
                    generation,
                    phase,
                    reply,
                };
                self.send(line, req, Some(PendingReply::Unit(rx)))?;
            }
            "unsubscribe" => {
                let name = words.get(1).ok_or("unsubscribe NAME")?;
                let s = self
                    .subscribers
                    .remove(*name)
                    .ok_or(format!("unknown subscriber `{name}`"))?;
                drop(s.rx);
                self.send(line, Request::Unsubscribe { subscriber: s.id }, None)?;
            }
            "driver" => {
                if words.len() != 3 {
                    return Err("driver EVENT TARGET".into());
                }
                let t = w.names.event(&f, words[1], words[2])?;
                let r = match t.target {
                    FaultTarget::Link { switch, port } => w.mock.set_port_state(switch, port, t.up).await,
                    FaultTarget::Switch(g) => w.mock.set_switch_state(g, t.up).await,
                    FaultTarget::Node(g) => w.mock.set_end_port_state(g, t.up).await,
                };
                r.map_err(|e| format!("mock: {e}"))?;
            }
            "settings" => {
                apply_settings(&mut w.settings, &words[1..])?;
                self.send(line, Request::Reload(Box::new(w.settings.clone())), None)?;
            }
            "shutdown" => self.send(line, Request::Shutdown, None)?,
            "advance" | "expect-quiet" => {
                let d = parse_duration(words.get(1).ok_or("advance DURATION")?)?;
                let before = w.out.len();
                let until = Instant::now() + d;
                while Instant::now() < until {
                    self.tick(w).await;
                }
                if words[0] == "expect-quiet" && w.out.len() > before {
                    w.out
                        .push(format!("! not quiet: {} lines recorded", w.out.len() - before));
                }
            }
            "until" => {
                let (cond, limit) = match words {
                    [cond @ .., "within", d] => (cond, parse_duration(d)?),
                    _ => (words, UNTIL_LIMIT),
                };
                let until = Instant::now() + limit;
                loop {
                    self.tick(w).await;
                    if self.holds(&cond[1..])? {
                        break;
                    }
                    if Instant::now() >= until {
                        return Err(format!("did not hold within {limit:?} of simulated time"));
                    }
                }
            }
            "check" => {
                self.tick(w).await;
                let p = self.published.load_full();
                check(&p, w);
            }
            other => return Err(format!("unknown step `{other}`")),
        }
        if matches!(
            words[0],
            "inject" | "reroute" | "clear-job" | "ack" | "unsubscribe" | "driver" | "settings" | "shutdown"
        ) {
            // The loop takes the request (or the driver's event) before the next step.
            self.tick(w).await;
        }
        Ok(())
    }
}

/// The summary of a `check` step, computed from the loop's snapshot, the mock's tables and the
/// state directory.
fn check(p: &Published, w: &mut World) {
    let mut o = String::new();
    let g = p.current.as_ref();
    let _ = write!(
        o,
        "check: generation {} committed, phase {}, pending {}, virtual faults {}, subscribers {}, discarded {}",
        p.generation(),
        p.phase,
        p.pending_faults,
        p.virtual_faults,
        p.subscribers,
        p.discarded_generations
    );
    let mut lines = vec![o];
    match g {
        None => lines.push("  switches hold the committed tables: no generation".into()),
        Some(g) => {
            let installed = w.mock.installed_lft_table();
            let mask = fabric_update::EscapeMask::new(&g.lids);
            for (what, escape) in [("base", false), ("escape", true)] {
                let differ: Vec<&str> = g
                    .fabric
                    .switch_ids()
                    .filter(|&sw| g.fabric.switch(sw).up)
                    .filter(|&sw| {
                        let (want, have) = (g.lfts.row(sw), installed.row(sw));
                        (1..=g.lids.top())
                            .filter(|&lid| mask.is_escape(lid) == escape)
                            .any(|lid| have.get(lid as usize) != want.get(lid as usize))
                    })
                    .map(|sw| w.names.switches[sw.idx()].as_str())
                    .collect();
                lines.push(if differ.is_empty() {
                    format!("  switches hold the committed {what} LID entries: yes")
                } else {
                    format!(
                        "  switches hold the committed {what} LID entries: no: {}",
                        differ.join(", ")
                    )
                });
            }
            let scratch = compute(ComputeInput {
                job: 0,
                physical: g.fabric.clone(),
                physical_events: vec![],
                exclusions: vec![],
                previous_lids: Arc::new(Guid2Lid::new()),
                installed_lids: None,
                lids_reusable: false,
                lmc: 1,
                max_lid: 0xBFFF,
                engine: EngineKind::Dmodc,
                job_groups: None,
                rank_options: Arc::new(RankOptions::default()),
                validate: false,
                installed: Arc::new(Lfts::new(0, 0)),
                dirty: Arc::new(BTreeSet::new()),
                resync: Arc::new(BTreeSet::new()),
                ports_in_use: false,
            });
            lines.push(match scratch {
                Ok(c) if *c.lids == *g.lids && *c.lfts == *g.lfts => {
                    "  committed routing equals a from-scratch routing of its topology: yes".into()
                }
                Ok(_) => "  committed routing equals a from-scratch routing of its topology: no".into(),
                Err(e) => format!("  from-scratch routing failed: {e}"),
            });
        }
    }
    let (base, escape) = (w.mock.verify_all_pairs(false), w.mock.verify_all_pairs(true));
    lines.push(format!(
        "  unreachable pairs through the switches: base {}, escape {}",
        base.unreachable_count, escape.unreachable_count
    ));
    let c = w.mock.counters();
    lines.push(format!(
        "  mock so far: {} LFT blocks written, {} read",
        c.blocks_written, c.blocks_read
    ));
    let un = &p.installation.unprogrammed;
    lines.push(if un.is_empty() {
        "  unprogrammed switches: none".into()
    } else {
        let list: Vec<String> = un
            .iter()
            .map(|u| format!("{} ({} blocks pending)", fmt_guid(u.guid), u.blocks_pending))
            .collect();
        format!("  unprogrammed switches: {}", list.join(", "))
    });
    lines.push(format!(
        "  ready: {}",
        p.installation.not_ready.as_deref().unwrap_or("yes")
    ));
    let or_none = |v: &[String]| if v.is_empty() { "none".to_string() } else { v.join("; ") };
    lines.push(format!(
        "  last error: {}",
        if p.last_error.is_empty() { "none" } else { &p.last_error }
    ));
    lines.push(format!("  missed acks: {}", or_none(&p.missed_acks)));
    lines.push(format!("  restarts: {}", or_none(&p.update_restarts)));
    lines.push(state_dir_summary(w.dir.path()));
    for l in lines {
        w.out.push(w.names.scrub(&l));
    }
}

fn state_dir_summary(dir: &Path) -> String {
    let st = match StateDir::open(dir) {
        Ok(st) => st,
        Err(e) => return format!("  state directory: {e}"),
    };
    let last = match st.load_last_generation() {
        Ok(g) => g.map_or("none".to_string(), |g| g.generation.to_string()),
        Err(e) => e.to_string(),
    };
    let progress = match st.load_update_progress() {
        Ok(p) => p.map_or("none".to_string(), |p| {
            format!("generation {} {}", p.generation, p.phase)
        }),
        Err(e) => e.to_string(),
    };
    let faults = match st.load_virtual_faults() {
        Ok(v) => v.len().to_string(),
        Err(e) => e.to_string(),
    };
    format!("  state directory: last generation {last}, update progress {progress}, virtual faults {faults}")
}

/// The state of one case run: the world once `fabric` is given, the process once started.
#[derive(Default)]
struct Runner {
    world: Option<World>,
    process: Option<Process>,
}

impl Runner {
    fn world(&mut self) -> Result<&mut World, String> {
        self.world.as_mut().ok_or_else(|| "no `fabric` step yet".to_string())
    }

    fn step(&mut self, line: &str, words: &[&str]) -> Result<(), String> {
        if let Some(w) = self.world.as_mut() {
            w.out.push(format!("> {line}"));
        }
        match words[0] {
            "fabric" => {
                if self.world.is_some() {
                    return Err("one `fabric` per case".into());
                }
                let spec = words[1..].join(" ");
                let fabric = fabric_topology::gen::generate_str(&spec, None).map_err(|e| format!("{spec}: {e}"))?;
                let names = Names::new(&fabric);
                let mut out = vec![format!("> {line}")];
                out.push(format!(
                    "fabric: {} switches ({}), {} end ports",
                    fabric.num_switches(),
                    names.switches.join(" "),
                    fabric.num_end_ports()
                ));
                let mut links = Vec::new();
                for (i, s) in fabric.switches().iter().enumerate() {
                    for (pn, port) in s.external_ports() {
                        if let fabric_topology::Remote::Switch { sw, port: rp } = port.remote {
                            if (i as u32, pn) < (sw.0, rp) {
                                links.push(format!(
                                    "{}[{pn}]={}[{rp}]",
                                    names.switches[i],
                                    names.switches[sw.idx()]
                                ));
                            }
                        }
                    }
                }
                out.push(format!("links: {}", links.join(" ")));
                self.world = Some(World {
                    names,
                    mock: Arc::new(MockFabric::new(fabric)),
                    dir: tempfile::tempdir().map_err(|e| format!("state directory: {e}"))?,
                    settings: default_settings(),
                    pool: POOL.with(Arc::clone),
                    hold: false,
                    out,
                });
            }
            "settings" if self.process.is_none() => apply_settings(&mut self.world()?.settings, &words[1..])?,
            "mock" => {
                let w = self.world()?;
                let mut cfg = w.mock.config();
                match words[1..] {
                    ["latency", d] => cfg.op_latency = parse_duration(d)?,
                    ["max-parallel", n] => cfg.max_parallel = n.parse().map_err(|_| format!("bad number `{n}`"))?,
                    ["fail-writes", "all"] => {
                        cfg.error_rate = 1.0;
                        cfg.max_retries = 0;
                    }
                    ["fail-writes", ref switches @ ..] if !switches.is_empty() => {
                        let f = w.mock.cabling();
                        for s in switches {
                            cfg.unreachable_switches.push(w.names.switch(f, s)?);
                        }
                    }
                    ["heal"] => {
                        let d = MockConfig::default();
                        (cfg.error_rate, cfg.max_retries) = (d.error_rate, d.max_retries);
                        cfg.unreachable_switches.clear();
                    }
                    _ => return Err("mock latency D | max-parallel N | fail-writes all|SWITCH... | heal".into()),
                }
                w.mock.set_config(cfg).map_err(|e| format!("mock: {e}"))?;
            }
            "start" | "restart" => {
                let w = self.world.as_ref().ok_or("no `fabric` step yet")?;
                match self.process.take() {
                    Some(p) if p.lp.task.is_finished() => drop(p),
                    Some(_) => return Err("the loop is running (`crash` or `shutdown` first)".into()),
                    None => {}
                }
                self.process = Some(Process::start(w)?);
            }
            "routing" => {
                let w = self.world()?;
                w.hold = match words[1..] {
                    ["hold"] => true,
                    ["release"] => false,
                    _ => return Err("routing hold|release".into()),
                };
            }
            "crash" => {
                let p = self.process.take().ok_or("no loop to crash")?;
                p.crash(self.world.as_ref().ok_or("no `fabric` step yet")?);
            }
            _ => {
                let w = self.world.as_mut().ok_or("no `fabric` step yet")?;
                let p = self.process.as_mut().ok_or("the loop is not started")?;
                p.rt.block_on(p.lp.exec(w, line, words))?;
            }
        }
        Ok(())
    }
}

/// Runs a case script: its record, or what went wrong with the line number.
fn run_case(input: &str) -> Result<Vec<String>, String> {
    let mut r = Runner::default();
    for (i, raw) in input.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        r.step(&words.join(" "), &words)
            .map_err(|e| format!("input line {}: `{line}`: {e}", i + 1))?;
    }
    if let (Some(p), Some(w)) = (r.process.take(), r.world.as_ref()) {
        p.crash(w);
    }
    Ok(r.world.map(|w| w.out).unwrap_or_default())
}

/// Where `got` departs from `want`: the line number (1-based), the step it belongs to and both
/// lines.
fn first_difference(want: &str, got: &str) -> Option<String> {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let i = (0..w.len().max(g.len())).find(|&i| w.get(i) != g.get(i))?;
    let step = g[..i.min(g.len())]
        .iter()
        .rev()
        .find(|l| l.starts_with("> "))
        .copied()
        .unwrap_or("(before the first step)");
    Some(format!(
        "line {} (in step `{}`):\n    expected: {}\n    got:      {}",
        i + 1,
        step.trim_start_matches("> "),
        w.get(i).copied().unwrap_or("(end of file)"),
        g.get(i).copied().unwrap_or("(end of record)")
    ))
}

fn cases(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.join("input").is_file())
        .collect();
    v.sort();
    v
}

/// Every case of `tests/data/loop`, each run twice (the two records must be identical) and
/// compared with its `expected` file (rewritten instead with `FABRICD_REGENERATE=1`).
#[test]
fn loop_conformance_cases() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/loop");
    let regenerate = std::env::var("FABRICD_REGENERATE").is_ok_and(|v| v == "1");
    let only = std::env::var("FABRICD_CONFORMANCE_CASE").unwrap_or_default();
    let all = cases(&root);
    assert!(!all.is_empty(), "no case in {}", root.display());
    let mut failures = Vec::new();
    let mut ran = 0;
    for dir in all {
        let name = dir.file_name().unwrap_or_default().to_string_lossy().into_owned();
        if !name.contains(&only) {
            continue;
        }
        ran += 1;
        let input = std::fs::read_to_string(dir.join("input")).expect("readable input");
        let run = || run_case(&input).map(|r| r.join("\n") + "\n");
        let got = match (run(), run()) {
            (Ok(a), Ok(b)) if a == b => a,
            (Ok(a), Ok(b)) => {
                let d = first_difference(&a, &b).unwrap_or_default();
                failures.push(format!("case {name}: two runs differ (not deterministic) at {d}"));
                continue;
            }
            (Err(e), _) | (_, Err(e)) => {
                failures.push(format!("case {name}: {e}"));
                continue;
            }
        };
        let expected = dir.join("expected");
        if regenerate {
            std::fs::write(&expected, &got).expect("writable expected file");
            continue;
        }
        match std::fs::read_to_string(&expected) {
            Ok(want) => {
                if let Some(d) = first_difference(&want, &got) {
                    failures.push(format!(
                        "case {name}: the record differs from {} at {d}\n  (if the change is intended: \
                         FABRICD_REGENERATE=1 cargo test -p fabricd --lib conformance, then review the diff)",
                        expected.display()
                    ));
                }
            }
            Err(e) => failures.push(format!(
                "case {name}: {}: {e} (create it with FABRICD_REGENERATE=1)",
                expected.display()
            )),
        }
    }
    assert!(ran > 0, "no case matches FABRICD_CONFORMANCE_CASE={only}");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
