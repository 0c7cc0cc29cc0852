//! One agent server per switch: the `SwitchAgent` service over the shared data plane.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use fabric_oob::proto::switch_agent_server::{SwitchAgent, SwitchAgentServer};
use fabric_oob::{proto, MAX_READ_LFT_BLOCKS};
use fabric_southbound::{CounterPort, DriverError, LftBlockWrite, SouthboundDriver};
use fabric_topology::{fmt_guid, PortNum};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_stream::StreamExt;
use tonic::transport::Server;
use tonic::{Request, Response, Status};

use super::epoch::{check_write_epoch, observe, request_epoch};
use super::io::KillableIo;
use super::mcast::{Mft, MFT_BLOCKS};
use super::mkey::{check_read, check_write, ManagementKey, MAX_PROTECT};
use super::state::{lock, AgentCtl, Sim};

/// Largest message an agent or the control service accepts or sends.
pub(super) const MAX_MESSAGE: usize = 64 << 20;

fn driver_status(e: DriverError) -> Status {
    match e {
        DriverError::InvalidPort { .. } | DriverError::InvalidLidPlan(_) | DriverError::LidConflict { .. } => {
            Status::invalid_argument(e.to_string())
        }
        DriverError::BlockOutOfRange { .. } => Status::out_of_range(e.to_string()),
        DriverError::UnknownSwitch(_) | DriverError::UnknownEndPort(_) => Status::not_found(e.to_string()),
        DriverError::Transient { .. } | DriverError::Timeout { .. } | DriverError::Unreachable { .. } => {
            Status::unavailable(e.to_string())
        }
        _ => Status::internal(e.to_string()),
    }
}

/// The agent of switch `i`.
struct AgentSvc {
    sim: Arc<Sim>,
    i: usize,
}

impl AgentSvc {
    fn ctl(&self) -> &AgentCtl {
        &self.sim.agents[self.i]
    }
    fn sl_to_vl_supported(&self) -> Result<(), Status> {
        if self.sim.without_sl_to_vl {
            return Err(Status::unimplemented("this agent has no SL-to-VL support"));
        }
        Ok(())
    }

    /// Prologue of a read: the request's manager epoch (INVALID_ARGUMENT when malformed), the
    /// management key (protect level 2), then the epoch raised.
    fn read_checks(&self, what: &str, md: &tonic::metadata::MetadataMap) -> Result<(), Status> {
        let a = self.ctl();
        let epoch = request_epoch(a, what, md)?;
        check_read(a, what, md)?;
        observe(a, epoch);
        Ok(())
    }

    /// Checks of a write (its `epoch` read from the metadata before the message is taken):
    /// the management key first (a refused call does not raise the epoch), then the epoch (a
    /// stale one is refused; `last`: this is the last check before the write is applied).
    fn write_checks(&self, what: &str, epoch: u64, key: u64, last: bool) -> Result<(), Status> {
        let a = self.ctl();
        check_write(a, what, key)?;
        check_write_epoch(a, &self.sim.refusal_log, what, epoch, last)
    }

    /// Common prologue: refuse when killed, apply the configured delay.
    async fn gate(&self) -> Result<(), Status> {
        let a = self.ctl();
        if a.killed.load(Ordering::SeqCst) {
            return Err(Status::unavailable("agent killed"));
        }
        let d = a.delay_ms.load(Ordering::SeqCst);
        if d > 0 {
            tokio::time::sleep(Duration::from_millis(d)).await;
        }
        Ok(())
    }
}

type EventStream = ReceiverStream<Result<proto::PortEvent, Status>>;

#[tonic::async_trait]
impl SwitchAgent for AgentSvc {
    async fn describe(&self, req: Request<proto::DescribeRequest>) -> Result<Response<proto::SwitchInfo>, Status> {
        self.gate().await?;
        let a = self.ctl();
        // Always open (no key check): a new leader's discovery fences the switch here.
        let manager_epoch = observe(a, request_epoch(a, "Describe", req.metadata())?);
        let powered = self.sim.state.lock().await.powered[a.sid.idx()];
        let s = self.sim.cabling.switch(a.sid);
        let mkey = *lock(&a.mkey);
        Ok(Response::new(proto::SwitchInfo {
            guid: s.guid,
            description: s.desc.clone(),
            port_count: u32::from(s.nports),
            lft_blocks: (u64::from(self.sim.max_lid) + 1).div_ceil(64) as u32,
            address_bits: self.sim.address_bits,
            max_address: self.sim.max_lid,
            address: lock(&self.sim.addrs).switch_lid[a.sid.idx()],
            lft_generation: a.lft_generation.load(Ordering::SeqCst),
            powered,
            vls: u32::from(self.sim.vls),
            vl_cap: u32::from(a.vl_cap),
            mft_blocks: MFT_BLOCKS,
            management_key_set: mkey.key != 0,
            management_protect: u32::from(mkey.protect),
            management_key: mkey.reported(),
            manager_epoch,
        }))
    }

    async fn get_ports(&self, req: Request<proto::GetPortsRequest>) -> Result<Response<proto::PortTable>, Status> {
        self.gate().await?;
        let a = self.ctl();
        self.read_checks("GetPorts", req.metadata())?;
        let n = self.sim.cabling.switch(a.sid).nports;
        let st = self.sim.state.lock().await;
        let up: Vec<bool> = (1..=n).map(|p| st.port_live(a.sid, p)).collect();
        drop(st);
        Ok(Response::new(proto::PortTable {
            guid: a.guid,
            ports: (1..=n)
                .zip(up)
                .map(|(p, up)| self.sim.port_info(a.sid, p, up))
                .collect(),
        }))
    }

    async fn set_addresses(
        &self,
        req: Request<proto::SetAddressesRequest>,
    ) -> Result<Response<proto::SetAddressesReply>, Status> {
        self.gate().await?;
        let epoch = request_epoch(self.ctl(), "SetAddresses", req.metadata())?;
        let r = req.into_inner();
        let a = self.ctl();
        self.write_checks("SetAddresses", epoch, r.management_key, true)?;
        let max = self.sim.max_lid;
        if r.lmc > 7 {
            return Err(Status::invalid_argument(format!("LMC {} not supported (0..=7)", r.lmc)));
        }
        if r.switch_address > max {
            return Err(Status::invalid_argument(format!(
                "address {} above {max}",
                r.switch_address
            )));
        }
        let mut updates = Vec::with_capacity(r.end_ports.len());
        for e in &r.end_ports {
            let ep = self
                .sim
                .cabling
                .end_port_by_guid(e.port_guid)
                .filter(|&ep| self.sim.cabling.end_port(ep).attach.map(|(s, _)| s) == Some(a.sid))
                .ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "end port {} is not cabled to this switch",
                        fmt_guid(e.port_guid)
                    ))
                })?;
            let span = 1u64 << r.lmc;
            if e.base != 0 && (!u64::from(e.base).is_multiple_of(span) || u64::from(e.base) + span - 1 > u64::from(max))
            {
                return Err(Status::invalid_argument(format!(
                    "base address {} of {} is misaligned or out of range",
                    e.base,
                    fmt_guid(e.port_guid)
                )));
            }
            updates.push((ep, e.base));
        }
        let mut ad = lock(&self.sim.addrs);
        ad.lmc = r.lmc as u8;
        ad.switch_lid[a.sid.idx()] = r.switch_address;
        for (ep, base) in updates {
            ad.end_base[ep.idx()] = base;
        }
        ad.dirty = true;
        Ok(Response::new(proto::SetAddressesReply {}))
    }

    async fn write_lft_blocks(
        &self,
        req: Request<proto::WriteLftBlocksRequest>,
    ) -> Result<Response<proto::WriteLftBlocksReply>, Status> {
        self.gate().await?;
        let epoch = request_epoch(self.ctl(), "WriteLftBlocks", req.metadata())?;
        let r = req.into_inner();
        let a = self.ctl();
        self.write_checks("WriteLftBlocks", epoch, r.management_key, false)?;
        let mut writes = Vec::with_capacity(r.blocks.len());
        for b in &r.blocks {
            let entries = <[u8; 64]>::try_from(b.entries.as_slice()).map_err(|_| {
                Status::invalid_argument(format!(
                    "LFT block {} has {} entries, expected 64",
                    b.block,
                    b.entries.len()
                ))
            })?;
            writes.push(LftBlockWrite {
                switch: a.guid,
                block: b.block,
                entries,
            });
        }
        let d = a.write_delay_ms.load(Ordering::SeqCst);
        if d > 0 {
            tokio::time::sleep(Duration::from_millis(d)).await;
            // Killed while "writing": nothing is applied.
            if a.killed.load(Ordering::SeqCst) {
                return Err(Status::unavailable("agent killed"));
            }
        }
        // Again just before the blocks are applied: a newer manager may have come meanwhile.
        check_write_epoch(a, &self.sim.refusal_log, "WriteLftBlocks", epoch, true)?;
        let rep = self.sim.mock.write_lft_blocks(&writes).await.map_err(driver_status)?;
        a.lft_generation.store(r.generation, Ordering::SeqCst);
        let c = &self.sim.counters;
        c.lft_write_calls.fetch_add(1, Ordering::SeqCst);
        c.lft_blocks_written
            .fetch_add(rep.blocks_written as u64, Ordering::SeqCst);
        Ok(Response::new(proto::WriteLftBlocksReply {
            written: rep.blocks_written as u32,
        }))
    }

    async fn read_lft_block(
        &self,
        req: Request<proto::ReadLftBlockRequest>,
    ) -> Result<Response<proto::LftBlock>, Status> {
        self.gate().await?;
        self.read_checks("ReadLftBlock", req.metadata())?;
        let block = req.into_inner().block;
        let e = self
            .sim
            .mock
            .read_lft_block(self.ctl().guid, block)
            .await
            .map_err(driver_status)?;
        self.sim.counters.lft_block_reads.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(proto::LftBlock {
            block,
            entries: e.to_vec(),
        }))
    }

    async fn read_lft_blocks(
        &self,
        req: Request<proto::ReadLftBlocksRequest>,
    ) -> Result<Response<proto::LftBlocks>, Status> {
        if self.sim.without_read_lft_blocks {
            return Err(Status::unimplemented(
                "ReadLftBlocks is not supported by this agent (--without-read-lft-blocks)",
            ));
        }
        self.gate().await?;
        self.read_checks("ReadLftBlocks", req.metadata())?;
        let proto::ReadLftBlocksRequest { first, count } = req.into_inner();
        if count == 0 || count > MAX_READ_LFT_BLOCKS {
            return Err(Status::invalid_argument(format!(
                "switch {}: ReadLftBlocks count {count} (1..={MAX_READ_LFT_BLOCKS} blocks per call)",
                fmt_guid(self.ctl().guid)
            )));
        }
        let mut blocks = Vec::with_capacity(count as usize);
        for block in (0..count).map(|i| first.checked_add(i)) {
            let Some(block) = block else {
                return Err(Status::out_of_range(format!(
                    "switch {}: ReadLftBlocks from block {first} count {count} passes block {}",
                    fmt_guid(self.ctl().guid),
                    u32::MAX
                )));
            };
            let e = self
                .sim
                .mock
                .read_lft_block(self.ctl().guid, block)
                .await
                .map_err(driver_status)?;
            blocks.push(proto::LftBlock {
                block,
                entries: e.to_vec(),
            });
        }
        let c = &self.sim.counters;
        c.lft_multi_reads.fetch_add(1, Ordering::SeqCst);
        c.lft_multi_blocks_read.fetch_add(u64::from(count), Ordering::SeqCst);
        Ok(Response::new(proto::LftBlocks { blocks }))
    }

    async fn write_mft_blocks(
        &self,
        req: Request<proto::WriteMftBlocksRequest>,
    ) -> Result<Response<proto::WriteMftBlocksReply>, Status> {
        self.gate().await?;
        let epoch = request_epoch(self.ctl(), "WriteMftBlocks", req.metadata())?;
        let r = req.into_inner();
        let a = self.ctl();
        self.write_checks("WriteMftBlocks", epoch, r.management_key, false)?;
        let nports = self.sim.cabling.switch(a.sid).nports;
        // Every block is checked before any is applied.
        let writes = r
            .blocks
            .iter()
            .map(|b| Mft::validate(b, nports))
            .collect::<Result<Vec<_>, _>>()?;
        let d = a.write_delay_ms.load(Ordering::SeqCst);
        if d > 0 {
            tokio::time::sleep(Duration::from_millis(d)).await;
            if a.killed.load(Ordering::SeqCst) {
                return Err(Status::unavailable("agent killed"));
            }
        }
        // Again just before the blocks are applied: a newer manager may have come meanwhile.
        check_write_epoch(a, &self.sim.refusal_log, "WriteMftBlocks", epoch, true)?;
        lock(&a.mft).apply(&writes);
        let c = &self.sim.counters;
        c.mft_write_calls.fetch_add(1, Ordering::SeqCst);
        c.mft_blocks_written.fetch_add(writes.len() as u64, Ordering::SeqCst);
        Ok(Response::new(proto::WriteMftBlocksReply {
            written: writes.len() as u32,
        }))
    }

    async fn read_mft_block(
        &self,
        req: Request<proto::ReadMftBlockRequest>,
    ) -> Result<Response<proto::MftBlock>, Status> {
        self.gate().await?;
        let a = self.ctl();
        self.read_checks("ReadMftBlock", req.metadata())?;
        let r = req.into_inner();
        let probe = proto::MftBlock {
            block: r.block,
            position: r.position,
            entries: vec![0; fabric_southbound::MFT_BLOCK_SIZE],
        };
        Mft::validate(&probe, self.sim.cabling.switch(a.sid).nports)?;
        let entries = lock(&a.mft).read(r.block, r.position as u8);
        self.sim.counters.mft_block_reads.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(proto::MftBlock {
            block: r.block,
            position: r.position,
            entries: entries.iter().map(|&e| u32::from(e)).collect(),
        }))
    }

    async fn set_management_key(
        &self,
        req: Request<proto::SetManagementKeyRequest>,
    ) -> Result<Response<proto::SetManagementKeyReply>, Status> {
        self.gate().await?;
        let epoch = request_epoch(self.ctl(), "SetManagementKey", req.metadata())?;
        let r = req.into_inner();
        let a = self.ctl();
        self.write_checks("SetManagementKey", epoch, r.management_key, true)?;
        if r.protect > u32::from(MAX_PROTECT) {
            return Err(Status::invalid_argument(format!(
                "switch {}: protect level {} (levels 0..={MAX_PROTECT})",
                fmt_guid(a.guid),
                r.protect
            )));
        }
        *lock(&a.mkey) = ManagementKey {
            key: r.key,
            protect: r.protect as u8,
        };
        Ok(Response::new(proto::SetManagementKeyReply {}))
    }

    async fn set_sl_to_vl(&self, req: Request<proto::SlToVlTable>) -> Result<Response<proto::SetSlToVlReply>, Status> {
        self.gate().await?;
        self.sl_to_vl_supported()?;
        let epoch = request_epoch(self.ctl(), "SetSlToVl", req.metadata())?;
        let r = req.into_inner();
        self.write_checks("SetSlToVl", epoch, r.management_key, true)?;
        let v = r.vl_of_sl;
        let table = <[u8; 16]>::try_from(v.as_slice())
            .map_err(|_| Status::invalid_argument(format!("SL-to-VL table has {} entries, expected 16", v.len())))?;
        let cap = self.ctl().vl_cap;
        if let Some((sl, vl)) = table.iter().enumerate().find(|(_, &vl)| vl >= cap) {
            return Err(Status::invalid_argument(format!(
                "switch {}: SL {sl} mapped to VL {vl}: its VLCap is {cap} data VLs (VL 0..={})",
                fmt_guid(self.ctl().guid),
                cap - 1
            )));
        }
        *lock(&self.ctl().sl2vl) = table;
        Ok(Response::new(proto::SetSlToVlReply {}))
    }

    async fn get_sl_to_vl(
        &self,
        req: Request<proto::GetSlToVlRequest>,
    ) -> Result<Response<proto::SlToVlTable>, Status> {
        self.gate().await?;
        self.sl_to_vl_supported()?;
        self.read_checks("GetSlToVl", req.metadata())?;
        Ok(Response::new(proto::SlToVlTable {
            vl_of_sl: lock(&self.ctl().sl2vl).to_vec(),
            management_key: 0,
        }))
    }

    async fn set_port_state(
        &self,
        req: Request<proto::SetPortStateRequest>,
    ) -> Result<Response<proto::SetPortStateReply>, Status> {
        self.gate().await?;
        let epoch = request_epoch(self.ctl(), "SetPortState", req.metadata())?;
        let r = req.into_inner();
        self.write_checks("SetPortState", epoch, r.management_key, true)?;
        let port = PortNum::try_from(r.port).map_err(|_| Status::invalid_argument(format!("no port {}", r.port)))?;
        self.sim
            .mock
            .set_port_state(self.ctl().guid, port, r.up)
            .await
            .map_err(driver_status)?;
        self.sim.refresh().await.map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(proto::SetPortStateReply {}))
    }

    async fn set_power(&self, req: Request<proto::SetPowerRequest>) -> Result<Response<proto::SetPowerReply>, Status> {
        self.gate().await?;
        let epoch = request_epoch(self.ctl(), "SetPower", req.metadata())?;
        let r = req.into_inner();
        self.write_checks("SetPower", epoch, r.management_key, true)?;
        self.sim
            .mock
            .set_switch_state(self.ctl().guid, r.on)
            .await
            .map_err(driver_status)?;
        self.sim.refresh().await.map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(proto::SetPowerReply {}))
    }

    async fn read_port_counters(
        &self,
        req: Request<proto::ReadPortCountersRequest>,
    ) -> Result<Response<proto::PortCountersTable>, Status> {
        self.gate().await?;
        let a = self.ctl();
        self.read_checks("ReadPortCounters", req.metadata())?;
        let nports = self.sim.cabling.switch(a.sid).nports;
        let asked = req.into_inner().ports;
        let asked: Vec<u32> = if asked.is_empty() {
            (1..=u32::from(nports)).collect()
        } else {
            asked
        };
        // The data plane (the mock) keeps the counters; a port number beyond 8 bits is answered
        // here, the others by the mock (no such port, powered off).
        let readable: Vec<CounterPort> = asked
            .iter()
            .filter_map(|&p| PortNum::try_from(p).ok())
            .map(|port| CounterPort::Switch { switch: a.guid, port })
            .collect();
        let mut read = self
            .sim
            .mock
            .read_port_counters(&readable)
            .await
            .map_err(driver_status)?
            .into_iter();
        let ports = asked
            .iter()
            .map(|&port| {
                let answer = match PortNum::try_from(port) {
                    Err(_) => None,
                    Ok(_) => read.next().map(|r| r.counters),
                };
                match answer {
                    Some(Ok(c)) => proto::PortCountersEntry {
                        port,
                        counters: Some(c.into()),
                        error: String::new(),
                    },
                    Some(Err(e)) => proto::PortCountersEntry {
                        port,
                        counters: None,
                        error: format!("port {port}: {e}"),
                    },
                    None => proto::PortCountersEntry {
                        port,
                        counters: None,
                        error: format!("port {port}: no such port (the switch has ports 1..={nports})"),
                    },
                }
            })
            .collect();
        self.sim.counters.port_counter_reads.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(proto::PortCountersTable { guid: a.guid, ports }))
    }

    type WatchPortsStream = EventStream;

    async fn watch_ports(&self, req: Request<proto::WatchPortsRequest>) -> Result<Response<EventStream>, Status> {
        self.gate().await?;
        let a = self.ctl();
        self.read_checks("WatchPorts", req.metadata())?;
        let (tx, rx) = mpsc::channel(256);
        // Subscribe before the snapshot, under the state lock: no change is lost in between.
        let st = self.sim.state.lock().await;
        let mut brx = a.events.subscribe();
        let mut stop = a.epoch_tx.subscribe();
        let powered = st.powered[a.sid.idx()];
        let nports = self.sim.cabling.switch(a.sid).nports;
        let mut snap = vec![proto::PortEvent {
            snapshot: true,
            powered,
            ..Default::default()
        }];
        for p in 1..=nports {
            let pi = self.sim.port_info(a.sid, p, st.port_live(a.sid, p));
            snap.push(proto::PortEvent {
                snapshot: true,
                port: u32::from(p),
                state: pi.state,
                neighbour: pi.neighbour,
                powered,
                ..Default::default()
            });
        }
        drop(st);
        if let Some(last) = snap.last_mut() {
            last.snapshot_end = true;
        }
        tokio::spawn(async move {
            for ev in snap {
                if tx.send(Ok(ev)).await.is_err() {
                    return;
                }
            }
            loop {
                tokio::select! {
                    _ = stop.changed() => return,
                    ev = brx.recv() => match ev {
                        Ok(ev) => if tx.send(Ok(ev)).await.is_err() { return },
                        // Lagged or closed: end the stream, the driver resynchronises.
                        Err(_) => return,
                    },
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// Serves switch `i`'s agent on `listener` (connections cut when the agent's epoch moves).
pub(super) fn spawn_agent(sim: Arc<Sim>, i: usize, listener: TcpListener) {
    let epoch = sim.agents[i].epoch.clone();
    let incoming = TcpListenerStream::new(listener).map(move |r| {
        r.map(|s| {
            let _ = s.set_nodelay(true);
            KillableIo {
                inner: s,
                born: epoch.load(Ordering::SeqCst),
                epoch: epoch.clone(),
            }
        })
    });
    let svc = SwitchAgentServer::new(AgentSvc { sim: sim.clone(), i })
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    let h = tokio::spawn(async move {
        let _ = Server::builder().add_service(svc).serve_with_incoming(incoming).await;
    });
    *lock(&sim.agents[i].server) = Some(h);
}
