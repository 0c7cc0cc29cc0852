//! Prometheus metrics of the daemon (`prometheus-client`) and the HTTP endpoint serving them:
//! `GET /metrics` (OpenMetrics text), `GET /ready` (200 once the first routing is installed),
//! `GET /live` (200 while the process runs), and the live dashboard ([`crate::dashboard`]) when
//! one is attached. Off unless `[prometheus] listen` is set.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::state::Phase;

mod ha;
mod health;
pub use ha::{HaGauges, HaSource};
pub use health::{HealthGauges, PortRate};

/// The port-health monitor's per-port view for the dashboard ([`Telemetry::health_ports`]).
#[derive(Clone, Debug, Default)]
pub struct HealthPorts {
    /// Highest error rate per second, by switch GUID and port (ports with a nonzero rate).
    pub error_rates: std::collections::HashMap<(fabric_topology::Guid, fabric_topology::PortNum), f64>,
    /// Why the link on a port is isolated, on both ends of every isolated link.
    pub isolation_reasons: std::collections::HashMap<(fabric_topology::Guid, fabric_topology::PortNum), String>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FaultLabels {
    kind: String,
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: String,
}

/// Labels of `fabricd_sa_answers_total`: the attribute's IBA name (`other` for ids the SA does
/// not know, so that random ids cannot grow the label set), the request method, the status.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SaAnswerLabels {
    attribute: String,
    method: String,
    status: String,
}

/// Subnet Administration metrics, read from the service's counters at every scrape.
#[derive(Clone, Default)]
struct SaMetrics {
    service: Arc<std::sync::OnceLock<Arc<fabric_sa::SaService>>>,
    answers: Family<SaAnswerLabels, Counter>,
    malformed: Counter,
    persist_failures: Counter,
    serving: Gauge,
    snapshot_version: Gauge,
}

impl SaMetrics {
    fn register(r: &mut Registry) -> SaMetrics {
        let m = SaMetrics::default();
        r.register(
            "sa_answers",
            "Subnet Administration answers, by attribute, request method and MAD status (wire and gRPC SaQuery)",
            m.answers.clone(),
        );
        r.register(
            "sa_malformed",
            "SA MADs that were not SA requests at all (runts, wrong class or base version): not answered",
            m.malformed.clone(),
        );
        r.register(
            "sa_persist_failures",
            "ServiceRecord/InformInfo changes refused (ERR_NO_RESOURCES) because the SA registry could not be saved",
            m.persist_failures.clone(),
        );
        r.register(
            "sa_serving",
            "1 while the subnet administrator answers (master with a routing installed), else 0",
            m.serving.clone(),
        );
        r.register(
            "sa_snapshot_version",
            "Version of the subnet snapshot the SA answers from (grows with every snapshot built)",
            m.snapshot_version.clone(),
        );
        m
    }

    /// Moves the metrics to the service's current counters.
    fn refresh(&self) {
        let Some(sa) = self.service.get() else {
            return;
        };
        let c = sa.counters();
        let mut totals: std::collections::HashMap<SaAnswerLabels, u64> = std::collections::HashMap::new();
        for (&(attr, method, status), &n) in &c.answers {
            let labels = SaAnswerLabels {
                attribute: crate::sa::attribute_name(attr).unwrap_or("other").into(),
                method: crate::sa::method_label(method).into(),
                status: format!("0x{status:04x}"),
            };
            *totals.entry(labels).or_default() += n;
        }
        for (labels, n) in totals {
            let counter = self.answers.get_or_create(&labels);
            counter.inc_by(n.saturating_sub(counter.get()));
        }
        self.malformed.inc_by(c.malformed.saturating_sub(self.malformed.get()));
        self.persist_failures
            .inc_by(c.persist_failures.saturating_sub(self.persist_failures.get()));
        self.serving.set(i64::from(sa.serving()));
        self.snapshot_version
            .set(i64::try_from(sa.subnet().version).unwrap_or(i64::MAX));
    }
}

/// The daemon's metrics. Cheap to clone (shared handles).
#[derive(Clone)]
pub struct Telemetry {
    registry: Arc<Registry>,
    routed_seconds: Histogram,
    committed_seconds: Histogram,
    compute_seconds: Histogram,
    upload_seconds: Histogram,
    blocks_written: Counter,
    write_retries: Counter,
    faults: Family<FaultLabels, Counter>,
    generation: Gauge,
    phase: Family<PhaseLabels, Gauge>,
    generations_discarded: Counter,
    generations_failed: Counter,
    pending_faults: Gauge,
    missed_acks: Family<PhaseLabels, Counter>,
    update_phase_seconds: Family<PhaseLabels, Histogram>,
    subscribers: Gauge,
    driver_smps: Counter,
    driver_smp_retries: Counter,
    driver_smp_failures: Counter,
    escape_vl_ready: Gauge,
    update_restarts: Counter,
    unprogrammed_switches: Gauge,
    persistence_ok: Gauge,
    /// `None` = ready; else the reason `/ready` answers 503 with.
    not_ready: Arc<Mutex<Option<String>>>,
    validity: ValidityGauges,
    sa: SaMetrics,
    /// The live dashboard's routes, served on the same listener.
    dashboard: Arc<std::sync::OnceLock<Arc<crate::dashboard::Dashboard>>>,
    health: health::HealthMetrics,
    /// `fabricd_ha_*`: only with `[ha]` ([`Telemetry::with_ha`]).
    ha: Option<ha::HaMetrics>,
}

/// Validity of the installed routing (`fabricd_routing_*`): set at every commit.
#[derive(Clone, Default)]
struct ValidityGauges {
    valid: Gauge,
    unreachable_pairs: Gauge,
    engine_unreachable_pairs: Gauge,
    switch_unreachable_pairs: Gauge,
    fallback_destinations: Gauge,
    disconnected_pairs: Gauge,
    fallbacks: Counter,
    topology_agnostic: Gauge,
    fat_tree_found: Gauge,
    vl_layers: Gauge,
    data_vls: Gauge,
    vl_refusals: Counter,
}

impl ValidityGauges {
    fn register(r: &mut Registry) -> ValidityGauges {
        let g = ValidityGauges::default();
        r.register(
            "routing_valid",
            "1 when every connected pair of live end ports reaches its destination through the installed tables (base and escape LIDs), else 0",
            g.valid.clone(),
        );
        r.register(
            "routing_unreachable_pairs",
            "Connected pairs of live end ports unreachable through the installed tables (base + escape LIDs, after any fallback)",
            g.unreachable_pairs.clone(),
        );
        r.register(
            "routing_engine_unreachable_pairs",
            "Connected pairs the base routing engine left unreachable in the installed generation (before the fallback)",
            g.engine_unreachable_pairs.clone(),
        );
        r.register(
            "routing_switch_unreachable_pairs",
            "(Live end port, switch) pairs whose switch LID is unreachable through the installed tables after any fallback (checked when the fabric is not a fat-tree; a routing with such pairs is not valid)",
            g.switch_unreachable_pairs.clone(),
        );
        r.register(
            "routing_fallback_destinations",
            "Destination end ports whose base LIDs are routed by the Up*/Down* fallback instead of the engine",
            g.fallback_destinations.clone(),
        );
        r.register(
            "routing_topology_agnostic",
            "1 when the installed generation is routed in the topology-agnostic mode (ranking finds no fat-tree, or [routing] topology = \"any\"): base LIDs by Up*/Down*",
            g.topology_agnostic.clone(),
        );
        r.register(
            "routing_fat_tree_found",
            "1 when the ranking of the installed generation finds a fat-tree (adjacent-level cables in the majority, every switch ranked)",
            g.fat_tree_found.clone(),
        );
        r.register(
            "routing_vl_layers",
            "Virtual layers of the installed routing's VL layering (DFSSSP: one SL/VL per layer, each layer's channel dependencies acyclic); 0 for routings on one data VL",
            g.vl_layers.clone(),
        );
        r.register(
            "routing_data_vls",
            "Data VLs the installed routing occupies (its layers' VLs and, with escape LIDs, the escape VL)",
            g.data_vls.clone(),
        );
        r.register(
            "routing_vl_refusals",
            "Generations refused because their VL layering needs more data VLs than the driver's ports operate (nothing installed)",
            g.vl_refusals.clone(),
        );
        r.register(
            "routing_disconnected_pairs",
            "Pairs of live end ports with no path in the live fabric (different components; not counted as unreachable)",
            g.disconnected_pairs.clone(),
        );
        r.register(
            "routing_fallbacks",
            "Committed generations whose base routing needed the Up*/Down* fallback",
            g.fallbacks.clone(),
        );
        g
    }
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").finish_non_exhaustive()
    }
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry::new()
    }
}

/// Buckets from 1 ms doubling to ~33 s.
fn latency_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.001, 2.0, 16)
}

impl Telemetry {
    pub fn new() -> Telemetry {
        Telemetry::build(false)
    }

    /// [`Telemetry::new`] with the `fabricd_ha_*` metrics (`[ha]`); their values come from
    /// the source given to [`Telemetry::attach_ha`].
    pub fn with_ha() -> Telemetry {
        Telemetry::build(true)
    }

    fn build(with_ha: bool) -> Telemetry {
        let mut r = Registry::with_prefix("fabricd");
        let routed_seconds = Histogram::new(latency_buckets());
        let committed_seconds = Histogram::new(latency_buckets());
        let compute_seconds = Histogram::new(latency_buckets());
        let upload_seconds = Histogram::new(latency_buckets());
        let blocks_written = Counter::default();
        let write_retries = Counter::default();
        let faults = Family::<FaultLabels, Counter>::default();
        let generation = Gauge::default();
        let phase = Family::<PhaseLabels, Gauge>::default();
        let generations_discarded = Counter::default();
        let generations_failed = Counter::default();
        let pending_faults = Gauge::default();
        let missed_acks = Family::<PhaseLabels, Counter>::default();
        let update_phase_seconds =
            Family::<PhaseLabels, Histogram>::new_with_constructor(|| Histogram::new(latency_buckets()));
        let subscribers = Gauge::default();
        let driver_smps = Counter::default();
        let driver_smp_retries = Counter::default();
        let driver_smp_failures = Counter::default();
        let escape_vl_ready = Gauge::default();
        r.register(
            "escape_vl_ready",
            "1 when the escape VL (SL-to-VL tables) is programmed on every live port, else 0",
            escape_vl_ready.clone(),
        );
        r.register(
            "driver_smps",
            "SMPs sent by the umad driver (re-sends included)",
            driver_smps.clone(),
        );
        r.register(
            "driver_smp_retries",
            "SMPs re-sent by the umad driver after a loss or a bounce",
            driver_smp_retries.clone(),
        );
        r.register(
            "driver_smp_failures",
            "SMPs the umad driver gave up after all attempts",
            driver_smp_failures.clone(),
        );
        let update_restarts = Counter::default();
        r.register(
            "update_restarts",
            "Five-phase update: generations restarted from prepare because a fault broke the routing being installed",
            update_restarts.clone(),
        );
        r.register(
            "update_missed_acks",
            "Five-phase update: subscribers that missed an unpath or repath deadline",
            missed_acks.clone(),
        );
        r.register(
            "update_phase_seconds",
            "Five-phase update: time spent in each phase of a generation",
            update_phase_seconds.clone(),
        );
        r.register(
            "update_subscribers",
            "Five-phase update: subscribers connected",
            subscribers.clone(),
        );
        r.register(
            "reroute_routed_seconds",
            "Reroute latency from the first fault seen to the routing computed",
            routed_seconds.clone(),
        );
        r.register(
            "reroute_committed_seconds",
            "Reroute latency from the first fault seen to the generation committed (LFTs uploaded)",
            committed_seconds.clone(),
        );
        r.register(
            "compute_seconds",
            "Ranking, LID assignment and routing time",
            compute_seconds.clone(),
        );
        r.register(
            "upload_seconds",
            "LFT upload time of one generation",
            upload_seconds.clone(),
        );
        r.register(
            "lft_blocks_written",
            "LFT blocks written to switches",
            blocks_written.clone(),
        );
        r.register("lft_write_retries", "LFT block write retries", write_retries.clone());
        r.register("faults", "Topology changes seen, by kind and source", faults.clone());
        r.register("generation", "Current routing generation", generation.clone());
        r.register("phase", "Current update phase (1 for the active phase)", phase.clone());
        r.register(
            "generations_discarded",
            "Computed generations discarded because a newer one superseded them",
            generations_discarded.clone(),
        );
        r.register(
            "generations_failed",
            "Generations that could not be installed",
            generations_failed.clone(),
        );
        let unprogrammed_switches = Gauge::default();
        r.register(
            "unprogrammed_switches",
            "Switches of the routed fabric that do not hold every LFT block of the committed generation",
            unprogrammed_switches.clone(),
        );
        let persistence_ok = Gauge::default();
        persistence_ok.set(1);
        r.register(
            "persistence_ok",
            "1 while the state directory takes the state files, 0 when a write failed",
            persistence_ok.clone(),
        );
        r.register(
            "pending_faults",
            "Topology changes queued for the next generation",
            pending_faults.clone(),
        );
        let validity = ValidityGauges::register(&mut r);
        let sa = SaMetrics::register(&mut r);
        let health = health::HealthMetrics::register(&mut r);
        let ha = with_ha.then(|| ha::HaMetrics::register(&mut r));
        let t = Telemetry {
            registry: Arc::new(r),
            routed_seconds,
            committed_seconds,
            compute_seconds,
            upload_seconds,
            blocks_written,
            write_retries,
            faults,
            generation,
            phase,
            generations_discarded,
            generations_failed,
            pending_faults,
            missed_acks,
            update_phase_seconds,
            subscribers,
            driver_smps,
            driver_smp_retries,
            driver_smp_failures,
            escape_vl_ready,
            update_restarts,
            unprogrammed_switches,
            persistence_ok,
            not_ready: Arc::new(Mutex::new(Some("not ready: no generation installed".into()))),
            validity,
            sa,
            dashboard: Arc::default(),
            health,
            ha,
        };
        t.set_phase(Phase::Idle);
        t
    }

    /// The port-health state after a poll (fabric counts, error rates, isolated links).
    pub fn health_state(&self, g: &HealthGauges) {
        self.health.set(g);
    }

    /// The port-health monitor isolated one more link.
    pub fn health_isolated(&self) {
        self.health.isolated_one();
    }

    /// Counts a topology change (`kind`: link, switch, node; `source`: driver, virtual).
    pub fn fault(&self, kind: &str, source: &str) {
        self.faults
            .get_or_create(&FaultLabels {
                kind: kind.into(),
                source: source.into(),
            })
            .inc();
    }

    pub fn set_phase(&self, p: Phase) {
        for q in Phase::ALL {
            self.phase
                .get_or_create(&PhaseLabels { phase: q.name().into() })
                .set(i64::from(q == p));
        }
    }

    pub fn set_pending(&self, n: usize) {
        self.pending_faults.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Records a committed generation.
    pub fn committed(&self, generation: u64, routed_s: f64, committed_s: f64, compute_s: f64, upload_s: f64) {
        self.generation.set(i64::try_from(generation).unwrap_or(i64::MAX));
        self.routed_seconds.observe(routed_s);
        self.committed_seconds.observe(committed_s);
        self.compute_seconds.observe(compute_s);
        self.upload_seconds.observe(upload_s);
    }

    /// What `/ready` answers: `None` = 200, else 503 with the reason (see
    /// [`crate::state::Installation::readiness`]).
    pub fn set_readiness(&self, not_ready: Option<String>) {
        *self.not_ready.lock().unwrap_or_else(PoisonError::into_inner) = not_ready;
    }

    pub fn set_unprogrammed_switches(&self, n: usize) {
        self.unprogrammed_switches.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub fn set_persistence_ok(&self, ok: bool) {
        self.persistence_ok.set(i64::from(ok));
    }

    /// Validity of a committed generation's routing (`fabricd_routing_*`).
    pub fn routing_check(&self, c: &fabric_routing::RoutingCheck) {
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let v = &self.validity;
        v.valid.set(i64::from(c.valid));
        v.unreachable_pairs
            .set(n(c.unreachable_pairs.saturating_add(c.escape_unreachable_pairs)));
        v.engine_unreachable_pairs.set(n(c.engine_unreachable_pairs));
        v.switch_unreachable_pairs.set(n(c.switch_unreachable_pairs));
        v.fallback_destinations.set(n(c.fallback_destinations));
        v.disconnected_pairs.set(n(c.disconnected_pairs));
        if c.fallback != fabric_routing::Fallback::None {
            v.fallbacks.inc();
        }
    }

    /// Topology mode of a committed generation (`fabricd_routing_topology_agnostic`,
    /// `fabricd_routing_fat_tree_found`).
    pub fn topology_mode(&self, agnostic: bool, fat_tree_found: bool) {
        self.validity.topology_agnostic.set(i64::from(agnostic));
        self.validity.fat_tree_found.set(i64::from(fat_tree_found));
    }

    /// VL layering of a committed generation (`fabricd_routing_vl_layers`,
    /// `fabricd_routing_data_vls`).
    pub fn vl_layering(&self, layers: u8, data_vls: u8) {
        self.validity.vl_layers.set(i64::from(layers));
        self.validity.data_vls.set(i64::from(data_vls));
    }

    /// A generation refused for its VL layering (`fabricd_routing_vl_refusals_total`).
    pub fn vl_refused(&self) {
        self.validity.vl_refusals.inc();
    }

    pub fn blocks_written(&self, blocks: u64, retries: u64) {
        self.blocks_written.inc_by(blocks);
        self.write_retries.inc_by(retries);
    }

    /// A subscriber missed the deadline of `phase` (`unpath`, `repath`).
    pub fn missed_ack(&self, phase: &str) {
        self.missed_acks
            .get_or_create(&PhaseLabels { phase: phase.into() })
            .inc();
    }

    /// Phase durations of a five-phase update.
    pub fn update_timings(&self, report: &fabric_update::Report) {
        for (p, d) in &report.durations {
            self.update_phase_seconds
                .get_or_create(&PhaseLabels { phase: p.name().into() })
                .observe(d.as_secs_f64());
        }
    }

    /// A generation restarted from Prepare (a fault broke the routing being installed).
    pub fn update_restarted(&self) {
        self.update_restarts.inc();
    }

    /// The umad driver's cumulative SMP counters (sent, retries, failures); the counters move
    /// up to these values.
    pub fn driver_smp_counters(&self, sent: u64, retries: u64, failures: u64) {
        for (c, v) in [
            (&self.driver_smps, sent),
            (&self.driver_smp_retries, retries),
            (&self.driver_smp_failures, failures),
        ] {
            c.inc_by(v.saturating_sub(c.get()));
        }
    }

    /// Whether the driver's escape VL is programmed (`fabricd_escape_vl_ready`).
    pub fn set_escape_vl_ready(&self, ready: bool) {
        self.escape_vl_ready.set(i64::from(ready));
    }

    pub fn set_subscribers(&self, n: usize) {
        self.subscribers.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub fn discarded(&self) {
        self.generations_discarded.inc();
    }

    pub fn failed(&self) {
        self.generations_failed.inc();
    }

    /// The SA service whose counters the `fabricd_sa_*` metrics report (read at every scrape).
    /// The first one attached stays.
    pub fn attach_sa(&self, sa: Arc<fabric_sa::SaService>) {
        let _ = self.sa.service.set(sa);
    }

    /// The dashboard whose routes the endpoint also serves. The first one attached stays.
    pub fn attach_dashboard(&self, d: Arc<crate::dashboard::Dashboard>) {
        let _ = self.dashboard.set(d);
    }

    /// Hands the port-health monitor's per-port view to the dashboard (when one is attached):
    /// error rates and isolation reasons by switch GUID and port.
    pub fn health_ports(&self, view: HealthPorts) {
        if let Some(d) = self.dashboard.get() {
            d.set_port_error_rates(view.error_rates);
            d.set_isolation_reasons(view.isolation_reasons);
        }
    }

    /// The source of the `fabricd_ha_*` metrics (read at every scrape; also decides `/ready`
    /// while it reports a reason). Ignored without [`Telemetry::with_ha`]; the first stays.
    pub fn attach_ha(&self, source: HaSource) {
        if let Some(h) = &self.ha {
            h.attach(source);
        }
    }

    /// What `/ready` answers: `None` = 200, else the reason of the 503 (HA first: a standby or
    /// a fenced leader is not ready whatever its tables).
    pub fn not_ready(&self) -> Option<String> {
        if let Some(why) = self.ha.as_ref().and_then(ha::HaMetrics::read).and_then(|v| v.not_ready) {
            return Some(why);
        }
        self.not_ready.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        self.sa.refresh();
        if let Some(h) = &self.ha {
            h.refresh();
        }
        let mut s = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut s, &self.registry);
        s
    }

    fn respond(&self, req: &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let (status, ctype, body) = match (req.method(), req.uri().path()) {
            (&Method::GET, "/metrics") => (
                StatusCode::OK,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                self.encode(),
            ),
            (&Method::GET, "/live") => (StatusCode::OK, "text/plain", "live\n".into()),
            (&Method::GET, "/ready") => match self.not_ready() {
                None => (StatusCode::OK, "text/plain", "ready\n".into()),
                Some(why) => (StatusCode::SERVICE_UNAVAILABLE, "text/plain", format!("{why}\n")),
            },
            (&Method::GET, _) => (StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
            _ => (
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain",
                "method not allowed\n".into(),
            ),
        };
        let mut resp = Response::new(Full::new(Bytes::from(body)));
        *resp.status_mut() = status;
        if let Ok(v) = hyper::header::HeaderValue::from_str(ctype) {
            resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        resp
    }

    /// Serves the endpoint on `listener` until `shutdown` resolves.
    pub async fn serve(self, listener: TcpListener, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                a = listener.accept() => a,
            };
            let (stream, peer) = match accepted {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "prometheus endpoint: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let me = self.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let resp = match me.dashboard.get().and_then(|d| d.route(&req)) {
                        Some(r) => r,
                        None => me.respond(&req).map(http_body_util::BodyExt::boxed),
                    };
                    async move { Ok::<_, Infallible>(resp) }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, svc)
                    .await
                {
                    tracing::debug!(%peer, error = %e, "prometheus endpoint: connection error");
                }
            });
        }
    }
}

/// Binds the Prometheus endpoint.
pub async fn bind(listen: &str) -> std::io::Result<(TcpListener, SocketAddr)> {
    let l = TcpListener::bind(listen).await?;
    let a = l.local_addr()?;
    Ok((l, a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ha_metrics_only_with_ha_and_ready_follows_the_fence() {
        assert!(!Telemetry::new().encode().contains("fabricd_ha_"));
        let t = Telemetry::with_ha();
        t.set_readiness(None);
        let fenced = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let f = fenced.clone();
        t.attach_ha(Arc::new(move || {
            let fenced = f.load(std::sync::atomic::Ordering::SeqCst);
            HaGauges {
                leader: true,
                epoch: 42,
                lease_remaining_s: 3.5,
                fenced,
                etcd_reachable: !fenced,
                fenced_writes: 7,
                leader_changes: 2,
                not_ready: fenced.then(|| "fenced: the lease of epoch 42 was not renewed".into()),
            }
        }));
        assert_eq!(t.not_ready(), None);
        let s = t.encode();
        for line in [
            "fabricd_ha_leader 1",
            "fabricd_ha_epoch 42",
            "fabricd_ha_lease_remaining_seconds 3.5",
            "fabricd_ha_fenced 0",
            "fabricd_ha_etcd_reachable 1",
            "fabricd_ha_fenced_writes_total 7",
            "fabricd_ha_leader_changes_total 2",
        ] {
            assert!(s.contains(line), "{line}:\n{s}");
        }
        fenced.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(t.not_ready().unwrap().starts_with("fenced"));
        assert!(t.encode().contains("fabricd_ha_fenced 1"));
    }

    #[test]
    fn exposition_has_every_family() {
        let t = Telemetry::new();
        t.fault("link", "virtual");
        t.fault("link", "virtual");
        t.committed(3, 0.002, 0.004, 0.001, 0.001);
        t.blocks_written(12, 1);
        t.set_phase(Phase::Update);
        let s = t.encode();
        for needle in [
            "fabricd_reroute_routed_seconds_bucket",
            "fabricd_reroute_committed_seconds_count 1",
            "fabricd_lft_blocks_written_total 12",
            "fabricd_lft_write_retries_total 1",
            "fabricd_faults_total{kind=\"link\",source=\"virtual\"} 2",
            "fabricd_generation 3",
            "fabricd_phase{phase=\"update\"} 1",
            "fabricd_phase{phase=\"idle\"} 0",
            "fabricd_unprogrammed_switches 0",
            "fabricd_persistence_ok 1",
        ] {
            assert!(s.contains(needle), "missing {needle:?} in\n{s}");
        }
    }

    #[test]
    fn driver_smp_counters_follow_the_driver_totals() {
        let t = Telemetry::new();
        t.driver_smp_counters(10, 2, 0);
        t.driver_smp_counters(25, 5, 1);
        // A stale (smaller) reading never moves a counter back.
        t.driver_smp_counters(20, 5, 1);
        t.set_escape_vl_ready(true);
        let s = t.encode();
        for needle in [
            "fabricd_escape_vl_ready 1",
            "fabricd_driver_smps_total 25",
            "fabricd_driver_smp_retries_total 5",
            "fabricd_driver_smp_failures_total 1",
        ] {
            assert!(s.contains(needle), "missing {needle:?} in\n{s}");
        }
    }

    #[test]
    fn sa_metrics_follow_the_service_counters() {
        use fabric_sa::wire;
        let t = Telemetry::new();
        assert!(t.encode().contains("fabricd_sa_serving 0"));
        let sa = Arc::new(fabric_sa::SaService::new(
            fabric_sa::registry::Registry::default(),
            None,
        ));
        t.attach_sa(sa.clone());
        sa.set_serving(true);
        let mut mad = [0u8; wire::MAD_SIZE];
        let get = |attr: u16| wire::SaHeader {
            class_version: wire::SA_CLASS_VERSION,
            method: wire::METHOD_GET,
            attr_id: attr,
            ..wire::SaHeader::default()
        };
        let from = fabric_sa::Requester::default();
        for attr in [0x1234, 0x4321, wire::attr::NODE_RECORD] {
            get(attr).encode(&mut mad);
            assert!(sa.handle(&mad, &from, std::time::SystemTime::now()).is_some());
        }
        // A runt is counted as malformed, not answered.
        assert!(sa.handle(&mad[..10], &from, std::time::SystemTime::now()).is_none());
        let s = t.encode();
        let answers = |attr: &str| {
            s.lines()
                .find(|l| {
                    l.starts_with(&format!(
                        "fabricd_sa_answers_total{{attribute=\"{attr}\",method=\"get\""
                    ))
                })
                .unwrap_or_else(|| panic!("no answers of {attr} in\n{s}"))
                .rsplit(' ')
                .next()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        };
        assert_eq!(answers("other"), 2, "unknown attribute ids share one label");
        assert_eq!(answers("NodeRecord"), 1);
        for needle in [
            "fabricd_sa_malformed_total 1",
            "fabricd_sa_persist_failures_total 0",
            "fabricd_sa_serving 1",
            "fabricd_sa_snapshot_version 0",
        ] {
            assert!(s.contains(needle), "missing {needle:?} in\n{s}");
        }
        // A second scrape does not count twice.
        assert!(t.encode().contains("fabricd_sa_malformed_total 1"));
    }

    #[tokio::test]
    async fn http_endpoint_serves_metrics_and_readiness() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let t = Telemetry::new();
        let (l, addr) = bind("127.0.0.1:0").await.unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(t.clone().serve(l, async move {
            let _ = rx.await;
        }));
        async fn get(addr: SocketAddr, path: &str) -> String {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            out
        }
        let r = get(addr, "/ready").await;
        assert!(
            r.starts_with("HTTP/1.1 503") && r.ends_with("not ready: no generation installed\n"),
            "{r}"
        );
        t.committed(1, 0.1, 0.2, 0.05, 0.05);
        // A commit alone is not readiness: the event loop decides (switches, persistence).
        assert!(get(addr, "/ready").await.starts_with("HTTP/1.1 503"));
        t.set_readiness(None);
        assert!(get(addr, "/ready").await.starts_with("HTTP/1.1 200"));
        t.set_readiness(Some("not ready: 1 switch unprogrammed: 0x0000000000000010".into()));
        let r = get(addr, "/ready").await;
        assert!(
            r.starts_with("HTTP/1.1 503") && r.contains("1 switch unprogrammed"),
            "{r}"
        );
        assert!(get(addr, "/live").await.starts_with("HTTP/1.1 200"));
        let m = get(addr, "/metrics").await;
        assert!(m.contains("fabricd_generation 1"), "{m}");
        assert!(get(addr, "/nope").await.starts_with("HTTP/1.1 404"));
        let _ = tx.send(());
        server.await.unwrap();
    }
}
