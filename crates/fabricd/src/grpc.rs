//! The gRPC northbound (`fabricd.v1.FabricManager`).
//!
//! Read-only calls answer from the [`Published`] snapshot (no lock, no round trip through the
//! event loop); calls that change state are sent to the event loop as [`LoopRequest`]s with a oneshot
//! reply. Names are resolved and requests validated here, so that a bad request gets a precise
//! `INVALID_ARGUMENT` without disturbing the loop. Heavy reads (metrics, reachability, OpenSM
//! dumps) run on the analysis pool or a blocking thread, never on a tokio worker.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use fabric_proto::v1 as pb;
use fabric_proto::v1::fabric_manager_server::FabricManager;
use fabric_routing::{check, write_opensm_lfts};
use fabric_southbound::MockFabric;
use fabric_topology::{fmt_guid, parse_guid, EndPortId, Fabric, Lid, LinkState, Remote, TopologyError};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use crate::config::MetricsConfig;
use crate::event_loop::{event_kind, FaultRequest, FaultTarget, LoopError, Request as LoopRequest, UpdateNotice};
use crate::persist::JobPort;
use crate::state::{Generation, Notice, Phase, Published, RerouteTimings};

/// Longest job id.
pub const MAX_JOB_ID_LEN: usize = 128;

/// Most elements one `WhatIf` plan takes down.
pub const MAX_WHAT_IF_CHANGES: usize = 4096;

/// Most problems one error message lists (the rest are counted).
pub const MAX_LISTED_PROBLEMS: usize = 20;

/// Longest error text built from a request, bytes (the rest is counted).
pub const MAX_ERROR_TEXT: usize = 4096;

/// Longest client-given name quoted in an error, characters.
const MAX_QUOTED_KEY: usize = 80;

/// `text` cut to at most `max` bytes (at a character boundary), with a note
/// `… (N more bytes)` when cut.
pub fn bounded_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &text[..end], text.len() - end)
}

/// The problems of a request, `; `-separated: the first [`MAX_LISTED_PROBLEMS`], then
/// `… (N more)`, the whole bounded by [`MAX_ERROR_TEXT`] (a request with 10⁶ bad entries gets a
/// short error, not one of megabytes).
pub fn bounded_problems(problems: &[String]) -> String {
    let mut text = problems
        .iter()
        .take(MAX_LISTED_PROBLEMS)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("; ");
    if problems.len() > MAX_LISTED_PROBLEMS {
        text.push_str(&format!("; … ({} more)", problems.len() - MAX_LISTED_PROBLEMS));
    }
    bounded_text(&text, MAX_ERROR_TEXT)
}

/// A client-given name, quoted for an error message: at most [`MAX_QUOTED_KEY`] characters,
/// then `… (N more bytes)`.
fn quoted_key(key: &str) -> String {
    match key.char_indices().nth(MAX_QUOTED_KEY) {
        None => format!("{key:?}"),
        Some((end, _)) => format!("{:?}… ({} more bytes)", &key[..end], key.len() - end),
    }
}

/// Cached congestion metrics of one generation.
#[derive(Clone, Debug)]
struct CoreMetrics {
    valid: bool,
    unreachable_pairs: u64,
    deadlock_free: bool,
    metrics: fabric_metrics::Metrics,
    floor: fabric_metrics::RpFloor,
    compute_ms: f64,
}

impl CoreMetrics {
    /// Validity, deadlock freedom, the static metrics and the `mu_rp` floor of one routing.
    fn compute(
        fabric: &Fabric,
        ranking: &fabric_ranking::Ranking,
        lids: &fabric_routing::LidPlan,
        lfts: &fabric_routing::Lfts,
        opts: &fabric_metrics::MetricsOptions,
    ) -> CoreMetrics {
        let t = Instant::now();
        let v = check::validity(fabric, lids, lfts);
        let deadlock_free = check::deadlock_free(fabric, ranking, lids, lfts);
        let metrics = fabric_metrics::compute(fabric, lids, lfts, opts);
        let floor = fabric_metrics::rp_floor(fabric, &ranking.level);
        CoreMetrics {
            valid: v.valid,
            unreachable_pairs: v.unreachable_count + v.escape_unreachable_count,
            deadlock_free,
            metrics,
            floor,
            compute_ms: t.elapsed().as_secs_f64() * 1e3,
        }
    }

    fn summary(&self) -> pb::MetricsSummary {
        let m = &self.metrics;
        pb::MetricsSummary {
            mu_sp: m.mu_sp,
            mu_rp: Some(rp_stats(&m.mu_rp)),
            mu_rp_floor: Some(rp_floor(&self.floor, &m.mu_rp)),
            mu_a2a: m.mu_a2a,
        }
    }
}

fn metrics_options(cfg: &MetricsConfig) -> fabric_metrics::MetricsOptions {
    fabric_metrics::MetricsOptions {
        random_perms: cfg.random_perms,
        seed: cfg.seed,
        all_to_all: cfg.all_to_all,
        shifts: cfg.shifts,
    }
}

fn rp_stats(r: &fabric_metrics::RpStats) -> pb::RpStats {
    pb::RpStats {
        median: r.median,
        q1: r.q1,
        q39: r.q39,
    }
}

fn rp_floor(f: &fabric_metrics::RpFloor, measured: &fabric_metrics::RpStats) -> pb::RpFloor {
    pb::RpFloor {
        median: f.median,
        p_above_median: f.p_at_least(f.median + 1),
        measured_p_above_median: measured.share_at_least(f.median + 1),
    }
}

/// The element a fault injection or a plan names (kind + switch/port or node), resolved
/// against the cabling.
fn resolve_target(f: &Fabric, kind: i32, switch: &str, port: u32, node: &str) -> Result<FaultTarget, Status> {
    match pb::FaultKind::try_from(kind).unwrap_or(pb::FaultKind::Unspecified) {
        pb::FaultKind::Link => {
            let s = f.switch(resolve_switch(f, switch)?);
            let out_of_range = || TopologyError::PortOutOfRange {
                guid: s.guid,
                port,
                nports: u32::from(s.nports),
            };
            let target = FaultTarget::Link {
                switch: s.guid,
                port: u8::try_from(port).map_err(|_| Status::invalid_argument(out_of_range().to_string()))?,
            };
            f.check_event(&target.event(false))
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            Ok(target)
        }
        pb::FaultKind::Switch => Ok(FaultTarget::Switch(f.switch(resolve_switch(f, switch)?).guid)),
        pb::FaultKind::Node => {
            let ep = resolve_end_port(f, node).map_err(Status::invalid_argument)?;
            Ok(FaultTarget::Node(f.end_port(ep).port_guid))
        }
        pb::FaultKind::Unspecified => Err(Status::invalid_argument(
            "fault kind is required (link, switch or node)",
        )),
    }
}

/// State shared by every handler.
pub struct Shared {
    pub published: Arc<ArcSwap<Published>>,
    pub events: mpsc::Sender<LoopRequest>,
    pub notices: broadcast::Sender<Notice>,
    /// The simulated fabric, when the driver is `mock` (Trace, VerifyReachability).
    pub mock: Option<Arc<MockFabric>>,
    /// Current `[metrics]` settings (reloadable).
    pub metrics_config: Arc<ArcSwap<MetricsConfig>>,
    /// Pool for metrics computations (separate from the routing pool).
    pub analysis_pool: Arc<rayon::ThreadPool>,
    /// The southbound driver, for its live counters and escape-VL state (Status).
    pub driver: Option<Arc<dyn fabric_southbound::SouthboundDriver>>,
    metrics_cache: tokio::sync::Mutex<Option<(u64, MetricsConfig, Arc<CoreMetrics>)>>,
    /// One maintenance plan (`WhatIf`) is computed at a time.
    what_if: tokio::sync::Mutex<()>,
}

impl Shared {
    pub fn new(
        published: Arc<ArcSwap<Published>>,
        events: mpsc::Sender<LoopRequest>,
        notices: broadcast::Sender<Notice>,
        mock: Option<Arc<MockFabric>>,
        metrics_config: Arc<ArcSwap<MetricsConfig>>,
        analysis_pool: Arc<rayon::ThreadPool>,
    ) -> Shared {
        Shared {
            published,
            events,
            notices,
            mock,
            metrics_config,
            analysis_pool,
            driver: None,
            metrics_cache: tokio::sync::Mutex::new(None),
            what_if: tokio::sync::Mutex::new(()),
        }
    }

    /// Attaches the southbound driver (Status reports its SMP counters and escape-VL state).
    pub fn with_driver(mut self, driver: Arc<dyn fabric_southbound::SouthboundDriver>) -> Shared {
        self.driver = Some(driver);
        self
    }
}

/// The `FabricManager` service.
#[derive(Clone)]
pub struct FabricService {
    shared: Arc<Shared>,
}

impl FabricService {
    pub fn new(shared: Arc<Shared>) -> FabricService {
        FabricService { shared }
    }

    fn snapshot(&self) -> Arc<Published> {
        self.shared.published.load_full()
    }

    fn current(&self) -> Result<(Arc<Published>, Arc<Generation>), Status> {
        let p = self.snapshot();
        match p.current.clone() {
            Some(g) => Ok((p, g)),
            None => Err(Status::failed_precondition("no routing generation is installed yet")),
        }
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, LoopError>>) -> LoopRequest,
    ) -> Result<T, Status> {
        let (tx, rx) = oneshot::channel();
        self.shared
            .events
            .send(make(tx))
            .await
            .map_err(|_| Status::unavailable("fabricd is shutting down"))?;
        match rx.await {
            Ok(r) => r.map_err(loop_status),
            Err(_) => Err(Status::unavailable("fabricd is shutting down")),
        }
    }

    /// The congestion metrics of generation `g` (cached per generation and settings; computed
    /// on the analysis pool), and whether they were computed now.
    async fn core_metrics(&self, g: &Arc<Generation>) -> Result<(Arc<CoreMetrics>, bool), Status> {
        let cfg = (*self.shared.metrics_config.load_full()).clone();
        let mut cache = self.shared.metrics_cache.lock().await;
        if let Some((n, c, m)) = cache.as_ref() {
            if *n == g.number && *c == cfg {
                return Ok((m.clone(), false));
            }
        }
        let g2 = g.clone();
        let opts = metrics_options(&cfg);
        let (tx, rx) = oneshot::channel();
        self.shared.analysis_pool.spawn(move || {
            let _ = tx.send(CoreMetrics::compute(&g2.fabric, &g2.ranking, &g2.lids, &g2.lfts, &opts));
        });
        let m = Arc::new(rx.await.map_err(|_| Status::internal("metrics computation failed"))?);
        *cache = Some((g.number, cfg, m.clone()));
        Ok((m, true))
    }

    fn mock(&self) -> Result<&Arc<MockFabric>, Status> {
        let p = self.snapshot();
        self.shared.mock.as_ref().ok_or_else(|| {
            Status::failed_precondition(format!(
                "driver {:?} does not simulate packets (mock driver only)",
                p.driver
            ))
        })
    }
}

/// A trace through the LFTs of generation `g` (drivers that do not simulate packets): the
/// switches crossed from end port `src` towards `dlid`, over the links live in that generation.
fn lft_trace(g: &Generation, src: EndPortId, dlid: Lid) -> pb::TraceResponse {
    let f = &g.fabric;
    let mut hops = Vec::new();
    match check::trace(f, &g.lfts, src, dlid, &mut hops) {
        Ok(_) => {
            let mut in_port = f.end_port(src).attach.map_or(0, |(_, p)| p);
            let mut out = Vec::with_capacity(hops.len());
            for &(sw, port) in &hops {
                let s = f.switch(sw);
                out.push(pb::Hop {
                    switch_guid: s.guid,
                    switch_name: s.desc.clone(),
                    in_port: u32::from(in_port),
                    out_port: u32::from(port),
                });
                in_port = match s.ports.get(port as usize).map(|p| p.remote) {
                    Some(Remote::Switch { port: rp, .. }) => rp,
                    _ => 0,
                };
            }
            pb::TraceResponse {
                dlid,
                hops: out,
                reached: true,
                error: String::new(),
            }
        }
        Err(e) => pb::TraceResponse {
            dlid,
            hops: Vec::new(),
            reached: false,
            error: e.to_string(),
        },
    }
}

/// gRPC status of a loop refusal.
fn loop_status(e: LoopError) -> Status {
    match e {
        LoopError::InvalidArgument(m) => Status::invalid_argument(m),
        LoopError::FailedPrecondition(m) => Status::failed_precondition(m),
        LoopError::NotFound(m) => Status::not_found(m),
        LoopError::Internal(m) => Status::internal(m),
        LoopError::ShuttingDown => Status::unavailable("fabricd is shutting down"),
    }
}

/// Service level of the base LIDs (data VLs).
pub const BASE_SL: u32 = 0;
/// Service level of the escape LIDs (mapped to the escape VL, n - 1).
pub const ESCAPE_SL: u32 = 1;

type UpdateStream = Pin<Box<dyn Stream<Item = Result<pb::UpdateNotice, Status>> + Send + 'static>>;

/// Sends `Unsubscribe` to the loop when a subscriber's stream is dropped (client gone).
struct SubscriberGuard {
    id: fabric_update::SubscriberId,
    events: mpsc::Sender<LoopRequest>,
}

impl Drop for SubscriberGuard {
    fn drop(&mut self) {
        let ev = LoopRequest::Unsubscribe { subscriber: self.id };
        if let Err(mpsc::error::TrySendError::Full(ev)) = self.events.try_send(ev) {
            if let Ok(h) = tokio::runtime::Handle::try_current() {
                let tx = self.events.clone();
                h.spawn(async move {
                    let _ = tx.send(ev).await;
                });
            }
        }
    }
}

fn phase_from_pb(v: i32) -> Option<Phase> {
    match pb::Phase::try_from(v).ok()? {
        pb::Phase::Unpath => Some(Phase::Unpath),
        pb::Phase::Repath => Some(Phase::Repath),
        _ => None,
    }
}

fn phase_pb(p: Phase) -> pb::Phase {
    match p {
        Phase::Idle => pb::Phase::Idle,
        Phase::Prepare => pb::Phase::Prepare,
        Phase::Unpath => pb::Phase::Unpath,
        Phase::Update => pb::Phase::Update,
        Phase::Repath => pb::Phase::Repath,
        Phase::Commit => pb::Phase::Commit,
    }
}

fn timings_pb(t: &RerouteTimings) -> pb::RerouteTimings {
    pb::RerouteTimings {
        generation: t.generation,
        routed_ms: t.routed_ms,
        committed_ms: t.committed_ms,
        coalesce_ms: t.coalesce_ms,
        compute_ms: t.compute_ms,
        upload_ms: t.upload_ms,
        blocks_written: t.blocks_written,
        retries: t.retries,
        faults: t.faults,
        committed_at_unix_ms: t.committed_at_unix_ms,
        driver_smps_sent: t.driver_smps_sent,
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Resolves a switch given by GUID or name.
fn resolve_switch(f: &Fabric, key: &str) -> Result<fabric_topology::SwitchId, Status> {
    let key = key.trim();
    if key.is_empty() {
        return Err(Status::invalid_argument("a switch (GUID or name) is required"));
    }
    f.find_switch(key).ok_or_else(|| match parse_guid(key) {
        Some(g) => Status::invalid_argument(format!("unknown switch GUID {}", fmt_guid(g))),
        None => Status::invalid_argument(format!(
            "unknown switch {} (neither a switch GUID nor a switch name)",
            quoted_key(key)
        )),
    })
}

/// Resolves an end port given by port GUID, node GUID or name.
fn resolve_end_port(f: &Fabric, key: &str) -> Result<EndPortId, String> {
    let key = key.trim();
    if key.is_empty() {
        return Err("an end port (GUID or name) is required".into());
    }
    f.find_end_port(key).ok_or_else(|| match parse_guid(key) {
        Some(g) => format!("unknown end port GUID {}", fmt_guid(g)),
        None => format!(
            "unknown end port {} (neither a port/node GUID nor a node name)",
            quoted_key(key)
        ),
    })
}

/// Checks a job id: 1..=128 characters from `[A-Za-z0-9._:-]`.
pub fn check_job_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("job_id must not be empty".into());
    }
    if id.len() > MAX_JOB_ID_LEN {
        return Err(format!(
            "job_id is {} characters long (at most {MAX_JOB_ID_LEN})",
            id.len()
        ));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        return Err(format!(
            "job_id {id:?} contains {c:?} (allowed: letters, digits, '.', '_', ':', '-')"
        ));
    }
    Ok(())
}

/// Splits an OpenSM dump into the section of one switch.
fn opensm_section(dump: &str, guid: u64) -> String {
    let needle = format!("guid {} ", fmt_guid(guid));
    let mut out = String::new();
    let mut inside = false;
    for line in dump.lines() {
        if line.starts_with("Unicast lids ") {
            inside = line.contains(&needle);
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

type NoticeStream = Pin<Box<dyn Stream<Item = Result<pb::FabricNotice, Status>> + Send + 'static>>;

fn notice_pb(n: Notice) -> pb::FabricNotice {
    use fabric_topology::FabricEvent as E;
    use pb::fabric_notice::Notice as N;
    let notice = match n {
        Notice::TopologyChange { event, physical } => {
            let (guid, port, up) = match event {
                E::LinkDown { switch, port } => (switch, u32::from(port), false),
                E::LinkUp { switch, port } => (switch, u32::from(port), true),
                E::SwitchDown(g) => (g, 0, false),
                E::SwitchUp(g) => (g, 0, true),
                E::EndPortDown(g) => (g, 0, false),
                E::EndPortUp(g) => (g, 0, true),
            };
            let kind = match event_kind(&event) {
                "link" => pb::FaultKind::Link,
                "switch" => pb::FaultKind::Switch,
                _ => pb::FaultKind::Node,
            };
            N::TopologyChange(pb::TopologyChange {
                event: event.to_string(),
                kind: kind as i32,
                up,
                guid,
                port,
                physical,
            })
        }
        Notice::PhaseChanged { generation, phase } => N::PhaseChanged(pb::PhaseChanged {
            generation,
            phase: phase_pb(phase) as i32,
        }),
        Notice::GenerationCommitted { generation, timings } => N::GenerationCommitted(pb::GenerationCommitted {
            generation,
            timings: Some(timings_pb(&timings)),
        }),
        Notice::AcksMissed {
            generation,
            subscribers,
        } => N::AcksMissed(pb::AcksMissed {
            generation,
            subscribers,
        }),
        Notice::UpdateAborted { generation, reason } => N::UpdateAborted(pb::UpdateAborted { generation, reason }),
        Notice::UpdateRestarted {
            generation,
            attempt,
            reason,
        } => N::UpdateRestarted(pb::UpdateRestarted {
            generation,
            attempt,
            reason,
        }),
    };
    pb::FabricNotice { notice: Some(notice) }
}

#[tonic::async_trait]
impl FabricManager for FabricService {
    async fn get_status(&self, _: Request<pb::GetStatusRequest>) -> Result<Response<pb::Status>, Status> {
        let p = self.snapshot();
        let f: &Fabric = match &p.current {
            Some(g) => &g.fabric,
            None => &p.cabling,
        };
        let (links, links_up) = f.count_links();
        let g = p.current.as_ref();
        let (vl, stats) = match &self.shared.driver {
            Some(d) => (d.escape_vl_status(), d.driver_stats()),
            None => (
                fabric_southbound::EscapeVlStatus {
                    ready: true,
                    ..Default::default()
                },
                fabric_southbound::DriverStats::default(),
            ),
        };
        Ok(Response::new(pb::Status {
            generation: p.generation(),
            phase: phase_pb(p.phase) as i32,
            engine: p.engine.clone(),
            driver: p.driver.to_string(),
            switches: count(f.num_switches()),
            switches_up: count(f.switches().iter().filter(|s| s.up).count()),
            nodes: count(f.num_end_ports()),
            nodes_up: count(f.end_port_ids().filter(|&e| f.end_port_live(e)).count()),
            links: count(links),
            links_up: count(links_up),
            pending_faults: count(p.pending_faults),
            last_reroute: g.map(|g| timings_pb(&g.timings)),
            last_error: p.last_error.clone(),
            uptime_s: p.started.elapsed().as_secs(),
            lmc: u32::from(p.lmc),
            top_lid: g.map_or(0, |g| g.lids.top()),
            ranking_diagnostics: g.map_or(0, |g| count(g.ranking.diagnostics.len())),
            discarded_generations: p.discarded_generations,
            virtual_faults: count(p.virtual_faults),
            levels: g.map_or(0, |g| g.ranking.height),
            subscribers: count(p.subscribers),
            missed_acks: p.missed_acks.clone(),
            dual_lids: p.lmc >= 1,
            update_restarts: p.update_restarts.clone(),
            escape_vl_ready: vl.ready,
            escape_vl_pending: vl.pending,
            escape_vl_error: vl.error.unwrap_or_default(),
            escape_vl_ready_at_unix_ms: vl.ready_at_unix_ms,
            driver_smps_sent: stats.smps_sent,
            driver_smp_retries: stats.retries,
            driver_smp_failures: stats.failures,
            job_aware: p.job_aware,
            unprogrammed_switches: p
                .installation
                .unprogrammed
                .iter()
                .map(|u| pb::UnprogrammedSwitch {
                    guid: u.guid,
                    name: u.name.clone(),
                    blocks_pending: u.blocks_pending,
                    last_error: u.last_error.clone(),
                })
                .collect(),
            unprogrammed_switch_count: count(p.installation.unprogrammed.len()),
            blocks_pending: p.installation.blocks_pending,
            tables_installed: p.installation.tables_installed(p.generation()),
            persistence_error: p.installation.persistence_error.clone(),
            topology_incomplete: p.installation.topology_incomplete.clone(),
            ready: p.installation.not_ready.is_none(),
            not_ready_reason: p.installation.not_ready.clone().unwrap_or_default(),
            routing_valid: g.is_some_and(|g| g.routing_check.valid),
            fallback_destinations: g.map_or(0, |g| g.routing_check.fallback_destinations),
            routing_fallback_reason: g.map_or_else(String::new, |g| g.routing_check.reason.clone()),
            unreachable_pairs: g.map_or(0, |g| {
                g.routing_check.unreachable_pairs + g.routing_check.escape_unreachable_pairs
            }),
            disconnected_pairs: g.map_or(0, |g| g.routing_check.disconnected_pairs),
        }))
    }

    async fn get_topology(&self, _: Request<pb::GetTopologyRequest>) -> Result<Response<pb::Topology>, Status> {
        let p = self.snapshot();
        let g = p.current.clone();
        let f: Arc<Fabric> = g.as_ref().map_or_else(|| p.cabling.clone(), |g| g.fabric.clone());
        let mut switches = Vec::with_capacity(f.num_switches());
        for sid in f.switch_ids() {
            let s = f.switch(sid);
            let mut ports = Vec::with_capacity(s.nports as usize);
            for (pn, port) in s.external_ports() {
                let (kind, rg, rp, up) = match port.remote {
                    Remote::None => (pb::RemoteKind::None, 0, 0, false),
                    Remote::Switch { sw, port: rp } => (
                        pb::RemoteKind::Switch,
                        f.switch(sw).guid,
                        u32::from(rp),
                        f.switch_link_live(sid, pn).is_some(),
                    ),
                    Remote::EndPort(ep) => {
                        let e = f.end_port(ep);
                        (
                            pb::RemoteKind::EndPort,
                            e.port_guid,
                            u32::from(e.port_num),
                            s.up && port.state == LinkState::Up,
                        )
                    }
                };
                let excluded = g.as_ref().is_some_and(|g| g.excluded_links.contains(&(s.guid, pn)));
                ports.push(pb::SwitchPort {
                    port: u32::from(pn),
                    remote_kind: kind as i32,
                    remote_guid: rg,
                    remote_port: rp,
                    state: if up { pb::PortState::Up } else { pb::PortState::Down } as i32,
                    excluded,
                    speed: port.speed.clone().unwrap_or_default(),
                });
            }
            switches.push(pb::SwitchInfo {
                guid: s.guid,
                name: s.desc.clone(),
                level: g
                    .as_ref()
                    .and_then(|g| g.ranking.level.get(sid.idx()).copied().flatten()),
                lid: g.as_ref().map_or(0, |g| g.lids.switch_lid(sid)),
                up: s.up,
                nports: u32::from(s.nports),
                ports,
            });
        }
        let end_ports = f
            .end_port_ids()
            .map(|id| {
                let e = f.end_port(id);
                let (sg, sp) = e.attach.map_or((0, 0), |(sw, p)| (f.switch(sw).guid, u32::from(p)));
                pb::EndPortInfo {
                    guid: e.port_guid,
                    node_guid: e.node_guid,
                    name: e.desc.clone(),
                    port_num: u32::from(e.port_num),
                    base_lid: g.as_ref().map_or(0, |g| g.lids.base_lid(id)),
                    escape_lid: g.as_ref().and_then(|g| g.lids.escape_lid(id)).unwrap_or(0),
                    switch_guid: sg,
                    switch_port: sp,
                    up: e.up,
                    live: f.end_port_live(id),
                }
            })
            .collect();
        let diagnostics = g.as_ref().map_or_else(Vec::new, |g| {
            g.ranking.diagnostics.iter().map(|d| d.to_string()).collect()
        });
        Ok(Response::new(pb::Topology {
            generation: p.generation(),
            switches,
            end_ports,
            diagnostics,
        }))
    }

    async fn get_lft(&self, req: Request<pb::GetLftRequest>) -> Result<Response<pb::GetLftResponse>, Status> {
        let req = req.into_inner();
        let (_, g) = self.current()?;
        let one = if req.switch.trim().is_empty() {
            None
        } else {
            Some(resolve_switch(&g.fabric, &req.switch)?)
        };
        let format = pb::LftFormat::try_from(req.format)
            .map_err(|_| Status::invalid_argument(format!("unknown LFT format {}", req.format)))?;
        match format {
            pb::LftFormat::Raw => {
                let ids: Vec<_> = match one {
                    Some(s) => vec![s],
                    None => g.fabric.switch_ids().collect(),
                };
                let switches = ids
                    .into_iter()
                    .map(|s| {
                        let sw = g.fabric.switch(s);
                        pb::SwitchLft {
                            guid: sw.guid,
                            name: sw.desc.clone(),
                            lid: g.lids.switch_lid(s),
                            lft: g.lfts.row(s).to_vec(),
                        }
                    })
                    .collect();
                Ok(Response::new(pb::GetLftResponse {
                    generation: g.number,
                    switches,
                    opensm_dump: String::new(),
                }))
            }
            pb::LftFormat::Opensm => {
                let g2 = g.clone();
                let dump = tokio::task::spawn_blocking(move || {
                    let all = write_opensm_lfts(&g2.fabric, &g2.lids, &g2.lfts);
                    match one {
                        Some(s) => opensm_section(&all, g2.fabric.switch(s).guid),
                        None => all,
                    }
                })
                .await
                .map_err(|e| Status::internal(format!("dump task failed: {e}")))?;
                Ok(Response::new(pb::GetLftResponse {
                    generation: g.number,
                    switches: Vec::new(),
                    opensm_dump: dump,
                }))
            }
        }
    }

    async fn get_metrics(&self, _: Request<pb::GetMetricsRequest>) -> Result<Response<pb::MetricsReport>, Status> {
        let (p, g) = self.current()?;
        let (core, fresh) = self.core_metrics(&g).await?;
        // Job metrics: computed per request (jobs change independently of generations).
        let jobs: Vec<(String, Vec<EndPortId>)> = p
            .jobs
            .iter()
            .map(|(id, ports)| {
                let eps = ports
                    .iter()
                    .filter_map(|jp| g.fabric.end_port_by_guid(jp.port_guid()))
                    .collect();
                (id.clone(), eps)
            })
            .collect();
        let job_reports = if jobs.is_empty() {
            Vec::new()
        } else {
            let g2 = g.clone();
            let (tx, rx) = oneshot::channel();
            self.shared.analysis_pool.spawn(move || {
                let out: Vec<pb::JobMetrics> = jobs
                    .iter()
                    .map(|(id, eps)| {
                        let m = fabric_metrics::job_metrics(&g2.fabric, &g2.lids, &g2.lfts, eps).unwrap_or_default();
                        let sh =
                            fabric_metrics::job_shift_metrics(&g2.fabric, &g2.lids, &g2.lfts, eps).unwrap_or_default();
                        pb::JobMetrics {
                            job_id: id.clone(),
                            end_ports: count(eps.len()),
                            effective_xi: m.effective_xi,
                            dark_share: m.dark_share,
                            mu_sp: sh.mu_sp,
                            worst_shift: sh.worst_shift,
                        }
                    })
                    .collect();
                let _ = tx.send(out);
            });
            rx.await
                .map_err(|_| Status::internal("job metrics computation failed"))?
        };
        let m = &core.metrics;
        Ok(Response::new(pb::MetricsReport {
            generation: g.number,
            valid: core.valid,
            unreachable_pairs: core.unreachable_pairs,
            deadlock_free: core.deadlock_free,
            mu_sp: m.mu_sp,
            mu_rp: Some(rp_stats(&m.mu_rp)),
            mu_a2a: m.mu_a2a,
            xi: m.xi,
            nu: m.nu,
            route_ms: g.route_ms,
            jobs: job_reports,
            compute_ms: if fresh { core.compute_ms } else { 0.0 },
            mu_rp_floor: Some(rp_floor(&core.floor, &m.mu_rp)),
        }))
    }

    async fn inject_fault(
        &self,
        req: Request<pb::InjectFaultRequest>,
    ) -> Result<Response<pb::InjectFaultResponse>, Status> {
        let req = req.into_inner();
        let p = self.snapshot();
        let f = &p.cabling;
        let target = resolve_target(f, req.kind, &req.switch, req.port, &req.node)?;
        let fr = FaultRequest {
            target,
            up: req.up,
            physical: req.physical,
            wait: req.wait,
        };
        let a = self.ask(|reply| LoopRequest::Inject { req: fr, reply }).await?;
        Ok(Response::new(pb::InjectFaultResponse {
            event: a.event,
            generation: a.generation,
        }))
    }

    async fn what_if(&self, req: Request<pb::WhatIfRequest>) -> Result<Response<pb::WhatIfReport>, Status> {
        let req = req.into_inner();
        if req.down.is_empty() || req.down.len() > MAX_WHAT_IF_CHANGES {
            return Err(Status::invalid_argument(format!(
                "a plan takes 1 to {MAX_WHAT_IF_CHANGES} elements down (got {})",
                req.down.len()
            )));
        }
        let (p, g) = self.current()?;
        let down = req
            .down
            .iter()
            .map(|c| resolve_target(&p.cabling, c.kind, &c.switch, c.port, &c.node))
            .collect::<Result<Vec<_>, Status>>()?;
        let events: Vec<String> = down.iter().map(|t| t.event(false).to_string()).collect();
        let _one_at_a_time = self.shared.what_if.lock().await;
        let input = self.ask(|reply| LoopRequest::WhatIf { down, reply }).await?;
        let (before, _) = self.core_metrics(&g).await?;
        let opts = metrics_options(&self.shared.metrics_config.load());
        let (tx, rx) = oneshot::channel();
        self.shared.analysis_pool.spawn(move || {
            let t = Instant::now();
            let out = crate::compute::compute(*input).map(|c| {
                let after = CoreMetrics::compute(&c.fabric, &c.ranking, &c.lids, &c.lfts, &opts);
                let v = check::validity(&c.fabric, &c.lids, &c.lfts);
                (c, after, v, t.elapsed().as_secs_f64() * 1e3)
            });
            let _ = tx.send(out);
        });
        let (c, after, v, compute_ms) = rx
            .await
            .map_err(|_| Status::internal("plan computation failed"))?
            .map_err(|e| Status::failed_precondition(format!("the plan cannot be routed: {e}")))?;
        let live = |f: &Fabric| f.end_port_ids().filter(|&e| f.end_port_live(e)).count() as u32;
        let switches: HashSet<u32> = c.writes.iter().map(|w| w.switch.0).collect();
        Ok(Response::new(pb::WhatIfReport {
            generation: g.number,
            events,
            end_ports_before: live(&g.fabric),
            end_ports_after: live(&c.fabric),
            components: count(v.components),
            disconnected_pairs: v.disconnected_pairs,
            valid: after.valid,
            unreachable_pairs: after.unreachable_pairs,
            deadlock_free: after.deadlock_free,
            lft_blocks: c.writes.len() as u64,
            switches_rewritten: count(switches.len()),
            route_ms: c.route_ms,
            compute_ms,
            before: Some(before.summary()),
            after: Some(after.summary()),
        }))
    }

    async fn reroute(&self, req: Request<pb::RerouteRequest>) -> Result<Response<pb::RerouteResponse>, Status> {
        let req = req.into_inner();
        let generation = self
            .ask(|reply| LoopRequest::Reroute {
                resync: req.resync,
                wait: req.wait,
                reply: Some(reply),
            })
            .await?;
        Ok(Response::new(pb::RerouteResponse { generation }))
    }

    async fn set_job_mapping(&self, req: Request<pb::SetJobMappingRequest>) -> Result<Response<pb::Job>, Status> {
        let req = req.into_inner();
        check_job_id(&req.job_id).map_err(Status::invalid_argument)?;
        if req.end_ports.is_empty() {
            return Err(Status::invalid_argument(format!(
                "job {:?} maps no end port",
                req.job_id
            )));
        }
        let p = self.snapshot();
        let f = &p.cabling;
        let mut problems = Vec::new();
        let mut seen = HashSet::new();
        let mut ports = Vec::with_capacity(req.end_ports.len());
        for (i, key) in req.end_ports.iter().enumerate() {
            match resolve_end_port(f, key) {
                Err(m) => problems.push(format!("end_ports[{i}]: {m}")),
                Ok(ep) => {
                    let e = f.end_port(ep);
                    if !seen.insert(ep) {
                        problems.push(format!(
                            "end_ports[{i}]: {} is listed twice ({})",
                            quoted_key(key),
                            fmt_guid(e.port_guid)
                        ));
                    } else {
                        ports.push(JobPort::new(e.port_guid, &e.desc));
                    }
                }
            }
        }
        if !problems.is_empty() {
            return Err(Status::invalid_argument(format!(
                "malformed job mapping {:?}: {}",
                req.job_id,
                bounded_problems(&problems)
            )));
        }
        let job = pb::Job {
            job_id: req.job_id.clone(),
            end_ports: ports
                .iter()
                .map(|jp| pb::EndPortRef {
                    guid: jp.port_guid(),
                    name: jp.name.clone(),
                })
                .collect(),
        };
        let id = req.job_id;
        self.ask(|reply| LoopRequest::SetJob { id, ports, reply }).await?;
        Ok(Response::new(job))
    }

    async fn clear_job(&self, req: Request<pb::ClearJobRequest>) -> Result<Response<pb::ClearJobResponse>, Status> {
        let id = req.into_inner().job_id;
        check_job_id(&id).map_err(Status::invalid_argument)?;
        self.ask(|reply| LoopRequest::ClearJob { id, reply }).await?;
        Ok(Response::new(pb::ClearJobResponse {}))
    }

    async fn list_jobs(&self, _: Request<pb::ListJobsRequest>) -> Result<Response<pb::ListJobsResponse>, Status> {
        let p = self.snapshot();
        let jobs = p
            .jobs
            .iter()
            .map(|(id, ports)| pb::Job {
                job_id: id.clone(),
                end_ports: ports
                    .iter()
                    .map(|jp| pb::EndPortRef {
                        guid: jp.port_guid(),
                        name: jp.name.clone(),
                    })
                    .collect(),
            })
            .collect();
        Ok(Response::new(pb::ListJobsResponse { jobs }))
    }

    type SubscribeStream = UpdateStream;

    async fn subscribe(&self, req: Request<pb::SubscribeRequest>) -> Result<Response<Self::SubscribeStream>, Status> {
        let req = req.into_inner();
        let name = req.name.trim().to_string();
        if name.is_empty() {
            return Err(Status::invalid_argument("a subscriber needs a name"));
        }
        let p = self.snapshot();
        let mut ports = Vec::with_capacity(req.end_ports.len());
        let mut problems = Vec::new();
        for (i, key) in req.end_ports.iter().enumerate() {
            match resolve_end_port(&p.cabling, key) {
                Ok(ep) => ports.push(p.cabling.end_port(ep).port_guid),
                Err(m) => problems.push(format!("end_ports[{i}]: {m}")),
            }
        }
        if !problems.is_empty() {
            return Err(Status::invalid_argument(bounded_problems(&problems)));
        }
        let (ntx, nrx) = mpsc::channel::<UpdateNotice>(16);
        let id = self
            .ask(|reply| LoopRequest::Subscribe {
                name,
                ports,
                notices: ntx,
                reply,
            })
            .await?;
        let now = self.snapshot();
        let first = pb::UpdateNotice {
            subscriber_id: id.0,
            generation: if now.phase == Phase::Idle {
                now.generation()
            } else {
                now.phase_generation
            },
            phase: phase_pb(now.phase) as i32,
            deadline_ms: 0,
        };
        let guard = SubscriberGuard {
            id,
            events: self.shared.events.clone(),
        };
        let rest = tokio_stream::wrappers::ReceiverStream::new(nrx).map(move |n| {
            let _keep = &guard;
            Ok(pb::UpdateNotice {
                subscriber_id: id.0,
                generation: n.generation,
                phase: phase_pb(n.phase) as i32,
                deadline_ms: n.deadline_ms,
            })
        });
        Ok(Response::new(Box::pin(tokio_stream::once(Ok(first)).chain(rest))))
    }

    async fn ack(&self, req: Request<pb::AckRequest>) -> Result<Response<pb::AckResponse>, Status> {
        let req = req.into_inner();
        let phase = phase_from_pb(req.phase)
            .ok_or_else(|| Status::invalid_argument("only UNPATH and REPATH notices are acked"))?;
        let subscriber = fabric_update::SubscriberId(req.subscriber_id);
        self.ask(|reply| LoopRequest::Ack {
            subscriber,
            generation: req.generation,
            phase,
            reply,
        })
        .await?;
        Ok(Response::new(pb::AckResponse {}))
    }

    async fn get_path(&self, req: Request<pb::GetPathRequest>) -> Result<Response<pb::PathInfo>, Status> {
        let (_, g) = self.current()?;
        let dst = resolve_end_port(&g.fabric, &req.into_inner().dst).map_err(Status::invalid_argument)?;
        Ok(Response::new(pb::PathInfo {
            base_lid: g.lids.base_lid(dst),
            base_sl: BASE_SL,
            escape_lid: g.lids.escape_lid(dst).unwrap_or(0),
            escape_sl: ESCAPE_SL,
            generation: g.number,
        }))
    }

    type WatchEventsStream = NoticeStream;

    async fn watch_events(
        &self,
        _: Request<pb::WatchEventsRequest>,
    ) -> Result<Response<Self::WatchEventsStream>, Status> {
        let rx = self.shared.notices.subscribe();
        let s = BroadcastStream::new(rx).map(|item| match item {
            Ok(n) => Ok(notice_pb(n)),
            Err(tokio_stream::wrappers::errors::BroadcastStreamRecvError::Lagged(n)) => Ok(pb::FabricNotice {
                notice: Some(pb::fabric_notice::Notice::Lagged(n)),
            }),
        });
        Ok(Response::new(Box::pin(s)))
    }

    async fn trace(&self, req: Request<pb::TraceRequest>) -> Result<Response<pb::TraceResponse>, Status> {
        let req = req.into_inner();
        // Without a simulated fabric (umad, oob), the trace walks the installed generation's
        // LFTs: what the daemon believes the switches hold (compare with `ibtracert`).
        let mock = self.shared.mock.clone();
        let (_, g) = self.current()?;
        let f = &g.fabric;
        let src = resolve_end_port(f, &req.src).map_err(|m| Status::invalid_argument(format!("src: {m}")))?;
        let dst = req.dst.trim();
        let dlid: Lid = if let Some(l) = dst.strip_prefix("lid:") {
            let l = l.trim();
            let parsed = match l.strip_prefix("0x") {
                Some(h) => Lid::from_str_radix(h, 16).ok(),
                None => l.parse().ok(),
            };
            parsed.ok_or_else(|| Status::invalid_argument(format!("dst: {l:?} is not a LID")))?
        } else {
            let ep = resolve_end_port(f, dst).map_err(|m| Status::invalid_argument(format!("dst: {m}")))?;
            if req.escape {
                g.lids
                    .escape_lid(ep)
                    .ok_or_else(|| Status::failed_precondition("LMC is 0: there are no escape LIDs"))?
            } else {
                g.lids.base_lid(ep)
            }
        };
        let src_guid = f.end_port(src).port_guid;
        let name = |guid: u64| {
            f.switch_by_guid(guid)
                .map(|s| f.switch(s).desc.clone())
                .unwrap_or_default()
        };
        let Some(mock) = mock else {
            return Ok(Response::new(lft_trace(&g, src, dlid)));
        };
        let resp = match mock.trace(src_guid, dlid) {
            Ok(hops) => pb::TraceResponse {
                dlid,
                hops: hops
                    .iter()
                    .map(|h| pb::Hop {
                        switch_guid: h.switch,
                        switch_name: name(h.switch),
                        in_port: u32::from(h.in_port),
                        out_port: u32::from(h.out_port),
                    })
                    .collect(),
                reached: true,
                error: String::new(),
            },
            Err(e) => pb::TraceResponse {
                dlid,
                hops: Vec::new(),
                reached: false,
                error: e.to_string(),
            },
        };
        Ok(Response::new(resp))
    }

    async fn verify_reachability(
        &self,
        req: Request<pb::VerifyReachabilityRequest>,
    ) -> Result<Response<pb::VerifyReachabilityResponse>, Status> {
        let escape = req.into_inner().escape;
        let mock = self.mock()?.clone();
        let p = self.snapshot();
        if escape && p.lmc == 0 {
            return Err(Status::failed_precondition("LMC is 0: there are no escape LIDs"));
        }
        let generation = p.generation();
        let r = tokio::task::spawn_blocking(move || mock.verify_all_pairs(escape))
            .await
            .map_err(|e| Status::internal(format!("verification task failed: {e}")))?;
        Ok(Response::new(pb::VerifyReachabilityResponse {
            generation,
            pairs_checked: r.pairs_checked as u64,
            unreachable_count: r.unreachable_count as u64,
            unreachable: r
                .unreachable
                .into_iter()
                .map(|(src, dst, reason)| pb::UnreachablePair { src, dst, reason })
                .collect(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_is_bounded() {
        let problems: Vec<String> = (0..1_000_000)
            .map(|i| format!("end_ports[{i}]: unknown end port \"n{i}\""))
            .collect();
        let t = bounded_problems(&problems);
        assert!(t.len() <= MAX_ERROR_TEXT + 40, "{} bytes", t.len());
        assert!(
            t.starts_with("end_ports[0]: ") && t.ends_with("; … (999980 more)"),
            "{t}"
        );
        assert_eq!(
            bounded_problems(&problems[..2]),
            format!("{}; {}", problems[0], problems[1])
        );
        let long = "é".repeat(5000);
        let t = bounded_text(&long, 4095);
        assert!(
            t.ends_with("é… (5906 more bytes)"),
            "{}",
            t.chars().rev().take(30).collect::<String>()
        );
        let q = quoted_key(&"x".repeat(10_000_000));
        assert!(q.len() < 120 && q.ends_with("… (9999920 more bytes)"), "{q}");
    }

    #[test]
    fn job_ids_are_checked() {
        assert!(check_job_id("slurm-1234.0").is_ok());
        assert!(check_job_id("a:b_c").is_ok());
        assert_eq!(check_job_id(""), Err("job_id must not be empty".to_string()));
        let e = check_job_id("job 1").unwrap_err();
        assert!(e.contains("contains ' '"), "{e}");
        assert!(check_job_id(&"x".repeat(129)).unwrap_err().contains("129 characters"));
    }

    #[test]
    fn opensm_section_picks_one_switch() {
        let dump = "Unicast lids [0-3] of switch Lid 1 guid 0x0000000000000010 ('a'):\n0x0001 000 # x\n3 lids dumped\n\
                    Unicast lids [0-3] of switch Lid 2 guid 0x0000000000000011 ('b'):\n0x0002 000 # y\n3 lids dumped\n";
        let s = opensm_section(dump, 0x11);
        assert!(s.starts_with("Unicast lids [0-3] of switch Lid 2"), "{s}");
        assert_eq!(s.lines().count(), 3);
        assert_eq!(opensm_section(dump, 0x99), "");
    }

    #[test]
    fn loop_errors_map_to_grpc_codes() {
        assert_eq!(
            loop_status(LoopError::InvalidArgument("x".into())).code(),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            loop_status(LoopError::FailedPrecondition("x".into())).code(),
            tonic::Code::FailedPrecondition
        );
        assert_eq!(
            loop_status(LoopError::NotFound("x".into())).code(),
            tonic::Code::NotFound
        );
        assert_eq!(loop_status(LoopError::ShuttingDown).code(), tonic::Code::Unavailable);
    }
}
