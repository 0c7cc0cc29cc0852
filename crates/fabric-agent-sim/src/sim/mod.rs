//! The simulator: data plane ([`MockFabric`]), one killable agent server per switch, the control
//! service and the console.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use fabric_oob::proto::sim_control_server::{SimControl, SimControlServer};
use fabric_oob::proto::switch_agent_server::{SwitchAgent, SwitchAgentServer};
use fabric_oob::proto::{self, NeighbourKind, PortState};
use fabric_oob::{AgentKey, Inventory, InventoryEntry};
use fabric_routing::LidPlan;
use fabric_southbound::{DriverError, LftBlockWrite, MockConfig, MockFabric, SouthboundDriver};
use fabric_topology::{fmt_guid, parse_guid, Fabric, Guid, Lid, PortNum, Remote, SwitchId};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_stream::StreamExt;
use tonic::transport::server::Connected;
use tonic::transport::Server;
use tonic::{Request, Response, Status};

use crate::Args;

const MAX_MESSAGE: usize = 64 << 20;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Simulator errors (startup and commands).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("{0}")]
    Topology(String),
    #[error("{0}")]
    Inventory(#[from] fabric_oob::InventoryError),
    #[error("I/O error on {what}: {err}")]
    Io { what: String, err: io::Error },
    #[error("{0}")]
    Command(String),
    #[error(transparent)]
    Driver(#[from] DriverError),
}

/// A TCP connection that fails all I/O once its agent's epoch moves (kill / drop connections).
struct KillableIo {
    inner: TcpStream,
    epoch: Arc<AtomicU64>,
    born: u64,
}

impl KillableIo {
    fn dead(&self) -> bool {
        self.epoch.load(Ordering::SeqCst) != self.born
    }
}

fn reset() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        "agent connection dropped by the simulator",
    )
}

impl AsyncRead for KillableIo {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.dead() {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.dead() {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.dead() {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl Connected for KillableIo {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

/// Control block of one agent.
struct AgentCtl {
    guid: Guid,
    sid: SwitchId,
    addr: SocketAddr,
    killed: AtomicBool,
    delay_ms: AtomicU64,
    /// Extra delay of `WriteLftBlocks` before the blocks are applied.
    write_delay_ms: AtomicU64,
    /// Connections born in an older epoch fail.
    epoch: Arc<AtomicU64>,
    /// Tells open event streams to end (value = epoch).
    epoch_tx: watch::Sender<u64>,
    events: broadcast::Sender<proto::PortEvent>,
    server: Mutex<Option<JoinHandle<()>>>,
    lft_generation: AtomicU64,
    /// VL of each SL (one table for every port pair of the switch).
    sl2vl: Mutex<[u8; 16]>,
}

/// Addresses set through the agents.
struct Addrs {
    lmc: u8,
    switch_lid: Vec<Lid>,
    end_base: Vec<Lid>,
    dirty: bool,
}

/// The whole simulator.
pub struct Sim {
    mock: Arc<MockFabric>,
    cabling: Fabric,
    /// Live snapshot (states), refreshed after every state change.
    state: tokio::sync::Mutex<Fabric>,
    addrs: Mutex<Addrs>,
    agents: Vec<AgentCtl>,
    max_lid: Lid,
    address_bits: u32,
    /// Virtual lanes per port.
    vls: u8,
    /// SL-to-VL RPCs answer UNIMPLEMENTED (`--without-sl-to-vl`).
    without_sl_to_vl: bool,
    counters: Counters,
}

/// What the agents did (the `GetCounters` control RPC).
#[derive(Default)]
struct Counters {
    lft_write_calls: AtomicU64,
    lft_blocks_written: AtomicU64,
    lft_block_reads: AtomicU64,
}

impl Sim {
    fn port_info(f: &Fabric, sid: SwitchId, pn: PortNum) -> proto::PortInfo {
        let s = f.switch(sid);
        let p = &s.ports[pn as usize];
        let (up, neighbour) = match p.remote {
            Remote::None => (false, None),
            Remote::Switch { sw, port } => {
                let r = f.switch(sw);
                (
                    f.switch_link_live(sid, pn).is_some(),
                    Some(proto::Neighbour {
                        kind: NeighbourKind::Switch as i32,
                        node_guid: r.guid,
                        port_guid: r.guid,
                        port: port as u32,
                        description: r.desc.clone(),
                        node_ports: r.nports as u32,
                    }),
                )
            }
            Remote::EndPort(ep) => {
                let e = f.end_port(ep);
                (
                    f.end_port_live(ep),
                    Some(proto::Neighbour {
                        kind: NeighbourKind::Ca as i32,
                        node_guid: e.node_guid,
                        port_guid: e.port_guid,
                        port: e.port_num as u32,
                        description: e.desc.clone(),
                        node_ports: e.node_ports as u32,
                    }),
                )
            }
        };
        proto::PortInfo {
            port: pn as u32,
            state: if up {
                PortState::Up as i32
            } else {
                PortState::Down as i32
            },
            neighbour,
            speed: p.speed.clone().unwrap_or_default(),
        }
    }

    /// Re-reads the data plane's states and pushes the differences to the agents' streams.
    async fn refresh(&self) -> Result<(), SimError> {
        let mut state = self.state.lock().await;
        let new = self.mock.discover().await?;
        for a in &self.agents {
            let (old_s, new_s) = (state.switch(a.sid), new.switch(a.sid));
            if old_s.up != new_s.up {
                let _ = a.events.send(proto::PortEvent {
                    powered: new_s.up,
                    ..Default::default()
                });
            }
            for pn in 1..=new_s.nports {
                let (o, n) = (Self::port_info(&state, a.sid, pn), Self::port_info(&new, a.sid, pn));
                if o.state != n.state {
                    let _ = a.events.send(proto::PortEvent {
                        port: pn as u32,
                        state: n.state,
                        neighbour: n.neighbour,
                        powered: new_s.up,
                        ..Default::default()
                    });
                }
            }
        }
        *state = new;
        Ok(())
    }

    /// Installs the addresses set through the agents into the data plane (before traces).
    async fn commit_addresses(&self) -> Result<(), SimError> {
        let plan = {
            let mut a = lock(&self.addrs);
            if !a.dirty {
                return Ok(());
            }
            a.dirty = false;
            LidPlan {
                lmc: a.lmc,
                max_lid: self.max_lid,
                switch_lid: a.switch_lid.clone(),
                end_port_base: a.end_base.clone(),
            }
        };
        if let Err(e) = self.mock.configure_lids(&self.cabling, &plan).await {
            lock(&self.addrs).dirty = true;
            return Err(e.into());
        }
        Ok(())
    }

    fn find_switches(&self, key: &str) -> Result<Vec<usize>, SimError> {
        if key == "all" {
            return Ok((0..self.agents.len()).collect());
        }
        self.cabling
            .find_switch(key)
            .map(|s| vec![s.idx()])
            .ok_or_else(|| SimError::Command(format!("unknown switch `{key}`")))
    }

    fn kill(&self, i: usize) {
        let a = &self.agents[i];
        a.killed.store(true, Ordering::SeqCst);
        if let Some(h) = lock(&a.server).take() {
            h.abort();
        }
        self.drop_connections(i);
    }

    fn drop_connections(&self, i: usize) {
        let a = &self.agents[i];
        let e = a.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = a.epoch_tx.send(e);
    }

    async fn restore(self: &Arc<Self>, i: usize) -> Result<(), SimError> {
        let a = &self.agents[i];
        if lock(&a.server).is_some() {
            return Ok(());
        }
        // The old listener may take a moment to be released after the abort.
        let mut tries = 0;
        let listener = loop {
            match TcpListener::bind(a.addr).await {
                Ok(l) => break l,
                Err(e) if tries < 50 => {
                    tries += 1;
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(err) => {
                    return Err(SimError::Io {
                        what: format!("agent address {}", a.addr),
                        err,
                    })
                }
            }
        };
        a.killed.store(false, Ordering::SeqCst);
        spawn_agent(self.clone(), i, listener);
        Ok(())
    }

    /// Runs one console / control command and returns its output.
    pub async fn command(self: &Arc<Self>, line: &str) -> Result<String, SimError> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let arg = |i: usize| {
            w.get(i)
                .copied()
                .ok_or_else(|| SimError::Command(format!("`{}`: missing argument", line.trim())))
        };
        let port = |s: &str| {
            s.parse::<PortNum>()
                .map_err(|_| SimError::Command(format!("invalid port `{s}`")))
        };
        let guid = |s: &str| parse_guid(s).ok_or_else(|| SimError::Command(format!("invalid GUID `{s}`")));
        let one = |s: &str| -> Result<Guid, SimError> {
            let v = self.find_switches(s)?;
            if v.len() != 1 {
                return Err(SimError::Command("`all` is not allowed here".into()));
            }
            Ok(self.agents[v[0]].guid)
        };
        match w.first().copied().unwrap_or("") {
            "" => Ok(String::new()),
            "link-down" | "link-up" => {
                let (g, p) = (one(arg(1)?)?, port(arg(2)?)?);
                self.mock.set_port_state(g, p, w[0] == "link-up").await?;
                self.refresh().await?;
                Ok(format!("{} {}[{p}]", w[0], fmt_guid(g)))
            }
            "switch-down" | "switch-up" => {
                let g = one(arg(1)?)?;
                self.mock.set_switch_state(g, w[0] == "switch-up").await?;
                self.refresh().await?;
                Ok(format!("{} {}", w[0], fmt_guid(g)))
            }
            "node-down" | "node-up" => {
                let g = guid(arg(1)?)?;
                self.mock.set_end_port_state(g, w[0] == "node-up").await?;
                self.refresh().await?;
                Ok(format!("{} {}", w[0], fmt_guid(g)))
            }
            "kill" => {
                let v = self.find_switches(arg(1)?)?;
                for &i in &v {
                    self.kill(i);
                }
                Ok(format!("killed {} agent(s)", v.len()))
            }
            "restore" => {
                let v = self.find_switches(arg(1)?)?;
                for &i in &v {
                    self.restore(i).await?;
                }
                Ok(format!("restored {} agent(s)", v.len()))
            }
            "drop" => {
                let v = self.find_switches(arg(1)?)?;
                for &i in &v {
                    self.drop_connections(i);
                }
                Ok(format!("dropped connections of {} agent(s)", v.len()))
            }
            "delay" => {
                let v = self.find_switches(arg(1)?)?;
                let ms: u64 = arg(2)?.parse().map_err(|_| SimError::Command("invalid delay".into()))?;
                for &i in &v {
                    self.agents[i].delay_ms.store(ms, Ordering::SeqCst);
                }
                Ok(format!("delay {ms} ms on {} agent(s)", v.len()))
            }
            "write-delay" => {
                let v = self.find_switches(arg(1)?)?;
                let ms: u64 = arg(2)?.parse().map_err(|_| SimError::Command("invalid delay".into()))?;
                for &i in &v {
                    self.agents[i].write_delay_ms.store(ms, Ordering::SeqCst);
                }
                Ok(format!("write delay {ms} ms on {} agent(s)", v.len()))
            }
            "verify" => {
                let r = self.verify(w.get(1) == Some(&"escape")).await?;
                Ok(format!(
                    "pairs checked {}, unreachable {}, disconnected {}{}",
                    r.pairs_checked,
                    r.unreachable_count,
                    r.disconnected,
                    r.unreachable.first().map(|u| format!("; first: {}", u.reason)).unwrap_or_default()
                ))
            }
            "trace" => {
                let (src, lid) = (guid(arg(1)?)?, arg(2)?.parse::<Lid>().map_err(|_| SimError::Command("invalid LID".into()))?);
                let r = self.trace(src, false, lid).await?;
                let hops: Vec<String> =
                    r.hops.iter().map(|h| format!("{}[{}->{}]", fmt_guid(h.switch_guid), h.in_port, h.out_port)).collect();
                Ok(format!("{}{}", hops.join(" "), if r.error.is_empty() { String::new() } else { format!(" error: {}", r.error) }))
            }
            "status" => {
                let killed = self.agents.iter().filter(|a| a.killed.load(Ordering::SeqCst)).count();
                let st = self.state.lock().await;
                let (total, live) = st.count_links();
                Ok(format!(
                    "{} agents ({} killed), {} end ports, links {live}/{total} up, address bits {}",
                    self.agents.len(),
                    killed,
                    st.num_end_ports(),
                    self.address_bits
                ))
            }
            "quit" | "exit" => std::process::exit(0),
            "help" => Ok("commands: link-down|link-up SW PORT, switch-down|switch-up SW, node-down|node-up PORTGUID, kill|restore|drop SW|all, delay SW|all MS, write-delay SW|all MS, verify [escape], trace SRCPORTGUID LID, status, quit".into()),
            other => Err(SimError::Command(format!("unknown command `{other}` (try `help`)"))),
        }
    }

    async fn verify(&self, escape: bool) -> Result<proto::VerifyAllPairsReply, SimError> {
        self.commit_addresses().await?;
        let mock = self.mock.clone();
        let r = tokio::task::spawn_blocking(move || mock.verify_all_pairs(escape))
            .await
            .map_err(|e| SimError::Command(format!("verification task failed: {e}")))?;
        Ok(proto::VerifyAllPairsReply {
            pairs_checked: r.pairs_checked as u64,
            unreachable_count: r.unreachable_count as u64,
            disconnected: r.disconnected as u64,
            unreachable: r
                .unreachable
                .into_iter()
                .map(|(s, d, reason)| proto::UnreachablePair {
                    source: s,
                    destination: d,
                    reason,
                })
                .collect(),
        })
    }

    async fn trace(&self, source: Guid, from_switch: bool, lid: Lid) -> Result<proto::TraceReply, SimError> {
        self.commit_addresses().await?;
        let r = if from_switch {
            self.mock.trace_from_switch(source, lid)
        } else {
            self.mock.trace(source, lid)
        };
        Ok(match r {
            Ok(h) => proto::TraceReply {
                hops: hops(&h),
                error: String::new(),
            },
            Err(e) => proto::TraceReply {
                hops: Vec::new(),
                error: e.to_string(),
            },
        })
    }
}

fn hops(h: &[fabric_southbound::Hop]) -> Vec<proto::Hop> {
    h.iter()
        .map(|h| proto::Hop {
            switch_guid: h.switch,
            in_port: h.in_port as u32,
            out_port: h.out_port as u32,
        })
        .collect()
}

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
    async fn describe(&self, _: Request<proto::DescribeRequest>) -> Result<Response<proto::SwitchInfo>, Status> {
        self.gate().await?;
        let a = self.ctl();
        let st = self.sim.state.lock().await;
        let s = st.switch(a.sid);
        Ok(Response::new(proto::SwitchInfo {
            guid: s.guid,
            description: s.desc.clone(),
            port_count: s.nports as u32,
            lft_blocks: (self.sim.max_lid as u64 + 1).div_ceil(64) as u32,
            address_bits: self.sim.address_bits,
            max_address: self.sim.max_lid,
            address: lock(&self.sim.addrs).switch_lid[a.sid.idx()],
            lft_generation: a.lft_generation.load(Ordering::SeqCst),
            powered: s.up,
            vls: self.sim.vls as u32,
        }))
    }

    async fn get_ports(&self, _: Request<proto::GetPortsRequest>) -> Result<Response<proto::PortTable>, Status> {
        self.gate().await?;
        let a = self.ctl();
        let st = self.sim.state.lock().await;
        let n = st.switch(a.sid).nports;
        Ok(Response::new(proto::PortTable {
            guid: a.guid,
            ports: (1..=n).map(|p| Sim::port_info(&st, a.sid, p)).collect(),
        }))
    }

    async fn set_addresses(
        &self,
        req: Request<proto::SetAddressesRequest>,
    ) -> Result<Response<proto::SetAddressesReply>, Status> {
        self.gate().await?;
        let r = req.into_inner();
        let a = self.ctl();
        let max = self.sim.max_lid;
        if r.lmc > 1 {
            return Err(Status::invalid_argument(format!("LMC {} not supported", r.lmc)));
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
            if e.base != 0 && (!(e.base as u64).is_multiple_of(span) || e.base as u64 + span - 1 > max as u64) {
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
        let r = req.into_inner();
        let a = self.ctl();
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

    async fn set_sl_to_vl(&self, req: Request<proto::SlToVlTable>) -> Result<Response<proto::SetSlToVlReply>, Status> {
        self.gate().await?;
        self.sl_to_vl_supported()?;
        let v = req.into_inner().vl_of_sl;
        let table = <[u8; 16]>::try_from(v.as_slice())
            .map_err(|_| Status::invalid_argument(format!("SL-to-VL table has {} entries, expected 16", v.len())))?;
        let vls = self.sim.vls;
        if let Some((sl, vl)) = table.iter().enumerate().find(|(_, &vl)| vl >= vls) {
            return Err(Status::invalid_argument(format!(
                "SL {sl} mapped to VL {vl}: the switch operates VLs 0..{}",
                vls - 1
            )));
        }
        *lock(&self.ctl().sl2vl) = table;
        Ok(Response::new(proto::SetSlToVlReply {}))
    }

    async fn get_sl_to_vl(&self, _: Request<proto::GetSlToVlRequest>) -> Result<Response<proto::SlToVlTable>, Status> {
        self.gate().await?;
        self.sl_to_vl_supported()?;
        Ok(Response::new(proto::SlToVlTable {
            vl_of_sl: lock(&self.ctl().sl2vl).to_vec(),
        }))
    }

    async fn set_port_state(
        &self,
        req: Request<proto::SetPortStateRequest>,
    ) -> Result<Response<proto::SetPortStateReply>, Status> {
        self.gate().await?;
        let r = req.into_inner();
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
        self.sim
            .mock
            .set_switch_state(self.ctl().guid, req.into_inner().on)
            .await
            .map_err(driver_status)?;
        self.sim.refresh().await.map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(proto::SetPowerReply {}))
    }

    type WatchPortsStream = EventStream;

    async fn watch_ports(&self, _: Request<proto::WatchPortsRequest>) -> Result<Response<EventStream>, Status> {
        self.gate().await?;
        let a = self.ctl();
        let (tx, rx) = mpsc::channel(256);
        // Subscribe before the snapshot, under the state lock: no change is lost in between.
        let st = self.sim.state.lock().await;
        let mut brx = a.events.subscribe();
        let mut stop = a.epoch_tx.subscribe();
        let s = st.switch(a.sid);
        let mut snap = vec![proto::PortEvent {
            snapshot: true,
            powered: s.up,
            ..Default::default()
        }];
        for p in 1..=s.nports {
            let pi = Sim::port_info(&st, a.sid, p);
            snap.push(proto::PortEvent {
                snapshot: true,
                port: p as u32,
                state: pi.state,
                neighbour: pi.neighbour,
                powered: s.up,
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

struct ControlSvc {
    sim: Arc<Sim>,
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
    async fn command(&self, req: Request<proto::CommandRequest>) -> Result<Response<proto::CommandReply>, Status> {
        self.sim
            .command(&req.into_inner().line)
            .await
            .map(|output| Response::new(proto::CommandReply { output }))
            .map_err(|e| Status::invalid_argument(e.to_string()))
    }
    async fn get_counters(&self, _: Request<proto::GetCountersRequest>) -> Result<Response<proto::Counters>, Status> {
        let c = &self.sim.counters;
        Ok(Response::new(proto::Counters {
            lft_write_calls: c.lft_write_calls.load(Ordering::SeqCst),
            lft_blocks_written: c.lft_blocks_written.load(Ordering::SeqCst),
            lft_block_reads: c.lft_block_reads.load(Ordering::SeqCst),
        }))
    }
}

fn spawn_agent(sim: Arc<Sim>, i: usize, listener: TcpListener) {
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

async fn bind(addr: SocketAddr) -> Result<TcpListener, SimError> {
    TcpListener::bind(addr).await.map_err(|err| SimError::Io {
        what: format!("bind {addr}"),
        err,
    })
}

/// Starts everything, writes the inventory, then serves until `quit`, SIGTERM or Ctrl-C.
pub async fn run(args: Args) -> Result<(), SimError> {
    let (mock, name) = match (&args.topology, &args.generate) {
        (Some(p), _) => (MockFabric::from_topology_file(p)?, p.display().to_string()),
        (None, Some(g)) => (MockFabric::from_generator(g, None)?, g.clone()),
        (None, None) => return Err(SimError::Topology("give --topology FILE or --generate SPEC".into())),
    };
    for w in mock.topology_warnings() {
        eprintln!("warning: {w}");
    }
    let max_lid: Lid = ((1u64 << args.address_bits) - 1) as Lid;
    let mock = mock.with_config(MockConfig {
        max_lid,
        escape_vl: None,
        ..MockConfig::default()
    })?;
    let cabling = mock.cabling().clone();
    let n = cabling.num_switches();
    if n > args.max_agents {
        return Err(SimError::Topology(format!(
            "{name}: {n} switches exceed --max-agents {} (one listening socket per agent)",
            args.max_agents
        )));
    }
    let previous = if args.reuse_inventory {
        Some(Inventory::read_file(&args.inventory)?)
    } else {
        None
    };
    let mut listeners = Vec::with_capacity(n);
    for s in cabling.switches() {
        let addr: SocketAddr = match &previous {
            Some(inv) => inv
                .entries
                .iter()
                .find(|e| e.key == AgentKey::Guid(s.guid) || e.key == AgentKey::Name(s.desc.clone()))
                .and_then(|e| e.address.parse().ok())
                .ok_or_else(|| {
                    SimError::Topology(format!("switch {} is not in the reused inventory", fmt_guid(s.guid)))
                })?,
            None => SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        listeners.push(bind(addr).await?);
    }
    let control_addr = match previous
        .as_ref()
        .and_then(|i| i.control.as_ref())
        .and_then(|c| c.parse().ok())
    {
        Some(a) => a,
        None => SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let control = bind(control_addr).await?;
    let mut agents = Vec::with_capacity(n);
    for (i, l) in listeners.iter().enumerate() {
        let addr = l.local_addr().map_err(|err| SimError::Io {
            what: "local address".into(),
            err,
        })?;
        let (epoch_tx, _) = watch::channel(0);
        agents.push(AgentCtl {
            guid: cabling.switches()[i].guid,
            sid: SwitchId(i as u32),
            addr,
            killed: AtomicBool::new(false),
            delay_ms: AtomicU64::new(0),
            write_delay_ms: AtomicU64::new(args.write_delay_ms),
            epoch: Arc::new(AtomicU64::new(0)),
            epoch_tx,
            events: broadcast::channel(1024).0,
            server: Mutex::new(None),
            lft_generation: AtomicU64::new(0),
            sl2vl: Mutex::new([0; 16]),
        });
    }
    let state = mock.discover().await?;
    let sim = Arc::new(Sim {
        addrs: Mutex::new(Addrs {
            lmc: 0,
            switch_lid: vec![0; n],
            end_base: vec![0; cabling.num_end_ports()],
            dirty: false,
        }),
        mock: Arc::new(mock),
        state: tokio::sync::Mutex::new(state),
        agents,
        max_lid,
        address_bits: args.address_bits,
        vls: args.vls,
        without_sl_to_vl: args.without_sl_to_vl,
        counters: Counters::default(),
        cabling,
    });
    for (i, l) in listeners.into_iter().enumerate() {
        spawn_agent(sim.clone(), i, l);
    }
    let control_local = control.local_addr().map_err(|err| SimError::Io {
        what: "control address".into(),
        err,
    })?;
    let ctl = SimControlServer::new(ControlSvc { sim: sim.clone() }).max_encoding_message_size(MAX_MESSAGE);
    tokio::spawn(async move {
        let _ = Server::builder()
            .add_service(ctl)
            .serve_with_incoming(TcpListenerStream::new(control))
            .await;
    });

    let inv = Inventory {
        control: Some(control_local.to_string()),
        entries: sim
            .agents
            .iter()
            .map(|a| InventoryEntry {
                key: AgentKey::Guid(a.guid),
                address: a.addr.to_string(),
                comment: sim.cabling.switch(a.sid).desc.replace('#', " "),
                line: 0,
            })
            .collect(),
    };
    let tmp = args.inventory.with_extension("tmp");
    std::fs::write(&tmp, inv.to_text()).map_err(|err| SimError::Io {
        what: tmp.display().to_string(),
        err,
    })?;
    std::fs::rename(&tmp, &args.inventory).map_err(|err| SimError::Io {
        what: args.inventory.display().to_string(),
        err,
    })?;
    println!("ready {}", args.inventory.display());

    if !args.no_console {
        let sim = sim.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                match sim.command(&line).await {
                    Ok(out) if out.is_empty() => {}
                    Ok(out) => println!("{out}"),
                    Err(e) => println!("error: {e}"),
                }
            }
        });
    }
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(|err| SimError::Io {
            what: "SIGTERM handler".into(),
            err,
        })?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    Ok(())
}
