//! Programming the switches: address set-up (addresses and SL-to-VL table) per switch and
//! table block uploads (LFT and MFT blocks share one path: [`write_blocks`]).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;

use fabric_routing::{LidPlan, BLOCK_SIZE};
use fabric_southbound::{DriverError, LftBlockWrite, MftBlockWrite, WriteReport};
use fabric_topology::{fmt_guid, Fabric, Guid, Remote};
use tokio::task::JoinSet;
use tonic::transport::Channel;
use tonic::{Code, Status};

use super::agents::{lock, AddressSetup, Inner};
use super::config::ESCAPE_SL;
use super::epoch::with_epoch;
use crate::proto;
use crate::proto::switch_agent_client::SwitchAgentClient;

/// One kind of table whose blocks the agents take in batches.
pub(super) trait TableBlocks: 'static {
    /// A block as the agent protocol carries it.
    type Block: Clone + Send + Sync + 'static;
    /// Operation name in errors.
    const OP: &'static str;
    /// Table name in errors.
    const TABLE: &'static str;
    /// Blocks per request.
    const PER_REQUEST: usize;
    /// Sends one request; answers the number of blocks the agent wrote.
    fn send(
        c: SwitchAgentClient<Channel>,
        generation: u64,
        management_key: u64,
        blocks: Vec<Self::Block>,
        epoch: u64,
    ) -> impl Future<Output = Result<tonic::Response<u32>, Status>> + Send;
}

/// LFT blocks (`WriteLftBlocks`).
pub(super) struct Lft;

impl TableBlocks for Lft {
    type Block = proto::LftBlock;
    const OP: &'static str = "LFT block write";
    const TABLE: &'static str = "LFT";
    /// 64 bytes each: ~140 KiB per message.
    const PER_REQUEST: usize = 2048;
    async fn send(
        mut c: SwitchAgentClient<Channel>,
        generation: u64,
        management_key: u64,
        blocks: Vec<proto::LftBlock>,
        epoch: u64,
    ) -> Result<tonic::Response<u32>, Status> {
        let req = proto::WriteLftBlocksRequest {
            generation,
            blocks,
            management_key,
        };
        let r = c.write_lft_blocks(with_epoch(req, epoch)).await?;
        Ok(tonic::Response::new(r.into_inner().written))
    }
}

/// MFT blocks (`WriteMftBlocks`).
pub(super) struct Mft;

impl TableBlocks for Mft {
    type Block = proto::MftBlock;
    const OP: &'static str = "MFT block write";
    const TABLE: &'static str = "MFT";
    /// 32 masks of at most 3 bytes each: ~200 KiB per message.
    const PER_REQUEST: usize = 2048;
    async fn send(
        mut c: SwitchAgentClient<Channel>,
        generation: u64,
        management_key: u64,
        blocks: Vec<proto::MftBlock>,
        epoch: u64,
    ) -> Result<tonic::Response<u32>, Status> {
        let req = proto::WriteMftBlocksRequest {
            generation,
            blocks,
            management_key,
        };
        let r = c.write_mft_blocks(with_epoch(req, epoch)).await?;
        Ok(tonic::Response::new(r.into_inner().written))
    }
}

impl Inner {
    /// Installs switch `idx`'s address set-up if it is not (yet, or any more) on the agent.
    /// An error names the switch; only this switch's blocks fail with it.
    async fn ensure_addresses(&self, idx: usize) -> Result<(), DriverError> {
        self.ensure_key(idx).await?;
        // (Checked before cloning: every write of every switch passes here.)
        let setup = {
            let cur = lock(&self.agents[idx].setup);
            match cur.as_ref() {
                Some(s) if !s.done => s.clone(),
                _ => return Ok(()),
            }
        };
        let key = self.write_key();
        self.call_write(idx, "set addresses", |mut c, epoch| {
            let r = with_epoch(
                proto::SetAddressesRequest {
                    management_key: key,
                    ..setup.addresses.clone()
                },
                epoch,
            );
            async move { c.set_addresses(r).await }
        })
        .await?;
        // SL-to-VL with the addresses: an agent without the RPC is reported, not fatal.
        let (supported, _) = self
            .call_write(idx, "set SL-to-VL", |mut c, epoch| {
                let r = with_epoch(
                    proto::SlToVlTable {
                        management_key: key,
                        ..setup.sl_to_vl.clone()
                    },
                    epoch,
                );
                async move {
                    match c.set_sl_to_vl(r).await {
                        Ok(_) => Ok(tonic::Response::new(true)),
                        Err(s) if s.code() == Code::Unimplemented => Ok(tonic::Response::new(false)),
                        Err(s) => Err(s),
                    }
                }
            })
            .await?;
        let support_changed = {
            let mut cur = lock(&self.agents[idx].setup);
            // A newer plan configured meanwhile is installed by its own set-up.
            match cur
                .as_mut()
                .filter(|c| c.addresses == setup.addresses && c.sl_to_vl == setup.sl_to_vl)
            {
                Some(c) => {
                    c.done = true;
                    std::mem::replace(&mut c.sl_to_vl_unsupported, !supported) == supported
                }
                None => false,
            }
        };
        // The warnings look at every switch: rebuilt only when this one's support changed
        // (`configure_lids` rebuilds them once after setting up every switch).
        if support_changed {
            self.refresh_config_warnings();
        }
        Ok(())
    }

    /// Rebuilds [`OobDriver::configuration_warnings`](crate::OobDriver::configuration_warnings) from the switches' VL counts and set-ups.
    fn refresh_config_warnings(&self) {
        let mut warnings = Vec::new();
        let single: Vec<String> = self
            .agents
            .iter()
            .filter_map(|a| {
                lock(&a.known)
                    .as_ref()
                    .filter(|k| k.info.vls == 1)
                    .map(|k| fmt_guid(k.info.guid))
            })
            .collect();
        if !single.is_empty() {
            warnings.push(format!(
                "switches operating a single VL ({}): escape traffic (SL {ESCAPE_SL}) shares VL 0 with the data",
                single.join(", ")
            ));
        }
        for a in &self.agents {
            if lock(&a.setup).as_ref().is_some_and(|s| s.sl_to_vl_unsupported) {
                warnings.push(format!(
                    "switch {}: the agent does not implement SetSlToVl; escape traffic (SL {ESCAPE_SL}) is not \
                     separated from the data there",
                    a.guid().map_or_else(|| a.key.to_string(), fmt_guid)
                ));
            }
        }
        warnings.sort();
        *lock(&self.config_warnings) = warnings;
    }
}

/// Records every switch's address set-up for the plan and installs it on the agents that
/// answer (the others get it before their switch's next LFT write).
pub(super) async fn configure_lids(inner: &Arc<Inner>, fabric: &Fabric, lids: &LidPlan) -> Result<(), DriverError> {
    lids.check_covers(fabric)
        .map_err(|e| DriverError::InvalidLidPlan(e.to_string()))?;
    // Fenced: refused once here (each switch's calls are checked again when sent).
    inner.write_epoch("set addresses")?;
    let max = inner.cfg.max_lid;
    let top = lids.top();
    if top > max {
        return Err(DriverError::InvalidLidPlan(format!(
            "highest LID {top} is above max_lid {max}"
        )));
    }
    let generation = fabric.generation();
    *lock(&inner.generation) = generation;
    let sl_to_vl = proto::SlToVlTable {
        vl_of_sl: inner.sl_to_vl_in_force().to_vec(),
        management_key: 0,
    };
    // Every switch of the plan gets its set-up; the agents that answer get it now, the
    // others before their switch's next LFT write (one switch that is down does not stop
    // the others from being programmed).
    let mut due = Vec::new();
    for sid in fabric.switch_ids() {
        let s = fabric.switch(sid);
        // A switch whose agent never answered and is not named by GUID in the inventory:
        // it is down in the fabric; the monitor makes it known when the agent answers.
        let Ok(idx) = inner.agent_of(s.guid) else { continue };
        let mut addresses = proto::SetAddressesRequest {
            generation,
            lmc: u32::from(lids.lmc),
            switch_address: lids.switch_lid(sid),
            end_ports: Vec::new(),
            management_key: 0,
        };
        for (_, p) in s.external_ports() {
            if let Remote::EndPort(ep) = p.remote {
                addresses.end_ports.push(proto::EndPortAddress {
                    port_guid: fabric.end_port(ep).port_guid,
                    base: lids.base_lid(ep),
                });
            }
        }
        let unsupported = lock(&inner.agents[idx].setup)
            .as_ref()
            .is_some_and(|x| x.sl_to_vl_unsupported);
        *lock(&inner.agents[idx].setup) = Some(AddressSetup {
            addresses,
            sl_to_vl: sl_to_vl.clone(),
            done: false,
            sl_to_vl_unsupported: unsupported,
        });
        if s.up && !lock(&inner.agents[idx].health).reported_down {
            due.push((idx, s.guid));
        }
    }
    let mut set = JoinSet::new();
    for (idx, guid) in due {
        let inner = inner.clone();
        set.spawn(async move { (guid, inner.ensure_addresses(idx).await) });
    }
    let (mut done, mut first_err) = (0usize, None);
    while let Some(r) = set.join_next().await {
        match r {
            Ok((_, Ok(()))) => done += 1,
            Ok((_, Err(e))) => {
                first_err.get_or_insert(e);
            }
            Err(e) => {
                first_err.get_or_insert(DriverError::Protocol {
                    guid: None,
                    message: format!("task failed: {e}"),
                });
            }
        }
    }
    inner.refresh_config_warnings();
    // Only when no switch at all took its addresses is the plan not installed; a switch
    // that failed keeps its set-up pending and its LFT writes fail naming it.
    match first_err {
        Some(e) if done == 0 => Err(e),
        _ => Ok(()),
    }
}

/// Writes LFT blocks to all switches concurrently (each switch's addresses first when its agent
/// has not taken them); a block at or above `max_blocks` is refused.
pub(super) async fn write_lft_blocks(
    inner: &Arc<Inner>,
    blocks: &[LftBlockWrite],
    max_blocks: u32,
) -> Result<WriteReport, DriverError> {
    if let Some(w) = blocks.iter().find(|w| w.block >= max_blocks) {
        return Err(DriverError::BlockOutOfRange {
            guid: w.switch,
            block: w.block,
            max_blocks,
        });
    }
    let items = blocks.iter().map(|w| {
        let b = proto::LftBlock {
            block: w.block,
            entries: w.entries.to_vec(),
        };
        (w.switch, Ok(b))
    });
    write_blocks::<Lft>(inner, items).await
}

/// Writes MFT blocks to all switches concurrently, through the same path as the LFT blocks. A
/// block beyond what a switch's agent reports (`SwitchInfo.mft_blocks`; 0 = no multicast
/// support) fails that switch's blocks only, naming it.
pub(super) async fn write_mft_blocks(inner: &Arc<Inner>, blocks: &[MftBlockWrite]) -> Result<WriteReport, DriverError> {
    let items = blocks.iter().map(|w| {
        let limit = inner
            .agent_of(w.switch)
            .ok()
            .and_then(|idx| lock(&inner.agents[idx].known).as_ref().map(|k| k.info.mft_blocks));
        let b = match limit {
            Some(n) if w.block >= n => Err(DriverError::Protocol {
                guid: Some(w.switch),
                message: if n == 0 {
                    "the agent reports no multicast forwarding table (SwitchInfo.mft_blocks = 0)".to_string()
                } else {
                    format!(
                        "switch {} has no MFT block {} (supports {n} blocks)",
                        fmt_guid(w.switch),
                        w.block
                    )
                },
            }),
            _ => Ok(proto::MftBlock {
                block: w.block,
                position: u32::from(w.position),
                entries: w.entries.iter().map(|&e| u32::from(e)).collect(),
            }),
        };
        (w.switch, b)
    });
    write_blocks::<Mft>(inner, items).await
}

/// Groups blocks per switch and writes each switch's blocks concurrently with the others (at
/// most `max_connections` requests in flight, each retried), after the switch's management key
/// and addresses when its agent does not have them. A block that failed its own checks, or of
/// an unknown switch, fails only that switch's blocks; the first error is returned after every
/// other switch was written.
pub(super) async fn write_blocks<K: TableBlocks>(
    inner: &Arc<Inner>,
    blocks: impl Iterator<Item = (Guid, Result<K::Block, DriverError>)>,
) -> Result<WriteReport, DriverError> {
    let mut per: HashMap<usize, Vec<K::Block>> = HashMap::new();
    let mut order = Vec::new();
    let mut first_err = None;
    let mut failed = HashSet::new();
    for (switch, b) in blocks {
        // An unknown switch fails its own blocks; the other switches are written.
        let idx = match inner.agent_of(switch) {
            Ok(i) => i,
            Err(e) => {
                first_err.get_or_insert(e);
                continue;
            }
        };
        match b {
            Ok(b) => per
                .entry(idx)
                .or_insert_with(|| {
                    order.push(idx);
                    Vec::new()
                })
                .push(b),
            Err(e) => {
                failed.insert(idx);
                first_err.get_or_insert(e);
            }
        }
    }
    // Fenced: refused once here, before any switch (each call is checked again when sent).
    inner.write_epoch(K::OP)?;
    let generation = *lock(&inner.generation);
    let key = inner.write_key();
    let mut set = JoinSet::new();
    for idx in order {
        let Some(mut rest) = per.remove(&idx).filter(|_| !failed.contains(&idx)) else {
            continue;
        };
        let inner = inner.clone();
        set.spawn(async move {
            // The switch's key and addresses first, if its agent does not have them yet.
            inner.ensure_addresses(idx).await?;
            let (mut written, mut retries) = (0, 0);
            while !rest.is_empty() {
                let tail = rest.split_off(rest.len().min(K::PER_REQUEST));
                let req = std::mem::replace(&mut rest, tail);
                let n = req.len();
                let (w, r) = inner
                    .call_write(idx, K::OP, |c, epoch| K::send(c, generation, key, req.clone(), epoch))
                    .await?;
                if w as usize != n {
                    return Err(DriverError::Protocol {
                        guid: inner.agents[idx].guid(),
                        message: format!("agent wrote {w} of {n} {} blocks", K::TABLE),
                    });
                }
                written += n;
                retries += r;
            }
            Ok::<_, DriverError>((written, retries))
        });
    }
    let mut report = WriteReport::default();
    while let Some(r) = set.join_next().await {
        match r {
            Ok(Ok((n, retries))) => {
                report.blocks_written += n;
                report.retries += retries;
            }
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(e) => {
                first_err.get_or_insert(DriverError::Protocol {
                    guid: None,
                    message: format!("upload task failed: {e}"),
                });
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// The most blocks one `ReadLftBlocks` request may ask for (agents refuse more with
/// INVALID_ARGUMENT).
pub const MAX_READ_LFT_BLOCKS: u32 = 1024;

/// One `ReadLftBlocks` call to agent `idx` (`count` ≤ [`MAX_READ_LFT_BLOCKS`]): the blocks in
/// order, or `None` when the agent predates the RPC (UNIMPLEMENTED).
pub(super) async fn read_lft_blocks(
    inner: &Inner,
    idx: usize,
    switch: Guid,
    first: u32,
    count: u32,
) -> Result<Option<Vec<[u8; BLOCK_SIZE]>>, DriverError> {
    let (reply, _) = inner
        .call(idx, "LFT blocks read", |mut c, epoch| {
            let r = inner.read_request(proto::ReadLftBlocksRequest { first, count }, epoch);
            async move {
                match c.read_lft_blocks(r).await {
                    Ok(r) => Ok(tonic::Response::new(Some(r.into_inner()))),
                    Err(s) if s.code() == Code::Unimplemented => Ok(tonic::Response::new(None)),
                    Err(s) => Err(s),
                }
            }
        })
        .await?;
    let Some(reply) = reply else { return Ok(None) };
    let protocol = |message: String| DriverError::Protocol {
        guid: Some(switch),
        message,
    };
    if reply.blocks.len() != count as usize {
        return Err(protocol(format!(
            "ReadLftBlocks from block {first}: {} blocks answered, {count} asked",
            reply.blocks.len()
        )));
    }
    let mut out = Vec::with_capacity(count as usize);
    for (b, want) in reply.blocks.iter().zip(first..) {
        if b.block != want {
            return Err(protocol(format!(
                "ReadLftBlocks from block {first}: block {} answered where block {want} was due",
                b.block
            )));
        }
        out.push(<[u8; BLOCK_SIZE]>::try_from(b.entries.as_slice()).map_err(|_| {
            protocol(format!(
                "LFT block {want} has {} entries, expected {BLOCK_SIZE}",
                b.entries.len()
            ))
        })?);
    }
    Ok(Some(out))
}
