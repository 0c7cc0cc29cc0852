//! The public surface of the event loop: how it is set up ([`LoopParams`], [`LoopIo`],
//! [`LoopInit`], [`LoopSettings`]), what callers send it ([`Request`]) and what it answers
//! (gRPC, signals, tests).

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use fabric_ranking::RankOptions;
use fabric_routing::{EngineKind, Guid2Lid};
use fabric_southbound::SouthboundDriver;
use fabric_topology::{Fabric, FabricEvent, Guid, Lid, PortNum};
use fabric_update::SubscriberId;
use tokio::sync::{broadcast, mpsc, oneshot, watch};

use crate::compute::ComputeInput;
use crate::config::{FaultInjectionConfig, UpdateConfig};
use crate::notify::Notifier;
use crate::persist::{JobPort, Jobs, StateDir, VirtualFault};
use crate::state::{Notice, Phase, Published};
use crate::telemetry::Telemetry;

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

pub(crate) type Reply<T> = oneshot::Sender<Result<T, LoopError>>;

/// The closed set of requests callers send the loop. What the loop's own tasks answer
/// (computations, uploads, persistence) is a crate-private message no caller can forge.
#[derive(Debug)]
pub enum Request {
    /// Fault injection (drill).
    Inject {
        req: FaultRequest,
        reply: Reply<FaultAccepted>,
    },
    /// The port-health monitor isolates (`isolate`) or restores a link: a virtual link-down
    /// like an injected one, accepted whether fault injection is enabled or not (not a drill).
    Isolate {
        switch: Guid,
        port: PortNum,
        isolate: bool,
        reply: Reply<FaultAccepted>,
    },
    /// Forced reroute (gRPC, SIGUSR2): the generation covering it is a full recomputation
    /// ([`crate::compute::ComputeInput::full`]). `resync` rewrites every block of every
    /// switch. With `wait` the reply comes after the commit.
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

/// The settings a reload can change.
#[derive(Clone, Debug)]
pub struct LoopSettings {
    pub update: UpdateConfig,
    pub engine: EngineKind,
    /// `[routing] topology`: `any` routes the base LIDs with Up*/Down*.
    pub topology: crate::topology_mode::TopologySetting,
    pub validate: bool,
    /// Route from the installed generation's routing state (`[routing] incremental`).
    pub incremental: bool,
    /// Base LIDs routed on node ids re-indexed by job (`[routing] job_aware`).
    pub job_aware: bool,
    pub rank_options: Arc<RankOptions>,
    pub fault_injection: FaultInjectionConfig,
    /// Route the SA's multicast groups and program the MFTs (`[multicast] enabled`).
    pub multicast: bool,
    /// The partitions in force (`[partitions]`, the file read at start or reload).
    pub partitions: Arc<crate::partitions::PartitionSettings>,
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
    /// The SA snapshots to keep (drivers whose `attach_sa` returned false): told every
    /// committed generation, every physical change and, through the upload, every
    /// acknowledged LFT block.
    pub sa: Option<Arc<crate::sa::SaPublisher>>,
    /// The SA service (every driver): its multicast groups are routed, the resolved
    /// partitions are handed to it.
    pub sa_service: Option<Arc<fabric_sa::SaService>>,
    /// Bumped by the SA after every multicast group change (its listener): wakes the loop.
    pub mcast_changes: Option<watch::Receiver<u64>>,
}

/// Initial state, loaded by the caller (discovery, state directory).
pub struct LoopInit {
    pub physical: Arc<Fabric>,
    pub guid2lid: Guid2Lid,
    pub jobs: Jobs,
    pub virtual_faults: Vec<VirtualFault>,
}

/// Kind label of an event (Prometheus, notices).
pub fn event_kind(e: &FabricEvent) -> &'static str {
    match e {
        FabricEvent::LinkDown { .. } | FabricEvent::LinkUp { .. } => "link",
        FabricEvent::SwitchDown(_) | FabricEvent::SwitchUp(_) => "switch",
        FabricEvent::EndPortDown(_) | FabricEvent::EndPortUp(_) => "node",
    }
}
