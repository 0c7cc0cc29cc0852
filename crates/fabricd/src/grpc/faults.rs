//! InjectFault and Reroute: validated here, carried out by the event loop.

use fabric_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::request::resolve_target;
use super::FabricService;
use crate::event_loop::{FaultRequest, Request as LoopRequest};

impl FabricService {
    pub(super) async fn handle_inject_fault(
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

    pub(super) async fn handle_reroute(
        &self,
        req: Request<pb::RerouteRequest>,
    ) -> Result<Response<pb::RerouteResponse>, Status> {
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
}
