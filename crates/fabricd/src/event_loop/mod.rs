//! The event loop: the single owner of the live state.
//!
//! One task reads the callers' [`Request`]s, the driver's physical-change stream, the answers
//! of its own tasks (a crate-private message enum no caller can forge) and one timer
//! (`EventLoop::next_deadline`: the coalescing window, a retry, a deadline of the five-phase
//! update). Handlers are synchronous and do no I/O: computations, uploads, driver calls and
//! state file writes run as tasks of the registry (`tasks`) and come back as messages.
//! Everything that changes the fabric, the routing, the jobs or the installed LFTs happens
//! here; readers see [`Published`](crate::state::Published) snapshots swapped through `arc-swap`.
//!
//! The loop is split by what it keeps:
//! * `scheduler`: pure generation scheduling (changes, coalescing, supersession, retries);
//! * `install`: the generation in flight as one value (dropping it is the abort);
//! * `generation`: computing and installing it (the five-phase protocol's actions);
//! * `abandon`: a generation given up or restarted half-way (drain, fold, restart);
//! * `commit`: committing it (or not), persistence of the generation;
//! * `faults`: injected, physical and persisted faults;
//! * `subscribers`: subscribers, notices, acks, waiters; `jobs`: job mappings;
//! * `tasks`: the task registry (abort-on-drop handles).
//!
//! # A generation
//!
//! 1. Changes (driver events, virtual faults, reroute requests) are numbered and queued. The
//!    loop waits until the fabric is quiet for `coalesce_ms` after the last change, or
//!    `coalesce_max_ms` after the first, so a storm becomes a few generations.
//! 2. **Prepare**: the computation (apply changes, rank, LIDs, route, diff) is sent to the
//!    routing rayon pool; the result comes back as a message. If more changes become due while
//!    it runs, a newer computation supersedes it (at most `max_superseded` times in a row) and
//!    the older one is dropped (counted as discarded).
//! 3. **Update**: the changed blocks are uploaded (bounded parallelism, retries) by a task.
//!    Changes arriving meanwhile are queued, never lost.
//! 4. **Commit**: LIDs, virtual faults and the generation number are persisted (a task), then
//!    the generation is published, waiters answered, subscribers notified. Then the next
//!    queued changes start the next generation.
//!
//! The phases `Unpath` and `Repath` of the five-phase update plug in between 2 and 4. A change
//! arriving while a five-phase generation installs is checked against the target's
//! port-in-use set ([`crate::compute::PortUse`]): one that kills a port the target forwards
//! through restarts the generation from Prepare with every change so far (after the running
//! stage upload has finished and been folded into the installed tables); any other change is
//! queued (see `docs/update-protocol.md`, "Faults during an update").

mod abandon;
mod commit;
mod exclusion;
mod faults;
mod generation;
pub(crate) mod install;
mod internal;
mod jobs;
mod request;
pub(crate) mod scheduler;
mod side;
mod status;
pub(crate) mod subscribers;
pub(crate) mod tasks;
mod topology;
mod vl;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use fabric_routing::{Guid2Lid, Lfts, LidPlan};
use fabric_topology::{fmt_guid, Fabric, FabricEvent, Lid};
use fabric_update::{Action as UAction, Input as UInput, Protocol, SubscriberId};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::persist::{JobPort, Jobs, UpdateProgress};
use crate::state::{Generation, Phase};
use exclusion::{exclusion_from_persisted, Exclusion};
use install::Install;
use internal::{Internal, ReadBack};
use scheduler::Scheduler;
use subscribers::{Subscribers, Waiters};
use tasks::{Task, Tasks};

pub use commit::{commit_delay, COMMIT_DELAY_ENV};
use request::Reply;
pub use request::{
    event_kind, FaultAccepted, FaultRequest, FaultTarget, LoopError, LoopInit, LoopIo, LoopParams, LoopSettings,
    Request, UpdateNotice,
};

/// Switches whose LFTs are read back at the same time (the driver bounds its own connections
/// below that).
const READ_BACK_SWITCHES: usize = 64;

/// A change of the job mappings waiting for its turn (they are written one at a time).
#[derive(Debug)]
struct JobChange {
    id: String,
    /// `Some`: set these ports; `None`: clear the job.
    ports: Option<Vec<JobPort>>,
    reply: Reply<()>,
}

/// The loop's state (see the module documentation).
pub struct EventLoop {
    settings: LoopSettings,
    lmc: u8,
    max_lid: Lid,
    driver_name: &'static str,
    io: LoopIo,
    rx: mpsc::Receiver<Request>,
    internal_rx: mpsc::UnboundedReceiver<Internal>,
    tasks: Tasks<Internal>,
    driver_rx: mpsc::UnboundedReceiver<FabricEvent>,
    /// Bumped at every publish (tests wait on it instead of polling).
    published_version: watch::Sender<u64>,

    cabling: Arc<Fabric>,
    physical: Arc<Fabric>,
    pending_physical: Vec<FabricEvent>,
    exclusions: BTreeSet<Exclusion>,
    persisted_exclusions: Vec<Exclusion>,
    guid2lid: Arc<Guid2Lid>,
    jobs: Arc<Jobs>,

    schedule: Scheduler,
    current: Option<Arc<Generation>>,
    installed: Arc<Lfts>,
    /// The ports the tables of a computed generation forward through, with those tables: the
    /// next computation reuses it while they are still `installed` (the same `Arc`).
    installed_ports: Option<(Arc<Lfts>, Arc<crate::compute::PortUse>)>,
    /// The routing state of the installed generation: the next one is re-routed from it.
    routing_state: Option<Arc<fabric_routing::incremental::RoutingState>>,
    installed_lids: Option<Arc<LidPlan>>,
    dirty: BTreeSet<(u32, u32)>,
    resync: BTreeSet<u32>,
    /// A forced reroute asked for a full recomputation: the next generation to start reuses
    /// nothing computed for the installed one ([`crate::compute::ComputeInput::full`]).
    recompute: bool,
    /// The multicast forwarding tables and P_Key tables (see `side`).
    side: side::SideTables,
    /// Switches (dense id) of the routed fabric that did not take their blocks of the
    /// committed generation: blocks pending and the last write error.
    unprogrammed: BTreeMap<u32, (u64, String)>,
    /// Why the last state file write failed (names the path); empty while persistence works.
    persistence_error: String,
    /// What the driver learnt after discovery that the routed fabric lacks
    /// ([`fabric_southbound::SouthboundDriver::topology_gaps`], one line per switch), polled at every event.
    topology_incomplete: Vec<String>,

    /// The generation being computed or installed.
    install: Option<Install>,
    discarded: u64,
    /// The phase readers see.
    phase: Phase,
    last_error: String,
    waiters: Waiters,
    shutting_down: Option<Instant>,
    started: Instant,

    /// The five-phase update state machine (LMC 1).
    protocol: Protocol,
    /// Deadlines armed by the protocol (instant, token); fired by the loop's one timer.
    deadlines: Vec<(Instant, u64)>,
    subscribers: Subscribers,
    /// `attempt N: reason` of the restarts from Prepare of the current (or last) generation.
    update_restarts: Vec<String>,
    /// A five-phase update interrupted by a restart (from `update-progress.json`).
    recovering: Option<UpdateProgress>,
    /// Read the switches' LFTs before the first generation (taking over from another master).
    read_back_first: bool,
    /// The read-back of the switches' LFTs runs; no generation starts before it is done.
    reading_back: Option<Task>,
    /// Highest routing generation number used before this process installed anything: the last
    /// one committed by a previous run (`generation.json`) or the one a previous run was
    /// interrupted in (`update-progress.json`), 0 for a new state directory. Generations of
    /// this process are numbered from it + 1, so numbers never go backwards across restarts.
    previous_generation: u64,
    /// The background escape-VL preparation (see `prepare_escape_vl`), while it runs.
    escape_vl_prefetch: Option<Task>,
    /// The data-VL plan the driver last programmed for a VL-layered generation (see `vl`).
    data_vls_in_force: Option<fabric_southbound::DataVlPlan>,
    /// Physical fault injections the driver is carrying out.
    physical_faults: BTreeMap<u64, Task>,
    next_physical_fault: u64,
    /// Job mapping changes, written one at a time, and the write running.
    job_changes: VecDeque<JobChange>,
    job_save: Option<Task>,
}

impl EventLoop {
    /// Creates the loop and the sender that feeds it.
    pub fn new(params: LoopParams, io: LoopIo, init: LoopInit) -> (EventLoop, mpsc::Sender<Request>) {
        let (tx, rx) = mpsc::channel(4096);
        let (internal_tx, internal_rx) = mpsc::unbounded_channel();
        let driver_rx = io.driver.subscribe_events();
        let physical = init.physical;
        let mut exclusions = BTreeSet::new();
        for v in &init.virtual_faults {
            match exclusion_from_persisted(&physical, v) {
                Ok(x) => {
                    exclusions.insert(x);
                }
                Err(e) => tracing::warn!(fault = ?v, error = %e, "dropping a persisted virtual fault"),
            }
        }
        let persisted_exclusions: Vec<Exclusion> = exclusions.iter().copied().collect();
        let recovering = match io.state_dir.load_update_progress() {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "ignoring an unreadable update progress file");
                None
            }
        };
        let mut last_error = String::new();
        if let Some(p) = &recovering {
            // The interrupted generation's target topology is the one to converge to.
            exclusions.clear();
            for v in &p.virtual_faults {
                match exclusion_from_persisted(&physical, v) {
                    Ok(x) => {
                        exclusions.insert(x);
                    }
                    Err(e) => {
                        tracing::warn!(fault = ?v, error = %e, "dropping a virtual fault of the interrupted update");
                    }
                }
            }
            last_error = format!(
                "generation {} was interrupted in phase {} by a restart: reading the LFTs back and reinstalling",
                p.generation, p.phase
            );
            tracing::warn!(generation = p.generation, phase = %p.phase, "{last_error}");
        }
        // The daemon refuses to start on an unreadable generation file (`daemon::run` loads it
        // first); here it can only fail for other embedders, which number from the progress file.
        let last_committed = match io.state_dir.load_last_generation() {
            Ok(g) => g,
            Err(e) => {
                tracing::error!(error = %e, "ignoring an unreadable generation file");
                None
            }
        };
        let previous_generation = last_committed
            .map_or(0, |g| g.generation)
            .max(recovering.as_ref().map_or(0, |p| p.generation));
        if previous_generation > 0 {
            tracing::info!(
                last_committed = last_committed.map_or(0, |g| g.generation),
                interrupted = recovering.as_ref().map_or(0, |p| p.generation),
                next = previous_generation + 1,
                "routing generation numbers continue from the previous run"
            );
        }
        let all_switches: BTreeSet<u32> = (0..physical.num_switches() as u32).collect();
        let params_protocol = params.settings.update.protocol(params.lmc >= 1);
        let now = Instant::now();
        let lp = EventLoop {
            settings: params.settings,
            lmc: params.lmc,
            max_lid: params.max_lid,
            driver_name: params.driver_name,
            io,
            rx,
            internal_rx,
            tasks: Tasks::new(internal_tx),
            driver_rx,
            published_version: watch::Sender::new(0),
            cabling: physical.clone(),
            physical,
            pending_physical: Vec::new(),
            persisted_exclusions,
            exclusions,
            guid2lid: Arc::new(init.guid2lid),
            jobs: Arc::new(init.jobs),
            schedule: Scheduler::new(now),
            current: None,
            installed: Arc::new(Lfts::new(0, 0)),
            installed_ports: None,
            routing_state: None,
            installed_lids: None,
            dirty: BTreeSet::new(),
            side: side::SideTables {
                // The first generation writes every switch's MFT blocks in use whole (entries an
                // earlier manager left there are overwritten; blocks beyond the highest MLID in
                // use are not read nor cleared); every P_Key table is written (none known
                // installed).
                mft_resync: all_switches.clone(),
                ..side::SideTables::default()
            },
            resync: all_switches,
            recompute: false,
            unprogrammed: BTreeMap::new(),
            persistence_error: String::new(),
            topology_incomplete: Vec::new(),
            install: None,
            discarded: 0,
            phase: Phase::Idle,
            last_error,
            waiters: Waiters::default(),
            shutting_down: None,
            started: now,
            protocol: Protocol::new(params_protocol),
            deadlines: Vec::new(),
            subscribers: Subscribers::default(),
            update_restarts: Vec::new(),
            recovering,
            read_back_first: false,
            reading_back: None,
            previous_generation,
            escape_vl_prefetch: None,
            data_vls_in_force: None,
            physical_faults: BTreeMap::new(),
            next_physical_fault: 1,
            job_changes: VecDeque::new(),
            job_save: None,
        };
        if params.lmc == 0 {
            tracing::warn!(
                "single LID per end port (lmc = 0): routing updates are direct uploads without the five-phase \
                 protocol (no per-flow consistency; see docs/update-protocol.md)"
            );
        }
        lp.publish();
        (lp, tx)
    }

    /// Taking over a fabric another subnet manager programmed: the first generation starts
    /// from what the switches hold (read back) and writes only the blocks that differ.
    pub fn read_back_first(&mut self) {
        self.read_back_first = true;
    }

    /// A receiver that sees a new value at every publish of a snapshot.
    #[cfg(test)]
    pub(crate) fn published_watch(&self) -> watch::Receiver<u64> {
        self.published_version.subscribe()
    }

    /// Runs until [`Request::Shutdown`] (and the running upload) completes.
    pub async fn run(mut self) {
        let mut watchdog = self.io.watchdog.map(|d| {
            let mut i = tokio::time::interval(d);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            i
        });
        let mut driver_open = true;
        if self.recovering.is_some() || self.read_back_first {
            self.start_read_back();
        }
        self.maybe_start();
        loop {
            if self.finished() {
                break;
            }
            self.note_topology_gaps();
            let deadline = self.next_deadline();
            let shutdown_deadline = self
                .shutting_down
                .map(|t| t + Duration::from_secs(self.settings.update.shutdown_timeout_s));
            tokio::select! {
                ev = self.rx.recv() => match ev {
                    Some(ev) => self.on_request(ev),
                    None => break,
                },
                Some(m) = self.internal_rx.recv() => self.on_internal(m),
                fe = self.driver_rx.recv(), if driver_open => match fe {
                    Some(fe) => self.on_driver_event(fe),
                    None => driver_open = false,
                },
                () = sleep_until_opt(deadline), if deadline.is_some() => self.on_timer(),
                () = sleep_until_opt(shutdown_deadline), if shutdown_deadline.is_some() => {
                    tracing::warn!("shutdown timeout: leaving with an upload in progress");
                    break;
                }
                () = tick_opt(&mut watchdog), if watchdog.is_some() => self.on_watchdog(),
                () = changed_opt(&mut self.io.mcast_changes) => self.on_mcast_changed(),
            }
        }
        self.waiters.shut_down();
        tracing::info!(generation = self.generation(), "event loop stopped");
    }

    /// The dispatcher of the callers' requests.
    fn on_request(&mut self, ev: Request) {
        match ev {
            Request::Inject { req, reply } => self.on_inject(req, reply),
            Request::Isolate {
                switch,
                port,
                isolate,
                reply,
            } => self.on_isolate(switch, port, isolate, reply),
            Request::WhatIf { down, reply } => drop(reply.send(self.what_if_input(&down))),
            Request::Reroute { resync, wait, reply } => self.on_reroute(resync, wait, reply),
            Request::SetJob { id, ports, reply } => self.on_job_change(id, Some(ports), reply),
            Request::ClearJob { id, reply } => self.on_job_change(id, None, reply),
            Request::Reload(s) => self.on_reload(*s),
            Request::Subscribe {
                name,
                ports,
                notices,
                reply,
            } => self.on_subscribe(name, ports.len(), notices, reply),
            Request::Ack {
                subscriber,
                generation,
                phase,
                reply,
            } => self.on_ack(subscriber, generation, phase, reply),
            Request::Unsubscribe { subscriber } => self.drop_subscriber(subscriber),
            Request::Shutdown => self.on_shutdown(),
        }
    }

    /// The dispatcher of the answers of the loop's tasks.
    fn on_internal(&mut self, m: Internal) {
        match m {
            Internal::ComputeDone(r) => self.on_compute_done(*r),
            Internal::EscapeVlChecked(c) => self.on_escape_vl_checked(*c),
            Internal::EscapeVlPrepared(result) => self.on_escape_vl_prepared(result),
            Internal::EscapeDone(u) => self.on_escape_done(u),
            Internal::UploadDone(u) => self.on_upload_done(u),
            Internal::PhysicalFaultDone(d) => self.on_physical_fault_done(*d),
            Internal::JobsSaved(j) => self.on_jobs_saved(*j),
            Internal::Persisted(p) => self.on_persisted(p),
            Internal::ReadBack(r) => self.on_read_back(r),
            Internal::Folded(f) => self.on_folded(f),
            Internal::PartitionsHanded => self.on_partitions_handed(),
        }
    }

    /// Carries out the five-phase protocol's actions (every one of them, in order).
    fn drive(&mut self, actions: Vec<UAction>) {
        for a in actions {
            match a {
                UAction::PhaseChanged { phase, at } => {
                    if phase != fabric_update::Phase::Idle {
                        self.save_progress(at, phase);
                        self.set_phase(phase);
                    }
                }
                // A restarted attempt (the first one is started by `maybe_start`).
                UAction::Compute { at } if at.attempt > 0 => self.begin_restart(),
                UAction::Compute { .. } => {}
                UAction::UploadEscape { .. } => self.upload_escape(),
                UAction::UploadBase { .. } => self.upload_base(),
                UAction::NotifyUnpath {
                    generation,
                    subscribers,
                    deadline,
                } => self
                    .subscribers
                    .notify(generation, &subscribers, deadline, Phase::Unpath),
                UAction::NotifyRepath {
                    generation,
                    subscribers,
                    deadline,
                } => self
                    .subscribers
                    .notify(generation, &subscribers, deadline, Phase::Repath),
                UAction::ArmDeadline { token, after } => self.deadlines.push((Instant::now() + after, token)),
                UAction::Restart { from, reason } => self.note_restart(from, reason),
                UAction::Commit { at, report } => {
                    self.deadlines.clear();
                    self.record_misses(&report);
                    self.commit_update(at);
                }
                UAction::Abort {
                    reason,
                    report,
                    base_touched,
                    ..
                } => {
                    self.deadlines.clear();
                    self.record_misses(&report);
                    self.abort_generation(&reason, base_touched);
                    self.clear_progress();
                }
            }
        }
    }

    /// Feeds the five-phase protocol one input (at tokio's now) and carries out its actions.
    fn protocol_input(&mut self, input: UInput) {
        let a = self.protocol.on(Instant::now().into_std(), input);
        self.drive(a);
    }

    fn finished(&self) -> bool {
        self.shutting_down.is_some() && !self.installing()
    }

    /// An upload (or a wait of the five-phase update, or a commit's state files) is in
    /// progress: the generation cannot be superseded any more.
    fn installing(&self) -> bool {
        self.install.as_ref().is_some_and(Install::installing)
    }

    /// The one timer of the loop: the earliest of the next generation's start (coalescing
    /// window, retry) and the deadlines of the five-phase update.
    fn next_deadline(&self) -> Option<Instant> {
        let protocol = self.deadlines.iter().map(|&(t, _)| t).min();
        let schedule = if self.shutting_down.is_some() || self.installing() || self.reading_back.is_some() {
            None
        } else {
            let computing = self.install.is_some();
            self.schedule.due(Instant::now(), computing, &self.settings.update)
        };
        match (protocol, schedule) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The timer fired: expired deadlines go to the protocol, then a due generation starts.
    fn on_timer(&mut self) {
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = self.deadlines.drain(..).partition(|&(t, _)| t <= now);
        self.deadlines = later;
        for (_, token) in due {
            self.protocol_input(UInput::Deadline { token });
        }
        self.maybe_start();
    }

    fn on_watchdog(&self) {
        if let Err(e) = self.io.notifier.watchdog() {
            tracing::warn!(error = %e, "watchdog notification failed");
        }
    }

    fn on_reroute(&mut self, resync: bool, wait: bool, reply: Option<Reply<u64>>) {
        if self.shutting_down.is_some() {
            if let Some(r) = reply {
                let _ = r.send(Err(LoopError::ShuttingDown));
            }
            return;
        }
        if resync {
            self.resync.extend(0..self.physical.num_switches() as u32);
            self.side.resync_all(self.physical.num_switches());
        }
        self.note_change(false);
        self.schedule.force();
        self.recompute = true;
        tracing::info!(resync, "reroute requested");
        match (reply, wait) {
            (Some(r), true) => self.waiters.reroute(self.schedule.change_seq(), r),
            (Some(r), false) => {
                let _ = r.send(Ok(self.generation()));
            }
            (None, _) => {}
        }
        self.maybe_start();
    }

    fn on_reload(&mut self, s: LoopSettings) {
        let reroute = s.engine != self.settings.engine
            || s.topology != self.settings.topology
            || s.job_aware != self.settings.job_aware
            || s.multicast != self.settings.multicast
            || s.partitions != self.settings.partitions
            || s.rank_options.roots != self.settings.rank_options.roots
            || s.rank_options.roles != self.settings.rank_options.roles;
        self.settings = s;
        self.protocol.set_config(self.settings.update.protocol(self.lmc >= 1));
        tracing::info!(engine = %self.settings.engine, "settings reloaded");
        if reroute {
            self.note_change(false);
            self.schedule.force();
        }
        self.publish();
        self.maybe_start();
    }

    fn on_shutdown(&mut self) {
        if self.shutting_down.is_none() {
            tracing::info!(uploading = self.installing(), "shutdown requested");
            self.shutting_down = Some(Instant::now());
            if !self.installing() {
                if let Some(i) = self.install.take() {
                    self.give_back(&i.flight);
                }
            }
        }
    }

    fn on_subscribe(
        &mut self,
        name: String,
        ports: usize,
        notices: mpsc::Sender<UpdateNotice>,
        reply: Reply<SubscriberId>,
    ) {
        let id = self.subscribers.register(name, ports, notices);
        self.protocol_input(UInput::SubscriberJoined { subscriber: id });
        self.publish();
        let _ = reply.send(Ok(id));
    }

    fn on_ack(&mut self, subscriber: SubscriberId, generation: u64, phase: Phase, reply: Reply<()>) {
        let phase = match self.subscribers.check_ack(subscriber, phase) {
            Ok(p) => p,
            Err(e) => return drop(reply.send(Err(e))),
        };
        let _ = reply.send(Ok(()));
        self.protocol_input(UInput::Ack {
            subscriber,
            generation,
            phase,
        });
    }

    fn drop_subscriber(&mut self, subscriber: SubscriberId) {
        if self.subscribers.remove(subscriber) {
            self.protocol_input(UInput::SubscriberGone { subscriber });
            self.publish();
        }
    }

    /// Records one change that needs a generation.
    fn note_change(&mut self, fault: bool) {
        self.schedule.note_change(Instant::now(), fault);
        self.publish();
    }

    /// Starts a computation when one is due (superseding the one running, if any).
    fn maybe_start(&mut self) {
        if self.shutting_down.is_some() || self.installing() || self.reading_back.is_some() {
            return;
        }
        let running = self.install.as_ref().map(|i| i.flight.covered());
        // Superseding a restarted attempt of a five-phase update continues that update.
        let restarted = self.install.as_ref().is_some_and(|i| i.restarted);
        let Some(start) = self
            .schedule
            .start_if_due(Instant::now(), running, &self.settings.update)
        else {
            return;
        };
        if let Some(old) = self.install.take() {
            // Superseded: dropping it drops its computation (its result is never used).
            self.give_back(&old.flight);
            self.discarded += 1;
            self.io.telemetry.discarded();
            tracing::debug!(job = old.flight.job, "computation superseded by newer changes");
        }
        self.start_compute(start, restarted);
    }

    /// Returns the dirty blocks and resync switches of an abandoned job.
    fn give_back(&mut self, f: &install::InFlight) {
        self.dirty.extend(f.dirty.iter().copied());
        self.resync.extend(f.resync.iter().copied());
    }

    /// After a restart that interrupted an update (or when taking over): what the switches
    /// really hold becomes the installed tables, so the first generation writes exactly the
    /// blocks that differ from the target (switches that cannot be read are rewritten whole).
    /// The switches are read by a task, [`READ_BACK_SWITCHES`] at a time, each with
    /// [`SouthboundDriver::read_lft_blocks`](fabric_southbound::SouthboundDriver::read_lft_blocks);
    /// no generation starts before it answers.
    fn start_read_back(&mut self) {
        let f = self.physical.clone();
        let driver = self.io.driver.clone();
        let top = self.guid2lid.iter().map(|(_, _, max)| max).max().unwrap_or(0);
        self.reading_back = Some(self.tasks.spawn(async move {
            let mut lfts = Lfts::new(f.num_switches(), top);
            let nb = lfts.num_blocks() as u32;
            let mut read_whole = Vec::new();
            let mut blocks = 0u64;
            let mut up = f.switch_ids().filter(|&sid| f.switch(sid).up);
            let mut reads = tokio::task::JoinSet::new();
            loop {
                while reads.len() < READ_BACK_SWITCHES {
                    let Some(sid) = up.next() else { break };
                    let (driver, guid) = (driver.clone(), f.switch(sid).guid);
                    reads.spawn(async move { (sid, guid, driver.read_lft_blocks(guid, 0, nb).await) });
                }
                let Some(done) = reads.join_next().await else { break };
                let (sid, guid, read) = match done {
                    Ok(r) => r,
                    Err(e) => std::panic::resume_unwind(e.into_panic()),
                };
                match read {
                    Ok(entries) if entries.len() == nb as usize => {
                        for (b, e) in entries.iter().enumerate() {
                            lfts.block_mut(sid, b).copy_from_slice(e);
                        }
                        blocks += u64::from(nb);
                        read_whole.push(sid.0);
                    }
                    Ok(entries) => {
                        tracing::warn!(switch = %fmt_guid(guid), blocks = entries.len(), expected = nb, "cannot read an LFT block back: the driver answered a short read");
                    }
                    Err(e) => {
                        tracing::warn!(switch = %fmt_guid(guid), blocks = nb, error = %e, "cannot read an LFT block back");
                    }
                }
            }
            read_whole.sort_unstable();
            Internal::ReadBack(ReadBack {
                lfts,
                read_whole,
                blocks,
            })
        }));
    }

    fn on_read_back(
        &mut self,
        ReadBack {
            lfts,
            read_whole,
            blocks,
        }: ReadBack,
    ) {
        for sid in &read_whole {
            self.resync.remove(sid);
        }
        tracing::info!(blocks, switches_to_rewrite = self.resync.len(), "LFTs read back");
        self.installed = Arc::new(lfts);
        self.reading_back = None;
        self.maybe_start();
    }
}

async fn sleep_until_opt(d: Option<Instant>) {
    match d {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// The next change of a watch channel; pending forever without one or once its sender is
/// gone (the SA's multicast change counter).
async fn changed_opt(rx: &mut Option<watch::Receiver<u64>>) {
    match rx {
        Some(r) => {
            if r.changed().await.is_err() {
                *rx = None;
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}

async fn tick_opt(i: &mut Option<tokio::time::Interval>) {
    match i {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod loop_tests;

#[cfg(test)]
mod conformance;
