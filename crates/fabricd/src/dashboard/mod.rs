//! The live dashboard: a read-only web page served on the Prometheus listener (`[prometheus]
//! listen`, same address and access rules as `/metrics`).
//!
//! * `GET /` and `GET /dashboard`: the page; `/dashboard/app.js`, `/dashboard/app.css` its
//!   script and style (embedded in the binary, no external resource);
//! * `GET /api/status`, `/api/fabric`, `/api/excluded`, `/api/jobs`, `/api/timeline`,
//!   `/api/loads`: JSON documents (see [`view`]);
//! * `GET /events`: server-sent events, one per daemon notice (`notice`), plus `loads` when the
//!   congestion heatmap of a new generation is ready and `lagged` when notices were lost.
//!
//! A follower task reads the daemon's notices (the broadcast that `WatchEvents` reads), keeps the
//! timeline (the last [`TIMELINE_LEN`] events), re-broadcasts each notice once as SSE text to the
//! page's clients, and, after each commit, computes the per-port loads of the installed routing
//! ([`fabric_metrics::port_loads`]) on the analysis pool, cached per generation. Nothing here
//! is on the path of a generation: a slow computation only delays the heatmap.
//!
//! SSE clients are bounded ([`MAX_SSE_CLIENTS`], 503 beyond); each reads its own broadcast
//! receiver, so a slow client lags (and is told to reload its state) without blocking anyone.

mod follower;
mod http;
mod view;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use fabric_topology::{Guid, PortNum};
use serde::Serialize;
use tokio::sync::{broadcast, Semaphore};

use crate::config::MetricsConfig;
use crate::state::{Notice, Published};

pub use http::DashboardBody;

/// Events kept in the timeline.
pub const TIMELINE_LEN: usize = 256;
/// Server-sent-event clients served at once.
pub const MAX_SSE_CLIENTS: usize = 16;

/// One event of the generation and phase timeline.
#[derive(Clone, Debug, Serialize)]
pub struct TimelineEvent {
    pub at_unix_ms: i64,
    /// `phase`, `committed`, `fault`, `acks-missed`, `aborted`, `restarted`, `lagged`.
    pub kind: &'static str,
    pub generation: u64,
    /// The phase entered (`phase` events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<&'static str>,
    /// The event in words.
    pub text: String,
    /// Timings of a `committed` event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings: Option<view::TimingsView>,
}

/// Per-port loads of one generation, as `/api/loads` shows them.
#[derive(Debug, Serialize)]
pub struct LoadsView {
    pub generation: u64,
    /// Live end ports of the patterns.
    pub end_ports: usize,
    /// Whether `worst_shift` loads were computed (`[metrics] shifts`).
    pub shifts: bool,
    pub max_all_to_all: u64,
    pub max_worst_shift: u32,
    /// Computation time, ms.
    pub compute_ms: f64,
    /// `[switch GUID, port, all-to-all paths, worst-shift paths]` per directed switch port.
    pub ports: Vec<(String, PortNum, u64, u32)>,
}

/// State of the loads cache.
#[derive(Default)]
struct Loads {
    /// The last computed loads.
    ready: Option<Arc<LoadsView>>,
    /// Generation being computed.
    computing: Option<u64>,
}

/// The dashboard's shared state (one per daemon).
pub struct Dashboard {
    published: Arc<ArcSwap<Published>>,
    pool: Arc<rayon::ThreadPool>,
    metrics_config: Arc<ArcSwap<MetricsConfig>>,
    /// SSE text of each event, for the page's clients.
    events: broadcast::Sender<Arc<str>>,
    sse_slots: Arc<Semaphore>,
    timeline: Mutex<VecDeque<TimelineEvent>>,
    loads: Mutex<Loads>,
    known_levels: Mutex<HashMap<Guid, u32>>,
    /// Port-health monitor input: errors per second by (switch GUID, port).
    error_rates: ArcSwap<HashMap<(Guid, PortNum), f64>>,
    /// Port-health monitor input: why a port is isolated, by (switch GUID, port).
    isolation_reasons: ArcSwap<HashMap<(Guid, PortNum), String>>,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard").finish_non_exhaustive()
    }
}

impl Dashboard {
    /// Creates the dashboard and starts its follower of `notices` (call before the event loop
    /// runs, so that the timeline has the first generation).
    pub fn start(
        published: Arc<ArcSwap<Published>>,
        notices: &broadcast::Sender<Notice>,
        pool: Arc<rayon::ThreadPool>,
        metrics_config: Arc<ArcSwap<MetricsConfig>>,
    ) -> Arc<Dashboard> {
        let (events, _) = broadcast::channel(256);
        let d = Arc::new(Dashboard {
            published,
            pool,
            metrics_config,
            events,
            sse_slots: Arc::new(Semaphore::new(MAX_SSE_CLIENTS)),
            timeline: Mutex::new(VecDeque::with_capacity(TIMELINE_LEN)),
            loads: Mutex::new(Loads::default()),
            known_levels: Mutex::new(HashMap::new()),
            error_rates: ArcSwap::from_pointee(HashMap::new()),
            isolation_reasons: ArcSwap::from_pointee(HashMap::new()),
        });
        tokio::spawn(follower::run(Arc::downgrade(&d), notices.subscribe()));
        d
    }

    /// Port error rates (errors per second by switch GUID and port) to colour the ports with;
    /// the port-health monitor calls this after each reading. Replaces the previous rates.
    pub fn set_port_error_rates(&self, rates: HashMap<(Guid, PortNum), f64>) {
        self.error_rates.store(Arc::new(rates));
    }

    /// Why ports are isolated (the reason of the port-health policy's virtual faults), by
    /// switch GUID and port; shown next to the excluded ports. Replaces the previous reasons.
    pub fn set_isolation_reasons(&self, reasons: HashMap<(Guid, PortNum), String>) {
        self.isolation_reasons.store(Arc::new(reasons));
    }

    fn push_timeline(&self, e: TimelineEvent) {
        let mut t = self.timeline.lock().unwrap_or_else(PoisonError::into_inner);
        if t.len() == TIMELINE_LEN {
            t.pop_front();
        }
        t.push_back(e);
    }

    fn timeline(&self) -> Vec<TimelineEvent> {
        self.timeline
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    fn fabric_view(&self) -> view::FabricView {
        let p = self.published.load();
        let mut known = self.known_levels.lock().unwrap_or_else(PoisonError::into_inner);
        view::fabric(&p, &mut known, &self.error_rates.load())
    }

    fn problems_view(&self) -> view::ProblemsView {
        let fv = self.fabric_view();
        view::problems(&self.published.load(), &fv, &self.isolation_reasons.load())
    }

    /// The cached loads (of the installed generation or an older one while it is computed).
    fn loads(&self) -> Option<Arc<LoadsView>> {
        self.loads.lock().unwrap_or_else(PoisonError::into_inner).ready.clone()
    }

    /// Starts computing the loads of the installed generation on the analysis pool unless they
    /// are cached or being computed. Never blocks.
    fn refresh_loads(self: &Arc<Self>) {
        let Some(g) = self.published.load().current.clone() else {
            return;
        };
        {
            let mut l = self.loads.lock().unwrap_or_else(PoisonError::into_inner);
            if l.ready.as_ref().is_some_and(|r| r.generation == g.number) || l.computing.is_some() {
                return;
            }
            l.computing = Some(g.number);
        }
        let shifts = self.metrics_config.load().shifts;
        let me = Arc::downgrade(self);
        self.pool.spawn(move || {
            let t = std::time::Instant::now();
            let pl = fabric_metrics::port_loads(&g.fabric, &g.lids, &g.lfts, shifts);
            let view = LoadsView {
                generation: g.number,
                end_ports: pl.end_ports,
                shifts: pl.shifts,
                max_all_to_all: pl.ports.iter().map(|p| p.all_to_all).max().unwrap_or(0),
                max_worst_shift: pl.ports.iter().map(|p| p.worst_shift).max().unwrap_or(0),
                compute_ms: t.elapsed().as_secs_f64() * 1e3,
                ports: pl
                    .ports
                    .iter()
                    .map(|p| {
                        (
                            fabric_topology::fmt_guid(p.port.guid),
                            p.port.port,
                            p.all_to_all,
                            p.worst_shift,
                        )
                    })
                    .collect(),
            };
            let Some(me) = me.upgrade() else { return };
            tracing::debug!(
                generation = view.generation,
                ports = view.ports.len(),
                compute_ms = format_args!("{:.1}", view.compute_ms),
                "dashboard: port loads computed"
            );
            let generation = view.generation;
            {
                let mut l = me.loads.lock().unwrap_or_else(PoisonError::into_inner);
                l.ready = Some(Arc::new(view));
                l.computing = None;
            }
            let _ = me.events.send(follower::sse_text(
                "loads",
                &serde_json::json!({ "generation": generation }),
            ));
            // A newer generation may have been committed meanwhile.
            me.refresh_loads();
        });
    }
}
