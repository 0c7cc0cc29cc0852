//! The gRPC northbound (`fabricd.v1.FabricManager`).
//!
//! Read-only calls answer from the [`Published`] snapshot (no lock, no round trip through the
//! event loop); calls that change state are sent to the event loop as [`LoopRequest`]s with a oneshot
//! reply. Names are resolved and requests validated here, so that a bad request gets a precise
//! `INVALID_ARGUMENT` without disturbing the loop. Heavy reads (metrics, reachability, OpenSM
//! dumps) run on the analysis pool or a blocking thread, never on a tokio worker.
//!
//! One file per service area; each holds the handlers of its RPCs as `handle_*` methods of
//! [`FabricService`], which the `FabricManager` implementation below forwards to:
//!
//! * `request`: limits and validation of client input (names, GUIDs, job ids, fault targets);
//! * `convert`: model → protobuf conversions (phases, timings, notices, metric summaries);
//! * `status`: Status, GetTopology, GetPath;
//! * `lft`: GetLft, StreamLft;
//! * `faults`: InjectFault, Reroute; `jobs`: SetJobMapping, ClearJob, ListJobs;
//! * `subscribe`: Subscribe, Ack (the update protocol's subscribers), WatchEvents;
//! * `analysis`: GetMetrics, WhatIf, Trace, VerifyReachability;
//! * `sa`: SaQuery (Subnet Administration queries through the daemon's SA service);
//! * `mcast`: ListMulticastGroups, VerifyMulticast, ListPartitions;
//! * `health`: GetHealth, ClearHealth, InjectPortErrors (the port-health monitor).

mod analysis;
mod convert;
mod faults;
mod health;
mod jobs;
mod lft;
mod mcast;
mod request;
mod sa;
mod status;
mod subscribe;

pub use request::{
    bounded_problems, bounded_text, check_job_id, MAX_ERROR_TEXT, MAX_JOB_ID_LEN, MAX_LISTED_PROBLEMS,
    MAX_WHAT_IF_CHANGES,
};
pub use status::{BASE_SL, ESCAPE_SL};

use std::sync::Arc;

use arc_swap::ArcSwap;
use fabric_proto::v1 as pb;
use fabric_proto::v1::fabric_manager_server::FabricManager;
use fabric_southbound::PacketSimulator;
use tokio::sync::{broadcast, mpsc, oneshot};
use tonic::{Request, Response, Status};

use crate::config::MetricsConfig;
use crate::event_loop::{LoopError, Request as LoopRequest};
use crate::state::{Generation, Notice, Published};
use analysis::CoreMetrics;
use lft::LftStream;
use subscribe::{NoticeStream, UpdateStream};

/// State shared by every handler.
pub struct Shared {
    pub published: Arc<ArcSwap<Published>>,
    pub events: mpsc::Sender<LoopRequest>,
    pub notices: broadcast::Sender<Notice>,
    /// The simulated fabric, when the driver simulates packets (`mock`): Trace and
    /// VerifyReachability answer from it.
    pub simulator: Option<Arc<dyn PacketSimulator>>,
    /// Current `[metrics]` settings (reloadable).
    pub metrics_config: Arc<ArcSwap<MetricsConfig>>,
    /// Pool for metrics computations (separate from the routing pool).
    pub analysis_pool: Arc<rayon::ThreadPool>,
    /// The southbound driver, for its live counters and escape-VL state (Status).
    pub driver: Option<Arc<dyn fabric_southbound::SouthboundDriver>>,
    /// The Subnet Administration service (SaQuery).
    pub sa: Option<Arc<fabric_sa::SaService>>,
    /// The port-health monitor (GetHealth, ClearHealth, InjectPortErrors).
    pub health: Option<Arc<crate::health::HealthHandle>>,
    /// `[ha]`: the coordinator's status and the fence (Status.ha, readiness).
    pub ha: Option<crate::ha::HaView>,
    /// `[ha]` standby: no event loop behind this service; every call but Status is refused
    /// with `UNAVAILABLE` naming the leader.
    pub standby: bool,
    /// The last complete congestion metrics: (generation, settings, figures).
    metrics_cache: tokio::sync::Mutex<Option<(u64, MetricsConfig, Arc<CoreMetrics>)>>,
    /// The metrics computation in flight, if any (cancelled when a newer generation's starts).
    metrics_job: std::sync::Mutex<Option<analysis::MetricsJob>>,
    /// One maintenance plan (`WhatIf`) is computed at a time.
    what_if: tokio::sync::Mutex<()>,
}

impl Shared {
    pub fn new(
        published: Arc<ArcSwap<Published>>,
        events: mpsc::Sender<LoopRequest>,
        notices: broadcast::Sender<Notice>,
        simulator: Option<Arc<dyn PacketSimulator>>,
        metrics_config: Arc<ArcSwap<MetricsConfig>>,
        analysis_pool: Arc<rayon::ThreadPool>,
    ) -> Shared {
        Shared {
            published,
            events,
            notices,
            simulator,
            metrics_config,
            analysis_pool,
            driver: None,
            sa: None,
            health: None,
            ha: None,
            standby: false,
            metrics_cache: tokio::sync::Mutex::new(None),
            metrics_job: std::sync::Mutex::new(None),
            what_if: tokio::sync::Mutex::new(()),
        }
    }

    /// Attaches the southbound driver (Status reports its SMP counters and escape-VL state).
    pub fn with_driver(mut self, driver: Arc<dyn fabric_southbound::SouthboundDriver>) -> Shared {
        self.driver = Some(driver);
        self
    }

    /// Attaches the port-health monitor.
    pub fn with_health(mut self, health: Arc<crate::health::HealthHandle>) -> Shared {
        self.health = Some(health);
        self
    }

    /// Attaches the HA state (`[ha]`); `standby`: the service of a standby (no event loop).
    pub fn with_ha(mut self, ha: crate::ha::HaView, standby: bool) -> Shared {
        self.ha = Some(ha);
        self.standby = standby;
        self
    }

    /// Attaches the Subnet Administration service (SaQuery).
    pub fn with_sa(mut self, sa: Arc<fabric_sa::SaService>) -> Shared {
        self.sa = Some(sa);
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

    /// A standby refuses every call but Status: `UNAVAILABLE`, naming the leader and epoch.
    fn serving(&self) -> Result<(), Status> {
        match &self.shared.ha {
            Some(h) if self.shared.standby => Err(Status::unavailable(h.standby_message())),
            _ => Ok(()),
        }
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

#[tonic::async_trait]
impl FabricManager for FabricService {
    async fn get_status(&self, req: Request<pb::GetStatusRequest>) -> Result<Response<pb::Status>, Status> {
        self.handle_get_status(req).await
    }

    async fn get_topology(&self, req: Request<pb::GetTopologyRequest>) -> Result<Response<pb::Topology>, Status> {
        self.serving()?;
        self.handle_get_topology(req).await
    }

    async fn get_lft(&self, req: Request<pb::GetLftRequest>) -> Result<Response<pb::GetLftResponse>, Status> {
        self.serving()?;
        self.handle_get_lft(req).await
    }

    type StreamLftStream = LftStream;

    async fn stream_lft(&self, req: Request<pb::GetLftRequest>) -> Result<Response<Self::StreamLftStream>, Status> {
        self.serving()?;
        self.handle_stream_lft(req).await
    }

    async fn get_metrics(&self, req: Request<pb::GetMetricsRequest>) -> Result<Response<pb::MetricsReport>, Status> {
        self.serving()?;
        self.handle_get_metrics(req).await
    }

    async fn inject_fault(
        &self,
        req: Request<pb::InjectFaultRequest>,
    ) -> Result<Response<pb::InjectFaultResponse>, Status> {
        self.serving()?;
        self.handle_inject_fault(req).await
    }

    async fn what_if(&self, req: Request<pb::WhatIfRequest>) -> Result<Response<pb::WhatIfReport>, Status> {
        self.serving()?;
        self.handle_what_if(req).await
    }

    async fn reroute(&self, req: Request<pb::RerouteRequest>) -> Result<Response<pb::RerouteResponse>, Status> {
        self.serving()?;
        self.handle_reroute(req).await
    }

    async fn set_job_mapping(&self, req: Request<pb::SetJobMappingRequest>) -> Result<Response<pb::Job>, Status> {
        self.serving()?;
        self.handle_set_job_mapping(req).await
    }

    async fn clear_job(&self, req: Request<pb::ClearJobRequest>) -> Result<Response<pb::ClearJobResponse>, Status> {
        self.serving()?;
        self.handle_clear_job(req).await
    }

    async fn list_jobs(&self, req: Request<pb::ListJobsRequest>) -> Result<Response<pb::ListJobsResponse>, Status> {
        self.serving()?;
        self.handle_list_jobs(req).await
    }

    type SubscribeStream = UpdateStream;

    async fn subscribe(&self, req: Request<pb::SubscribeRequest>) -> Result<Response<Self::SubscribeStream>, Status> {
        self.serving()?;
        self.handle_subscribe(req).await
    }

    async fn ack(&self, req: Request<pb::AckRequest>) -> Result<Response<pb::AckResponse>, Status> {
        self.serving()?;
        self.handle_ack(req).await
    }

    async fn get_path(&self, req: Request<pb::GetPathRequest>) -> Result<Response<pb::PathInfo>, Status> {
        self.serving()?;
        self.handle_get_path(req).await
    }

    type WatchEventsStream = NoticeStream;

    async fn watch_events(
        &self,
        req: Request<pb::WatchEventsRequest>,
    ) -> Result<Response<Self::WatchEventsStream>, Status> {
        self.serving()?;
        self.handle_watch_events(req).await
    }

    async fn trace(&self, req: Request<pb::TraceRequest>) -> Result<Response<pb::TraceResponse>, Status> {
        self.serving()?;
        self.handle_trace(req).await
    }

    async fn verify_reachability(
        &self,
        req: Request<pb::VerifyReachabilityRequest>,
    ) -> Result<Response<pb::VerifyReachabilityResponse>, Status> {
        self.serving()?;
        self.handle_verify_reachability(req).await
    }

    async fn sa_query(&self, req: Request<pb::SaQueryRequest>) -> Result<Response<pb::SaQueryResponse>, Status> {
        self.serving()?;
        self.handle_sa_query(req).await
    }

    async fn list_multicast_groups(
        &self,
        req: Request<pb::ListMulticastGroupsRequest>,
    ) -> Result<Response<pb::ListMulticastGroupsResponse>, Status> {
        self.serving()?;
        self.handle_list_multicast_groups(req).await
    }

    async fn verify_multicast(
        &self,
        req: Request<pb::VerifyMulticastRequest>,
    ) -> Result<Response<pb::VerifyMulticastResponse>, Status> {
        self.serving()?;
        self.handle_verify_multicast(req).await
    }

    async fn list_partitions(
        &self,
        req: Request<pb::ListPartitionsRequest>,
    ) -> Result<Response<pb::ListPartitionsResponse>, Status> {
        self.serving()?;
        self.handle_list_partitions(req).await
    }

    async fn get_health(&self, req: Request<pb::GetHealthRequest>) -> Result<Response<pb::HealthReport>, Status> {
        self.serving()?;
        self.handle_get_health(req).await
    }

    async fn clear_health(
        &self,
        req: Request<pb::ClearHealthRequest>,
    ) -> Result<Response<pb::ClearHealthResponse>, Status> {
        self.serving()?;
        self.handle_clear_health(req).await
    }

    async fn inject_port_errors(
        &self,
        req: Request<pb::InjectPortErrorsRequest>,
    ) -> Result<Response<pb::InjectPortErrorsResponse>, Status> {
        self.serving()?;
        self.handle_inject_port_errors(req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
