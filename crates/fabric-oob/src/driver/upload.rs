//! Programming the switches: address set-up (addresses and SL-to-VL table) per switch and LFT
//! block uploads.

use std::collections::HashMap;
use std::sync::Arc;

use fabric_routing::LidPlan;
use fabric_southbound::{DriverError, LftBlockWrite, WriteReport};
use fabric_topology::{fmt_guid, Fabric, Remote};
use tokio::task::JoinSet;
use tonic::Code;

use super::agents::{lock, AddressSetup, Inner};
use super::config::{sl_to_vl_table, ESCAPE_SL};
use crate::proto;

/// Blocks per `WriteLftBlocks` request (64 bytes each: ~140 KiB per message).
const BLOCKS_PER_REQUEST: usize = 2048;

impl Inner {
    /// Installs switch `idx`'s address set-up if it is not (yet, or any more) on the agent.
    /// An error names the switch; only this switch's blocks fail with it.
    async fn ensure_addresses(&self, idx: usize) -> Result<(), DriverError> {
        let Some(setup) = lock(&self.agents[idx].setup).clone().filter(|s| !s.done) else {
            return Ok(());
        };
        self.call(idx, "set addresses", |mut c| {
            let r = setup.addresses.clone();
            async move { c.set_addresses(r).await }
        })
        .await?;
        // SL-to-VL with the addresses: an agent without the RPC is reported, not fatal.
        let (supported, _) = self
            .call(idx, "set SL-to-VL", |mut c| {
                let r = setup.sl_to_vl.clone();
                async move {
                    match c.set_sl_to_vl(r).await {
                        Ok(_) => Ok(tonic::Response::new(true)),
                        Err(s) if s.code() == Code::Unimplemented => Ok(tonic::Response::new(false)),
                        Err(s) => Err(s),
                    }
                }
            })
            .await?;
        {
            let mut cur = lock(&self.agents[idx].setup);
            // A newer plan configured meanwhile is installed by its own set-up.
            if let Some(c) = cur
                .as_mut()
                .filter(|c| c.addresses == setup.addresses && c.sl_to_vl == setup.sl_to_vl)
            {
                c.done = true;
                c.sl_to_vl_unsupported = !supported;
            }
        }
        self.refresh_config_warnings();
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
        vl_of_sl: sl_to_vl_table(inner.escape_vl()).to_vec(),
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
    let mut per: HashMap<usize, Vec<proto::LftBlock>> = HashMap::new();
    let mut order = Vec::new();
    let mut first_err = None;
    for w in blocks {
        if w.block >= max_blocks {
            return Err(DriverError::BlockOutOfRange {
                guid: w.switch,
                block: w.block,
                max_blocks,
            });
        }
        // An unknown switch fails its own blocks; the other switches are written.
        let idx = match inner.agent_of(w.switch) {
            Ok(i) => i,
            Err(e) => {
                first_err.get_or_insert(e);
                continue;
            }
        };
        let v = per.entry(idx).or_insert_with(|| {
            order.push(idx);
            Vec::new()
        });
        v.push(proto::LftBlock {
            block: w.block,
            entries: w.entries.to_vec(),
        });
    }
    let generation = *lock(&inner.generation);
    let mut set = JoinSet::new();
    for idx in order {
        let Some(mut rest) = per.remove(&idx) else { continue };
        let inner = inner.clone();
        set.spawn(async move {
            // The switch's addresses first, if its agent has not taken them yet.
            inner.ensure_addresses(idx).await?;
            let (mut written, mut retries) = (0, 0);
            while !rest.is_empty() {
                let tail = rest.split_off(rest.len().min(BLOCKS_PER_REQUEST));
                let req = proto::WriteLftBlocksRequest {
                    generation,
                    blocks: std::mem::replace(&mut rest, tail),
                };
                let n = req.blocks.len();
                let (reply, r) = inner
                    .call(idx, "LFT block write", |mut c| {
                        let r = req.clone();
                        async move { c.write_lft_blocks(r).await }
                    })
                    .await?;
                if reply.written as usize != n {
                    return Err(DriverError::Protocol {
                        guid: inner.agents[idx].guid(),
                        message: format!("agent wrote {} of {n} LFT blocks", reply.written),
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
