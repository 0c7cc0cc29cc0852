//! One process of the daemon under test: a paused-time runtime running an [`EventLoop`] over the
//! mock fabric, the steps that talk to it, and what the harness records of it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use fabric_mock::MockFabric;
use fabric_southbound::SouthboundDriver;
use fabric_topology::fmt_guid;
use fabric_update::SubscriberId;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::Instant;

use super::script::{apply_settings, loop_error, notice_text, parse_duration, parse_phase, Names};
use crate::compute::{compute, ComputeInput};
use crate::event_loop::Request;
use crate::event_loop::{
    EventLoop, FaultAccepted, FaultRequest, FaultTarget, LoopError, LoopInit, LoopIo, LoopParams, LoopSettings,
    UpdateNotice,
};
use crate::notify::Notifier;
use crate::persist::{JobPort, StateDir};
use crate::state::{Notice, Phase, Published};
use crate::telemetry::Telemetry;

/// Simulated time between two looks of the harness at the loop.
const TICK: Duration = Duration::from_millis(1);
/// Longest simulated wait of one `until` step.
const UNTIL_LIMIT: Duration = Duration::from_secs(120);
/// Longest real time the harness waits for the loop's blocking tasks (state-directory writes).
const BLOCKING_LIMIT: Duration = Duration::from_secs(30);

thread_local! {
    /// The routing pool: one worker, the test thread itself (rayon leaks such a registry, so
    /// there is one per thread, shared by every case run on it).
    pub(super) static POOL: Arc<rayon::ThreadPool> = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .use_current_thread()
            .build()
            .expect("a rayon pool on the test thread"),
    );
}

/// What survives a crash: the simulated fabric, the state directory, the record.
pub(super) struct World {
    pub(super) names: Names,
    pub(super) mock: Arc<MockFabric>,
    pub(super) dir: tempfile::TempDir,
    pub(super) settings: LoopSettings,
    pub(super) pool: Arc<rayon::ThreadPool>,
    /// `routing hold`: computations stay queued (the routing pool is busy).
    pub(super) hold: bool,
    pub(super) out: Vec<String>,
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

/// One process of the daemon: a runtime and the loop running on it.
pub(super) struct Process {
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
    pub(super) fn start(w: &World) -> Result<Process, String> {
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
                jobs: Arc::new(jobs.clone()),
                ..Published::starting(physical.clone(), String::new(), false, "mock", 1)
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
                    sa: None,
                    sa_service: None,
                    mcast_changes: None,
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

    /// Runs a step that talks to the loop, in this process's runtime.
    pub(super) fn exec(&mut self, w: &mut World, line: &str, words: &[&str]) -> Result<(), String> {
        self.rt.block_on(self.lp.exec(w, line, words))
    }

    /// Whether the loop has stopped (after a `shutdown`).
    pub(super) fn stopped(&self) -> bool {
        self.lp.task.is_finished()
    }

    /// kill -9: every task of the process is dropped (queued computations are thrown away); the
    /// switches keep what they hold and the state directory what was written.
    pub(super) fn crash(self, w: &World) {
        drop(self.lp);
        // A computation's waiting blocking thread ends once its job has run (the result goes
        // nowhere: the loop is gone); then the runtime can stop.
        while w.pool.yield_now() == Some(rayon::Yield::Executed) {}
        self.rt.shutdown_timeout(Duration::from_secs(10));
    }
}

/// Lets the tasks woken at this instant (upload latencies, deadlines) run, with the state
/// directory writes they start: there is one blocking thread, so a no-op blocking task queued
/// behind them ends after them. A computation waits for its routing job on that blocking thread
/// (`Tasks::spawn_on_pool`), so while the probe waits the routing pool's queued jobs run here,
/// on the test thread (the pool's only worker). Under `routing hold` (`pool` is `None`) they
/// stay queued: the blocking thread stays busy with the waiting computation, so nothing is
/// awaited behind it (held routing holds the loop's blocking tasks too). A blocking task that
/// never ends fails the case after [`BLOCKING_LIMIT`] (real time: simulated time stands still
/// meanwhile) instead of hanging.
async fn settle(pool: Option<&rayon::ThreadPool>) {
    for _ in 0..2 {
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
        let Some(pool) = pool else { continue };
        let probe = tokio::task::spawn_blocking(|| ());
        let since = std::time::Instant::now();
        while !probe.is_finished() {
            assert!(
                since.elapsed() < BLOCKING_LIMIT,
                "a blocking task of the loop has run for {BLOCKING_LIMIT:?}"
            );
            if pool.yield_now() != Some(rayon::Yield::Executed) {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

impl LoopHandle {
    /// One tick: simulated time goes on by [`TICK`], queued computations run, arrivals are
    /// recorded.
    async fn tick(&mut self, w: &mut World) {
        while !w.hold && w.pool.yield_now() == Some(rayon::Yield::Executed) {}
        // The results go back to the loop and everything they cause runs before time moves on.
        tokio::time::advance(TICK).await;
        settle((!w.hold).then_some(&*w.pool)).await;
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
        for (name, s) in &mut self.subscribers {
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
            "set-job" => {
                let id = words.get(1).ok_or("set-job ID END-PORT...")?.to_string();
                let ports = words[2..]
                    .iter()
                    .map(|n| Ok(JobPort::new(w.names.end_port(&f, n)?, n)))
                    .collect::<Result<Vec<_>, String>>()?;
                let (reply, rx) = oneshot::channel();
                self.send(line, Request::SetJob { id, ports, reply }, Some(PendingReply::Unit(rx)))?;
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
                ports_in_use: false,
                ..ComputeInput::from_scratch(g.fabric.clone(), vec![])
            });
            lines.push(match scratch {
                Ok(c) if *c.lids == *g.lids && *c.lfts == *g.lfts => {
                    "  committed routing equals a from-scratch Dmodc routing (no jobs) of its topology: yes".into()
                }
                Ok(_) => "  committed routing equals a from-scratch Dmodc routing (no jobs) of its topology: no".into(),
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
    let jobs = match st.load_jobs() {
        Ok(j) => j.len().to_string(),
        Err(e) => e.to_string(),
    };
    format!(
        "  state directory: last generation {last}, update progress {progress}, virtual faults {faults}, jobs {jobs}"
    )
}
