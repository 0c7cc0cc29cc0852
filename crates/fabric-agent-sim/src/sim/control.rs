//! The `SimControl` service: traces, all-pairs and multicast verification, commands, counters,
//! port error drills and the manager epochs.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use fabric_oob::proto;
use fabric_oob::proto::sim_control_server::SimControl;
use fabric_southbound::{CounterPort, DriverError, PortCounters};
use fabric_topology::{fmt_guid, PortNum};
use tonic::{Request, Response, Status};

use super::state::{lock, Sim};

pub(super) struct ControlSvc {
    pub(super) sim: Arc<Sim>,
}

#[tonic::async_trait]
impl SimControl for ControlSvc {
    async fn trace(&self, req: Request<proto::TraceRequest>) -> Result<Response<proto::TraceReply>, Status> {
        let r = req.into_inner();
        self.sim
            .trace(r.source, r.from_switch, r.address)
            .await
            .map(Response::new)
            .map_err(|e| Status::failed_precondition(e.to_string()))
    }
    async fn verify_all_pairs(
        &self,
        req: Request<proto::VerifyAllPairsRequest>,
    ) -> Result<Response<proto::VerifyAllPairsReply>, Status> {
        self.sim
            .verify(req.into_inner().use_escape)
            .await
            .map(Response::new)
            .map_err(|e| Status::failed_precondition(e.to_string()))
    }
    async fn verify_multicast(
        &self,
        _: Request<proto::VerifyMulticastRequest>,
    ) -> Result<Response<proto::McastReport>, Status> {
        self.sim
            .verify_multicast()
            .await
            .map(Response::new)
            .map_err(|e| Status::failed_precondition(e.to_string()))
    }
    async fn command(&self, req: Request<proto::CommandRequest>) -> Result<Response<proto::CommandReply>, Status> {
        self.sim
            .command(&req.into_inner().line)
            .await
            .map(|output| Response::new(proto::CommandReply { output }))
            .map_err(|e| Status::invalid_argument(e.to_string()))
    }
    async fn get_counters(&self, _: Request<proto::GetCountersRequest>) -> Result<Response<proto::Counters>, Status> {
        let c = &self.sim.counters;
        let refusals: Vec<proto::AgentRefusals> = self
            .sim
            .agents
            .iter()
            .map(|a| proto::AgentRefusals {
                switch_guid: a.guid,
                writes: a.refused_writes.load(Ordering::SeqCst),
                reads: a.refused_reads.load(Ordering::SeqCst),
            })
            .filter(|r| r.writes + r.reads > 0)
            .collect();
        Ok(Response::new(proto::Counters {
            lft_write_calls: c.lft_write_calls.load(Ordering::SeqCst),
            lft_blocks_written: c.lft_blocks_written.load(Ordering::SeqCst),
            lft_block_reads: c.lft_block_reads.load(Ordering::SeqCst),
            mft_write_calls: c.mft_write_calls.load(Ordering::SeqCst),
            mft_blocks_written: c.mft_blocks_written.load(Ordering::SeqCst),
            mft_block_reads: c.mft_block_reads.load(Ordering::SeqCst),
            management_key_refusals: refusals.iter().map(|r| r.writes + r.reads).sum(),
            refusals,
            port_counter_reads: c.port_counter_reads.load(Ordering::SeqCst),
        }))
    }
    async fn get_epoch_stats(
        &self,
        _: Request<proto::GetEpochStatsRequest>,
    ) -> Result<Response<proto::EpochStats>, Status> {
        let switches = self
            .sim
            .agents
            .iter()
            .map(|a| {
                let m = *lock(&a.manager);
                proto::SwitchEpochStats {
                    guid: a.guid,
                    manager_epoch: m.highest,
                    accepted_writes: m.accepted,
                    refused_writes: m.refused,
                    last_refused_epoch: m.last_refused,
                }
            })
            .collect();
        Ok(Response::new(proto::EpochStats { switches }))
    }
    async fn add_port_errors(
        &self,
        req: Request<proto::AddPortErrorsRequest>,
    ) -> Result<Response<proto::AddPortErrorsReply>, Status> {
        let r = req.into_inner();
        let delta: PortCounters = r.delta.map(PortCounters::from).unwrap_or_default();
        let port = PortNum::try_from(r.port).map_err(|_| {
            Status::invalid_argument(format!("switch {} has no port {}", fmt_guid(r.switch_guid), r.port))
        })?;
        // The data plane keeps the counters: they count whether the agent is alive or killed.
        let counters = self
            .sim
            .mock
            .add_port_counters(
                CounterPort::Switch {
                    switch: r.switch_guid,
                    port,
                },
                &delta,
            )
            .map_err(|e| match e {
                DriverError::UnknownSwitch(_) => Status::not_found(e.to_string()),
                _ => Status::invalid_argument(e.to_string()),
            })?;
        Ok(Response::new(proto::AddPortErrorsReply {
            counters: Some(counters.into()),
        }))
    }
}
