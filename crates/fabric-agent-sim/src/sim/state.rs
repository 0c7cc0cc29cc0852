//! The simulator's state: the data plane, one control block per agent, the addresses set through
//! the agents, the counters; state refreshes, traces and all-pairs verification.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use fabric_mock::MockFabric;
use fabric_oob::proto::{self, NeighbourKind, PortState};
use fabric_routing::LidPlan;
use fabric_southbound::{DriverError, SouthboundDriver};
use fabric_topology::{Fabric, Guid, Lid, PortNum, Remote, SwitchId};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

use super::epoch::{ManagerEpoch, RefusalLog};
use super::mcast::Mft;
use super::mkey::ManagementKey;

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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

/// Control block of one agent.
pub(super) struct AgentCtl {
    pub(super) guid: Guid,
    pub(super) sid: SwitchId,
    pub(super) addr: SocketAddr,
    pub(super) killed: AtomicBool,
    pub(super) delay_ms: AtomicU64,
    /// Extra delay of `WriteLftBlocks` before the blocks are applied.
    pub(super) write_delay_ms: AtomicU64,
    /// Connections born in an older epoch fail.
    pub(super) epoch: Arc<AtomicU64>,
    /// Tells open event streams to end (value = epoch).
    pub(super) epoch_tx: watch::Sender<u64>,
    pub(super) events: broadcast::Sender<proto::PortEvent>,
    pub(super) server: Mutex<Option<JoinHandle<()>>>,
    pub(super) lft_generation: AtomicU64,
    /// VL of each SL (one table for every port pair of the switch).
    pub(super) sl2vl: Mutex<[u8; 16]>,
    /// VLCap of the switch: `SetSlToVl` accepts VLs below it (`--vl-cap`, `--vl-cap-of`).
    pub(super) vl_cap: u8,
    /// The switch's multicast forwarding table (switch configuration: survives `kill`).
    pub(super) mft: Mutex<Mft>,
    /// The management key and its protect level (switch configuration: survives `kill`;
    /// `mkey-clear` resets it, as an administrator's reset of the switch would).
    pub(super) mkey: Mutex<ManagementKey>,
    /// Write calls refused for a missing or wrong management key.
    pub(super) refused_writes: AtomicU64,
    /// Read calls refused (protect level 2) for a missing or wrong management key.
    pub(super) refused_reads: AtomicU64,
    /// The highest manager epoch seen and the write fencing counts (simulator memory: survives
    /// `kill`/`restore`; `epoch-forget` resets it).
    pub(super) manager: Mutex<ManagerEpoch>,
}

impl AgentCtl {
    /// A control block with no delays, an empty MFT, no management key, for a switch of
    /// `nports` ports whose VLCap is `vl_cap` data VLs.
    pub(super) fn new(
        guid: Guid,
        sid: SwitchId,
        addr: SocketAddr,
        write_delay_ms: u64,
        nports: u8,
        vl_cap: u8,
    ) -> Self {
        let (epoch_tx, _) = watch::channel(0);
        AgentCtl {
            guid,
            sid,
            addr,
            killed: AtomicBool::new(false),
            delay_ms: AtomicU64::new(0),
            write_delay_ms: AtomicU64::new(write_delay_ms),
            epoch: Arc::new(AtomicU64::new(0)),
            epoch_tx,
            events: broadcast::channel(event_capacity(nports)).0,
            server: Mutex::new(None),
            lft_generation: AtomicU64::new(0),
            sl2vl: Mutex::new([0; 16]),
            vl_cap,
            mft: Mutex::new(Mft::default()),
            mkey: Mutex::new(ManagementKey::default()),
            refused_writes: AtomicU64::new(0),
            refused_reads: AtomicU64::new(0),
            manager: Mutex::new(ManagerEpoch::default()),
        }
    }
}

/// Port events an agent's stream may lag behind by before it ends (the driver then
/// reconnects and reads a fresh snapshot): the largest burst one command makes (`switch-down`:
/// the power and every port) and one more (tokio rounds it up to a power of two). Allocated up
/// front for every agent: 1 024 slots took 140 kB per agent, 950 MB for 6 804 switches.
pub(super) fn event_capacity(nports: u8) -> usize {
    usize::from(nports) + 2
}

/// Addresses set through the agents.
pub(super) struct Addrs {
    pub(super) lmc: u8,
    pub(super) switch_lid: Vec<Lid>,
    pub(super) end_base: Vec<Lid>,
    pub(super) dirty: bool,
}

/// What the agents report of the data plane's state: each switch's power and each switch
/// port's liveness, flat, updated in place by [`Sim::refresh`] (issue #17: rebuilding a fabric
/// model per command took 0.1–0.4 s of CPU at 65 536 nodes).
pub(super) struct LiveView {
    pub(super) powered: Vec<bool>,
    /// Index of port 0 of each switch in `live`.
    offset: Vec<usize>,
    live: Vec<bool>,
}

impl LiveView {
    /// The data plane's state now.
    pub(super) fn read(mock: &MockFabric) -> Self {
        let f = mock.cabling();
        let (mut offset, mut live) = (Vec::with_capacity(f.num_switches()), Vec::new());
        for sid in f.switch_ids() {
            offset.push(live.len());
            live.extend((0..=f.switch(sid).nports).map(|pn| mock.port_live(sid, pn)));
        }
        LiveView {
            powered: f.switch_ids().map(|sid| mock.switch_is_up(sid)).collect(),
            offset,
            live,
        }
    }

    /// Whether port `pn` of switch `sid` is up (what [`Sim::port_info`] reports as its state).
    pub(super) fn port_live(&self, sid: SwitchId, pn: PortNum) -> bool {
        self.live[self.offset[sid.idx()] + pn as usize]
    }
}

/// The whole simulator.
pub struct Sim {
    pub(super) mock: Arc<MockFabric>,
    pub(super) cabling: Fabric,
    /// The agents' view of the state, refreshed after every state change (the lock orders a
    /// refresh and its events against an event stream's snapshot).
    pub(super) state: tokio::sync::Mutex<LiveView>,
    pub(super) addrs: Mutex<Addrs>,
    pub(super) agents: Vec<AgentCtl>,
    pub(super) max_lid: Lid,
    pub(super) address_bits: u32,
    /// Virtual lanes per port.
    pub(super) vls: u8,
    /// SL-to-VL RPCs answer UNIMPLEMENTED (`--without-sl-to-vl`).
    pub(super) without_sl_to_vl: bool,
    /// `ReadLftBlocks` answers UNIMPLEMENTED (`--without-read-lft-blocks`).
    pub(super) without_read_lft_blocks: bool,
    pub(super) counters: Counters,
    /// Writes refused for a stale manager epoch, logged at a bounded rate.
    pub(super) refusal_log: RefusalLog,
}

/// What the agents did (the `GetCounters` control RPC).
#[derive(Default)]
pub(super) struct Counters {
    pub(super) lft_write_calls: AtomicU64,
    pub(super) lft_blocks_written: AtomicU64,
    pub(super) lft_block_reads: AtomicU64,
    pub(super) lft_multi_reads: AtomicU64,
    pub(super) lft_multi_blocks_read: AtomicU64,
    pub(super) mft_write_calls: AtomicU64,
    pub(super) mft_blocks_written: AtomicU64,
    pub(super) mft_block_reads: AtomicU64,
    pub(super) port_counter_reads: AtomicU64,
}

impl Sim {
    /// Port `pn` of switch `sid` as its agent describes it: the cabled neighbour (from the
    /// cabling) and the state (`up`).
    pub(super) fn port_info(&self, sid: SwitchId, pn: PortNum, up: bool) -> proto::PortInfo {
        let f = &self.cabling;
        let p = &f.switch(sid).ports[pn as usize];
        let neighbour = match p.remote {
            Remote::None => None,
            Remote::Switch { sw, port } => {
                let r = f.switch(sw);
                Some(proto::Neighbour {
                    kind: NeighbourKind::Switch as i32,
                    node_guid: r.guid,
                    port_guid: r.guid,
                    port: u32::from(port),
                    description: r.desc.clone(),
                    node_ports: u32::from(r.nports),
                })
            }
            Remote::EndPort(ep) => {
                let e = f.end_port(ep);
                Some(proto::Neighbour {
                    kind: NeighbourKind::Ca as i32,
                    node_guid: e.node_guid,
                    port_guid: e.port_guid,
                    port: u32::from(e.port_num),
                    description: e.desc.clone(),
                    node_ports: u32::from(e.node_ports),
                })
            }
        };
        proto::PortInfo {
            port: u32::from(pn),
            state: if up {
                PortState::Up as i32
            } else {
                PortState::Down as i32
            },
            neighbour,
            speed: p.speed.clone().unwrap_or_default(),
        }
    }

    /// Reads the data plane's states into the agents' view, in place, and pushes the
    /// differences to the agents' streams (a few loads per port: no fabric model is built).
    pub(super) async fn refresh(&self) -> Result<(), SimError> {
        let mut view = self.state.lock().await;
        for a in &self.agents {
            let sid = a.sid;
            let powered = self.mock.switch_is_up(sid);
            if std::mem::replace(&mut view.powered[sid.idx()], powered) != powered {
                let _ = a.events.send(proto::PortEvent {
                    powered,
                    ..Default::default()
                });
            }
            let off = view.offset[sid.idx()];
            for pn in 1..=self.cabling.switch(sid).nports {
                let up = self.mock.port_live(sid, pn);
                if std::mem::replace(&mut view.live[off + pn as usize], up) == up {
                    continue;
                }
                // The full port description is built for a change only.
                let n = self.port_info(sid, pn, up);
                let _ = a.events.send(proto::PortEvent {
                    port: u32::from(pn),
                    state: n.state,
                    neighbour: n.neighbour,
                    powered,
                    ..Default::default()
                });
            }
        }
        Ok(())
    }

    /// Installs the addresses set through the agents into the data plane (before traces).
    pub(super) async fn commit_addresses(&self) -> Result<(), SimError> {
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

    pub(super) fn find_switches(&self, key: &str) -> Result<Vec<usize>, SimError> {
        if key == "all" {
            return Ok((0..self.agents.len()).collect());
        }
        self.cabling
            .find_switch(key)
            .map(|s| vec![s.idx()])
            .ok_or_else(|| SimError::Command(format!("unknown switch `{key}`")))
    }

    pub(super) fn kill(&self, i: usize) {
        let a = &self.agents[i];
        a.killed.store(true, Ordering::SeqCst);
        if let Some(h) = lock(&a.server).take() {
            h.abort();
        }
        self.drop_connections(i);
    }

    pub(super) fn drop_connections(&self, i: usize) {
        let a = &self.agents[i];
        let e = a.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = a.epoch_tx.send(e);
    }

    /// Traces every pair (unicast) and floods every MLID in use (multicast).
    pub(super) async fn verify(&self, escape: bool) -> Result<proto::VerifyAllPairsReply, SimError> {
        self.commit_addresses().await?;
        let mock = self.mock.clone();
        let r = tokio::task::spawn_blocking(move || mock.verify_all_pairs(escape))
            .await
            .map_err(|e| SimError::Command(format!("verification task failed: {e}")))?;
        let multicast = self.verify_multicast().await?;
        Ok(proto::VerifyAllPairsReply {
            multicast: Some(multicast),
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

    pub(super) async fn trace(&self, source: Guid, from_switch: bool, lid: Lid) -> Result<proto::TraceReply, SimError> {
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

fn hops(h: &[fabric_mock::Hop]) -> Vec<proto::Hop> {
    h.iter()
        .map(|h| proto::Hop {
            switch_guid: h.switch,
            in_port: u32::from(h.in_port),
            out_port: u32::from(h.out_port),
        })
        .collect()
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
