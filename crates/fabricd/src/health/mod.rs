//! The port-health monitor (docs/port-health.md).
//!
//! A background task, outside the event loop: every `[health] interval_s` it reads the
//! counters of every cabled switch port and end port of the fabric through the driver
//! ([`fabric_southbound::SouthboundDriver::read_port_counters`]), computes rates, counts link
//! flaps from the daemon's notices, applies the policy and, with `action = "isolate"`, asks the
//! event loop for a virtual link-down ([`crate::event_loop::Request::Isolate`]) whose reason it
//! keeps in `health.json`. Readers (gRPC, Prometheus) see a [`HealthSnapshot`] swapped through
//! `arc-swap`; the operator's clear goes to the task as a command.
//!
//! * `rates`, `flaps`, `policy`, `safety`: pure (given `now`), unit-tested;
//! * `store`: `health.json`; `summary`: fabric counts; `monitor`: the task; `rows`: the
//!   snapshot's rows kept between publications.

mod flaps;
mod monitor;
pub mod names;
pub mod policy;
mod rates;
mod rows;
mod safety;
pub mod store;
mod summary;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use fabric_southbound::{Counter, CounterPort};
use tokio::sync::{mpsc, oneshot};

use crate::config::HealthConfig;
pub use monitor::{start, MonitorIo};
pub use summary::FabricSummary;

/// A port's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PortState {
    Ok,
    /// Over a threshold or flapping (reported, or its isolation refused), or a counter saturated.
    Warning,
    /// Its link is isolated by the monitor.
    Isolated,
}

impl PortState {
    /// `ok`, `warning`, `isolated`.
    pub fn name(self) -> &'static str {
        match self {
            PortState::Ok => "ok",
            PortState::Warning => "warning",
            PortState::Isolated => "isolated",
        }
    }
}

/// One counter of a port as shown.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CounterView {
    pub counter: Counter,
    pub value: u64,
    /// Per second; `None` before two reads or when saturated.
    pub rate: Option<f64>,
    pub saturated: bool,
}

/// The health of one port.
#[derive(Clone, Debug, PartialEq)]
pub struct PortHealth {
    pub port: CounterPort,
    /// `switch name [port]` or the end port's name.
    pub name: String,
    /// What the port is cabled to, in words.
    pub remote: String,
    pub state: PortState,
    /// Why it is not ok (or empty).
    pub reason: String,
    /// Every counter (empty before the first good read).
    pub counters: Vec<CounterView>,
    /// Highest error rate, per second.
    pub max_error_rate: f64,
    /// Link-downs within the flap window.
    pub flaps: u32,
    /// Why the last read failed (empty when it did not).
    pub read_error: String,
}

impl PortHealth {
    /// Whether it has anything to show (not ok, errors, flaps, a failed read).
    pub fn notable(&self) -> bool {
        self.state != PortState::Ok
            || self.max_error_rate > 0.0
            || self.flaps > 0
            || !self.read_error.is_empty()
            || self.counters.iter().any(|c| c.saturated)
    }
}

/// What readers see.
#[derive(Clone, Debug, Default)]
pub struct HealthSnapshot {
    /// `[health] enabled`.
    pub enabled: bool,
    /// Notable ports first, worst first (isolated, warning, then by rate and flaps); ports
    /// without anything to show follow. Rows are shared between snapshots (a publication
    /// rebuilds only those of ports that changed).
    pub ports: Vec<Arc<PortHealth>>,
    /// Why counters are not read (driver without counters, a failed read), empty when they are.
    pub counters_note: String,
    /// Polls done, and when the last one ended (ms since the Unix epoch; 0: none yet).
    pub polls: u64,
    pub last_poll_unix_ms: i64,
    pub interval_s: u64,
    /// The policy in words (`action`, thresholds, flaps).
    pub policy: String,
    /// Links isolated by the monitor, with their reasons.
    pub isolated: Vec<store::Isolation>,
    /// Refusals of the last poll: ports the policy wanted isolated that were reported instead.
    pub refused: Vec<String>,
    pub fabric: FabricSummary,
}

/// What a clear targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClearTarget {
    All,
    Port(CounterPort),
}

pub(crate) enum Command {
    Clear {
        target: ClearTarget,
        reply: oneshot::Sender<Result<Vec<String>, String>>,
    },
}

/// The monitor as the gRPC handlers and the daemon see it.
pub struct HealthHandle {
    snapshot: ArcSwap<HealthSnapshot>,
    config: ArcSwap<HealthConfig>,
    fault_injection: AtomicBool,
    commands: mpsc::Sender<Command>,
}

impl HealthHandle {
    /// The latest snapshot.
    pub fn snapshot(&self) -> Arc<HealthSnapshot> {
        self.snapshot.load_full()
    }

    /// The `[health]` in force.
    pub fn config(&self) -> Arc<HealthConfig> {
        self.config.load_full()
    }

    /// New settings (`SIGHUP`): `[health]` and `[fault_injection] enabled` (the drill's gate).
    pub fn reload(&self, c: HealthConfig, fault_injection: bool) {
        self.config.store(Arc::new(c));
        self.fault_injection.store(fault_injection, Ordering::Relaxed);
    }

    /// `[fault_injection] enabled` (InjectPortErrors is a drill).
    pub fn fault_injection(&self) -> bool {
        self.fault_injection.load(Ordering::Relaxed)
    }

    /// Clears isolations and warnings; answers what was cleared, in words.
    pub async fn clear(&self, target: ClearTarget) -> Result<Vec<String>, String> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Clear { target, reply: tx })
            .await
            .map_err(|_| "the health monitor is stopped".to_string())?;
        rx.await.map_err(|_| "the health monitor is stopped".to_string())?
    }
}
