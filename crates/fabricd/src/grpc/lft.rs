//! GetLft (one message) and StreamLft (bounded messages): the installed LFTs, raw or as OpenSM's
//! `opensm-lfts.dump`, answered from the published generation.
//!
//! A full OpenSM dump is ~76 bytes per (switch, LID): 18 GB for a 34 992-node fabric, far beyond
//! one gRPC message. StreamLft streams it in pieces of whole lines (about
//! [`fabric_routing::opensm::FLUSH_BYTES`] each) produced by a blocking task through a small
//! bounded channel, so neither side holds more than the tables plus a few pieces; GetLft refuses
//! a dump that would not fit one message.

use std::io;
use std::pin::Pin;
use std::sync::Arc;

use fabric_proto::v1 as pb;
use fabric_routing::OpensmLftWriter;
use fabric_topology::SwitchId;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use super::request::resolve_switch;
use super::FabricService;
use crate::state::Generation;

/// The StreamLft reply stream.
pub(super) type LftStream = Pin<Box<dyn Stream<Item = Result<pb::GetLftResponse, Status>> + Send + 'static>>;

/// Messages produced ahead of the client (each at most one switch row or one dump piece).
const STREAM_DEPTH: usize = 4;

/// A parsed GetLft/StreamLft request.
struct LftRequest {
    g: Arc<Generation>,
    one: Option<SwitchId>,
    format: pb::LftFormat,
}

impl LftRequest {
    fn raw(&self, s: SwitchId) -> pb::SwitchLft {
        let sw = self.g.fabric.switch(s);
        pb::SwitchLft {
            guid: sw.guid,
            name: sw.desc.clone(),
            lid: self.g.lids.switch_lid(s),
            lft: self.g.lfts.row(s).to_vec(),
        }
    }

    fn raw_ids(&self) -> Vec<SwitchId> {
        match self.one {
            Some(s) => vec![s],
            None => self.g.fabric.switch_ids().collect(),
        }
    }

    /// Writes the OpenSM dump (one switch or all) into `w`.
    fn opensm(&self, w: &mut dyn io::Write) -> io::Result<()> {
        let dump = OpensmLftWriter::new(&self.g.fabric, &self.g.lids, &self.g.lfts);
        match self.one {
            Some(s) => dump.write_switch(s, w),
            None => dump.write_all(w),
        }
    }
}

/// A `Write` that refuses to grow past `limit` bytes (GetLft's one message).
struct Capped {
    out: Vec<u8>,
    limit: usize,
}

impl io::Write for Capped {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if self.out.len() + b.len() > self.limit {
            return Err(io::Error::other(TooBig));
        }
        self.out.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the reply exceeds one message")]
struct TooBig;

fn is_too_big(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(<dyn std::error::Error + Send + Sync>::is::<TooBig>)
}

fn too_big(what: &str) -> Status {
    Status::resource_exhausted(format!(
        "the {what} exceeds one gRPC message ({} MiB): use StreamLft (`fabricctl lft` streams)",
        fabric_proto::MAX_MESSAGE_BYTES >> 20
    ))
}

/// Sends each write (whole dump lines) as one StreamLft message; an error once the client is
/// gone.
struct ChunkSink {
    tx: mpsc::Sender<Result<pb::GetLftResponse, Status>>,
    generation: u64,
    sent: bool,
}

impl ChunkSink {
    fn send(&mut self, opensm_dump: String, switches: Vec<pb::SwitchLft>) -> io::Result<()> {
        self.sent = true;
        let m = pb::GetLftResponse {
            generation: self.generation,
            switches,
            opensm_dump,
        };
        self.tx
            .blocking_send(Ok(m))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "StreamLft client gone"))
    }
}

impl io::Write for ChunkSink {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let text = std::str::from_utf8(b).map_err(io::Error::other)?;
        self.send(text.to_string(), Vec::new())?;
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl FabricService {
    fn lft_request(&self, req: pb::GetLftRequest) -> Result<LftRequest, Status> {
        let (_, g) = self.current()?;
        let one = if req.switch.trim().is_empty() {
            None
        } else {
            Some(resolve_switch(&g.fabric, &req.switch)?)
        };
        let format = pb::LftFormat::try_from(req.format)
            .map_err(|_| Status::invalid_argument(format!("unknown LFT format {}", req.format)))?;
        Ok(LftRequest { g, one, format })
    }

    pub(super) async fn handle_get_lft(
        &self,
        req: Request<pb::GetLftRequest>,
    ) -> Result<Response<pb::GetLftResponse>, Status> {
        let r = self.lft_request(req.into_inner())?;
        let generation = r.g.number;
        let limit = fabric_proto::MAX_MESSAGE_BYTES - 4096;
        match r.format {
            pb::LftFormat::Raw => {
                let ids = r.raw_ids();
                if ids.len().saturating_mul(r.g.lfts.row_len() + 64) > limit {
                    return Err(too_big("raw tables"));
                }
                let switches = ids.into_iter().map(|s| r.raw(s)).collect();
                Ok(Response::new(pb::GetLftResponse {
                    generation,
                    switches,
                    opensm_dump: String::new(),
                }))
            }
            pb::LftFormat::Opensm => {
                let dump = tokio::task::spawn_blocking(move || {
                    let mut out = Capped { out: Vec::new(), limit };
                    r.opensm(&mut out).map(|()| out.out)
                })
                .await
                .map_err(|e| Status::internal(format!("dump task failed: {e}")))?
                .map_err(|e| {
                    if is_too_big(&e) {
                        too_big("OpenSM dump")
                    } else {
                        Status::internal(format!("dump failed: {e}"))
                    }
                })?;
                let opensm_dump =
                    String::from_utf8(dump).map_err(|e| Status::internal(format!("dump is not UTF-8: {e}")))?;
                Ok(Response::new(pb::GetLftResponse {
                    generation,
                    switches: Vec::new(),
                    opensm_dump,
                }))
            }
        }
    }

    pub(super) async fn handle_stream_lft(
        &self,
        req: Request<pb::GetLftRequest>,
    ) -> Result<Response<LftStream>, Status> {
        let r = self.lft_request(req.into_inner())?;
        let (tx, rx) = mpsc::channel(STREAM_DEPTH);
        let mut sink = ChunkSink {
            tx,
            generation: r.g.number,
            sent: false,
        };
        tokio::task::spawn_blocking(move || {
            let done = match r.format {
                pb::LftFormat::Raw => r
                    .raw_ids()
                    .into_iter()
                    .try_for_each(|s| sink.send(String::new(), vec![r.raw(s)])),
                pb::LftFormat::Opensm => r.opensm(&mut sink),
            };
            let done = match done {
                // Nothing to dump (the switch is down or has no LID): one empty message still
                // names the generation.
                Ok(()) if !sink.sent => sink.send(String::new(), Vec::new()),
                other => other,
            };
            if let Err(e) = done {
                if e.kind() != io::ErrorKind::BrokenPipe {
                    let _ = sink
                        .tx
                        .blocking_send(Err(Status::internal(format!("dump failed: {e}"))));
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn capped_refuses_past_its_limit() {
        let mut c = Capped {
            out: Vec::new(),
            limit: 8,
        };
        c.write_all(b"12345").unwrap();
        let e = c.write_all(b"6789").unwrap_err();
        assert!(is_too_big(&e));
        assert_eq!(c.out, b"12345");
        assert!(too_big("OpenSM dump").message().contains("use StreamLft"));
    }
}
