//! What every subsystem of the driver shares: [`Inner`] (the transport, the [`State`] and the
//! locks and flags of the subsystems; see "Lock order" in the [parent module](super)) and the
//! helpers that build, submit and check SMPs and publish events.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};

use fabric_sa::SaService;
use fabric_southbound::DriverError;
use fabric_topology::{FabricEvent, Guid};
use tokio::sync::{mpsc, oneshot, Notify};

use super::state::{Sl2VlProgress, State};
use crate::config::UmadConfig;
use crate::mad::{Route, Smp};
use crate::transport::{Reply, Transport, TransportError};

/// The driver behind [`super::UmadDriver`]'s `Arc`; the background tasks hold a `Weak` to it.
pub(super) struct Inner {
    pub(super) cfg: UmadConfig,
    pub(super) tp: Transport,
    /// The subnet as last seen (lock `state`: short, never held across an `.await`).
    pub(super) state: Mutex<State>,
    /// Event subscribers (lock `subscribers`: only to send or add).
    pub(super) subscribers: Mutex<Vec<mpsc::UnboundedSender<FabricEvent>>>,
    /// The transport's trap channel until the trap listener takes it (lock `traps`).
    pub(super) traps: Mutex<Option<mpsc::UnboundedReceiver<Smp>>>,
    /// Wakes the sweeper (trap 128, explicit requests).
    pub(super) wake: Arc<Notify>,
    /// The background tasks (trap listener, sweeper, SL-to-VL programmer) were spawned.
    pub(super) sweeper_started: AtomicBool,
    /// Serialises the operations that read port states, change directed routes or activate
    /// ports (see "Lock order"); held across `.await`s.
    pub(super) sweep_lock: tokio::sync::Mutex<()>,
    /// Light sweeps run (paces the probes of silent switches).
    pub(super) sweeps: AtomicU64,
    /// SL-to-VL programming: progress (lock `sl2vl`: short, never held across an `.await`),
    /// the programmer's wake-up, and the waiters' wake-up.
    pub(super) sl2vl: Mutex<Sl2VlProgress>,
    pub(super) sl2vl_kick: Arc<Notify>,
    pub(super) sl2vl_finished: Notify,
    /// Another subnet manager is master: no sweep, nothing is written.
    pub(super) standby: AtomicBool,
    /// The Subnet Administration service this driver keeps current
    /// ([`SouthboundDriver::attach_sa`](fabric_southbound::SouthboundDriver::attach_sa);
    /// see [`super::sa_snapshot`]).
    pub(super) sa: OnceLock<Arc<SaService>>,
    /// Serialises the SA snapshot's producers (lock `sa_publish`, taken before `state`; holds
    /// the version of the last snapshot published).
    pub(super) sa_publish: Mutex<u64>,
    /// PerfMgt ClassPortInfo CapabilityMask per agent (switch GUID or end-port GUID), read
    /// once by [`super::counters`] (lock `perf_caps`: short, never nested, never across an
    /// `.await`).
    pub(super) perf_caps: Mutex<std::collections::HashMap<Guid, u16>>,
}

impl Inner {
    /// A driver on transport `tp` that knows nothing yet; `traps` is the transport's trap channel.
    pub(super) fn new(cfg: UmadConfig, tp: Transport, traps: mpsc::UnboundedReceiver<Smp>) -> Inner {
        Inner {
            cfg,
            tp,
            state: Mutex::new(State::default()),
            subscribers: Mutex::new(Vec::new()),
            traps: Mutex::new(Some(traps)),
            wake: Arc::new(Notify::new()),
            sweeper_started: false.into(),
            sweep_lock: tokio::sync::Mutex::new(()),
            sweeps: 0.into(),
            sl2vl: Mutex::new(Sl2VlProgress::default()),
            sl2vl_kick: Arc::new(Notify::new()),
            sl2vl_finished: Notify::new(),
            standby: AtomicBool::new(false),
            sa: OnceLock::new(),
            sa_publish: Mutex::new(0),
            perf_caps: Mutex::new(std::collections::HashMap::new()),
        }
    }
}

/// Locks a std mutex, recovering it if a panicking holder poisoned it.
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A transport failure of operation `op` on `guid` as a driver error.
pub(super) fn tp_err(guid: Guid, op: &'static str, e: TransportError) -> DriverError {
    match e {
        TransportError::Timeout { attempts } => DriverError::Transient { guid, op, attempts },
        TransportError::Closed => DriverError::Protocol {
            guid: Some(guid),
            message: "umad transport closed".into(),
        },
        TransportError::Mad(m) => DriverError::Protocol {
            guid: Some(guid),
            message: m,
        },
    }
}

/// A reply whose MAD status is not 0 as a driver error naming `guid` and `what`.
pub(super) fn check_status(guid: Guid, what: &str, r: &Reply) -> Result<(), DriverError> {
    let s = r.smp.status();
    if s != 0 {
        return Err(DriverError::Protocol {
            guid: Some(guid),
            message: format!("{what}: MAD status {s:#06x}"),
        });
    }
    Ok(())
}

/// A submitted SMP's reply to come.
pub(super) type Pending = oneshot::Receiver<Result<Reply, TransportError>>;

/// Builds an SMP and queues it at normal priority.
pub(super) fn submit(
    tp: &Transport,
    route: &Route,
    method: u8,
    attr: u16,
    modifier: u32,
    data: &[u8; 64],
) -> Result<Pending, DriverError> {
    let smp = Smp::request(route, method, attr, modifier, data).map_err(|e| DriverError::Protocol {
        guid: None,
        message: e.to_string(),
    })?;
    Ok(tp.submit(route.clone(), smp))
}

/// Attribute data of a Get.
pub(super) const ZERO: [u8; 64] = [0u8; 64];

/// Sends `events` to every subscriber, forgetting those that are gone.
pub(super) fn emit(inner: &Inner, events: &[FabricEvent]) {
    if events.is_empty() {
        return;
    }
    let mut subs = lock(&inner.subscribers);
    subs.retain(|s| events.iter().all(|e| s.send(e.clone()).is_ok()));
}
