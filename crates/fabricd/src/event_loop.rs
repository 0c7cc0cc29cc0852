//! The event loop: the single owner of the live state.
//!
//! One task reads one closed [`Event`] enum (plus the driver's physical-change stream and its
//! own timers). Everything that changes the fabric, the routing, the jobs or the installed LFTs
//! happens here; readers see [`Published`] snapshots swapped through `arc-swap`.
//!
//! # A generation
//!
//! 1. Changes (driver events, virtual faults, reroute requests) are numbered and queued. The
//!    loop waits until the fabric is quiet for `coalesce_ms` after the last change, or
//!    `coalesce_max_ms` after the first, so a storm becomes a few generations.
//! 2. **Prepare**: the computation (apply changes, rank, LIDs, route, diff) is sent to the
//!    routing rayon pool; the result comes back over a oneshot channel as
//!    [`Event::ComputeDone`]. If more changes become due while it runs, a newer computation
//!    supersedes it (at most `max_superseded` times in a row) and the older result is
//!    discarded as stale when it arrives.
//! 3. **Update**: the changed blocks are uploaded (bounded parallelism, retries) by a task that
//!    reports [`Event::UploadDone`]. Changes arriving meanwhile are queued, never lost.
//! 4. **Commit**: the generation is published, LIDs and virtual faults persisted, waiters
//!    answered, subscribers notified. Then the next queued changes start the next generation.
//!
//! The phases `Unpath` and `Repath` of the five-phase update plug in between 2 and 4. A change
//! arriving while a five-phase generation installs is checked against the target's
//! port-in-use set ([`crate::compute::PortUse`]): one that kills a port the target forwards
//! through restarts the generation from Prepare with every change so far (after the running
//! stage upload has finished and been folded into the installed tables); any other change is
//! queued (see `docs/update-protocol.md`, "Faults during an update").

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use fabric_ranking::RankOptions;
use fabric_routing::{EngineKind, Guid2Lid, LftBlockDiff, Lfts, LidPlan};
use fabric_southbound::SouthboundDriver;
use fabric_topology::{fmt_guid, Fabric, FabricEvent, Guid, Lid, PortNum, Remote, SwitchId};
use fabric_update::{split_writes, Action as UAction, EscapeMask, Input as UInput, Protocol, SubscriberId};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::Instant;

use crate::compute::{compute, ComputeError, ComputeInput, Computed};
use crate::config::{FaultInjectionConfig, UpdateConfig};
use crate::notify::Notifier;
use crate::persist::{CommittedGeneration, JobPort, Jobs, StateDir, UpdateProgress, VirtualFault};
use crate::state::{Generation, Installation, Notice, Phase, Published, RerouteTimings, UnprogrammedSwitch};
use crate::telemetry::Telemetry;
use crate::upload::{upload, UploadOutcome, UploadParams};

/// What a fault injection targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultTarget {
    /// The link on a switch port.
    Link {
        switch: Guid,
        port: PortNum,
    },
    Switch(Guid),
    /// An end port (port GUID).
    Node(Guid),
}

impl FaultTarget {
    /// The topology event that takes the target down (`up = false`) or brings it back.
    pub fn event(&self, up: bool) -> FabricEvent {
        match (self, up) {
            (FaultTarget::Link { switch, port }, false) => FabricEvent::LinkDown {
                switch: *switch,
                port: *port,
            },
            (FaultTarget::Link { switch, port }, true) => FabricEvent::LinkUp {
                switch: *switch,
                port: *port,
            },
            (FaultTarget::Switch(g), false) => FabricEvent::SwitchDown(*g),
            (FaultTarget::Switch(g), true) => FabricEvent::SwitchUp(*g),
            (FaultTarget::Node(g), false) => FabricEvent::EndPortDown(*g),
            (FaultTarget::Node(g), true) => FabricEvent::EndPortUp(*g),
        }
    }
}

/// A fault injection request (names already resolved to GUIDs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultRequest {
    pub target: FaultTarget,
    /// Bring back up (true) or take down (false).
    pub up: bool,
    /// The driver changes the physical state (true) or routing only excludes it (false).
    pub physical: bool,
    /// Answer once a generation including the change is committed.
    pub wait: bool,
}

/// Answer to an accepted fault injection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultAccepted {
    /// Canonical event text (`link-down 0x...[5]`), with ` (no change)` when it changed nothing.
    pub event: String,
    /// The generation that includes the change (with `wait`) or the current one.
    pub generation: u64,
}

/// Why the loop refused a request. Maps onto gRPC status codes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoopError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Internal(String),
    #[error("fabricd is shutting down")]
    ShuttingDown,
}

type Reply<T> = oneshot::Sender<Result<T, LoopError>>;

/// The closed set of messages the loop reads.
#[derive(Debug)]
pub enum Event {
    /// Fault injection (drill).
    Inject {
        req: FaultRequest,
        reply: Reply<FaultAccepted>,
    },
    /// Forced reroute (gRPC, SIGUSR2). `resync` rewrites every block of every switch. With
    /// `wait` the reply comes after the commit.
    Reroute {
        resync: bool,
        wait: bool,
        reply: Option<Reply<u64>>,
    },
    /// Create or replace a job mapping (ports already resolved and validated).
    SetJob {
        id: String,
        ports: Vec<JobPort>,
        reply: Reply<()>,
    },
    ClearJob {
        id: String,
        reply: Reply<()>,
    },
    /// Maintenance planning: the computation input of the current state with `down` taken
    /// down as well (the caller runs it; nothing changes here).
    WhatIf {
        down: Vec<FaultTarget>,
        reply: Reply<Box<ComputeInput>>,
    },
    /// New run-time settings (SIGHUP).
    Reload(Box<LoopSettings>),
    /// A computation finished on the rayon pool.
    ComputeDone {
        job: u64,
        result: Box<Result<Computed, ComputeError>>,
    },
    /// An upload finished.
    UploadDone {
        job: u64,
        outcome: UploadOutcome,
    },
    /// The escape stage of the five-phase update is uploaded.
    EscapeDone {
        job: u64,
        outcome: UploadOutcome,
    },
    /// The driver answered [`SouthboundDriver::escape_vl_ready`] for a computed five-phase
    /// generation (still in Prepare): go on with it, or fall back (see
    /// [`EventLoop::on_escape_vl_checked`]).
    EscapeVlChecked {
        job: u64,
        computed: Box<Computed>,
        result: Result<(), String>,
    },
    /// A deadline of the five-phase update expired.
    UpdateDeadline {
        token: u64,
    },
    /// A client subscribes to Unpath / Repath notices for the end ports it speaks for.
    Subscribe {
        name: String,
        ports: Vec<Guid>,
        notices: mpsc::Sender<UpdateNotice>,
        reply: Reply<SubscriberId>,
    },
    /// A subscriber acks a notice.
    Ack {
        subscriber: SubscriberId,
        generation: u64,
        phase: Phase,
        reply: Reply<()>,
    },
    /// A subscriber's stream closed.
    Unsubscribe {
        subscriber: SubscriberId,
    },
    /// Finish the running upload (bounded by `shutdown_timeout_s`) and stop.
    Shutdown,
}

/// A notice of the five-phase update sent to one subscriber.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateNotice {
    /// The generation being installed.
    pub generation: u64,
    /// [`Phase::Unpath`] (drain, move to the escape LIDs) or [`Phase::Repath`] (move back).
    pub phase: Phase,
    /// Ack within this many milliseconds.
    pub deadline_ms: u64,
}

/// A registered subscriber.
#[derive(Debug)]
struct SubscriberEntry {
    name: String,
    ports: usize,
    notices: mpsc::Sender<UpdateNotice>,
}

/// The settings a reload can change.
#[derive(Clone, Debug)]
pub struct LoopSettings {
    pub update: UpdateConfig,
    pub engine: EngineKind,
    pub validate: bool,
    /// Base LIDs routed on node ids re-indexed by job (`[routing] job_aware`).
    pub job_aware: bool,
    pub rank_options: Arc<RankOptions>,
    pub fault_injection: FaultInjectionConfig,
}

/// Fixed parameters of the loop.
pub struct LoopParams {
    pub settings: LoopSettings,
    pub lmc: u8,
    pub max_lid: Lid,
    pub driver_name: &'static str,
}

/// Hooks and shared handles the loop reports to.
pub struct LoopIo {
    pub driver: Arc<dyn SouthboundDriver>,
    pub state_dir: StateDir,
    pub pool: Arc<rayon::ThreadPool>,
    pub published: Arc<ArcSwap<Published>>,
    pub notices: broadcast::Sender<Notice>,
    pub telemetry: Telemetry,
    pub notifier: Notifier,
    pub watchdog: Option<Duration>,
    /// Called once, after the first generation is committed (complete or incomplete), with
    /// its number and a status line saying what is incomplete.
    pub on_ready: Option<Box<dyn FnOnce(u64, String) + Send + Sync>>,
}

/// Initial state, loaded by the caller (discovery, state directory).
pub struct LoopInit {
    pub physical: Arc<Fabric>,
    pub guid2lid: Guid2Lid,
    pub jobs: Jobs,
    pub virtual_faults: Vec<VirtualFault>,
}

/// Canonical key of a virtual fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Exclusion {
    /// Canonical end of the link: the lower (GUID, port).
    Link(Guid, PortNum),
    Switch(Guid),
    Node(Guid),
}

impl Exclusion {
    fn down_event(self) -> FabricEvent {
        match self {
            Exclusion::Link(switch, port) => FabricEvent::LinkDown { switch, port },
            Exclusion::Switch(g) => FabricEvent::SwitchDown(g),
            Exclusion::Node(g) => FabricEvent::EndPortDown(g),
        }
    }
    fn persisted(self) -> VirtualFault {
        match self {
            Exclusion::Link(s, port) => VirtualFault::Link {
                switch: fmt_guid(s),
                port,
            },
            Exclusion::Switch(s) => VirtualFault::Switch { switch: fmt_guid(s) },
            Exclusion::Node(g) => VirtualFault::Node { port_guid: fmt_guid(g) },
        }
    }
}

/// Kind label of an event (Prometheus, notices).
pub fn event_kind(e: &FabricEvent) -> &'static str {
    match e {
        FabricEvent::LinkDown { .. } | FabricEvent::LinkUp { .. } => "link",
        FabricEvent::SwitchDown(_) | FabricEvent::SwitchUp(_) => "switch",
        FabricEvent::EndPortDown(_) | FabricEvent::EndPortUp(_) => "node",
    }
}

/// Checks that an event names things that exist (the cabling never changes).
/// One WARN line per computed generation whose routing is not the engine's own or is still
/// invalid: the engine, the counts, a few example destinations and the fallback.
fn log_routing_check(job: u64, c: &fabric_routing::RoutingCheck) {
    if c.reason.is_empty() {
        return;
    }
    tracing::warn!(
        job,
        engine = %c.engine,
        failed_destinations = c.engine_failed_destinations,
        failed_pairs = c.engine_unreachable_pairs,
        fallback = %c.fallback.name(),
        fallback_destinations = c.fallback_destinations,
        unreachable_pairs = c.unreachable_pairs,
        escape_unreachable_pairs = c.escape_unreachable_pairs,
        disconnected_pairs = c.disconnected_pairs,
        valid = c.valid,
        "routing validity: {}",
        c.reason
    );
}

/// A computation or upload in flight.
#[derive(Debug)]
struct InFlight {
    job: u64,
    /// Changes up to this number are included.
    seq: u64,
    first_seen: Instant,
    started: Instant,
    routed: Option<Instant>,
    faults: u32,
    /// Number of `pending_physical` events the job applied.
    physical_events: usize,
    exclusions: Vec<Exclusion>,
    /// Dirty blocks and resync switches handed to the job.
    dirty: Arc<BTreeSet<(u32, u32)>>,
    resync: Arc<BTreeSet<u32>>,
}

#[derive(Debug, Default)]
enum Busy {
    #[default]
    Idle,
    Computing(InFlight),
    Uploading(InFlight, Box<Computed>),
    /// Five-phase update: escape stage uploading or subscribers moving to the escape LIDs;
    /// the base stage waits here.
    Escape(InFlight, Box<Computed>, Vec<LftBlockDiff>),
    /// Five-phase update: base stage uploaded, subscribers moving back.
    Repath(InFlight, Box<Computed>, UploadOutcome),
    /// Five-phase update given up or restarted while a stage was uploading: the upload of job
    /// `flight.job` finishes (its blocks are folded into the installed tables) before anything
    /// else is computed, so what the switches hold is known exactly.
    Draining {
        flight: InFlight,
        /// The stage being uploaded: escape (true) or base.
        escape: bool,
        /// Then compute the restarted attempt (true), or go idle (abort).
        restart: bool,
    },
}

/// The loop's state (see the module documentation).
pub struct EventLoop {
    settings: LoopSettings,
    lmc: u8,
    max_lid: Lid,
    driver_name: &'static str,
    io: LoopIo,
    rx: mpsc::Receiver<Event>,
    tx: mpsc::Sender<Event>,
    driver_rx: mpsc::UnboundedReceiver<FabricEvent>,

    cabling: Arc<Fabric>,
    physical: Arc<Fabric>,
    pending_physical: Vec<FabricEvent>,
    exclusions: BTreeSet<Exclusion>,
    persisted_exclusions: Vec<Exclusion>,
    guid2lid: Arc<Guid2Lid>,
    jobs: Arc<Jobs>,

    change_seq: u64,
    started_seq: u64,
    pending_faults: usize,
    first_pending: Option<Instant>,
    last_pending: Option<Instant>,
    force: bool,
    retry_at: Option<Instant>,
    retry_backoff: Duration,

    current: Option<Arc<Generation>>,
    installed: Arc<Lfts>,
    installed_lids: Option<Arc<LidPlan>>,
    dirty: BTreeSet<(u32, u32)>,
    resync: BTreeSet<u32>,
    /// Switches (dense id) of the routed fabric that did not take their blocks of the
    /// committed generation: blocks pending and the last write error.
    unprogrammed: BTreeMap<u32, (u64, String)>,
    /// Why the last state file write failed (names the path); empty while persistence works.
    persistence_error: String,
    /// What the driver learnt after discovery that the routed fabric lacks
    /// ([`SouthboundDriver::topology_gaps`], one line per switch), polled at every event.
    topology_incomplete: Vec<String>,

    busy: Busy,
    next_job: u64,
    superseded_in_row: u32,
    discarded: u64,
    phase: Phase,
    last_error: String,
    waiters: Vec<(u64, Reply<u64>)>,
    inject_waiters: Vec<(u64, String, Reply<FaultAccepted>)>,
    shutting_down: Option<Instant>,
    started: Instant,

    /// The five-phase update state machine (LMC 1).
    protocol: Protocol,
    subscribers: std::collections::BTreeMap<SubscriberId, SubscriberEntry>,
    next_subscriber: u64,
    /// Escape stage of the generation being installed, until its upload starts.
    escape_stage: Vec<LftBlockDiff>,
    /// Blocks of the escape stage, its outcome, and the blocks written by both stages.
    escape_keys: HashSet<(u32, u32)>,
    escape_outcome: Option<UploadOutcome>,
    stage_overlap: Vec<(u32, u32)>,
    /// The blocks of the escape and the base stage handed to the driver (folded into
    /// `installed` as each stage completes).
    escape_written: Vec<LftBlockDiff>,
    base_written: Vec<LftBlockDiff>,
    /// `name (phase)` of the subscribers that missed a deadline in the last generation.
    missed_acks: Vec<String>,
    /// `attempt N: reason` of the restarts from Prepare of the current (or last) generation.
    update_restarts: Vec<String>,
    /// A five-phase update interrupted by a restart (from `update-progress.json`).
    recovering: Option<UpdateProgress>,
    /// Read the switches' LFTs before the first generation (taking over from another master).
    read_back_first: bool,
    /// Highest routing generation number used before this process installed anything: the last
    /// one committed by a previous run (`generation.json`) or the one a previous run was
    /// interrupted in (`update-progress.json`), 0 for a new state directory. Generations of
    /// this process are numbered from it + 1, so numbers never go backwards across restarts.
    previous_generation: u64,
    /// A background `escape_vl_ready` request is running (see `prepare_escape_vl`).
    escape_vl_prefetch: Arc<std::sync::atomic::AtomicBool>,
}

impl EventLoop {
    /// Creates the loop and the sender that feeds it.
    pub fn new(params: LoopParams, io: LoopIo, init: LoopInit) -> (EventLoop, mpsc::Sender<Event>) {
        let (tx, rx) = mpsc::channel(4096);
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
        let lp = EventLoop {
            settings: params.settings,
            lmc: params.lmc,
            max_lid: params.max_lid,
            driver_name: params.driver_name,
            io,
            rx,
            tx: tx.clone(),
            driver_rx,
            cabling: physical.clone(),
            physical,
            pending_physical: Vec::new(),
            persisted_exclusions,
            exclusions,
            guid2lid: Arc::new(init.guid2lid),
            jobs: Arc::new(init.jobs),
            // The first generation is due at once.
            change_seq: 1,
            started_seq: 0,
            pending_faults: 0,
            first_pending: Some(Instant::now()),
            last_pending: Some(Instant::now()),
            force: true,
            retry_at: None,
            retry_backoff: Duration::ZERO,
            current: None,
            installed: Arc::new(Lfts::new(0, 0)),
            installed_lids: None,
            dirty: BTreeSet::new(),
            resync: all_switches,
            unprogrammed: BTreeMap::new(),
            persistence_error: String::new(),
            topology_incomplete: Vec::new(),
            busy: Busy::Idle,
            next_job: 1,
            superseded_in_row: 0,
            discarded: 0,
            phase: Phase::Idle,
            last_error,
            waiters: Vec::new(),
            inject_waiters: Vec::new(),
            shutting_down: None,
            started: Instant::now(),
            protocol: Protocol::new(params_protocol),
            subscribers: std::collections::BTreeMap::new(),
            next_subscriber: 1,
            escape_stage: Vec::new(),
            escape_keys: HashSet::new(),
            escape_outcome: None,
            stage_overlap: Vec::new(),
            escape_written: Vec::new(),
            read_back_first: false,
            base_written: Vec::new(),
            missed_acks: Vec::new(),
            update_restarts: Vec::new(),
            recovering,
            previous_generation,
            escape_vl_prefetch: Arc::new(std::sync::atomic::AtomicBool::new(false)),
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

    /// The snapshot readers see.
    fn publish(&self) {
        let p = Published {
            cabling: self.cabling.clone(),
            current: self.current.clone(),
            phase: self.phase,
            phase_generation: if self.phase == Phase::Idle {
                0
            } else {
                self.next_generation()
            },
            pending_faults: self.pending_faults,
            last_error: self.last_error.clone(),
            discarded_generations: self.discarded,
            jobs: self.jobs.clone(),
            engine: self.settings.engine.to_string(),
            job_aware: self.settings.job_aware,
            driver: self.driver_name,
            lmc: self.lmc,
            started: self.started,
            virtual_faults: self.exclusions.len(),
            subscribers: self.subscribers.len(),
            missed_acks: self.missed_acks.clone(),
            update_restarts: self.update_restarts.clone(),
            installation: self.installation(),
        };
        self.io.telemetry.set_readiness(p.installation.not_ready.clone());
        self.io
            .telemetry
            .set_unprogrammed_switches(p.installation.unprogrammed.len());
        self.io.telemetry.set_persistence_ok(self.persistence_error.is_empty());
        self.io.published.store(Arc::new(p));
        self.io.telemetry.set_pending(self.pending_faults);
        self.io.telemetry.set_subscribers(self.subscribers.len());
    }

    /// What is guaranteed about the installed routing (see `docs/operations.md`, "Failure
    /// semantics").
    fn installation(&self) -> Installation {
        let unprogrammed: Vec<UnprogrammedSwitch> = self
            .unprogrammed
            .iter()
            .map(|(&sid, (blocks, err))| {
                let sw = (sid as usize) < self.cabling.num_switches();
                let (guid, name) = if sw {
                    let s = self.cabling.switch(SwitchId(sid));
                    (s.guid, s.desc.clone())
                } else {
                    (0, String::new())
                };
                UnprogrammedSwitch {
                    guid,
                    name,
                    blocks_pending: *blocks,
                    last_error: err.clone(),
                }
            })
            .collect();
        let not_ready = Installation::readiness(
            self.generation(),
            &self.last_error,
            &unprogrammed,
            &self.topology_incomplete,
            &self.persistence_error,
        );
        Installation {
            blocks_pending: self.unprogrammed.values().map(|(b, _)| b).sum(),
            unprogrammed,
            persistence_error: self.persistence_error.clone(),
            topology_incomplete: self.topology_incomplete.clone(),
            not_ready,
        }
    }

    /// Takes the driver's topology gaps ([`SouthboundDriver::topology_gaps`]): an ERROR per
    /// switch when it is first listed (the operator must restart fabricd to route what it
    /// lists), an INFO when none is left. Returns whether the list changed.
    fn poll_topology_gaps(&mut self) -> bool {
        let gaps = self.io.driver.topology_gaps();
        let lines: Vec<String> = gaps.iter().map(ToString::to_string).collect();
        if lines == self.topology_incomplete {
            return false;
        }
        for (g, line) in gaps.iter().zip(&lines) {
            if !self.topology_incomplete.contains(line) {
                tracing::error!(
                    switch = %fmt_guid(g.switch),
                    name = %g.name,
                    end_ports = g.end_ports.len(),
                    links = g.links.len(),
                    "{line}: they are not routed; restart fabricd (systemctl restart fabricd) to discover and route them"
                );
            }
        }
        if lines.is_empty() {
            tracing::info!("topology complete again: every end port and cable the switches list is routed");
        }
        self.topology_incomplete = lines;
        true
    }

    /// Records the result of writing state files: an ERROR once when persistence starts
    /// failing, an INFO when it works again (`fabricd_persistence_ok`, Status, `/ready`).
    fn note_persistence(&mut self, result: Result<(), String>) {
        match result {
            Ok(()) if !self.persistence_error.is_empty() => {
                tracing::info!(previous_error = %self.persistence_error, "state directory writable again");
                self.persistence_error.clear();
            }
            Ok(()) => {}
            Err(e) => {
                if self.persistence_error.is_empty() {
                    tracing::error!(
                        dir = %self.io.state_dir.path().display(),
                        error = %e,
                        "cannot persist state: the daemon keeps serving, but a restart would lose what is not written"
                    );
                } else if self.persistence_error != e {
                    tracing::debug!(error = %e, "cannot persist state (still)");
                }
                self.persistence_error = e;
            }
        }
    }

    /// The generation installed by this process; 0 before its first commit (whatever the
    /// numbering continues from: see [`EventLoop::next_generation`]).
    fn generation(&self) -> u64 {
        self.current.as_ref().map_or(0, |g| g.number)
    }

    /// Number of the generation being prepared or installed (the next one to commit): the
    /// installed one + 1, or, before this process has installed any, the last number of the
    /// previous run + 1.
    fn next_generation(&self) -> u64 {
        self.current
            .as_ref()
            .map_or(self.previous_generation, |g| g.number)
            .saturating_add(1)
    }

    fn set_phase(&mut self, phase: Phase) {
        if self.phase == phase {
            return;
        }
        self.phase = phase;
        self.io.telemetry.set_phase(phase);
        if phase != Phase::Idle {
            let installed = match self.generation() {
                0 => String::new(),
                g => format!("generation {g} installed; "),
            };
            let _ = self.io.notifier.status(&format!(
                "{installed}installing {}: {} ({} subscribers)",
                self.next_generation(),
                phase.name(),
                self.subscribers.len()
            ));
        }
        self.publish();
        // Idle names the installed generation (none is being prepared any more).
        let _ = self.io.notices.send(Notice::PhaseChanged {
            generation: if phase == Phase::Idle {
                self.generation()
            } else {
                self.next_generation()
            },
            phase,
        });
    }

    /// Taking over a fabric another subnet manager programmed: the first generation starts
    /// from what the switches hold (read back) and writes only the blocks that differ.
    pub fn read_back_first(&mut self) {
        self.read_back_first = true;
    }

    /// Runs until [`Event::Shutdown`] (and the running upload) completes.
    pub async fn run(mut self) {
        let mut watchdog = self.io.watchdog.map(|d| {
            let mut i = tokio::time::interval(d);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            i
        });
        let mut driver_open = true;
        if self.recovering.is_some() || self.read_back_first {
            self.read_back().await;
        }
        self.maybe_start();
        loop {
            if self.finished() {
                break;
            }
            if self.poll_topology_gaps() {
                if self.generation() > 0 {
                    let _ = self
                        .io
                        .notifier
                        .status(&self.installation().status_line(self.generation()));
                }
                self.publish();
            }
            let deadline = self.next_deadline();
            let shutdown_deadline = self
                .shutting_down
                .map(|t| t + Duration::from_secs(self.settings.update.shutdown_timeout_s));
            tokio::select! {
                ev = self.rx.recv() => match ev {
                    Some(ev) => self.handle(ev).await,
                    None => break,
                },
                fe = self.driver_rx.recv(), if driver_open => match fe {
                    Some(fe) => self.on_driver_event(fe).await,
                    None => driver_open = false,
                },
                () = sleep_until_opt(deadline), if deadline.is_some() => self.maybe_start(),
                () = sleep_until_opt(shutdown_deadline), if shutdown_deadline.is_some() => {
                    tracing::warn!("shutdown timeout: leaving with an upload in progress");
                    break;
                }
                () = tick_opt(&mut watchdog), if watchdog.is_some() => {
                    if let Err(e) = self.io.notifier.watchdog() {
                        tracing::warn!(error = %e, "watchdog notification failed");
                    }
                }
            }
        }
        for (_, r) in self.waiters.drain(..) {
            let _ = r.send(Err(LoopError::ShuttingDown));
        }
        for (_, _, r) in self.inject_waiters.drain(..) {
            let _ = r.send(Err(LoopError::ShuttingDown));
        }
        tracing::info!(generation = self.generation(), "event loop stopped");
    }

    /// After a restart that interrupted an update: what the switches really hold becomes the
    /// installed tables, so the first generation writes exactly the blocks that differ from
    /// the target (switches that cannot be read are rewritten whole).
    async fn read_back(&mut self) {
        let f = self.physical.clone();
        let top = self.guid2lid.iter().map(|(_, _, max)| max).max().unwrap_or(0);
        let mut lfts = Lfts::new(f.num_switches(), top);
        let nb = lfts.num_blocks() as u32;
        let mut read = 0u64;
        for sid in f.switch_ids() {
            let sw = f.switch(sid);
            if !sw.up {
                continue;
            }
            let mut ok = true;
            for b in 0..nb {
                match self.io.driver.read_lft_block(sw.guid, b).await {
                    Ok(entries) => {
                        lfts.block_mut(sid, b as usize).copy_from_slice(&entries);
                        read += 1;
                    }
                    Err(e) => {
                        tracing::warn!(switch = %fmt_guid(sw.guid), block = b, error = %e, "cannot read an LFT block back");
                        ok = false;
                        break;
                    }
                }
            }
            if ok {
                self.resync.remove(&sid.0);
            }
        }
        tracing::info!(blocks = read, switches_to_rewrite = self.resync.len(), "LFTs read back");
        self.installed = Arc::new(lfts);
    }

    /// Persists the progress of the five-phase update (the phase just entered).
    fn save_progress(&mut self, at: fabric_update::AttemptId, phase: fabric_update::Phase) {
        let flight = match &self.busy {
            Busy::Escape(f, _, _)
            | Busy::Uploading(f, _)
            | Busy::Repath(f, _, _)
            | Busy::Computing(f)
            | Busy::Draining { flight: f, .. } => f,
            Busy::Idle => return,
        };
        let p = UpdateProgress {
            version: 1,
            generation: at.generation,
            attempt: at.attempt,
            phase,
            virtual_faults: flight.exclusions.iter().map(|x| x.persisted()).collect(),
        };
        let r = self.io.state_dir.save_update_progress(&p).map_err(|e| e.to_string());
        self.note_persistence(r);
    }

    fn clear_progress(&mut self) {
        self.recovering = None;
        let r = self.io.state_dir.clear_update_progress().map_err(|e| e.to_string());
        self.note_persistence(r);
    }

    fn finished(&self) -> bool {
        self.shutting_down.is_some() && !self.installing()
    }

    /// An upload (or a wait of the five-phase update) is in progress: the generation cannot be
    /// superseded any more.
    fn installing(&self) -> bool {
        matches!(
            self.busy,
            Busy::Uploading(..) | Busy::Escape(..) | Busy::Repath(..) | Busy::Draining { .. }
        )
    }

    /// When the next generation may start (coalescing window), or a failed one is retried.
    fn next_deadline(&self) -> Option<Instant> {
        if self.shutting_down.is_some() || self.installing() {
            return None;
        }
        let computing = matches!(self.busy, Busy::Computing(_));
        // A retry is only due when nothing runs: a running computation already includes the
        // blocks to retry.
        let mut d = if computing { None } else { self.retry_at };
        if self.change_seq > self.started_seq {
            if computing && self.superseded_in_row >= self.settings.update.max_superseded {
                return None;
            }
            let due = if self.force {
                Instant::now()
            } else {
                let u = &self.settings.update;
                match (self.first_pending, self.last_pending) {
                    (Some(f), Some(l)) => (l + u.coalesce()).min(f + u.coalesce_max()),
                    _ => Instant::now(),
                }
            };
            d = Some(d.map_or(due, |x| x.min(due)));
        }
        d
    }

    async fn handle(&mut self, ev: Event) {
        match ev {
            Event::Inject { req, reply } => self.on_inject(req, reply).await,
            Event::WhatIf { down, reply } => {
                let _ = reply.send(self.what_if_input(&down));
            }
            Event::Reroute { resync, wait, reply } => {
                if self.shutting_down.is_some() {
                    if let Some(r) = reply {
                        let _ = r.send(Err(LoopError::ShuttingDown));
                    }
                    return;
                }
                if resync {
                    self.resync.extend(0..self.physical.num_switches() as u32);
                }
                self.note_change(false);
                self.force = true;
                tracing::info!(resync, "reroute requested");
                match (reply, wait) {
                    (Some(r), true) => self.waiters.push((self.change_seq, r)),
                    (Some(r), false) => {
                        let _ = r.send(Ok(self.generation()));
                    }
                    (None, _) => {}
                }
                self.maybe_start();
            }
            Event::SetJob { id, ports, reply } => {
                let mut jobs = (*self.jobs).clone();
                jobs.insert(id.clone(), ports);
                let r = self.save_jobs(jobs).await;
                let ok = r.is_ok();
                if ok {
                    tracing::info!(job = %crate::logging::untrusted(&id), "job mapping set");
                }
                let _ = reply.send(r);
                if ok {
                    self.reroute_for_jobs(&id);
                }
            }
            Event::ClearJob { id, reply } => {
                if !self.jobs.contains_key(&id) {
                    let _ = reply.send(Err(LoopError::NotFound(format!("no job {id:?}"))));
                    return;
                }
                let mut jobs = (*self.jobs).clone();
                jobs.remove(&id);
                let r = self.save_jobs(jobs).await;
                let ok = r.is_ok();
                if ok {
                    tracing::info!(job = %crate::logging::untrusted(&id), "job mapping cleared");
                }
                let _ = reply.send(r);
                if ok {
                    self.reroute_for_jobs(&id);
                }
            }
            Event::Reload(s) => {
                let reroute = s.engine != self.settings.engine
                    || s.job_aware != self.settings.job_aware
                    || s.rank_options.roots != self.settings.rank_options.roots
                    || s.rank_options.roles != self.settings.rank_options.roles;
                self.settings = *s;
                self.protocol.set_config(self.settings.update.protocol(self.lmc >= 1));
                tracing::info!(engine = %self.settings.engine, "settings reloaded");
                if reroute {
                    self.note_change(false);
                    self.force = true;
                }
                self.publish();
                self.maybe_start();
            }
            Event::ComputeDone { job, result } => self.on_compute_done(job, *result).await,
            Event::UploadDone { job, outcome } => self.on_upload_done(job, outcome).await,
            Event::EscapeDone { job, outcome } => self.on_escape_done(job, outcome).await,
            Event::EscapeVlChecked { job, computed, result } => self.on_escape_vl_checked(job, *computed, result).await,
            Event::UpdateDeadline { token } => {
                let a = self.protocol.on(Instant::now().into_std(), UInput::Deadline { token });
                self.drive(a).await;
            }
            Event::Subscribe {
                name,
                ports,
                notices,
                reply,
            } => {
                let id = SubscriberId(self.next_subscriber);
                self.next_subscriber += 1;
                tracing::info!(subscriber = id.0, name = %crate::logging::untrusted(&name), ports = ports.len(), "subscriber registered");
                self.subscribers.insert(
                    id,
                    SubscriberEntry {
                        name,
                        ports: ports.len(),
                        notices,
                    },
                );
                let a = self
                    .protocol
                    .on(Instant::now().into_std(), UInput::SubscriberJoined { subscriber: id });
                self.drive(a).await;
                self.publish();
                let _ = reply.send(Ok(id));
            }
            Event::Ack {
                subscriber,
                generation,
                phase,
                reply,
            } => {
                if !self.subscribers.contains_key(&subscriber) {
                    let _ = reply.send(Err(LoopError::NotFound(format!("no subscriber {}", subscriber.0))));
                    return;
                }
                let Some(phase) = update_phase(phase) else {
                    let _ = reply.send(Err(LoopError::InvalidArgument(format!(
                        "only unpath and repath notices are acked, not {}",
                        phase.name()
                    ))));
                    return;
                };
                let _ = reply.send(Ok(()));
                let a = self.protocol.on(
                    Instant::now().into_std(),
                    UInput::Ack {
                        subscriber,
                        generation,
                        phase,
                    },
                );
                self.drive(a).await;
            }
            Event::Unsubscribe { subscriber } => self.drop_subscriber(subscriber).await,
            Event::Shutdown => {
                if self.shutting_down.is_none() {
                    tracing::info!(uploading = self.installing(), "shutdown requested");
                    self.shutting_down = Some(Instant::now());
                    if matches!(self.busy, Busy::Computing(_)) {
                        if let Busy::Computing(f) = std::mem::take(&mut self.busy) {
                            self.give_back(&f);
                        }
                    }
                }
            }
        }
    }

    async fn save_jobs(&mut self, jobs: Jobs) -> Result<(), LoopError> {
        let dir = self.io.state_dir.clone();
        let snapshot = jobs.clone();
        let res = tokio::task::spawn_blocking(move || dir.save_jobs(&snapshot)).await;
        match res {
            Ok(Ok(())) => {
                self.jobs = Arc::new(jobs);
                self.note_persistence(Ok(()));
                self.publish();
                Ok(())
            }
            Ok(Err(e)) => {
                self.note_persistence(Err(e.to_string()));
                self.publish();
                Err(LoopError::Internal(format!("cannot persist job mappings: {e}")))
            }
            Err(e) => Err(LoopError::Internal(format!("cannot persist job mappings: {e}"))),
        }
    }

    /// Records one change that needs a generation.
    fn note_change(&mut self, fault: bool) {
        let now = Instant::now();
        if self.change_seq == self.started_seq {
            self.first_pending = Some(now);
        }
        self.first_pending.get_or_insert(now);
        self.last_pending = Some(now);
        self.change_seq += 1;
        if fault {
            self.pending_faults += 1;
        }
        self.publish();
    }

    async fn on_driver_event(&mut self, fe: FabricEvent) {
        if let Err(e) = self.cabling.check_event(&fe) {
            tracing::warn!(event = %fe, error = %e, "ignoring a driver event");
            return;
        }
        tracing::info!(event = %fe, "physical change");
        if let FabricEvent::SwitchUp(g) = fe {
            // A switch that comes back may have lost its tables: rewrite them whole.
            if let Some(id) = self.cabling.switch_by_guid(g) {
                self.resync.insert(id.0);
            }
        }
        self.io.telemetry.fault(event_kind(&fe), "driver");
        let _ = self.io.notices.send(Notice::TopologyChange {
            event: fe.clone(),
            physical: true,
        });
        self.pending_physical.push(fe.clone());
        self.note_change(true);
        self.change_during_update(&fe).await;
    }

    /// A change arrived: during a five-phase update, tell the protocol whether it breaks the
    /// routing being installed (some entry of the target's base or escape tables forwards
    /// through a port it kills: restart from Prepare) or not (queued for the next generation).
    async fn change_during_update(&mut self, ev: &FabricEvent) {
        if self.protocol.phase() == fabric_update::Phase::Idle {
            return;
        }
        let c = match &self.busy {
            Busy::Escape(_, c, _) | Busy::Repath(_, c, _) | Busy::Uploading(_, c) => c,
            // Computing: the computation in flight is superseded by one including the change;
            // draining: the restarted computation starts after the upload and includes it.
            _ => return,
        };
        let reason = breaking_reason(&self.cabling, &c.ports_in_use, ev);
        tracing::info!(event = %ev, breaks_target = reason.is_some(), "change during an update");
        let a = self.protocol.on(
            Instant::now().into_std(),
            UInput::Fault {
                breaks_target: reason.is_some(),
                description: reason.unwrap_or_else(|| ev.to_string()),
            },
        );
        self.drive(a).await;
    }

    /// The canonical exclusion of a virtual fault.
    fn exclusion_of(&self, t: &FaultTarget) -> Exclusion {
        match *t {
            FaultTarget::Link { switch, port } => canonical_link(&self.cabling, switch, port),
            FaultTarget::Switch(g) => Exclusion::Switch(g),
            FaultTarget::Node(g) => Exclusion::Node(g),
        }
    }

    async fn on_inject(&mut self, req: FaultRequest, reply: Reply<FaultAccepted>) {
        if self.shutting_down.is_some() {
            let _ = reply.send(Err(LoopError::ShuttingDown));
            return;
        }
        let fi = &self.settings.fault_injection;
        if !fi.enabled {
            let _ = reply.send(Err(LoopError::FailedPrecondition(
                "fault injection is disabled (set [fault_injection] enabled = true and reload)".into(),
            )));
            return;
        }
        if req.physical && !fi.allow_physical {
            let _ = reply.send(Err(LoopError::FailedPrecondition(
                "physical fault injection is disabled (set [fault_injection] allow_physical = true and reload)".into(),
            )));
            return;
        }
        let event = req.target.event(req.up);
        if let Err(e) = self.cabling.check_event(&event) {
            let _ = reply.send(Err(LoopError::InvalidArgument(e.to_string())));
            return;
        }
        let before = self.change_seq;
        if req.physical {
            if let Err(e) = self.physical_fault(&req).await {
                let _ = reply.send(Err(e));
                return;
            }
            // The driver reports the change on its stream before returning: take it now so the
            // waiter below covers it.
            while let Ok(fe) = self.driver_rx.try_recv() {
                self.on_driver_event(fe).await;
            }
        } else {
            let x = self.exclusion_of(&req.target);
            let changed = if req.up {
                self.exclusions.remove(&x)
            } else {
                self.exclusions.insert(x)
            };
            if changed {
                tracing::info!(event = %event, "virtual fault");
                self.io.telemetry.fault(event_kind(&event), "virtual");
                let _ = self.io.notices.send(Notice::TopologyChange {
                    event: event.clone(),
                    physical: false,
                });
                self.note_change(true);
                self.change_during_update(&event).await;
            }
        }
        let changed = self.change_seq > before;
        let text = if changed {
            event.to_string()
        } else {
            format!("{event} (no change)")
        };
        if req.wait && changed {
            self.inject_waiters.push((self.change_seq, text, reply));
        } else {
            let _ = reply.send(Ok(FaultAccepted {
                event: text,
                generation: self.generation(),
            }));
        }
        self.maybe_start();
    }

    async fn physical_fault(&self, req: &FaultRequest) -> Result<(), LoopError> {
        let d = &self.io.driver;
        let r = match req.target {
            FaultTarget::Link { switch, port } => d.set_port_state(switch, port, req.up).await,
            FaultTarget::Switch(g) => d.set_switch_state(g, req.up).await,
            FaultTarget::Node(g) => {
                // Physically, a node is taken down by its cable: the leaf port it hangs on.
                let ep = self
                    .cabling
                    .end_port_by_guid(g)
                    .ok_or_else(|| LoopError::InvalidArgument(format!("unknown end port GUID {}", fmt_guid(g))))?;
                let Some((sw, port)) = self.cabling.end_port(ep).attach else {
                    return Err(LoopError::InvalidArgument(format!(
                        "end port {} is not cabled",
                        fmt_guid(g)
                    )));
                };
                d.set_port_state(self.cabling.switch(sw).guid, port, req.up).await
            }
        };
        r.map_err(|e| LoopError::FailedPrecondition(format!("driver refused the fault: {e}")))
    }

    /// Starts a computation when one is due.
    fn maybe_start(&mut self) {
        if self.shutting_down.is_some() || self.installing() {
            return;
        }
        if self.change_seq == self.started_seq && self.retry_at.is_none() {
            return;
        }
        match self.next_deadline() {
            Some(d) if d <= Instant::now() => {}
            _ => return,
        }
        if self.change_seq == self.started_seq {
            // A retry of a failed upload with no new change.
            self.change_seq += 1;
        }
        let now = Instant::now();
        let (first_seen, faults) = match std::mem::take(&mut self.busy) {
            Busy::Computing(old) => {
                // Supersede: the old result will be discarded when it arrives.
                self.superseded_in_row += 1;
                self.give_back(&old);
                tracing::debug!(job = old.job, "computation superseded by newer changes");
                (
                    old.first_seen.min(self.first_pending.unwrap_or(now)),
                    old.faults + self.pending_faults as u32,
                )
            }
            _ => (self.first_pending.unwrap_or(now), self.pending_faults as u32),
        };
        self.start_compute(first_seen, faults);
    }

    /// The input of a computation of the current state (every change so far, like the next
    /// generation would see it) with `down` taken down too: a maintenance plan (`WhatIf`).
    fn what_if_input(&self, down: &[FaultTarget]) -> Result<Box<ComputeInput>, LoopError> {
        if self.shutting_down.is_some() {
            return Err(LoopError::ShuttingDown);
        }
        let mut exclusions: Vec<FabricEvent> = self.exclusions.iter().map(|x| x.down_event()).collect();
        for t in down {
            let ev = t.event(false);
            self.cabling
                .check_event(&ev)
                .map_err(|e| LoopError::InvalidArgument(e.to_string()))?;
            exclusions.push(ev);
        }
        let mut input = self.compute_input(0, exclusions, Arc::default(), Arc::default());
        (input.validate, input.ports_in_use) = (false, false);
        Ok(Box::new(input))
    }

    /// The computation of the current state (every physical change seen so far) with
    /// `exclusions` taken down; the upload-related parts as the next generation needs them.
    fn compute_input(
        &self,
        job: u64,
        exclusions: Vec<FabricEvent>,
        dirty: Arc<BTreeSet<(u32, u32)>>,
        resync: Arc<BTreeSet<u32>>,
    ) -> ComputeInput {
        ComputeInput {
            job,
            physical: self.physical.clone(),
            physical_events: self.pending_physical.clone(),
            exclusions,
            previous_lids: self.guid2lid.clone(),
            installed_lids: self.installed_lids.clone(),
            lids_reusable: self.installed_lids.is_some(),
            lmc: self.lmc,
            max_lid: self.max_lid,
            engine: self.settings.engine,
            job_groups: self.job_groups(),
            rank_options: self.settings.rank_options.clone(),
            validate: self.settings.validate,
            installed: self.installed.clone(),
            dirty,
            resync,
            // Only a five-phase update classifies the changes arriving while it installs.
            ports_in_use: self.protocol.phase() != fabric_update::Phase::Idle
                || (self.lmc >= 1 && self.settings.update.five_phase && self.current.is_some()),
        }
    }

    /// The running jobs' port GUIDs (jobs in id order, ports in mapping order) when routing is
    /// job-aware.
    fn job_groups(&self) -> Option<Arc<Vec<Vec<fabric_topology::Guid>>>> {
        (self.settings.job_aware && !self.jobs.is_empty()).then(|| {
            Arc::new(
                self.jobs
                    .values()
                    .map(|ports| ports.iter().map(super::persist::JobPort::port_guid).collect())
                    .collect(),
            )
        })
    }

    /// Job-aware routing: a changed job mapping is a reason for a new generation (coalesced
    /// with whatever else is pending, installed like any other).
    fn reroute_for_jobs(&mut self, id: &str) {
        if self.settings.job_aware {
            tracing::info!(job = %crate::logging::untrusted(id), "job mappings changed: job-aware reroute");
            // Like a fault: a burst of mappings (a scheduler starting many jobs) coalesces.
            self.note_change(false);
            self.maybe_start();
        }
    }

    /// Sends a computation of the current state (every change so far) to the routing pool.
    fn start_compute(&mut self, first_seen: Instant, faults: u32) {
        let now = Instant::now();
        let job = self.next_job;
        self.next_job += 1;
        let exclusions: Vec<Exclusion> = self.exclusions.iter().copied().collect();
        let dirty = Arc::new(std::mem::take(&mut self.dirty));
        let resync = Arc::new(std::mem::take(&mut self.resync));
        let input = self.compute_input(
            job,
            exclusions.iter().map(|x| x.down_event()).collect(),
            dirty.clone(),
            resync.clone(),
        );
        let flight = InFlight {
            job,
            seq: self.change_seq,
            first_seen,
            started: now,
            routed: None,
            faults,
            physical_events: self.pending_physical.len(),
            exclusions,
            dirty,
            resync,
        };
        self.started_seq = self.change_seq;
        self.pending_faults = 0;
        self.first_pending = None;
        self.last_pending = None;
        self.force = false;
        self.retry_at = None;
        tracing::debug!(job, faults, "computing a generation");
        self.busy = Busy::Computing(flight);
        self.set_phase(Phase::Prepare);
        self.publish();

        let (otx, orx) = oneshot::channel();
        self.io.pool.spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compute(input)));
            let _ = otx.send(r);
        });
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = match orx.await {
                Ok(Ok(r)) => r,
                Ok(Err(_)) => Err(ComputeError::Panicked),
                Err(_) => Err(ComputeError::Panicked),
            };
            let _ = tx
                .send(Event::ComputeDone {
                    job,
                    result: Box::new(result),
                })
                .await;
        });
    }

    /// Returns the dirty blocks and resync switches of an abandoned job.
    fn give_back(&mut self, f: &InFlight) {
        self.dirty.extend(f.dirty.iter().copied());
        self.resync.extend(f.resync.iter().copied());
    }

    async fn on_compute_done(&mut self, job: u64, result: Result<Computed, ComputeError>) {
        let flight = match std::mem::take(&mut self.busy) {
            Busy::Computing(f) if f.job == job => f,
            other => {
                self.busy = other;
                self.discarded += 1;
                self.io.telemetry.discarded();
                tracing::debug!(job, "discarding a stale computation");
                self.publish();
                return;
            }
        };
        self.superseded_in_row = 0;
        let mut flight = flight;
        // A restarted attempt of a five-phase update is in Prepare: its result goes to the
        // protocol (an error, or a LID change that would forbid the protocol, aborts it).
        let restarted = self.protocol.phase() != fabric_update::Phase::Idle;
        if restarted {
            let refused = match &result {
                Err(e) => Some(e.to_string()),
                Ok(c) if c.lids_changed => Some("the LID plan changed during a restarted update".to_string()),
                Ok(_) => None,
            };
            if let Some(reason) = refused {
                self.busy = Busy::Computing(flight);
                let at = self.protocol.attempt();
                let a = self.protocol.on(
                    Instant::now().into_std(),
                    UInput::Computed {
                        at,
                        result: Err(reason),
                    },
                );
                self.drive(a).await;
                return;
            }
        }
        match result {
            Err(e) => {
                tracing::error!(job, error = %e, "generation failed; keeping the installed routing");
                self.give_back(&flight);
                self.last_error = e.to_string();
                self.io.telemetry.failed();
                self.set_phase(Phase::Idle);
                self.publish();
                self.fail_waiters(flight.seq, &e.to_string());
                // Same input, same error: wait for the next change or reroute.
                self.maybe_start();
            }
            Ok(c) => {
                flight.routed = Some(Instant::now());
                log_routing_check(job, &c.routing_check);
                if let Some(v) = &c.validation {
                    if !v.deadlock_free {
                        tracing::warn!(job, "new routing has a cycle in its channel dependencies");
                    }
                }
                // The five-phase update needs escape LIDs and tables that already hold a
                // generation with the same LIDs (the first upload and a LID change carry no
                // traffic that could be kept consistent: direct upload).
                let five_phase = restarted
                    || (self.lmc >= 1 && self.settings.update.five_phase && !c.lids_changed && self.current.is_some());
                if five_phase && !self.io.driver.escape_vl_status().ready {
                    // Still Prepare: the escape VL must be programmed before any traffic moves
                    // to the escape LIDs. The driver finishes (or retries) its SL-to-VL tables
                    // in the background; the answer comes back as `EscapeVlChecked`. A newer
                    // change meanwhile supersedes this computation as usual.
                    self.busy = Busy::Computing(flight);
                    let driver = self.io.driver.clone();
                    let tx = self.tx.clone();
                    tracing::info!(job, "five-phase update waits for the escape VL (SL-to-VL tables)");
                    tokio::spawn(async move {
                        let result = driver.escape_vl_ready().await.map_err(|e| e.to_string());
                        let _ = tx
                            .send(Event::EscapeVlChecked {
                                job,
                                computed: Box::new(c),
                                result,
                            })
                            .await;
                    });
                    return;
                }
                self.install(job, flight, c, five_phase, restarted);
            }
        }
    }

    /// The escape VL check of a five-phase generation came back. Ready: the five-phase update
    /// goes on. Not ready (a table could not be written): the generation must not move traffic
    /// to escape LIDs whose VL is not set up, so a first attempt falls back to a direct upload
    /// of the new routing (as the first generation after start; logged, and the driver's error
    /// stays in Status as `escape_vl_error`), and a restarted attempt (the protocol is already
    /// running) is given up like a failed computation (the protocol aborts it; the installed
    /// routing stays, the next change retries).
    async fn on_escape_vl_checked(&mut self, job: u64, c: Computed, result: Result<(), String>) {
        let flight = match std::mem::take(&mut self.busy) {
            Busy::Computing(f) if f.job == job => f,
            other => {
                // Superseded while waiting: a newer computation checks again.
                self.busy = other;
                self.discarded += 1;
                self.io.telemetry.discarded();
                tracing::debug!(
                    job,
                    "discarding a computation superseded while it waited for the escape VL"
                );
                self.publish();
                return;
            }
        };
        let restarted = self.protocol.phase() != fabric_update::Phase::Idle;
        match result {
            Ok(()) => {
                tracing::info!(job, "escape VL ready");
                self.install(job, flight, c, true, restarted);
            }
            Err(e) if restarted => {
                tracing::error!(job, error = %e, "escape VL not ready: the restarted update is given up");
                self.busy = Busy::Computing(flight);
                let at = self.protocol.attempt();
                let a = self.protocol.on(
                    Instant::now().into_std(),
                    UInput::Computed {
                        at,
                        result: Err(format!("escape VL not ready: {e}")),
                    },
                );
                self.drive(a).await;
            }
            Err(e) => {
                tracing::warn!(
                    job,
                    error = %e,
                    "escape VL not ready: this generation is a direct upload (no five-phase update)"
                );
                self.install(job, flight, c, false, false);
            }
        }
        self.publish();
    }

    /// After a commit, when later updates may be five-phase ones (LMC 1 and `five_phase`) and
    /// the driver's escape VL is not ready: asks the driver to program it now, in the background
    /// (umad: the SL-to-VL tables, after the first generation's LFTs so that they stay off the
    /// bring-up's critical path). One request at a time; a failure is logged and retried after
    /// the next commit, and the next five-phase update checks again (`EscapeVlChecked`).
    fn prepare_escape_vl(&mut self) {
        if self.lmc == 0 || !self.settings.update.five_phase || self.io.driver.escape_vl_status().ready {
            return;
        }
        if self.escape_vl_prefetch.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let driver = self.io.driver.clone();
        let busy = self.escape_vl_prefetch.clone();
        tokio::spawn(async move {
            match driver.escape_vl_ready().await {
                Ok(()) => tracing::info!("escape VL ready (SL-to-VL tables programmed)"),
                Err(e) => tracing::warn!(error = %e, "escape VL not ready; retried after the next commit"),
            }
            busy.store(false, std::sync::atomic::Ordering::SeqCst);
        });
    }

    /// Installs a computed generation: the five-phase update (escape stage first), or a direct
    /// upload.
    fn install(&mut self, job: u64, flight: InFlight, c: Computed, five_phase: bool, restarted: bool) {
        if five_phase {
            let mask = EscapeMask::new(&c.lids);
            let stages = split_writes(&self.installed, &c.writes, &mask);
            tracing::debug!(
                job,
                escape_blocks = stages.escape.len(),
                base_blocks = stages.base.len(),
                "five-phase update"
            );
            self.escape_stage = stages.escape;
            self.busy = Busy::Escape(flight, Box::new(c), stages.base);
            let now = Instant::now();
            let mut a = Vec::new();
            if !restarted {
                self.update_restarts.clear();
                a = self.protocol.on(
                    now.into_std(),
                    UInput::Begin {
                        generation: self.next_generation(),
                    },
                );
            }
            let at = self.protocol.attempt();
            a.extend(
                self.protocol
                    .on(now.into_std(), UInput::Computed { at, result: Ok(()) }),
            );
            self.drive_sync(a);
            return;
        }
        self.set_phase(Phase::Update);
        let writes = c.writes.clone();
        self.busy = Busy::Uploading(flight, Box::new(c));
        self.spawn_upload(job, writes, true, false);
    }

    /// Uploads `writes` of the generation in `self.busy` (configuring LIDs first when they
    /// changed and `lids_first`); reports [`Event::EscapeDone`] or [`Event::UploadDone`].
    fn spawn_upload(&self, job: u64, writes: Vec<LftBlockDiff>, lids_first: bool, escape: bool) {
        let c = match &self.busy {
            Busy::Uploading(_, c) | Busy::Escape(_, c, _) | Busy::Repath(_, c, _) => c,
            _ => return,
        };
        let driver = self.io.driver.clone();
        let fabric = c.physical.clone();
        let lids = c.lids.clone();
        let lids_changed = c.lids_changed && lids_first;
        let u = &self.settings.update;
        let params = UploadParams {
            batch_blocks: u.upload_batch_blocks,
            parallelism: u.upload_parallelism,
            retries: u.upload_retries,
            backoff: Duration::from_millis(u.retry_backoff_ms),
        };
        let tx = self.tx.clone();
        {
            {
                tokio::spawn(async move {
                    let outcome = if lids_changed {
                        match driver.configure_lids(&fabric, &lids).await {
                            Ok(()) => upload(driver, fabric, writes, params).await,
                            Err(e) => UploadOutcome {
                                failed: writes.iter().map(|w| (w.switch.0, w.block)).collect(),
                                error: Some(format!("LID configuration failed: {e}")),
                                ..UploadOutcome::default()
                            },
                        }
                    } else {
                        upload(driver, fabric, writes, params).await
                    };
                    let ev = if escape {
                        Event::EscapeDone { job, outcome }
                    } else {
                        Event::UploadDone { job, outcome }
                    };
                    let _ = tx.send(ev).await;
                });
            }
        }
    }

    /// Carries out the protocol's actions that need no `await` (everything but Commit and
    /// Abort, which only follow acks, deadlines and upload results: see [`EventLoop::drive`]).
    fn drive_sync(&mut self, actions: Vec<UAction>) {
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
                UAction::UploadEscape { .. } => {
                    let job = match &self.busy {
                        Busy::Escape(f, _, _) => f.job,
                        _ => continue,
                    };
                    let writes = std::mem::take(&mut self.escape_stage);
                    self.escape_keys = writes.iter().map(|w| (w.switch.0, w.block)).collect();
                    self.escape_outcome = None;
                    self.escape_written = writes.clone();
                    self.spawn_upload(job, writes, false, true);
                }
                UAction::UploadBase { .. } => {
                    if let Busy::Escape(f, c, base) = std::mem::take(&mut self.busy) {
                        let job = f.job;
                        self.stage_overlap = base
                            .iter()
                            .map(|w| (w.switch.0, w.block))
                            .filter(|k| self.escape_keys.contains(k))
                            .collect();
                        self.busy = Busy::Uploading(f, c);
                        self.base_written = base.clone();
                        self.spawn_upload(job, base, false, false);
                    }
                }
                UAction::NotifyUnpath {
                    generation,
                    subscribers,
                    deadline,
                } => self.notify(generation, &subscribers, deadline, Phase::Unpath),
                UAction::NotifyRepath {
                    generation,
                    subscribers,
                    deadline,
                } => self.notify(generation, &subscribers, deadline, Phase::Repath),
                UAction::ArmDeadline { token, after } => {
                    let tx = self.tx.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(after).await;
                        let _ = tx.send(Event::UpdateDeadline { token }).await;
                    });
                }
                UAction::Restart { from, reason } => {
                    let attempt = from.attempt + 1;
                    tracing::warn!(
                        generation = from.generation,
                        attempt,
                        reason = %crate::logging::untrusted(&reason),
                        "update restarts from prepare with the new topology"
                    );
                    self.io.telemetry.update_restarted();
                    self.update_restarts.push(format!("attempt {attempt}: {reason}"));
                    let _ = self.io.notices.send(Notice::UpdateRestarted {
                        generation: from.generation,
                        attempt,
                        reason,
                    });
                    self.publish();
                }
                UAction::Commit { .. } | UAction::Abort { .. } => {
                    tracing::error!("commit/abort reached drive_sync (bug): ignored");
                }
            }
        }
    }

    /// Carries out the protocol's actions.
    async fn drive(&mut self, actions: Vec<UAction>) {
        let mut rest = Vec::new();
        for a in actions {
            match a {
                UAction::Commit { at, report } => {
                    if !rest.is_empty() {
                        self.drive_sync(std::mem::take(&mut rest));
                    }
                    self.record_misses(&report);
                    if let Busy::Repath(f, c, outcome) = std::mem::take(&mut self.busy) {
                        self.commit(f, *c, outcome).await;
                    }
                    self.clear_progress();
                    let after = self.protocol.on(Instant::now().into_std(), UInput::Committed { at });
                    rest.extend(after);
                }
                UAction::Abort {
                    reason,
                    report,
                    base_touched,
                    ..
                } => {
                    if !rest.is_empty() {
                        self.drive_sync(std::mem::take(&mut rest));
                    }
                    self.record_misses(&report);
                    self.abort_generation(&reason, base_touched);
                    self.clear_progress();
                }
                other => rest.push(other),
            }
        }
        self.drive_sync(rest);
    }

    /// Sends an Unpath or Repath notice to `subscribers`.
    fn notify(&self, generation: u64, subscribers: &[SubscriberId], deadline: Duration, phase: Phase) {
        let notice = UpdateNotice {
            generation,
            phase,
            deadline_ms: u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX),
        };
        for id in subscribers {
            if let Some(s) = self.subscribers.get(id) {
                if s.notices.try_send(notice.clone()).is_err() {
                    // Full or closed: it misses the deadline, or its stream ends and
                    // Unsubscribe follows.
                    tracing::warn!(subscriber = id.0, name = %crate::logging::untrusted(&s.name), "cannot deliver an update notice");
                }
            }
        }
    }

    fn record_misses(&mut self, report: &fabric_update::Report) {
        self.missed_acks = report
            .missed
            .iter()
            .map(|m| {
                let name = self
                    .subscribers
                    .get(&m.subscriber)
                    .map_or_else(|| format!("#{}", m.subscriber.0), |s| s.name.clone());
                format!("{name} ({})", m.phase)
            })
            .collect();
        for m in &report.missed {
            self.io.telemetry.missed_ack(m.phase.name());
        }
        if !report.missed.is_empty() {
            tracing::warn!(generation = report.generation, missed = ?self.missed_acks, "subscribers missed a deadline");
            let _ = self.io.notices.send(Notice::AcksMissed {
                generation: report.generation,
                subscribers: self.missed_acks.clone(),
            });
        }
        self.io.telemetry.update_timings(report);
        self.publish();
    }

    /// The five-phase protocol gave the generation up: keep the installed routing, retry later.
    fn abort_generation(&mut self, reason: &str, base_touched: bool) {
        // (flight, the stage whose upload is still running: Some(escape?))
        let (flight, uploading) = match std::mem::take(&mut self.busy) {
            Busy::Escape(f, _, _) => {
                let running = self.escape_outcome.is_none();
                if !running {
                    self.fold_escape();
                }
                (f, running.then_some(true))
            }
            Busy::Uploading(f, _) => (f, Some(false)),
            Busy::Repath(f, _, _) | Busy::Computing(f) => (f, None),
            Busy::Draining { flight, escape, .. } => (flight, Some(escape)),
            Busy::Idle => return,
        };
        tracing::error!(
            reason,
            base_touched,
            "generation aborted; the previous routing stays installed"
        );
        self.give_back(&flight);
        // The changes it covered are due again: the retry counts them (a generation's `faults`
        // are the changes it routes; without this an abort lost them from every count).
        self.pending_faults += flight.faults as usize;
        self.first_pending = Some(
            self.first_pending
                .map_or(flight.first_seen, |f| f.min(flight.first_seen)),
        );
        if base_touched {
            // The base entries may mix two generations: rewrite every switch.
            self.resync.extend(0..self.physical.num_switches() as u32);
        }
        let number = self.next_generation();
        self.last_error = format!("generation {number} aborted: {reason}");
        self.io.telemetry.failed();
        let _ = self.io.notices.send(Notice::UpdateAborted {
            generation: number,
            reason: reason.to_string(),
        });
        // The changes it covered are due again, after the failure backoff.
        self.retry_backoff = (self.retry_backoff * 2)
            .max(Duration::from_millis(self.settings.update.failed_generation_backoff_ms))
            .min(Duration::from_secs(60));
        self.retry_at = Some(Instant::now() + self.retry_backoff);
        self.set_phase(Phase::Idle);
        self.publish();
        self.fail_waiters(flight.seq, reason);
        if let Some(escape) = uploading {
            // Nothing new is computed before the running upload has finished.
            self.busy = Busy::Draining {
                flight,
                escape,
                restart: false,
            };
        }
    }

    /// Writes of a completed upload stage into `installed` (what the switches hold); blocks
    /// that failed are unknown and stay dirty. Only needed when a generation is given up or
    /// restarted half-way (a completed generation sets `installed` to its tables).
    fn fold_stage(&mut self, escape: bool, failed: &[(u32, u32)]) {
        let writes = std::mem::take(if escape {
            &mut self.escape_written
        } else {
            &mut self.base_written
        });
        if writes.is_empty() {
            return;
        }
        let failed: HashSet<(u32, u32)> = failed.iter().copied().collect();
        let lfts = Arc::make_mut(&mut self.installed);
        for w in &writes {
            let key = (w.switch.0, w.block);
            if failed.contains(&key) || w.switch.idx() >= lfts.num_switches() || w.block as usize >= lfts.num_blocks() {
                self.dirty.insert(key);
                continue;
            }
            lfts.block_mut(w.switch, w.block as usize).copy_from_slice(&w.entries);
        }
    }

    /// Folds the completed escape stage (see [`EventLoop::fold_stage`]).
    fn fold_escape(&mut self) {
        let failed = self
            .escape_outcome
            .as_ref()
            .map(|o| o.failed.clone())
            .unwrap_or_default();
        self.fold_stage(true, &failed);
    }

    /// The protocol restarts the generation from Prepare: once no upload runs any more, the
    /// routing of the current topology (every change so far) is computed again.
    fn begin_restart(&mut self) {
        self.busy = match std::mem::take(&mut self.busy) {
            // Escape stage still uploading (restart in Prepare) or base stage uploading
            // (restart in Update): wait for it.
            Busy::Escape(flight, _, _) if self.escape_outcome.is_none() => Busy::Draining {
                flight,
                escape: true,
                restart: true,
            },
            Busy::Uploading(flight, _) => Busy::Draining {
                flight,
                escape: false,
                restart: true,
            },
            Busy::Escape(flight, _, _) => {
                // Escape stage installed (restart in Unpath).
                self.fold_escape();
                self.restart_compute(flight);
                return;
            }
            // Both stages installed: `installed` holds the abandoned attempt's tables.
            Busy::Repath(flight, _, _) => {
                self.restart_compute(flight);
                return;
            }
            Busy::Draining { flight, escape, .. } => Busy::Draining {
                flight,
                escape,
                restart: true,
            },
            other => other,
        };
    }

    /// Starts the computation of a restarted attempt (the abandoned attempt's changes and
    /// every change since).
    fn restart_compute(&mut self, flight: InFlight) {
        self.give_back(&flight);
        self.escape_outcome = None;
        self.escape_keys.clear();
        self.stage_overlap.clear();
        self.escape_written.clear();
        self.base_written.clear();
        if self.shutting_down.is_some() {
            // The progress file makes the next start finish the generation.
            self.busy = Busy::Idle;
            return;
        }
        let first_seen = flight.first_seen.min(self.first_pending.unwrap_or(flight.first_seen));
        let faults = flight.faults + self.pending_faults as u32;
        self.start_compute(first_seen, faults);
        self.save_progress(self.protocol.attempt(), fabric_update::Phase::Prepare);
    }

    /// The upload of a given-up attempt finished (see [`Busy::Draining`]).
    fn drained(&mut self, outcome: UploadOutcome) {
        let Busy::Draining {
            flight,
            escape,
            restart,
        } = std::mem::take(&mut self.busy)
        else {
            return;
        };
        self.io
            .telemetry
            .blocks_written(outcome.blocks_written, outcome.retries);
        self.dirty.extend(outcome.failed.iter().copied());
        if escape {
            self.escape_outcome = Some(outcome);
            self.fold_escape();
        } else {
            self.fold_escape();
            self.fold_stage(false, &outcome.failed);
        }
        tracing::debug!(
            job = flight.job,
            escape,
            restart,
            "upload of an abandoned attempt finished"
        );
        if restart {
            self.restart_compute(flight);
        } else {
            self.escape_outcome = None;
            self.escape_written.clear();
            self.base_written.clear();
            self.maybe_start();
        }
    }

    async fn drop_subscriber(&mut self, subscriber: SubscriberId) {
        if let Some(s) = self.subscribers.remove(&subscriber) {
            tracing::info!(subscriber = subscriber.0, name = %crate::logging::untrusted(&s.name), ports = s.ports, "subscriber gone");
            let a = self
                .protocol
                .on(Instant::now().into_std(), UInput::SubscriberGone { subscriber });
            self.drive(a).await;
            self.publish();
        }
    }

    async fn on_escape_done(&mut self, job: u64, outcome: UploadOutcome) {
        if matches!(&self.busy, Busy::Draining { flight, escape: true, .. } if flight.job == job) {
            self.drained(outcome);
            return;
        }
        if !matches!(&self.busy, Busy::Escape(f, _, _) if f.job == job) {
            tracing::error!(job, "escape upload result for an unknown job");
            return;
        }
        let at = self.protocol.attempt();
        // As with a direct upload, blocks that could not be written stay dirty and are
        // retried; the generation goes on (aborting would leave the fault un-routed on every
        // healthy switch). The base stage reports the failure in `last_error`.
        if let Some(e) = &outcome.error {
            tracing::error!(failed = outcome.failed.len(), error = %e, "escape stage incomplete");
            self.dirty.extend(outcome.failed.iter().copied());
        }
        self.escape_outcome = Some(outcome);
        let result = Ok(());
        let a = self
            .protocol
            .on(Instant::now().into_std(), UInput::EscapeUploaded { at, result });
        self.drive(a).await;
    }

    fn fail_waiters(&mut self, seq: u64, msg: &str) {
        let (done, keep): (Vec<_>, Vec<_>) = self.waiters.drain(..).partition(|(s, _)| *s <= seq);
        self.waiters = keep;
        for (_, r) in done {
            let _ = r.send(Err(LoopError::Internal(format!("generation failed: {msg}"))));
        }
        let (done, keep): (Vec<_>, Vec<_>) = self.inject_waiters.drain(..).partition(|(s, _, _)| *s <= seq);
        self.inject_waiters = keep;
        for (_, _, r) in done {
            let _ = r.send(Err(LoopError::Internal(format!("generation failed: {msg}"))));
        }
    }

    async fn on_upload_done(&mut self, job: u64, outcome: UploadOutcome) {
        if matches!(&self.busy, Busy::Draining { flight, escape: false, .. } if flight.job == job) {
            self.drained(outcome);
            return;
        }
        let (flight, c) = match std::mem::take(&mut self.busy) {
            Busy::Uploading(f, c) if f.job == job => (f, c),
            other => {
                self.busy = other;
                tracing::error!(job, "upload result for an unknown job");
                return;
            }
        };
        if self.protocol.phase() == fabric_update::Phase::Update {
            // Base stage of the five-phase update: Repath, then Commit. Blocks that failed
            // stay dirty and are retried by the next generation, as with a direct upload.
            // Every selected block is now written with the new tables (escape-only blocks by
            // the escape stage): the switches hold `c.lfts`, but for the failed blocks and
            // those of dead switches, which stay dirty.
            self.installed = c.lfts.clone();
            self.dirty.extend(outcome.failed.iter().copied());
            self.dirty.extend(c.skipped.iter().copied());
            self.escape_written.clear();
            self.base_written.clear();
            let outcome = self.merge_stage_outcomes(outcome);
            self.busy = Busy::Repath(flight, c, outcome);
            let at = self.protocol.attempt();
            let a = self
                .protocol
                .on(Instant::now().into_std(), UInput::BaseUploaded { at, result: Ok(()) });
            self.drive(a).await;
            return;
        }
        self.commit(flight, *c, outcome).await;
    }

    /// The upload outcome of both stages: `blocks_written` counts distinct blocks (a block
    /// written by both stages once), times and retries add up.
    fn merge_stage_outcomes(&mut self, base: UploadOutcome) -> UploadOutcome {
        let Some(esc) = self.escape_outcome.take() else {
            return base;
        };
        let twice = std::mem::take(&mut self.stage_overlap)
            .into_iter()
            .filter(|k| !esc.failed.contains(k) && !base.failed.contains(k))
            .count() as u64;
        let mut failed = base.failed;
        for k in esc.failed {
            if !failed.contains(&k) {
                failed.push(k);
            }
        }
        self.escape_keys.clear();
        let mut switch_errors = esc.switch_errors;
        switch_errors.extend(base.switch_errors);
        UploadOutcome {
            blocks_written: (esc.blocks_written + base.blocks_written).saturating_sub(twice),
            retries: esc.retries + base.retries,
            failed,
            error: base.error.or(esc.error),
            switch_errors,
            elapsed: esc.elapsed + base.elapsed,
        }
    }

    /// Schedules the retry of a generation, or of its failed blocks, with exponential backoff.
    fn schedule_retry(&mut self) {
        self.retry_backoff = (self.retry_backoff * 2)
            .max(Duration::from_millis(self.settings.update.failed_generation_backoff_ms))
            .min(Duration::from_secs(60));
        self.retry_at = Some(Instant::now() + self.retry_backoff);
        self.io.telemetry.failed();
    }

    /// Nothing of the generation could be written while something was due: it is not
    /// committed (no number used, waiters get an error, the installed generation stays what
    /// readers see) and is retried with backoff.
    fn not_committed(&mut self, flight: InFlight, outcome: UploadOutcome) {
        let err = outcome.error.clone().unwrap_or_else(|| "unknown error".into());
        let due = outcome.failed.len();
        // Its blocks are still to be written, the resync switches still to be rewritten.
        self.give_back(&flight);
        self.dirty.extend(outcome.failed.iter().copied());
        for (sid, (_, e)) in &mut self.unprogrammed {
            if let Some(x) = outcome.switch_errors.get(sid) {
                e.clone_from(x);
            }
        }
        self.schedule_retry();
        let msg = format!("no LFT block could be written ({due} due), nothing installed, retrying: {err}");
        if self.current.is_none() {
            tracing::error!(blocks_due = due, error = %err, "no generation installed: no LFT block could be written; retrying");
        } else {
            tracing::warn!(
                blocks_due = due,
                installed = self.generation(),
                error = %err,
                "generation not committed: no LFT block could be written; retrying"
            );
        }
        self.last_error = format!("generation {} not committed: {msg}", self.next_generation());
        self.set_phase(Phase::Idle);
        self.publish();
        // Waiters are answered once readers see the failure.
        self.fail_waiters(flight.seq, &msg);
        self.maybe_start();
    }

    /// The switches that did not take their blocks of the generation just committed (every
    /// dirty block of a live switch was part of its writes, so its failures are the whole
    /// list): logged when the list changes, INFO for each switch that is programmed again.
    fn note_unprogrammed(&mut self, number: u64, physical: &Fabric, outcome: &UploadOutcome) {
        let mut now: BTreeMap<u32, (u64, String)> = BTreeMap::new();
        for &(sid, _) in &outcome.failed {
            if (sid as usize) >= physical.num_switches() || !physical.switch(SwitchId(sid)).up {
                continue;
            }
            let e = now.entry(sid).or_insert_with(|| {
                let err = outcome
                    .switch_errors
                    .get(&sid)
                    .or(outcome.error.as_ref())
                    .cloned()
                    .unwrap_or_default();
                (0, err)
            });
            e.0 += 1;
        }
        for sid in self.unprogrammed.keys() {
            if now.contains_key(sid) || (*sid as usize) >= physical.num_switches() {
                continue;
            }
            let sw = physical.switch(SwitchId(*sid));
            if sw.up {
                tracing::info!(switch = %fmt_guid(sw.guid), generation = number, "switch {} programmed", sw.desc);
            } else {
                tracing::info!(switch = %fmt_guid(sw.guid), "switch {} is down: no longer listed as unprogrammed", sw.desc);
            }
        }
        self.unprogrammed = now;
        if !self.unprogrammed.is_empty() {
            let list = self.installation().unprogrammed;
            tracing::error!(
                generation = number,
                switches = list.len(),
                blocks_pending = list.iter().map(|u| u.blocks_pending).sum::<u64>(),
                "generation {number} committed incomplete: unprogrammed switches: {}; retrying",
                crate::state::name_switches(&list)
            );
        }
    }

    /// Commit: fold the generation into the live state, persist, publish, answer waiters.
    ///
    /// Committed generation N means every block of N is on every live switch of the routed
    /// fabric except the switches listed as unprogrammed. A generation of which nothing could
    /// be written while something was due is not committed ([`EventLoop::not_committed`]).
    async fn commit(&mut self, flight: InFlight, c: Computed, outcome: UploadOutcome) {
        if outcome.error.is_some() && outcome.blocks_written == 0 && (!outcome.failed.is_empty() || c.lids_changed) {
            self.not_committed(flight, outcome);
            return;
        }
        self.set_phase(Phase::Commit);
        if self.recovering.is_some() && outcome.error.is_none() {
            tracing::info!("the interrupted update is finished");
            self.clear_progress();
        }
        // Fold what the generation applied into the live state.
        self.physical = c.physical.clone();
        let k = flight.physical_events.min(self.pending_physical.len());
        self.pending_physical.drain(..k);
        self.installed = c.lfts.clone();
        self.installed_lids = Some(c.lids.clone());
        self.dirty.extend(outcome.failed.iter().copied());
        self.dirty.extend(c.skipped.iter().copied());
        let number = self.next_generation();
        self.note_unprogrammed(number, &c.physical, &outcome);
        if let Some(err) = &outcome.error {
            self.schedule_retry();
            self.last_error = format!(
                "generation {number} incomplete: {} LFT blocks not written on {} switches, retrying: {err}",
                outcome.failed.len(),
                self.unprogrammed.len().max(1)
            );
        } else {
            self.retry_backoff = Duration::ZERO;
            self.last_error.clear();
        }

        let committed_at_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));

        // Persist what changed (LIDs, virtual faults) and the generation number before
        // announcing the commit: a number announced as committed is never used again, even
        // after a crash right after the announcement. One blocking task, off the tokio workers.
        let lids = (*c.guid2lid != *self.guid2lid
            || !self.io.state_dir.path().join(crate::persist::GUID2LID_FILE).exists())
        .then(|| c.guid2lid.clone());
        let faults = (flight.exclusions != self.persisted_exclusions)
            .then(|| flight.exclusions.iter().map(|x| x.persisted()).collect::<Vec<_>>());
        let record = CommittedGeneration {
            generation: number,
            committed_at_unix_ms,
        };
        {
            let dir = self.io.state_dir.clone();
            // Each file on its own: one that cannot be written does not keep the others old.
            let res = tokio::task::spawn_blocking(move || {
                let mut errors = Vec::new();
                let mut faults_saved = false;
                if let Some(l) = lids {
                    if let Err(e) = dir.save_guid2lid(&l) {
                        errors.push(e.to_string());
                    }
                }
                if let Some(f) = faults {
                    match dir.save_virtual_faults(&f) {
                        Ok(()) => faults_saved = true,
                        Err(e) => errors.push(e.to_string()),
                    }
                }
                if let Err(e) = dir.save_last_generation(&record) {
                    errors.push(e.to_string());
                }
                (faults_saved, errors)
            })
            .await;
            match res {
                Ok((faults_saved, errors)) => {
                    if faults_saved {
                        self.persisted_exclusions = flight.exclusions.clone();
                    }
                    let r = if errors.is_empty() {
                        Ok(())
                    } else {
                        Err(errors.join("; "))
                    };
                    self.note_persistence(r);
                }
                Err(e) => self.note_persistence(Err(format!("persistence task failed: {e}"))),
            }
        }
        self.guid2lid = c.guid2lid.clone();

        let committed = Instant::now();
        let ms = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64() * 1e3;
        let routed = flight.routed.unwrap_or(committed);
        let timings = RerouteTimings {
            generation: number,
            routed_ms: ms(flight.first_seen, routed),
            committed_ms: ms(flight.first_seen, committed),
            coalesce_ms: ms(flight.first_seen, flight.started),
            compute_ms: c.compute_ms,
            upload_ms: outcome.elapsed.as_secs_f64() * 1e3,
            blocks_written: outcome.blocks_written,
            retries: outcome.retries,
            faults: flight.faults,
            committed_at_unix_ms,
            driver_smps_sent: self.io.driver.driver_stats().smps_sent,
        };
        let excluded_links: HashSet<(Guid, PortNum)> = flight
            .exclusions
            .iter()
            .filter_map(|x| match *x {
                Exclusion::Link(s, p) => Some((s, p)),
                _ => None,
            })
            .flat_map(|(s, p)| {
                let mut v = vec![(s, p)];
                if let Some((rg, rp)) = remote_switch_end(&self.cabling, s, p) {
                    v.push((rg, rp));
                }
                v
            })
            .collect();
        let generation = Arc::new(Generation {
            number,
            fabric: c.fabric.clone(),
            ranking: c.ranking.clone(),
            lids: c.lids.clone(),
            lfts: c.lfts.clone(),
            engine: self.settings.engine.to_string(),
            route_ms: c.route_ms,
            timings: timings.clone(),
            excluded_links: Arc::new(excluded_links),
            virtual_faults: flight.exclusions.len(),
            routing_check: c.routing_check.clone(),
        });
        self.io.telemetry.routing_check(&c.routing_check);
        let first = self.current.is_none();
        self.current = Some(generation);
        tracing::info!(
            generation = number,
            faults = timings.faults,
            routed_ms = format_args!("{:.1}", timings.routed_ms),
            committed_ms = format_args!("{:.1}", timings.committed_ms),
            blocks_written = timings.blocks_written,
            "generation committed"
        );
        self.io
            .telemetry
            .blocks_written(outcome.blocks_written, outcome.retries);
        self.io.telemetry.committed(
            number,
            timings.routed_ms / 1e3,
            timings.committed_ms / 1e3,
            timings.compute_ms / 1e3,
            timings.upload_ms / 1e3,
        );
        let _ = self.io.notices.send(Notice::GenerationCommitted {
            generation: number,
            timings: timings.clone(),
        });
        self.poll_topology_gaps();
        let status = self.installation().status_line(number);
        if first {
            if let Some(f) = self.io.on_ready.take() {
                f(number, status.clone());
            }
        }
        let _ = self.io.notifier.status(&status);
        self.prepare_escape_vl();
        self.set_phase(Phase::Idle);
        self.publish();
        // Waiters are answered once readers see the committed generation.
        let (done, keep): (Vec<_>, Vec<_>) = self.waiters.drain(..).partition(|(s, _)| *s <= flight.seq);
        self.waiters = keep;
        for (_, r) in done {
            let _ = r.send(Ok(number));
        }
        let (done, keep): (Vec<_>, Vec<_>) = self.inject_waiters.drain(..).partition(|(s, _, _)| *s <= flight.seq);
        self.inject_waiters = keep;
        for (_, text, r) in done {
            let _ = r.send(Ok(FaultAccepted {
                event: text,
                generation: number,
            }));
        }
        self.maybe_start();
    }
}

/// The protocol phase a subscriber acks (Unpath or Repath only).
fn update_phase(p: Phase) -> Option<Phase> {
    matches!(p, Phase::Unpath | Phase::Repath).then_some(p)
}

/// Why `ev` breaks the routing whose used ports are `used`, or `None` when it does not.
///
/// A change breaks a routing when a port it kills is one that some LFT entry forwards through:
/// both ends of a link going down; the ports of the neighbours facing a switch going down (the
/// dead switch's own entries no longer matter). A port facing an end port carries only that end
/// port's own traffic, which no routing can save: an end port or its cable going down breaks
/// nothing. Changes bringing something up never break a routing.
pub(crate) fn breaking_reason(cabling: &Fabric, used: &crate::compute::PortUse, ev: &FabricEvent) -> Option<String> {
    use fabric_topology::SwitchId;
    let mut cut: Vec<(SwitchId, PortNum)> = Vec::new();
    match *ev {
        FabricEvent::LinkDown { switch, port } => {
            let sid = cabling.switch_by_guid(switch)?;
            if let Remote::Switch { sw, port: rp } = cabling.switch(sid).ports.get(port as usize)?.remote {
                cut.push((sid, port));
                cut.push((sw, rp));
            }
        }
        FabricEvent::SwitchDown(g) => {
            let sid = cabling.switch_by_guid(g)?;
            for (_, p) in cabling.switch(sid).external_ports() {
                if let Remote::Switch { sw, port } = p.remote {
                    cut.push((sw, port));
                }
            }
        }
        _ => return None,
    }
    let (sw, port) = cut.into_iter().find(|&(s, p)| used.in_use(s, p))?;
    Some(format!(
        "{ev} cuts switch {} port {port}, which the routing being installed forwards through",
        fmt_guid(cabling.switch(sw).guid)
    ))
}

/// The canonical (lower GUID, port) end of the link on `switch`/`port`.
fn canonical_link(f: &Fabric, switch: Guid, port: PortNum) -> Exclusion {
    match remote_switch_end(f, switch, port) {
        Some(other) if other < (switch, port) => Exclusion::Link(other.0, other.1),
        _ => Exclusion::Link(switch, port),
    }
}

/// The other end of a switch-to-switch cable, as (switch GUID, port).
fn remote_switch_end(f: &Fabric, switch: Guid, port: PortNum) -> Option<(Guid, PortNum)> {
    let id = f.switch_by_guid(switch)?;
    match f.switch(id).ports.get(port as usize)?.remote {
        Remote::Switch { sw, port: rp } => Some((f.switch(sw).guid, rp)),
        _ => None,
    }
}

fn exclusion_from_persisted(f: &Fabric, v: &VirtualFault) -> Result<Exclusion, String> {
    let guid = |s: &str| fabric_topology::parse_guid(s).ok_or_else(|| format!("{s:?} is not a GUID"));
    let (x, ev) = match v {
        VirtualFault::Link { switch, port } => {
            let g = guid(switch)?;
            (
                canonical_link(f, g, *port),
                FabricEvent::LinkDown { switch: g, port: *port },
            )
        }
        VirtualFault::Switch { switch } => {
            let g = guid(switch)?;
            (Exclusion::Switch(g), FabricEvent::SwitchDown(g))
        }
        VirtualFault::Node { port_guid } => {
            let g = guid(port_guid)?;
            (Exclusion::Node(g), FabricEvent::EndPortDown(g))
        }
    };
    f.check_event(&ev).map_err(|e| e.to_string())?;
    Ok(x)
}

async fn sleep_until_opt(d: Option<Instant>) {
    match d {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
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
mod conformance;

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_topology::{FabricBuilder, NodeType};

    fn tiny() -> Fabric {
        let mut b = FabricBuilder::new();
        let l0 = b.add_switch(0x10, "leaf0", 8).unwrap();
        let s0 = b.add_switch(0x20, "spine0", 8).unwrap();
        b.connect_switches(l0, 5, s0, 1).unwrap();
        let e0 = b.add_end_port(0x101, 0x100, "n0", 1, 1, NodeType::Compute).unwrap();
        b.connect_end_port(e0, l0, 1).unwrap();
        b.build()
    }

    #[test]
    fn links_are_keyed_by_their_lower_end() {
        let f = tiny();
        assert_eq!(canonical_link(&f, 0x20, 1), Exclusion::Link(0x10, 5));
        assert_eq!(canonical_link(&f, 0x10, 5), Exclusion::Link(0x10, 5));
        // A port facing an end port is its own key.
        assert_eq!(canonical_link(&f, 0x10, 1), Exclusion::Link(0x10, 1));
    }

    /// The tiny fabric routed with `exclusions` applied.
    fn routed(exclusions: Vec<FabricEvent>) -> crate::compute::Computed {
        crate::compute::compute(crate::compute::ComputeInput {
            job: 1,
            physical: Arc::new(tiny()),
            physical_events: vec![],
            exclusions,
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
            ports_in_use: true,
        })
        .unwrap()
    }

    #[test]
    fn a_change_breaks_the_target_only_when_it_kills_a_port_the_target_forwards_through() {
        let f = tiny();
        let c = routed(vec![]);
        let used = &c.ports_in_use;
        let down = FabricEvent::LinkDown { switch: 0x20, port: 1 };
        let r = breaking_reason(&f, used, &down).expect("the leaf-spine link carries the spine's LID and n0's");
        assert!(r.contains("link-down 0x0000000000000020[1]"), "{r}");
        assert!(
            r.contains("switch 0x0000000000000010 port 5") || r.contains("switch 0x0000000000000020 port 1"),
            "{r}"
        );
        assert!(breaking_reason(&f, used, &FabricEvent::SwitchDown(0x20)).is_some());
        assert!(breaking_reason(&f, used, &FabricEvent::SwitchDown(0x10)).is_some());
        // Bringing things up, and the end port's own cable, never break a routing.
        assert_eq!(
            breaking_reason(&f, used, &FabricEvent::LinkUp { switch: 0x10, port: 5 }),
            None
        );
        assert_eq!(breaking_reason(&f, used, &FabricEvent::EndPortDown(0x101)), None);
        assert_eq!(
            breaking_reason(&f, used, &FabricEvent::LinkDown { switch: 0x10, port: 1 }),
            None
        );
        assert_eq!(breaking_reason(&f, used, &FabricEvent::SwitchDown(0x99)), None);
        // A routing that already avoids the link is not broken by it going down physically.
        let c = routed(vec![FabricEvent::LinkDown { switch: 0x10, port: 5 }]);
        assert_eq!(breaking_reason(&f, &c.ports_in_use, &down), None);
        assert_eq!(
            breaking_reason(&f, &c.ports_in_use, &FabricEvent::SwitchDown(0x20)),
            None
        );
    }

    #[test]
    fn persisted_faults_round_trip_and_stale_ones_are_rejected() {
        let f = tiny();
        let x = exclusion_from_persisted(
            &f,
            &VirtualFault::Link {
                switch: fmt_guid(0x20),
                port: 1,
            },
        )
        .unwrap();
        assert_eq!(x, Exclusion::Link(0x10, 5));
        assert_eq!(exclusion_from_persisted(&f, &x.persisted()).unwrap(), x);
        assert!(exclusion_from_persisted(&f, &VirtualFault::Switch { switch: fmt_guid(0x77) }).is_err());
    }
}

/// The loop in-process with the mock driver: stale results, queued faults, waiters.
#[cfg(test)]
mod loop_tests {
    use super::*;
    use fabric_mock::{MockConfig, MockFabric};

    struct Harness {
        tx: mpsc::Sender<Event>,
        published: Arc<ArcSwap<Published>>,
        mock: Arc<MockFabric>,
        pool: Arc<rayon::ThreadPool>,
        telemetry: Telemetry,
        task: tokio::task::JoinHandle<()>,
        dir: Arc<tempfile::TempDir>,
        /// The loop's WatchEvents broadcast (subscribe to see notices from then on).
        notices: broadcast::Sender<Notice>,
    }

    fn settings(coalesce_ms: u64) -> LoopSettings {
        LoopSettings {
            update: UpdateConfig {
                coalesce_ms,
                coalesce_max_ms: coalesce_ms,
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

    fn start(settings: LoopSettings, mock_cfg: MockConfig) -> Harness {
        let fabric = fabric_topology::gen::generate_str("PGFT(2;4,6;1,3;1,1)", None).unwrap();
        let mock = Arc::new(MockFabric::new(fabric).with_config(mock_cfg).unwrap());
        start_on(settings, mock, Arc::new(tempfile::tempdir().unwrap()))
    }

    /// A loop over an existing simulated fabric and state directory (a restarted daemon).
    fn start_on(settings: LoopSettings, mock: Arc<MockFabric>, dir: Arc<tempfile::TempDir>) -> Harness {
        let driver: Arc<dyn SouthboundDriver> = mock.clone();
        start_with(settings, mock, driver, dir)
    }

    /// A loop whose driver is `driver` (a wrapper of `mock`).
    fn start_with(
        settings: LoopSettings,
        mock: Arc<MockFabric>,
        driver: Arc<dyn SouthboundDriver>,
        dir: Arc<tempfile::TempDir>,
    ) -> Harness {
        let fabric = mock.cabling().clone();
        let guid2lid = StateDir::open(dir.path()).unwrap().load_guid2lid().unwrap();
        let virtual_faults = StateDir::open(dir.path()).unwrap().load_virtual_faults().unwrap();
        let pool = Arc::new(rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap());
        let physical = Arc::new(fabric);
        let published = Arc::new(ArcSwap::from_pointee(Published {
            cabling: physical.clone(),
            current: None,
            phase: Phase::Idle,
            phase_generation: 0,
            pending_faults: 0,
            last_error: String::new(),
            discarded_generations: 0,
            jobs: Arc::new(Jobs::new()),
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
        let (notices, _) = broadcast::channel(1024);
        let watch = notices.clone();
        let telemetry = Telemetry::new();
        let (lp, tx) = EventLoop::new(
            LoopParams {
                settings,
                lmc: 1,
                max_lid: 0xBFFF,
                driver_name: "mock",
            },
            LoopIo {
                driver,
                state_dir: StateDir::open(dir.path()).unwrap(),
                pool: pool.clone(),
                published: published.clone(),
                notices,
                telemetry: telemetry.clone(),
                notifier: Notifier::default(),
                watchdog: None,
                on_ready: None,
            },
            LoopInit {
                physical,
                guid2lid,
                jobs: Jobs::new(),
                virtual_faults,
            },
        );
        let task = tokio::spawn(lp.run());
        Harness {
            tx,
            published,
            mock,
            pool,
            telemetry,
            task,
            dir,
            notices: watch,
        }
    }

    impl Harness {
        async fn until(&self, what: &str, f: impl Fn(&Published) -> bool) -> Arc<Published> {
            for _ in 0..1000 {
                let p = self.published.load_full();
                if f(&p) {
                    return p;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            panic!("timed out waiting for {what}");
        }

        fn links(&self) -> Vec<(Guid, PortNum)> {
            let f = self.mock.cabling();
            let mut v = Vec::new();
            for s in f.switch_ids() {
                for (pn, p) in f.switch(s).external_ports() {
                    if let Remote::Switch { sw, port } = p.remote {
                        if (s, pn) < (sw, port) {
                            v.push((f.switch(s).guid, pn));
                        }
                    }
                }
            }
            v
        }

        async fn subscribe(&self, name: &str) -> (SubscriberId, mpsc::Receiver<UpdateNotice>) {
            let (ntx, nrx) = mpsc::channel(16);
            let (reply, rx) = oneshot::channel();
            self.tx
                .send(Event::Subscribe {
                    name: name.into(),
                    ports: Vec::new(),
                    notices: ntx,
                    reply,
                })
                .await
                .unwrap();
            (rx.await.unwrap().unwrap(), nrx)
        }

        async fn ack(&self, subscriber: SubscriberId, n: &UpdateNotice) {
            let (reply, rx) = oneshot::channel();
            self.tx
                .send(Event::Ack {
                    subscriber,
                    generation: n.generation,
                    phase: n.phase,
                    reply,
                })
                .await
                .unwrap();
            rx.await.unwrap().unwrap();
        }

        async fn inject(
            &self,
            link: (Guid, PortNum),
            up: bool,
            wait: bool,
        ) -> oneshot::Receiver<Result<FaultAccepted, LoopError>> {
            let (reply, rx) = oneshot::channel();
            let req = FaultRequest {
                target: FaultTarget::Link {
                    switch: link.0,
                    port: link.1,
                },
                up,
                physical: false,
                wait,
            };
            self.tx.send(Event::Inject { req, reply }).await.unwrap();
            rx
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_superseded_computation_is_discarded_and_the_newer_one_covers_both_faults() {
        let h = start(settings(0), MockConfig::default());
        h.until("generation 1", |p| p.generation() == 1).await;
        // Hold the routing pool's only thread so the next computations queue behind it.
        let (release, blocked) = std::sync::mpsc::channel::<()>();
        h.pool.spawn(move || {
            let _ = blocked.recv();
        });
        let links = h.links();
        let a = h.inject(links[0], false, false).await.await.unwrap().unwrap();
        assert_eq!(a.generation, 1);
        h.until("prepare", |p| p.phase == Phase::Prepare).await;
        // Due at once (no coalescing): supersedes the computation that is still queued.
        let b = h.inject(links[1], false, true).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        release.send(()).unwrap();
        let b = b.await.unwrap().unwrap();
        assert_eq!(b.generation, 2, "both faults land in one generation");
        let p = h.until("idle", |p| p.phase == Phase::Idle).await;
        assert_eq!(p.discarded_generations, 1, "the stale result was discarded");
        let g = p.current.clone().unwrap();
        assert_eq!(g.number, 2);
        assert_eq!(g.timings.faults, 2);
        assert_eq!(g.virtual_faults, 2);
        assert_eq!(g.fabric.count_links().1 + 2, g.fabric.count_links().0);
        assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn faults_arriving_during_an_upload_are_queued_for_the_next_generation() {
        let slow = MockConfig {
            op_latency: Duration::from_millis(150),
            ..MockConfig::default()
        };
        // Direct upload: every change arriving during it waits for the next generation (with
        // the five-phase update, one that breaks the routing being installed restarts it).
        let mut s = settings(0);
        s.update.five_phase = false;
        let h = start(s, slow);
        h.until("generation 1", |p| p.generation() == 1).await;
        let links = h.links();
        let first = h.inject(links[0], false, true).await;
        h.until("update", |p| p.phase == Phase::Update).await;
        let second = h.inject(links[1], false, true).await;
        let p = h.until("queued", |p| p.pending_faults == 1).await;
        assert_eq!(p.phase, Phase::Update, "the upload is still running");
        assert_eq!(first.await.unwrap().unwrap().generation, 2);
        assert_eq!(second.await.unwrap().unwrap().generation, 3);
        let p = h.until("idle", |p| p.phase == Phase::Idle && p.generation() == 3).await;
        let g = p.current.clone().unwrap();
        assert_eq!(g.timings.faults, 1);
        assert_eq!(g.virtual_faults, 2);
        assert_eq!(p.pending_faults, 0);
        // Undoing one and repeating the other: one change, one no-op answered at once.
        let up = h.inject(links[0], true, true).await;
        let noop = h.inject(links[1], false, true).await.await.unwrap().unwrap();
        assert!(noop.event.ends_with("(no change)"), "{}", noop.event);
        assert_eq!(noop.generation, 3);
        assert_eq!(up.await.unwrap().unwrap().generation, 4);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failed_blocks_are_retried_until_the_fabric_holds_the_generation() {
        let mut s = settings(0);
        s.update.failed_generation_backoff_ms = 30;
        s.update.upload_retries = 0;
        let h = start(s, MockConfig::default());
        h.until("generation 1", |p| p.generation() == 1).await;
        // Every block write fails from now on.
        h.mock
            .set_config(MockConfig {
                error_rate: 1.0,
                max_retries: 0,
                ..MockConfig::default()
            })
            .unwrap();
        let links = h.links();
        let e = h.inject(links[0], false, true).await.await.unwrap().unwrap_err();
        assert!(e.to_string().contains("no LFT block could be written"), "{e}");
        let p = h.published.load_full();
        assert_eq!(p.generation(), 1, "nothing written: nothing committed");
        assert!(
            p.last_error.contains("no LFT block could be written"),
            "{}",
            p.last_error
        );
        assert!(
            p.installation.not_ready.is_none(),
            "generation 1 is still wholly installed"
        );
        // Retries keep failing (backoff doubles) without using generation numbers, until the
        // switches accept writes again.
        let before = h.mock.counters().write_attempts;
        h.until("retries", |_| h.mock.counters().write_attempts >= before + 3)
            .await;
        assert_eq!(h.published.load().generation(), 1);
        h.mock.set_config(MockConfig::default()).unwrap();
        let p = h
            .until("recovered", |p| {
                p.generation() == 2 && p.last_error.is_empty() && p.phase == Phase::Idle
            })
            .await;
        let cur = p.current.clone().unwrap();
        assert!(cur.timings.blocks_written > 0);
        let installed = h.mock.installed_lft_table();
        for sw in cur.fabric.switch_ids() {
            let want = cur.lfts.row(sw);
            assert_eq!(
                &installed.row(sw)[..want.len()],
                want,
                "switch {} holds the generation",
                sw.0
            );
        }
        assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn refused_requests_change_nothing() {
        let mut s = settings(0);
        s.fault_injection.enabled = false;
        let h = start(s, MockConfig::default());
        h.until("generation 1", |p| p.generation() == 1).await;
        let links = h.links();
        let e = h.inject(links[0], false, true).await.await.unwrap().unwrap_err();
        assert!(
            matches!(e, LoopError::FailedPrecondition(ref m) if m.contains("disabled")),
            "{e:?}"
        );
        let (reply, rx) = oneshot::channel();
        h.tx.send(Event::ClearJob {
            id: "nope".into(),
            reply,
        })
        .await
        .unwrap();
        assert!(matches!(rx.await.unwrap(), Err(LoopError::NotFound(_))));
        let (reply, rx) = oneshot::channel();
        let req = FaultRequest {
            target: FaultTarget::Link { switch: 0x1, port: 1 },
            up: false,
            physical: false,
            wait: false,
        };
        let mut s = settings(0);
        s.fault_injection.enabled = true;
        h.tx.send(Event::Reload(Box::new(s))).await.unwrap();
        h.tx.send(Event::Inject { req, reply }).await.unwrap();
        let e = rx.await.unwrap().unwrap_err();
        assert_eq!(
            e,
            LoopError::InvalidArgument("unknown switch GUID 0x0000000000000001".into())
        );
        let p = h.published.load_full();
        assert_eq!((p.generation(), p.pending_faults, p.virtual_faults), (1, 0, 0));
    }

    async fn next_notice(rx: &mut mpsc::Receiver<UpdateNotice>) -> UpdateNotice {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("a notice within 10 s")
            .expect("stream open")
    }

    /// Entries of every switch for the LIDs `keep` selects.
    fn entries(t: &Lfts, switches: usize, top: Lid, keep: impl Fn(Lid) -> bool) -> Vec<u8> {
        let mut v = Vec::new();
        for s in 0..switches {
            for lid in 1..=top {
                if keep(lid) {
                    v.push(t.get(fabric_topology::SwitchId(s as u32), lid));
                }
            }
        }
        v
    }

    fn update_settings(unpath_ms: u64, policy: fabric_update::DeadlinePolicy) -> LoopSettings {
        let mut s = settings(0);
        s.update.unpath_deadline_ms = unpath_ms;
        s.update.repath_deadline_ms = unpath_ms;
        s.update.missed_ack_policy = policy;
        s
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn five_phase_escape_stage_before_unpath_base_stage_before_repath() {
        let h = start(
            update_settings(10_000, fabric_update::DeadlinePolicy::Proceed),
            MockConfig::default(),
        );
        let p1 = h.until("generation 1", |p| p.generation() == 1).await;
        let g1 = p1.current.clone().unwrap();
        let (id, mut rx) = h.subscribe("job-a").await;
        h.until("subscribed", |p| p.subscribers == 1).await;
        let ns = g1.fabric.num_switches();
        let top = g1.lids.top();
        let mask = EscapeMask::new(&g1.lids);
        let before = h.mock.installed_lft_table();
        let done = h.inject(h.links()[0], false, true).await;

        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase, n.deadline_ms), (2, Phase::Unpath, 10_000));
        assert_eq!(h.published.load_full().phase, Phase::Unpath);
        let mid = h.mock.installed_lft_table();
        assert_eq!(
            entries(&mid, ns, top, |l| !mask.is_escape(l)),
            entries(&before, ns, top, |l| !mask.is_escape(l)),
            "no base LID entry changes before the subscribers moved"
        );
        assert_ne!(
            entries(&mid, ns, top, |l| mask.is_escape(l)),
            entries(&before, ns, top, |l| mask.is_escape(l)),
            "the escape stage is installed before Unpath"
        );
        h.ack(id, &n).await;

        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (2, Phase::Repath));
        let p = h.published.load_full();
        assert_eq!(
            (p.generation(), p.phase),
            (1, Phase::Repath),
            "not committed before Repath"
        );
        let installed = h.mock.installed_lft_table();
        h.ack(id, &n).await;
        let r = done.await.unwrap().unwrap();
        assert_eq!(r.generation, 2);
        let p = h.until("idle", |p| p.phase == Phase::Idle).await;
        let g2 = p.current.clone().unwrap();
        assert_eq!(
            entries(&installed, ns, top, |_| true),
            entries(&g2.lfts, ns, top, |_| true),
            "the whole generation is installed before Repath"
        );
        assert!(p.missed_acks.is_empty());
        assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
        assert_eq!(h.mock.verify_all_pairs(true).unreachable_count, 0);
    }

    /// The mock driver with an escape VL that is not ready until released: `escape_vl_ready`
    /// waits for `release`, then answers Ok or (with `fail`) an error naming a GUID and port.
    struct SlowEscapeVl {
        mock: Arc<MockFabric>,
        ready: std::sync::atomic::AtomicBool,
        calls: std::sync::atomic::AtomicUsize,
        release: tokio::sync::Semaphore,
        fail: bool,
    }

    #[async_trait::async_trait]
    impl SouthboundDriver for SlowEscapeVl {
        fn caps(&self) -> fabric_southbound::DriverCaps {
            self.mock.caps()
        }
        async fn discover(&self) -> Result<Fabric, fabric_southbound::DriverError> {
            self.mock.discover().await
        }
        fn subscribe_events(&self) -> mpsc::UnboundedReceiver<FabricEvent> {
            self.mock.subscribe_events()
        }
        async fn configure_lids(&self, f: &Fabric, l: &LidPlan) -> Result<(), fabric_southbound::DriverError> {
            self.mock.configure_lids(f, l).await
        }
        async fn write_lft_blocks(
            &self,
            b: &[fabric_southbound::LftBlockWrite],
        ) -> Result<fabric_southbound::WriteReport, fabric_southbound::DriverError> {
            self.mock.write_lft_blocks(b).await
        }
        async fn read_lft_block(
            &self,
            s: Guid,
            b: u32,
        ) -> Result<[u8; fabric_routing::BLOCK_SIZE], fabric_southbound::DriverError> {
            self.mock.read_lft_block(s, b).await
        }
        async fn set_port_state(&self, s: Guid, p: PortNum, up: bool) -> Result<(), fabric_southbound::DriverError> {
            self.mock.set_port_state(s, p, up).await
        }
        async fn set_switch_state(&self, s: Guid, up: bool) -> Result<(), fabric_southbound::DriverError> {
            self.mock.set_switch_state(s, up).await
        }
        async fn escape_vl_ready(&self) -> Result<(), fabric_southbound::DriverError> {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let permit = self.release.acquire().await;
            drop(permit);
            if self.fail {
                return Err(fabric_southbound::DriverError::Protocol {
                    guid: Some(0x20),
                    message: "SLtoVLMappingTable Set on switch 0x0000000000000020 input port 3 output port 5: \
                              no reply"
                        .into(),
                });
            }
            self.ready.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        }
        fn escape_vl_status(&self) -> fabric_southbound::EscapeVlStatus {
            fabric_southbound::EscapeVlStatus {
                ready: self.ready.load(std::sync::atomic::Ordering::SeqCst),
                ..Default::default()
            }
        }
    }

    fn slow_escape_vl(fail: bool) -> (Harness, Arc<SlowEscapeVl>) {
        let fabric = fabric_topology::gen::generate_str("PGFT(2;4,6;1,3;1,1)", None).unwrap();
        let mock = Arc::new(MockFabric::new(fabric));
        let d = Arc::new(SlowEscapeVl {
            mock: mock.clone(),
            ready: false.into(),
            calls: 0.into(),
            release: tokio::sync::Semaphore::new(0),
            fail,
        });
        let h = start_with(
            update_settings(10_000, fabric_update::DeadlinePolicy::Proceed),
            mock,
            d.clone(),
            Arc::new(tempfile::tempdir().unwrap()),
        );
        (h, d)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_five_phase_update_waits_in_prepare_for_the_escape_vl() {
        use std::sync::atomic::Ordering::SeqCst;
        let (h, d) = slow_escape_vl(false);
        let calls = |n: usize| {
            let d = d.clone();
            async move {
                for _ in 0..1000 {
                    if d.calls.load(SeqCst) >= n {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                d.calls.load(SeqCst)
            }
        };
        // The first generation is a direct upload: it needs no escape VL. Once it is committed
        // the loop asks the driver to program it, in the background.
        h.until("generation 1", |p| p.generation() == 1).await;
        assert_eq!(calls(1).await, 1, "escape VL requested after the first commit");
        let (id, mut rx) = h.subscribe("job-a").await;
        h.until("subscribed", |p| p.subscribers == 1).await;
        let before = h.mock.installed_lft_table();
        let done = h.inject(h.links()[0], false, true).await;
        assert_eq!(calls(2).await, 2, "the five-phase update asks for the escape VL");
        // Held in Prepare: no Unpath notice, no escape stage written.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(rx.try_recv().is_err(), "no Unpath before the escape VL is ready");
        assert_eq!(h.published.load_full().phase, Phase::Prepare);
        assert_eq!(h.published.load_full().generation(), 1);
        assert_eq!(h.mock.installed_lft_table(), before, "nothing written while waiting");
        // Ready: the five-phase update goes on.
        d.release.add_permits(1);
        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (2, Phase::Unpath));
        h.ack(id, &n).await;
        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (2, Phase::Repath));
        h.ack(id, &n).await;
        assert_eq!(done.await.unwrap().unwrap().generation, 2);
        // Ready from now on: the next update does not ask again.
        let done = h.inject(h.links()[1], false, true).await;
        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (3, Phase::Unpath));
        h.ack(id, &n).await;
        let n = next_notice(&mut rx).await;
        h.ack(id, &n).await;
        assert_eq!(done.await.unwrap().unwrap().generation, 3);
        assert_eq!(d.calls.load(SeqCst), 2);
        assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_escape_vl_that_cannot_be_programmed_gives_a_direct_upload() {
        let (h, d) = slow_escape_vl(true);
        h.until("generation 1", |p| p.generation() == 1).await;
        let (_id, mut rx) = h.subscribe("job-a").await;
        h.until("subscribed", |p| p.subscribers == 1).await;
        d.release.add_permits(10);
        let done = h.inject(h.links()[0], false, true).await;
        let r = tokio::time::timeout(Duration::from_secs(10), done)
            .await
            .expect("committed without waiting for acks")
            .unwrap()
            .unwrap();
        assert_eq!(r.generation, 2);
        assert!(rx.try_recv().is_err(), "subscribers are never moved to the escape LIDs");
        let p = h.until("idle", |p| p.phase == Phase::Idle).await;
        assert_eq!(p.generation(), 2);
        assert!(p.missed_acks.is_empty());
        assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_subscriber_that_never_acks_is_reported_and_the_update_proceeds() {
        let h = start(
            update_settings(150, fabric_update::DeadlinePolicy::Proceed),
            MockConfig::default(),
        );
        h.until("generation 1", |p| p.generation() == 1).await;
        let (_id, mut rx) = h.subscribe("silent").await;
        let t = Instant::now();
        let r = h.inject(h.links()[0], false, true).await.await.unwrap().unwrap();
        assert_eq!(r.generation, 2);
        assert!(t.elapsed() >= Duration::from_millis(300), "both deadlines waited");
        assert_eq!(next_notice(&mut rx).await.phase, Phase::Unpath);
        assert_eq!(next_notice(&mut rx).await.phase, Phase::Repath);
        let p = h.published.load_full();
        assert_eq!(
            p.missed_acks,
            vec!["silent (unpath)".to_string(), "silent (repath)".to_string()]
        );
        let m = h.telemetry.encode();
        assert!(
            m.contains("fabricd_update_missed_acks_total{phase=\"unpath\"} 1"),
            "{m}"
        );
        assert!(m.contains("fabricd_update_subscribers 1"), "{m}");
        assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn strict_policy_aborts_the_generation_and_keeps_the_base_routing() {
        let h = start(
            update_settings(150, fabric_update::DeadlinePolicy::Abort),
            MockConfig::default(),
        );
        let p1 = h.until("generation 1", |p| p.generation() == 1).await;
        let g1 = p1.current.clone().unwrap();
        let mask = EscapeMask::new(&g1.lids);
        let (ns, top) = (g1.fabric.num_switches(), g1.lids.top());
        let (_id, _rx) = h.subscribe("silent").await;
        let r = h.inject(h.links()[0], false, true).await.await.unwrap();
        let e = r.expect_err("the generation is aborted");
        assert!(e.to_string().contains("unpath deadline"), "{e}");
        let p = h.published.load_full();
        assert_eq!(p.generation(), 1);
        assert!(p.last_error.contains("aborted"), "{}", p.last_error);
        assert_eq!(p.missed_acks, vec!["silent (unpath)".to_string()]);
        let now = h.mock.installed_lft_table();
        assert_eq!(
            entries(&now, ns, top, |l| !mask.is_escape(l)),
            entries(&g1.lfts, ns, top, |l| !mask.is_escape(l)),
            "the previous base routing stays installed"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_subscriber_that_disconnects_is_dropped_without_waiting_for_its_deadline() {
        let h = start(
            update_settings(60_000, fabric_update::DeadlinePolicy::Proceed),
            MockConfig::default(),
        );
        h.until("generation 1", |p| p.generation() == 1).await;
        let (id, mut rx) = h.subscribe("leaver").await;
        let done = h.inject(h.links()[0], false, true).await;
        assert_eq!(next_notice(&mut rx).await.phase, Phase::Unpath);
        drop(rx);
        h.tx.send(Event::Unsubscribe { subscriber: id }).await.unwrap();
        let r = tokio::time::timeout(Duration::from_secs(10), done)
            .await
            .expect("no wait for the 60 s deadline")
            .unwrap()
            .unwrap();
        assert_eq!(r.generation, 2);
        let p = h.until("idle", |p| p.phase == Phase::Idle).await;
        assert_eq!(p.subscribers, 0);
        assert!(p.missed_acks.is_empty());
    }

    /// The next `UpdateRestarted` notice (other notices skipped), or `None` when none comes
    /// within `wait`.
    async fn next_restart(rx: &mut broadcast::Receiver<Notice>, wait: Duration) -> Option<(u64, u32, String)> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Err(_) => return None,
                Ok(Ok(Notice::UpdateRestarted {
                    generation,
                    attempt,
                    reason,
                })) => return Some((generation, attempt, reason)),
                Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(broadcast::error::RecvError::Closed)) => return None,
            }
        }
    }

    /// The routing of the cabling with `links` excluded, computed from scratch (fresh LIDs).
    fn from_scratch(mock: &MockFabric, links: &[(Guid, PortNum)]) -> Computed {
        compute(ComputeInput {
            job: 0,
            physical: Arc::new(mock.cabling().clone()),
            physical_events: vec![],
            exclusions: links
                .iter()
                .map(|&(switch, port)| FabricEvent::LinkDown { switch, port })
                .collect(),
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
            ports_in_use: true,
        })
        .expect("routing from scratch")
    }

    /// A fault on a link that the routing being installed uses arrives in `phase`: the
    /// generation restarts from Prepare and installs the routing of the final topology.
    async fn breaking_fault_in(phase: Phase) {
        // Slow block writes in Update so that the fault arrives while the base stage uploads.
        let cfg = MockConfig {
            op_latency: Duration::from_millis(if phase == Phase::Update { 40 } else { 0 }),
            max_parallel: 4,
            ..MockConfig::default()
        };
        let h = start(update_settings(10_000, fabric_update::DeadlinePolicy::Proceed), cfg);
        h.until("generation 1", |p| p.generation() == 1).await;
        let (id, mut rx) = h.subscribe("job").await;
        let mut watch = h.notices.subscribe();
        let links = h.links();
        let (a, b) = (links[0], links[3]);
        let first = h.inject(a, false, true).await;
        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (2, Phase::Unpath));
        match phase {
            Phase::Unpath => {}
            Phase::Update => {
                h.ack(id, &n).await;
                h.until("update", |p| p.phase == Phase::Update).await;
            }
            Phase::Repath => {
                h.ack(id, &n).await;
                assert_eq!(next_notice(&mut rx).await.phase, Phase::Repath);
            }
            _ => unreachable!("restart phases are unpath, update, repath"),
        }
        let second = h.inject(b, false, true).await;
        let (generation, attempt, reason) = next_restart(&mut watch, Duration::from_secs(10))
            .await
            .expect("an update_restarted notice");
        assert_eq!((generation, attempt), (2, 1));
        assert!(
            reason.contains(&format!("link-down {}[{}]", fmt_guid(b.0), b.1)),
            "{reason}"
        );
        let p = h.until("restart in status", |p| !p.update_restarts.is_empty()).await;
        assert_eq!(p.update_restarts.len(), 1);
        assert!(
            p.update_restarts[0].starts_with("attempt 1: "),
            "{:?}",
            p.update_restarts
        );
        // The same generation is notified again once the new escape stage is installed.
        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (2, Phase::Unpath));
        h.ack(id, &n).await;
        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (2, Phase::Repath));
        h.ack(id, &n).await;
        assert_eq!(first.await.unwrap().unwrap().generation, 2);
        assert_eq!(
            second.await.unwrap().unwrap().generation,
            2,
            "one generation covers both"
        );
        let p = h.until("idle", |p| p.phase == Phase::Idle && p.generation() == 2).await;
        let g = p.current.clone().unwrap();
        assert_eq!(g.virtual_faults, 2);
        assert_eq!(p.pending_faults, 0);
        assert_eq!(p.update_restarts.len(), 1, "kept in status after the commit");
        // The installed routing is the from-scratch routing of the final topology.
        let scratch = from_scratch(&h.mock, &[a, b]);
        let only_a = from_scratch(&h.mock, &[a]);
        assert_ne!(*only_a.lfts, *scratch.lfts, "the second fault changes the routing");
        assert_eq!(*g.lids, *scratch.lids);
        assert_eq!(*g.lfts, *scratch.lfts, "generation 2 is the routing of both faults");
        let installed = h.mock.installed_lft_table();
        for sw in g.fabric.switch_ids() {
            let want = scratch.lfts.row(sw);
            assert_eq!(&installed.row(sw)[..want.len()], want, "switch {} holds it", sw.0);
        }
        assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
        assert_eq!(h.mock.verify_all_pairs(true).unreachable_count, 0);
        let m = h.telemetry.encode();
        assert!(m.contains("fabricd_update_restarts_total 1"), "{m}");
        assert!(StateDir::open(h.dir.path())
            .unwrap()
            .load_update_progress()
            .unwrap()
            .is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_breaking_fault_during_unpath_restarts_from_prepare_and_installs_the_final_topology() {
        breaking_fault_in(Phase::Unpath).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_breaking_fault_during_the_base_upload_restarts_once_the_upload_is_drained() {
        breaking_fault_in(Phase::Update).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_breaking_fault_during_repath_restarts_from_prepare() {
        breaking_fault_in(Phase::Repath).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_generation_broken_more_than_max_restarts_times_is_aborted_then_retried() {
        let mut s = update_settings(10_000, fabric_update::DeadlinePolicy::Proceed);
        s.update.failed_generation_backoff_ms = 50;
        let h = start(s, MockConfig::default());
        h.until("generation 1", |p| p.generation() == 1).await;
        let (id, mut rx) = h.subscribe("job").await;
        let mut watch = h.notices.subscribe();
        let links = h.links();
        let faults = [links[0], links[3], links[7], links[10], links[14]];
        let first = h.inject(faults[0], false, true).await;
        let max = fabric_update::ProtocolConfig::default().max_restarts;
        let mut later = Vec::new();
        for (i, &link) in faults[1..=max as usize + 1].iter().enumerate() {
            let n = next_notice(&mut rx).await;
            assert_eq!((n.generation, n.phase), (2, Phase::Unpath), "attempt {i}");
            later.push(h.inject(link, false, true).await);
            if i < max as usize {
                let r = next_restart(&mut watch, Duration::from_secs(10))
                    .await
                    .expect("a restart");
                assert_eq!((r.0, r.1), (2, i as u32 + 1));
            }
        }
        // One breaking fault too many: the generation is given up, the installed routing kept.
        let e = first.await.unwrap().expect_err("aborted");
        assert!(e.to_string().contains("after 3 restarts"), "{e}");
        let p = h.until("aborted", |p| p.last_error.contains("aborted")).await;
        assert_eq!(p.generation(), 1);
        assert_eq!(p.update_restarts.len(), max as usize);
        // Retried after the backoff with every fault: the subscriber acks it through.
        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (2, Phase::Unpath));
        h.ack(id, &n).await;
        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (2, Phase::Repath));
        h.ack(id, &n).await;
        let p = h
            .until("generation 2", |p| p.generation() == 2 && p.phase == Phase::Idle)
            .await;
        let g = p.current.clone().unwrap();
        assert_eq!(g.virtual_faults, faults.len());
        // The retried generation counts every change it routes, the aborted attempt's too.
        assert_eq!(g.timings.faults as usize, faults.len(), "{:?}", g.timings);
        assert!(p.last_error.is_empty(), "{}", p.last_error);
        assert_eq!(*g.lfts, *from_scratch(&h.mock, &faults).lfts);
        let installed = h.mock.installed_lft_table();
        for sw in g.fabric.switch_ids() {
            let want = g.lfts.row(sw);
            assert_eq!(&installed.row(sw)[..want.len()], want, "switch {}", sw.0);
        }
        // The waiters of the faults the given-up attempts covered were told so; the fault
        // that arrived last was never part of one.
        let last = later.pop().unwrap();
        for r in later {
            assert!(r.await.unwrap().is_err());
        }
        assert_eq!(last.await.unwrap().unwrap().generation, 2);
        assert!(h
            .telemetry
            .encode()
            .contains(&format!("fabricd_update_restarts_total {max}")));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_benign_fault_during_unpath_is_queued_for_the_next_generation() {
        let h = start(
            update_settings(10_000, fabric_update::DeadlinePolicy::Proceed),
            MockConfig::default(),
        );
        h.until("generation 1", |p| p.generation() == 1).await;
        let links = h.links();
        let (a, b) = (links[0], links[3]);
        assert_eq!(h.inject(a, false, true).await.await.unwrap().unwrap().generation, 2);
        let (id, mut rx) = h.subscribe("job").await;
        let mut watch = h.notices.subscribe();
        let fault = h.inject(b, false, true).await;
        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (3, Phase::Unpath));
        // Relinking `a` uses no port of the routing being installed: queued.
        let relink = h.inject(a, true, true).await;
        let p = h.until("queued", |p| p.pending_faults == 1).await;
        assert_eq!(p.phase, Phase::Unpath, "no restart");
        h.ack(id, &n).await;
        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (3, Phase::Repath));
        h.ack(id, &n).await;
        assert_eq!(fault.await.unwrap().unwrap().generation, 3);
        // The queued relink is the next generation, with its own notices.
        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (4, Phase::Unpath));
        h.ack(id, &n).await;
        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (4, Phase::Repath));
        h.ack(id, &n).await;
        assert_eq!(relink.await.unwrap().unwrap().generation, 4);
        let p = h.until("idle", |p| p.phase == Phase::Idle && p.generation() == 4).await;
        assert!(p.update_restarts.is_empty());
        assert_eq!(next_restart(&mut watch, Duration::from_millis(50)).await, None);
        assert!(h.telemetry.encode().contains("fabricd_update_restarts_total 0"));
        let g = p.current.clone().unwrap();
        assert_eq!(g.virtual_faults, 1);
        assert_eq!(*g.lfts, *from_scratch(&h.mock, &[b]).lfts);
        assert_eq!(h.mock.verify_all_pairs(true).unreachable_count, 0);
    }

    /// kill -9 of the daemon in `phase` of a five-phase update (the loop task is aborted; the
    /// simulated switches keep their tables), then a restart on the same state directory.
    async fn crash_and_restart_in(phase: Phase) {
        let s = update_settings(60_000, fabric_update::DeadlinePolicy::Proceed);
        let cfg = MockConfig {
            op_latency: Duration::from_millis(if phase == Phase::Update { 300 } else { 0 }),
            ..MockConfig::default()
        };
        let h = start(s.clone(), cfg);
        h.until("generation 1", |p| p.generation() == 1).await;
        let link = h.links()[0];
        let (id, mut rx) = h.subscribe("job").await;
        let _accepted = h.inject(link, false, false).await;
        let n = next_notice(&mut rx).await;
        assert_eq!(n.phase, Phase::Unpath);
        match phase {
            Phase::Unpath => {}
            Phase::Update => {
                h.ack(id, &n).await;
                h.until("update", |p| p.phase == Phase::Update).await;
            }
            Phase::Repath => {
                h.ack(id, &n).await;
                assert_eq!(next_notice(&mut rx).await.phase, Phase::Repath);
            }
            _ => unreachable!("crash phases are unpath, update, repath"),
        }
        let progress = StateDir::open(h.dir.path())
            .unwrap()
            .load_update_progress()
            .unwrap()
            .expect("progress persisted");
        assert_eq!((progress.generation, progress.phase.name()), (2, phase.name()));
        assert_eq!(progress.virtual_faults.len(), 1);
        let (mock, dir) = (h.mock.clone(), h.dir.clone());
        let Harness { task, .. } = h;
        task.abort();
        let _ = task.await;
        mock.set_config(MockConfig::default()).unwrap();

        let h = start_on(s, mock, dir);
        let p = h
            .until("converged", |p| {
                p.generation() >= 1 && p.phase == Phase::Idle && p.last_error.is_empty()
            })
            .await;
        let cur = p.current.clone().unwrap();
        assert!(
            cur.excluded_links.contains(&link),
            "the interrupted generation's fault is routed around"
        );
        assert!(
            cur.number > progress.generation,
            "the recovery generation {} comes after the interrupted one",
            cur.number
        );
        assert_eq!(
            StateDir::open(h.dir.path())
                .unwrap()
                .load_last_generation()
                .unwrap()
                .map(|g| g.generation),
            Some(cur.number),
            "the generation file holds the last commit"
        );
        let installed = h.mock.installed_lft_table();
        for sw in cur.fabric.switch_ids() {
            let want = cur.lfts.row(sw);
            assert_eq!(
                &installed.row(sw)[..want.len()],
                want,
                "switch {} holds the routing",
                sw.0
            );
        }
        let nb = cur.lfts.num_blocks() * cur.fabric.num_switches();
        assert!(
            (cur.timings.blocks_written as usize) < nb,
            "read back: only differing blocks are written ({} of {nb})",
            cur.timings.blocks_written
        );
        if phase == Phase::Repath {
            assert_eq!(cur.timings.blocks_written, 0, "everything was installed before Repath");
        }
        assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
        assert_eq!(h.mock.verify_all_pairs(true).unreachable_count, 0);
        let st = StateDir::open(h.dir.path()).unwrap();
        assert_eq!(st.load_update_progress().unwrap(), None, "progress cleared");
        assert_eq!(st.load_virtual_faults().unwrap().len(), 1, "the fault is persisted");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kill_in_unpath_then_restart_converges() {
        crash_and_restart_in(Phase::Unpath).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kill_in_update_then_restart_converges() {
        crash_and_restart_in(Phase::Update).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kill_in_repath_then_restart_converges() {
        crash_and_restart_in(Phase::Repath).await;
    }

    /// The next notice of a `WatchEvents` broadcast, lagging skipped.
    async fn next_watch(rx: &mut broadcast::Receiver<Notice>) -> Notice {
        loop {
            match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
                Ok(Ok(n)) => return n,
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
                other => panic!("no WatchEvents notice: {other:?}"),
            }
        }
    }

    /// Generation numbers continue across a restart on the same state directory (the loop task
    /// is stopped; the simulated switches keep their tables): the first generation of the new
    /// loop is the last committed + 1 and still a direct upload (this process has installed
    /// nothing yet, whatever the number), the next one a five-phase update whose notices,
    /// progress file, commit and generation file all carry the continued number.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn generation_numbers_continue_after_a_restart() {
        let s = update_settings(10_000, fabric_update::DeadlinePolicy::Proceed);
        let h = start(s.clone(), MockConfig::default());
        h.until("generation 1", |p| p.generation() == 1).await;
        let links = h.links();
        for (i, &l) in links[..2].iter().enumerate() {
            let r = h.inject(l, false, true).await.await.unwrap().unwrap();
            assert_eq!(r.generation, i as u64 + 2);
        }
        let st = StateDir::open(h.dir.path()).unwrap();
        let saved = st.load_last_generation().unwrap().expect("generation file");
        let g3 = h
            .until("generation 3", |p| p.generation() == 3)
            .await
            .current
            .clone()
            .unwrap();
        assert_eq!(
            (saved.generation, saved.committed_at_unix_ms),
            (3, g3.timings.committed_at_unix_ms)
        );
        let (mock, dir) = (h.mock.clone(), h.dir.clone());
        let Harness { task, .. } = h;
        task.abort();
        let _ = task.await;

        let h = start_on(s, mock, dir);
        let mut watch = h.notices.subscribe();
        let (id, mut rx) = h.subscribe("job").await;
        assert_eq!(
            h.published.load_full().generation(),
            0,
            "subscribed before the first generation of the new loop commits"
        );
        // Committed without any notice to the subscriber (a direct upload; a five-phase update
        // would wait for its ack up to the 10 s deadline).
        let p = h.until("generation 4", |p| p.generation() == 4).await;
        assert_eq!(p.current.as_ref().unwrap().timings.generation, 4);
        assert!(rx.try_recv().is_err(), "no update notice for the first generation");
        loop {
            match next_watch(&mut watch).await {
                Notice::PhaseChanged { generation, .. } => assert_eq!(generation, 4),
                Notice::GenerationCommitted { generation, .. } => {
                    assert_eq!(generation, 4);
                    break;
                }
                other => panic!("unexpected notice {other:?}"),
            }
        }
        assert_eq!(st.load_last_generation().unwrap().map(|g| g.generation), Some(4));

        let done = h.inject(links[2], false, true).await;
        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (5, Phase::Unpath));
        assert_eq!(h.published.load_full().phase_generation, 5);
        let progress = st.load_update_progress().unwrap().expect("progress file");
        assert_eq!((progress.generation, progress.phase), (5, Phase::Unpath));
        h.ack(id, &n).await;
        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (5, Phase::Repath));
        h.ack(id, &n).await;
        assert_eq!(done.await.unwrap().unwrap().generation, 5);
        let mut phases = Vec::new();
        loop {
            match next_watch(&mut watch).await {
                // Idle after the commit of 4 names the installed generation, the others 5.
                Notice::PhaseChanged { generation, phase } => {
                    assert_eq!(generation, if phase == Phase::Idle { 4 } else { 5 }, "{phase:?}");
                    phases.push(phase);
                }
                Notice::GenerationCommitted { generation, timings } => {
                    assert_eq!((generation, timings.generation), (5, 5));
                    break;
                }
                Notice::TopologyChange { .. } => {}
                other => panic!("unexpected notice {other:?}"),
            }
        }
        assert!(
            phases.contains(&Phase::Unpath) && phases.contains(&Phase::Repath),
            "{phases:?}"
        );
        assert_eq!(st.load_last_generation().unwrap().map(|g| g.generation), Some(5));
        // The progress file goes right after the commit is announced.
        for _ in 0..1000 {
            if st.load_update_progress().unwrap().is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the progress file of generation 5 stays after its commit");
    }
}
