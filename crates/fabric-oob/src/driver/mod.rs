//! [`OobDriver`]: the [`SouthboundDriver`] over per-switch management agents.
//!
//! `config` holds the configuration, `agents` what the driver knows of each agent and one
//! request to it, `discover` the fabric built from the agents' neighbour tables, `monitor` the
//! per-agent health watch and its events, `upload` the address set-up and the LFT writes,
//! `counters` the port counter reads, `data_vl` the data VL plans (SL-to-VL tables of a VL
//! layering, checked against the switches' VLCap).

mod agents;
mod config;
mod counters;
mod data_vl;
mod discover;
mod epoch;
mod mkey;
mod monitor;
mod upload;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use fabric_routing::{LidPlan, BLOCK_SIZE};
use fabric_southbound::{
    CounterPort, CountersReading, DataVlPlan, DriverCaps, DriverError, Fence, LftBlockWrite, MftBlockWrite,
    SouthboundDriver, TopologyGap, WriteReport, MFT_BLOCK_SIZE,
};
use fabric_topology::{Fabric, FabricEvent, Guid, PortNum};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use tokio::sync::{watch, Semaphore};
use tonic::transport::Endpoint;

use self::agents::{inventory_guids, lock, Agent, Discovered, Health, Inner};
pub use self::config::{sl_to_vl_table, OobConfig, ESCAPE_SL, MAX_MANAGEMENT_KEY_PROTECT};
use self::epoch::with_epoch;
pub use self::epoch::MANAGER_EPOCH_METADATA;
use self::mkey::KeyState;
pub use self::mkey::READ_KEY_METADATA;
pub use self::upload::MAX_READ_LFT_BLOCKS;
use crate::fds;
use crate::inventory::Inventory;
use crate::proto;

/// The `oob` driver. See the [crate documentation](crate).
///
/// Construct with [`OobDriver::open`] (reads the inventory; no network I/O). The first
/// [`SouthboundDriver::discover`] starts one monitor task per agent (port-event stream,
/// reconnection with backoff, unreachable deadline); they stop when the driver is dropped.
#[derive(Clone)]
pub struct OobDriver {
    inner: Arc<Inner>,
}

impl OobDriver {
    /// Reads the inventory and prepares the agents (no connection is made yet).
    pub fn open(cfg: OobConfig) -> Result<Self, DriverError> {
        cfg.validate()?;
        let inv = Inventory::read_file(&cfg.inventory).map_err(|e| DriverError::Config(e.to_string()))?;
        Self::with_inventory(cfg, inv)
    }

    /// Like [`OobDriver::open`] with an inventory already in memory (`cfg.inventory` is ignored).
    ///
    /// The driver holds one connection per agent: when the agents need more descriptors than
    /// the soft open-file limit allows ([`fds::driver_fds`]), the soft limit is raised to the
    /// hard one; if that is still too few, the driver is not created (a [`DriverError::Config`]
    /// saying what to raise) rather than failing agents with `EMFILE` later.
    pub fn with_inventory(cfg: OobConfig, inv: Inventory) -> Result<Self, DriverError> {
        cfg.validate()?;
        let n = inv.entries.len();
        let needed = fds::driver_fds(n);
        let mut limits = fds::fd_limits();
        if needed > limits.soft {
            limits = fds::raise_fd_limit();
        }
        fds::check_fds(n, needed, limits)
            .map_err(|e| DriverError::Config(format!("inventory {}: {e}", cfg.inventory.display())))?;
        let mut agents = Vec::with_capacity(inv.entries.len());
        for e in inv.entries {
            let endpoint = Endpoint::from_shared(format!("http://{}", e.address))
                .map_err(|err| DriverError::Config(format!("agent {} address {}: {err}", e.key, e.address)))?
                .connect_timeout(cfg.connect_timeout)
                .tcp_nodelay(true)
                .http2_keep_alive_interval(cfg.request_timeout.max(Duration::from_millis(500)))
                .keep_alive_timeout(cfg.request_timeout)
                .keep_alive_while_idle(true);
            agents.push(Agent {
                key: e.key,
                address: e.address,
                endpoint,
                channel: Mutex::new(None),
                known: Mutex::new(None),
                health: Mutex::new(Health::default()),
                setup: Mutex::new(None),
                key_state: Mutex::new(KeyState::Pending),
            });
        }
        let by_guid = inventory_guids(&agents);
        let (stop_tx, stop_rx) = watch::channel(());
        Ok(OobDriver {
            inner: Arc::new(Inner {
                permits: Semaphore::new(cfg.max_connections),
                counter_permits: Semaphore::new(cfg.max_counter_reads),
                cfg,
                agents,
                by_guid: RwLock::new(by_guid),
                subscribers: Mutex::new(Vec::new()),
                link_up: Mutex::new(HashMap::new()),
                end_port_up: Mutex::new(HashMap::new()),
                discovered: Mutex::new(Discovered::default()),
                gaps: Mutex::new(BTreeMap::new()),
                warnings: Mutex::new(Vec::new()),
                config_warnings: Mutex::new(Vec::new()),
                generation: Mutex::new(0),
                limits: Mutex::new(None),
                monitors_started: Mutex::new(false),
                fence: RwLock::new(None),
                data_vl_table: Mutex::new(None),
                _stop: stop_tx,
                stop: stop_rx,
            }),
        })
    }

    /// Sets the write fence of a high-availability manager (replacing any earlier one; the
    /// driver's clones share it). From then on every write call checks
    /// [`Fence::check`] right before each attempt is sent: a refusal is
    /// [`DriverError::Fenced`] and nothing reaches the agent; the epoch it answers goes in the
    /// request metadata [`MANAGER_EPOCH_METADATA`], and every other request (discovery, reads,
    /// `WatchPorts`, counters) carries [`Fence::epoch`]. An agent that refuses a write for a
    /// stale epoch closes the fence ([`Fence::superseded`]) and the write fails with
    /// [`DriverError::Fenced`] (never retried; the agent is not counted as lost). Without a
    /// fence (the default) the epoch is 0, no metadata is sent and nothing is fenced.
    pub fn set_fence(&self, fence: Arc<Fence>) {
        *self
            .inner
            .fence
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(fence);
    }

    /// The fence set by [`OobDriver::set_fence`], if any.
    pub fn fence(&self) -> Option<Arc<Fence>> {
        self.inner.fence()
    }

    /// The configuration.
    pub fn config(&self) -> &OobConfig {
        &self.inner.cfg
    }

    /// Inconsistencies found by the last discovery: neighbour tables that disagree on a cable,
    /// unreachable agents, GUID mismatches. Each message names the switches (GUID and name) and
    /// ports.
    pub fn discovery_warnings(&self) -> Vec<String> {
        lock(&self.inner.warnings).clone()
    }

    /// Number of agents in the inventory.
    pub fn num_agents(&self) -> usize {
        self.inner.agents.len()
    }

    /// Problems of the last [`SouthboundDriver::configure_lids`]: agents that do not implement
    /// `SetSlToVl`, or a fabric whose switches operate a single VL (escape traffic then shares
    /// VL 0 with the data); and, at any time, agents that refuse the management key (protected
    /// by another manager) or cannot take one. Each message names the switch.
    pub fn configuration_warnings(&self) -> Vec<String> {
        let mut w = lock(&self.inner.config_warnings).clone();
        w.extend(self.inner.key_warnings());
        w
    }

    /// Switches whose agent refused a call for the management key: protected by another
    /// manager's key (or by a key while this driver has none configured). Cleared for a switch
    /// when the key is set on it again (discovery, or the agent answering after a loss).
    pub fn management_key_refusals(&self) -> Vec<Guid> {
        self.inner
            .agents
            .iter()
            .filter(|a| *lock(&a.key_state) == KeyState::Refused)
            .filter_map(Agent::guid)
            .collect()
    }

    /// The VL escape-LID traffic (SL 1) is mapped to: `n - 1` where `n` is the smallest number
    /// of VLs reported by the discovered switches (2 assumed for agents that report none);
    /// `None` before discovery or when a switch operates one VL only.
    pub fn escape_vl(&self) -> Option<u8> {
        self.inner.escape_vl()
    }

    /// Reads a switch's SL-to-VL table back through its agent.
    pub async fn read_sl_to_vl(&self, switch: Guid) -> Result<[u8; 16], DriverError> {
        let idx = self.inner.agent_of(switch)?;
        let (t, _) = self
            .inner
            .call(idx, "SL-to-VL read", |mut c, epoch| {
                let r = self.inner.read_request(proto::GetSlToVlRequest {}, epoch);
                async move { c.get_sl_to_vl(r).await }
            })
            .await?;
        <[u8; 16]>::try_from(t.vl_of_sl.as_slice()).map_err(|_| DriverError::Protocol {
            guid: Some(switch),
            message: format!("SL-to-VL table has {} entries, expected 16", t.vl_of_sl.len()),
        })
    }
}

#[async_trait]
impl SouthboundDriver for OobDriver {
    fn configuration_warnings(&self) -> Vec<String> {
        OobDriver::configuration_warnings(self)
    }

    fn caps(&self) -> DriverCaps {
        let limits = self.inner.limits();
        let from_lid = (u64::from(self.inner.cfg.max_lid) + 1).div_ceil(BLOCK_SIZE as u64) as u32;
        DriverCaps {
            name: "oob",
            max_lid: self.inner.cfg.max_lid,
            max_lft_blocks: Some(limits.lft_blocks.map_or(from_lid, |b| b.min(from_lid))),
            escape_vl: limits.escape_vl,
        }
    }

    /// The blocks of one `WriteLftBlocks` request (larger calls are split into requests of
    /// this size, one switch's in sequence).
    fn lft_blocks_per_call(&self) -> Option<usize> {
        Some(<upload::Lft as upload::TableBlocks>::PER_REQUEST)
    }

    async fn discover(&self) -> Result<Fabric, DriverError> {
        let fabric = discover::discover(&self.inner).await?;
        monitor::start(&self.inner);
        Ok(fabric)
    }

    async fn program_data_vls(&self, plan: &DataVlPlan) -> Result<(), DriverError> {
        data_vl::program_data_vls(&self.inner, plan).await
    }

    fn data_vl_capacity(&self) -> Option<u8> {
        self.inner.data_vl_capacity()
    }

    fn topology_gaps(&self) -> Vec<TopologyGap> {
        lock(&self.inner.gaps).values().cloned().collect()
    }

    fn subscribe_events(&self) -> UnboundedReceiver<FabricEvent> {
        let (tx, rx) = unbounded_channel();
        lock(&self.inner.subscribers).push(tx);
        rx
    }

    async fn configure_lids(&self, fabric: &Fabric, lids: &LidPlan) -> Result<(), DriverError> {
        upload::configure_lids(&self.inner, fabric, lids).await
    }

    async fn write_lft_blocks(&self, blocks: &[LftBlockWrite]) -> Result<WriteReport, DriverError> {
        let max_blocks = self.caps().max_lft_blocks.unwrap_or(u32::MAX);
        upload::write_lft_blocks(&self.inner, blocks, max_blocks).await
    }

    async fn read_lft_block(&self, switch: Guid, block: u32) -> Result<[u8; BLOCK_SIZE], DriverError> {
        let idx = self.inner.agent_of(switch)?;
        let (b, _) = self
            .inner
            .call(idx, "LFT block read", |mut c, epoch| {
                let r = self.inner.read_request(proto::ReadLftBlockRequest { block }, epoch);
                async move { c.read_lft_block(r).await }
            })
            .await?;
        <[u8; BLOCK_SIZE]>::try_from(b.entries.as_slice()).map_err(|_| DriverError::Protocol {
            guid: Some(switch),
            message: format!(
                "LFT block {block} has {} entries, expected {BLOCK_SIZE}",
                b.entries.len()
            ),
        })
    }

    async fn read_lft_blocks(
        &self,
        switch: Guid,
        first: u32,
        count: u32,
    ) -> Result<Vec<[u8; BLOCK_SIZE]>, DriverError> {
        let idx = self.inner.agent_of(switch)?;
        let mut out = Vec::with_capacity(count as usize);
        let end = first.saturating_add(count);
        let mut next = first;
        while next < end {
            let n = (end - next).min(MAX_READ_LFT_BLOCKS);
            match upload::read_lft_blocks(&self.inner, idx, switch, next, n).await? {
                Some(blocks) => out.extend(blocks),
                // An agent that predates ReadLftBlocks: one call per block.
                None => {
                    for b in next..end {
                        out.push(self.read_lft_block(switch, b).await?);
                    }
                    return Ok(out);
                }
            }
            next += n;
        }
        Ok(out)
    }

    async fn write_mft_blocks(&self, blocks: &[MftBlockWrite]) -> Result<WriteReport, DriverError> {
        upload::write_mft_blocks(&self.inner, blocks).await
    }

    async fn read_mft_block(
        &self,
        switch: Guid,
        block: u32,
        position: u8,
    ) -> Result<[u16; MFT_BLOCK_SIZE], DriverError> {
        let idx = self.inner.agent_of(switch)?;
        let (b, _) = self
            .inner
            .call(idx, "MFT block read", |mut c, epoch| {
                let r = self.inner.read_request(
                    proto::ReadMftBlockRequest {
                        block,
                        position: u32::from(position),
                    },
                    epoch,
                );
                async move { c.read_mft_block(r).await }
            })
            .await?;
        let bad = |why: String| DriverError::Protocol {
            guid: Some(switch),
            message: format!("MFT block {block} position {position}: {why}"),
        };
        if b.entries.len() != MFT_BLOCK_SIZE {
            return Err(bad(format!("{} entries, expected {MFT_BLOCK_SIZE}", b.entries.len())));
        }
        let mut out = [0u16; MFT_BLOCK_SIZE];
        for (o, &e) in out.iter_mut().zip(&b.entries) {
            *o = u16::try_from(e).map_err(|_| bad(format!("port mask {e:#x} wider than 16 bits")))?;
        }
        Ok(out)
    }

    /// Port counters through the agents' `ReadPortCounters`:
    ///
    /// * the switch ports asked are grouped by switch: **one request per agent** (all its asked
    ///   ports at once), the agents asked concurrently with at most
    ///   [`OobConfig::max_counter_reads`] requests in flight, a limit of its own on top of
    ///   `max_connections`, so that a poll never holds a permit an LFT upload waits for; over
    ///   the driver's existing agent connections;
    /// * an agent that does not answer (down, killed, timed out) gives **each of its ports**
    ///   an error naming the switch GUID ([`DriverError::Unreachable`], `Timeout`, ...); the
    ///   other agents' ports are still read. An agent the health monitor already knows
    ///   unreachable is not asked. A read is retried once at most and, unlike a write, giving
    ///   it up does not mark the agent as lost (the next poll is the retry);
    /// * a port the agent refuses (no such port, data plane powered off) is a
    ///   [`DriverError::Protocol`] naming the switch and port; a switch absent from the
    ///   inventory is [`DriverError::UnknownSwitch`];
    /// * **end ports** ([`CounterPort::EndPort`]) answer [`DriverError::Unsupported`]: the
    ///   agents manage switches only and see a CA port only as the neighbour of a leaf port.
    ///   The leaf switch port facing it is the other end of the link (its receive errors are
    ///   what the end port sent, its transmit counters what the end port received), not the
    ///   end port's own counters, so the driver does not pass it off as them: a caller that
    ///   wants that link's health reads the leaf port (`CounterPort::Switch`).
    ///
    /// The batch itself never fails (`Ok` always).
    async fn read_port_counters(&self, ports: &[CounterPort]) -> Result<Vec<CountersReading>, DriverError> {
        Ok(counters::read_port_counters(&self.inner, ports).await)
    }

    async fn set_port_state(&self, switch: Guid, port: PortNum, up: bool) -> Result<(), DriverError> {
        let idx = self.inner.agent_of(switch)?;
        self.inner.write_epoch("set port state")?;
        self.inner.ensure_key(idx).await?;
        let management_key = self.inner.write_key();
        let r = self
            .inner
            .call_write(idx, "set port state", |mut c, epoch| async move {
                let r = proto::SetPortStateRequest {
                    port: u32::from(port),
                    up,
                    management_key,
                };
                c.set_port_state(with_epoch(r, epoch)).await
            })
            .await;
        match r {
            Ok(_) => Ok(()),
            Err(DriverError::Protocol { message, .. }) if message.contains("InvalidArgument") => {
                Err(DriverError::InvalidPort {
                    guid: switch,
                    port,
                    reason: "rejected by the agent",
                })
            }
            Err(e) => Err(e),
        }
    }

    async fn set_switch_state(&self, switch: Guid, up: bool) -> Result<(), DriverError> {
        let idx = self.inner.agent_of(switch)?;
        self.inner.write_epoch("set power")?;
        self.inner.ensure_key(idx).await?;
        let management_key = self.inner.write_key();
        self.inner
            .call_write(idx, "set power", |mut c, epoch| async move {
                let r = proto::SetPowerRequest { on: up, management_key };
                c.set_power(with_epoch(r, epoch)).await
            })
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_reports_inventory_errors_with_path() {
        let e = OobDriver::open(OobConfig::new("/nonexistent/inventory")).err().unwrap();
        assert!(e.to_string().contains("/nonexistent/inventory"), "{e}");
    }

    #[tokio::test]
    async fn unreachable_agent_is_an_error_naming_the_switch() {
        // Port 1 on loopback: nothing listens there.
        let inv = Inventory::parse("0x42 127.0.0.1:1\n", "t").unwrap();
        let mut cfg = OobConfig::new("t");
        cfg.max_retries = 1;
        cfg.connect_timeout = Duration::from_millis(200);
        let d = OobDriver::with_inventory(cfg, inv).unwrap();
        let e = d.discover().await.unwrap_err();
        assert!(matches!(e, DriverError::Protocol { .. }), "{e}");
        assert!(
            d.discovery_warnings()[0].contains("0x0000000000000042"),
            "{:?}",
            d.discovery_warnings()
        );
        // The inventory names the switch: it is known as unreachable, not as an unknown GUID.
        assert!(matches!(
            d.read_lft_block(0x42, 0).await,
            Err(DriverError::Unreachable { guid: 0x42 })
        ));
        assert!(matches!(
            d.read_lft_block(0x43, 0).await,
            Err(DriverError::UnknownSwitch(0x43))
        ));
        assert_eq!(d.caps().max_lid, 0xFF_FFFF);
    }
}
