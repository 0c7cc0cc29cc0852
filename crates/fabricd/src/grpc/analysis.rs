//! GetMetrics, WhatIf, Trace and VerifyReachability: computations over a generation, on the
//! analysis pool or a blocking thread.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use fabric_proto::v1 as pb;
use fabric_routing::check;
use fabric_southbound::PacketSimulator;
use fabric_topology::{EndPortId, Fabric, Lid, Remote};
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{oneshot, watch};
use tonic::{Request, Response, Status};

use super::convert::{count, rp_floor, rp_stats};
use super::request::{end_port_or_status, resolve_target, MAX_WHAT_IF_CHANGES};
use super::FabricService;
use crate::config::MetricsConfig;
use crate::event_loop::Request as LoopRequest;
use crate::state::Generation;

/// Cached congestion metrics of one generation.
#[derive(Clone, Debug)]
pub(super) struct CoreMetrics {
    valid: bool,
    unreachable_pairs: u64,
    deadlock_free: bool,
    metrics: fabric_metrics::Metrics,
    floor: fabric_metrics::RpFloor,
    compute_ms: f64,
}

/// Where a metrics computation's outcome appears: `Some(None)` = cancelled.
type JobOutcome = watch::Receiver<Option<Option<(Arc<Generation>, Arc<CoreMetrics>)>>>;

/// The congestion metrics computation in flight: for which generation and settings, its
/// cancel flag, and where its outcome appears (`Some(None)` = cancelled).
pub(super) struct MetricsJob {
    generation: u64,
    cfg: MetricsConfig,
    cancel: Arc<AtomicBool>,
    done: JobOutcome,
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
        let never = AtomicBool::new(false);
        let none = "never cancelled";
        Self::compute_cancellable(fabric, ranking, lids, lfts, opts, &never).expect(none)
    }

    /// [`CoreMetrics::compute`] that gives up (`None`) soon after `cancel` is raised.
    fn compute_cancellable(
        fabric: &Fabric,
        ranking: &fabric_ranking::Ranking,
        lids: &fabric_routing::LidPlan,
        lfts: &fabric_routing::Lfts,
        opts: &fabric_metrics::MetricsOptions,
        cancel: &AtomicBool,
    ) -> Option<CoreMetrics> {
        let t = Instant::now();
        let v = check::validity(fabric, lids, lfts);
        let deadlock_free = check::deadlock_free(fabric, ranking, lids, lfts);
        let progress = fabric_metrics::Progress::new();
        let metrics = fabric_metrics::compute_cancellable(fabric, lids, lfts, opts, &progress, cancel)?;
        let floor = fabric_metrics::rp_floor(fabric, &ranking.level);
        Some(CoreMetrics {
            valid: v.valid,
            unreachable_pairs: v.unreachable_count + v.escape_unreachable_count,
            deadlock_free,
            metrics,
            floor,
            compute_ms: t.elapsed().as_secs_f64() * 1e3,
        })
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

impl FabricService {
    /// The congestion metrics of the current generation (cached per generation and settings;
    /// computed on the analysis pool, without holding any lock meanwhile), and whether they
    /// were computed now. A computation for an older generation still in flight is cancelled
    /// when a newer generation's starts; its waiters move on to the newer generation, so the
    /// figures returned always belong to the generation committed last (or to a newer one than
    /// the caller's `g`: the returned generation says which). Generations are never delayed:
    /// routing and commits run on other threads and never wait for metrics.
    async fn core_metrics(&self, g: &Arc<Generation>) -> Result<(Arc<Generation>, Arc<CoreMetrics>, bool), Status> {
        let mut g = g.clone();
        loop {
            let cfg = (*self.shared.metrics_config.load_full()).clone();
            if let Some((n, c, m)) = self.shared.metrics_cache.lock().await.as_ref() {
                if *n == g.number && *c == cfg {
                    return Ok((g, m.clone(), false));
                }
            }
            let (mut done, cancel) = self.metrics_job_for(&g, &cfg);
            let outcome = loop {
                if let Some(o) = done.borrow_and_update().clone() {
                    break o;
                }
                tokio::select! {
                    r = done.changed() => {
                        if r.is_err() {
                            return Err(Status::internal("metrics computation failed"));
                        }
                    }
                    // A newer generation committed meanwhile: this computation is stale.
                    () = tokio::time::sleep(std::time::Duration::from_millis(50)) => {
                        if self.snapshot().current.as_ref().is_some_and(|c| c.number > g.number) {
                            cancel.store(true, Ordering::Relaxed);
                        }
                    }
                }
            };
            match outcome {
                Some((g, m)) => return Ok((g, m, true)),
                // Cancelled by a newer generation's computation: follow it.
                None => {
                    let (_, newer) = self.current()?;
                    g = newer;
                }
            }
        }
    }

    /// The receiver of the computation for `(g, cfg)`: the one in flight, or a new one started
    /// on the analysis pool (cancelling one for another generation or other settings).
    fn metrics_job_for(&self, g: &Arc<Generation>, cfg: &MetricsConfig) -> (JobOutcome, Arc<AtomicBool>) {
        let mut job = self
            .shared
            .metrics_job
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(j) = job.as_ref() {
            let finished = j.done.borrow().is_some();
            if !finished && j.generation == g.number && j.cfg == *cfg {
                return (j.done.clone(), j.cancel.clone());
            }
            if !finished && j.generation <= g.number {
                j.cancel.store(true, Ordering::Relaxed);
            } else if !finished {
                // In flight for a newer generation than the caller's: join it.
                return (j.done.clone(), j.cancel.clone());
            }
        }
        let (tx, rx) = watch::channel(None);
        let cancel = Arc::new(AtomicBool::new(false));
        let cancel_out = cancel.clone();
        *job = Some(MetricsJob {
            generation: g.number,
            cfg: cfg.clone(),
            cancel: cancel.clone(),
            done: rx.clone(),
        });
        let (g2, opts, cfg2) = (g.clone(), metrics_options(cfg), cfg.clone());
        let shared = self.shared.clone();
        self.shared.analysis_pool.spawn(move || {
            let out = CoreMetrics::compute_cancellable(&g2.fabric, &g2.ranking, &g2.lids, &g2.lfts, &opts, &cancel)
                .map(|m| (g2.clone(), Arc::new(m)));
            if let Some((_, m)) = &out {
                // Published as the last complete result unless a newer generation's already is.
                let mut cache = shared.metrics_cache.blocking_lock();
                if cache.as_ref().is_none_or(|(n, _, _)| *n <= g2.number) {
                    *cache = Some((g2.number, cfg2, m.clone()));
                }
            }
            let _ = tx.send(Some(out));
        });
        (rx, cancel_out)
    }

    pub(super) fn simulator(&self) -> Result<&Arc<dyn PacketSimulator>, Status> {
        let p = self.snapshot();
        self.shared.simulator.as_ref().ok_or_else(|| {
            Status::failed_precondition(format!(
                "driver {:?} does not simulate packets (mock driver only)",
                p.driver
            ))
        })
    }

    pub(super) async fn handle_get_metrics(
        &self,
        _: Request<pb::GetMetricsRequest>,
    ) -> Result<Response<pb::MetricsReport>, Status> {
        let (p, g) = self.current()?;
        // The figures may belong to a newer generation than `g` (committed meanwhile).
        let (g, core, fresh) = self.core_metrics(&g).await?;
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

    pub(super) async fn handle_what_if(
        &self,
        req: Request<pb::WhatIfRequest>,
    ) -> Result<Response<pb::WhatIfReport>, Status> {
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
        let (_, before, _) = self.core_metrics(&g).await?;
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

    pub(super) async fn handle_trace(
        &self,
        req: Request<pb::TraceRequest>,
    ) -> Result<Response<pb::TraceResponse>, Status> {
        let req = req.into_inner();
        // Without a simulated fabric (umad, oob), the trace walks the installed generation's
        // LFTs: what the daemon believes the switches hold (compare with `ibtracert`).
        let simulator = self.shared.simulator.clone();
        let (_, g) = self.current()?;
        let f = &g.fabric;
        let src = end_port_or_status(f, &req.src, "src: ")?;
        let dst = req.dst.trim();
        let dlid: Lid = if let Some(l) = dst.strip_prefix("lid:") {
            let l = l.trim();
            let parsed = match l.strip_prefix("0x") {
                Some(h) => Lid::from_str_radix(h, 16).ok(),
                None => l.parse().ok(),
            };
            parsed.ok_or_else(|| Status::invalid_argument(format!("dst: {l:?} is not a LID")))?
        } else {
            let ep = end_port_or_status(f, dst, "dst: ")?;
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
        let Some(simulator) = simulator else {
            return Ok(Response::new(lft_trace(&g, src, dlid)));
        };
        let traced = simulator.trace(src_guid, dlid).map_err(|e| e.to_string()).map(|hops| {
            hops.iter()
                .map(|h| pb::Hop {
                    switch_guid: h.switch,
                    switch_name: name(h.switch),
                    in_port: u32::from(h.in_port),
                    out_port: u32::from(h.out_port),
                })
                .collect()
        });
        Ok(Response::new(trace_response(dlid, traced)))
    }

    pub(super) async fn handle_verify_reachability(
        &self,
        req: Request<pb::VerifyReachabilityRequest>,
    ) -> Result<Response<pb::VerifyReachabilityResponse>, Status> {
        let escape = req.into_inner().escape;
        let simulator = self.simulator()?.clone();
        let p = self.snapshot();
        if escape && p.lmc == 0 {
            return Err(Status::failed_precondition("LMC is 0: there are no escape LIDs"));
        }
        let generation = p.generation();
        let r = tokio::task::spawn_blocking(move || simulator.verify_all_pairs(escape))
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

/// A trace through the LFTs of generation `g` (drivers that do not simulate packets): the
/// switches crossed from end port `src` towards `dlid`, over the links live in that generation.
fn lft_trace(g: &Generation, src: EndPortId, dlid: Lid) -> pb::TraceResponse {
    let f = &g.fabric;
    let mut hops = Vec::new();
    let traced = match check::trace(f, &g.lfts, src, dlid, &mut hops) {
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
            Ok(out)
        }
        Err(e) => Err(e.to_string()),
    };
    trace_response(dlid, traced)
}

/// The answer to a Trace: the hops when the packet reached the owner of `dlid`, else why not.
fn trace_response(dlid: Lid, traced: Result<Vec<pb::Hop>, String>) -> pb::TraceResponse {
    match traced {
        Ok(hops) => pb::TraceResponse {
            dlid,
            hops,
            reached: true,
            error: String::new(),
        },
        Err(error) => pb::TraceResponse {
            dlid,
            hops: Vec::new(),
            reached: false,
            error,
        },
    }
}
