//! SetJobMapping, ClearJob and ListJobs: the job → end ports mapping of job-aware routing.

use std::collections::HashSet;

use fabric_proto::v1 as pb;
use fabric_topology::fmt_guid;
use tonic::{Request, Response, Status};

use super::request::{bounded_problems, check_job_id, quoted_key, resolve_end_port};
use super::FabricService;
use crate::event_loop::Request as LoopRequest;
use crate::persist::JobPort;

impl FabricService {
    pub(super) async fn handle_set_job_mapping(
        &self,
        req: Request<pb::SetJobMappingRequest>,
    ) -> Result<Response<pb::Job>, Status> {
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
        let job = job_pb(&req.job_id, &ports);
        let id = req.job_id;
        self.ask(|reply| LoopRequest::SetJob { id, ports, reply }).await?;
        Ok(Response::new(job))
    }

    pub(super) async fn handle_clear_job(
        &self,
        req: Request<pb::ClearJobRequest>,
    ) -> Result<Response<pb::ClearJobResponse>, Status> {
        let id = req.into_inner().job_id;
        check_job_id(&id).map_err(Status::invalid_argument)?;
        self.ask(|reply| LoopRequest::ClearJob { id, reply }).await?;
        Ok(Response::new(pb::ClearJobResponse {}))
    }

    pub(super) async fn handle_list_jobs(
        &self,
        _: Request<pb::ListJobsRequest>,
    ) -> Result<Response<pb::ListJobsResponse>, Status> {
        let p = self.snapshot();
        let jobs = p.jobs.iter().map(|(id, ports)| job_pb(id, ports)).collect();
        Ok(Response::new(pb::ListJobsResponse { jobs }))
    }
}

/// A job as the API shows it: its id and its end ports (port GUID and name).
fn job_pb(job_id: &str, ports: &[JobPort]) -> pb::Job {
    pb::Job {
        job_id: job_id.to_string(),
        end_ports: ports
            .iter()
            .map(|jp| pb::EndPortRef {
                guid: jp.port_guid(),
                name: jp.name.clone(),
            })
            .collect(),
    }
}
