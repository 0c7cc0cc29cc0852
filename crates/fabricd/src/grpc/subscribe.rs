//! Subscribe and Ack (the subscribers of the five-phase update protocol) and WatchEvents (the
//! notice stream).

use std::pin::Pin;

use fabric_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use super::convert::{notice_pb, phase_from_pb, phase_pb};
use super::request::{bounded_problems, resolve_end_port};
use super::FabricService;
use crate::event_loop::{Request as LoopRequest, UpdateNotice};
use crate::state::Phase;

pub(super) type UpdateStream = Pin<Box<dyn Stream<Item = Result<pb::UpdateNotice, Status>> + Send + 'static>>;

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

pub(super) type NoticeStream = Pin<Box<dyn Stream<Item = Result<pb::FabricNotice, Status>> + Send + 'static>>;

impl FabricService {
    pub(super) async fn handle_subscribe(
        &self,
        req: Request<pb::SubscribeRequest>,
    ) -> Result<Response<UpdateStream>, Status> {
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

    pub(super) async fn handle_ack(&self, req: Request<pb::AckRequest>) -> Result<Response<pb::AckResponse>, Status> {
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

    pub(super) async fn handle_watch_events(
        &self,
        _: Request<pb::WatchEventsRequest>,
    ) -> Result<Response<NoticeStream>, Status> {
        let rx = self.shared.notices.subscribe();
        let s = BroadcastStream::new(rx).map(|item| match item {
            Ok(n) => Ok(notice_pb(n)),
            Err(tokio_stream::wrappers::errors::BroadcastStreamRecvError::Lagged(n)) => Ok(pb::FabricNotice {
                notice: Some(pb::fabric_notice::Notice::Lagged(n)),
            }),
        });
        Ok(Response::new(Box::pin(s)))
    }
}
