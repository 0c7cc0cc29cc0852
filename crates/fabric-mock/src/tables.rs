//! Multicast forwarding tables and P_Key tables of the simulated fabric: block writes (with the
//! same latency, injected errors, retries and parallelism as LFT writes, see
//! [`MockFabric::run_batch`]), reads and accessors.
//!
//! * **MFT.** Block `b`, position `p` holds the port masks of MLIDs `0xC000 + 32b ..= +31` for
//!   ports `16p ..= 16p + 15` (bit 0 of position 0 is port 0, the switch itself). A switch has
//!   positions `0 ..= nports / 16` and blocks below [`MockConfig::max_mft_blocks`]; a mask bit
//!   naming a port beyond the switch's ports is refused. Never written masks read 0.
//! * **P_Key tables.** One per end port (by port GUID) and one per switch external port,
//!   [`MockConfig::partition_cap`] entries each. A table never written is the InfiniBand default:
//!   `0xFFFF` (full member of the default partition) in entry 0, the rest empty (0).

use std::sync::atomic::Ordering;

use fabric_southbound::{
    DriverError, MftBlockWrite, PkeyBlockWrite, PkeyPort, WriteReport, MFT_BLOCK_SIZE, MFT_PORTS_PER_POSITION,
    MLID_BASE, PKEY_BLOCK_SIZE,
};
use fabric_topology::{fmt_guid, EndPortId, Guid, Lid, PortNum, SwitchId};
use rand::Rng;

use crate::{bump, read, write, MockConfig, MockFabric, SwitchCell};

/// The default P_Key: full member of the default partition.
pub const DEFAULT_PKEY: u16 = 0xFFFF;

/// MFT positions of a switch with `nports` external ports (ports `0..=nports`).
pub(crate) fn mft_positions(nports: PortNum) -> usize {
    nports as usize / MFT_PORTS_PER_POSITION + 1
}

/// The port mask of `mlid` at `position` in an installed MFT (0 when never written).
pub(crate) fn mft_mask(cell: &SwitchCell, nports: PortNum, mlid: Lid, position: usize) -> u16 {
    if mlid < MLID_BASE {
        return 0;
    }
    let npos = mft_positions(nports);
    cell.mft
        .get((mlid - MLID_BASE) as usize * npos + position)
        .copied()
        .unwrap_or(0)
}

/// Entry `i` of a P_Key table as stored (empty = the default table).
fn pkey_entry(table: &[u16], i: usize) -> u16 {
    if table.is_empty() {
        if i == 0 {
            DEFAULT_PKEY
        } else {
            0
        }
    } else {
        table.get(i).copied().unwrap_or(0)
    }
}

/// Writes `entries` at block `block` of a stored table, materialising the default table first.
fn store_pkey_block(table: &mut Vec<u16>, cap: u16, block: u16, entries: &[u16; PKEY_BLOCK_SIZE]) {
    if table.is_empty() {
        table.push(DEFAULT_PKEY);
    }
    let start = block as usize * PKEY_BLOCK_SIZE;
    let len = (cap as usize).max(start + PKEY_BLOCK_SIZE).max(table.len());
    table.resize(len, 0);
    table[start..start + PKEY_BLOCK_SIZE].copy_from_slice(entries);
}

/// The effective P_Key table (the default one when never written), without empty entries.
pub(crate) fn effective_pkeys(table: &[u16]) -> Vec<u16> {
    if table.is_empty() {
        vec![DEFAULT_PKEY]
    } else {
        table.iter().copied().filter(|k| k & 0x7FFF != 0).collect()
    }
}

/// Whether two P_Key tables let their ports talk (IBA 10.9.3): some P_Key of one matches one
/// of the other in its low 15 bits (0 excluded) and at least one of the two is full member.
pub(crate) fn pkeys_match(a: &[u16], b: &[u16]) -> bool {
    a.iter().any(|&ka| {
        ka & 0x7FFF != 0
            && b.iter()
                .any(|&kb| ka & 0x7FFF == kb & 0x7FFF && (ka | kb) & 0x8000 != 0)
    })
}

impl MockFabric {
    /// Checks the address of an MFT block write or read; the switch's dense id.
    fn check_mft_address(
        &self,
        cfg: &MockConfig,
        switch: Guid,
        block: u32,
        position: u8,
    ) -> Result<SwitchId, DriverError> {
        let sw = self.switch_id(switch)?;
        let max_blocks = cfg.max_mft_blocks();
        if block >= max_blocks {
            return Err(DriverError::BlockOutOfRange {
                guid: switch,
                block,
                max_blocks,
            });
        }
        if position as usize >= mft_positions(self.topo.switch(sw).nports) {
            return Err(DriverError::InvalidPort {
                guid: switch,
                port: (position as usize * MFT_PORTS_PER_POSITION).min(PortNum::MAX as usize) as PortNum,
                reason: "MFT position beyond the switch's ports",
            });
        }
        Ok(sw)
    }

    /// Whether the management path to a live switch is up (else [`DriverError::Unreachable`]).
    fn check_reachable(&self, cfg: &MockConfig, sw: SwitchId, guid: Guid) -> Result<(), DriverError> {
        if !self.switch_up[sw.idx()].load(Ordering::SeqCst) || cfg.unreachable_switches.contains(&guid) {
            return Err(DriverError::Unreachable { guid });
        }
        Ok(())
    }

    /// Draws whether one write attempt to switch cell `cell` fails (injected error).
    fn draw_failure(&self, cell: &mut SwitchCell, cfg: &MockConfig) -> bool {
        bump(&self.counters.write_attempts, 1);
        if cfg.error_rate > 0.0 && cell.rng.gen::<f64>() < cfg.error_rate {
            bump(&self.counters.write_failures, 1);
            return true;
        }
        false
    }

    fn write_mft_once(&self, sw: SwitchId, w: &MftBlockWrite, cfg: &MockConfig) -> Result<bool, DriverError> {
        self.check_reachable(cfg, sw, w.switch)?;
        let mut cell = write(&self.cells[sw.idx()]);
        if self.draw_failure(&mut cell, cfg) {
            return Ok(false);
        }
        let npos = mft_positions(self.topo.switch(sw).nports);
        let first = w.block as usize * MFT_BLOCK_SIZE;
        let need = (first + MFT_BLOCK_SIZE) * npos;
        if cell.mft.len() < need {
            cell.mft.resize(need, 0);
        }
        for (i, &mask) in w.entries.iter().enumerate() {
            cell.mft[(first + i) * npos + w.position as usize] = mask;
        }
        bump(&self.counters.mft_blocks_written, 1);
        Ok(true)
    }

    /// [`SouthboundDriver::write_mft_blocks`](fabric_southbound::SouthboundDriver::write_mft_blocks)
    /// of the mock: every address (switch, block, position, mask bits) is checked before anything
    /// is written.
    pub(crate) async fn write_mft_batch(&self, blocks: &[MftBlockWrite]) -> Result<WriteReport, DriverError> {
        let cfg = self.config();
        bump(&self.counters.write_batches, 1);
        let mut ids = Vec::with_capacity(blocks.len());
        for w in blocks {
            let sw = self.check_mft_address(&cfg, w.switch, w.block, w.position)?;
            let nports = self.topo.switch(sw).nports as usize;
            let first_port = w.position as usize * MFT_PORTS_PER_POSITION;
            let all = w.entries.iter().fold(0u16, |a, &m| a | m);
            if let Some(bit) = (0..MFT_PORTS_PER_POSITION).find(|&b| all & (1 << b) != 0 && first_port + b > nports) {
                return Err(DriverError::InvalidPort {
                    guid: w.switch,
                    port: (first_port + bit) as PortNum,
                    reason: "MFT port mask names a port beyond the switch's ports",
                });
            }
            ids.push(sw);
        }
        self.run_batch(
            &cfg,
            blocks.len(),
            "MFT block write",
            |i| blocks[i].switch,
            |i| self.write_mft_once(ids[i], &blocks[i], &cfg),
        )
        .await
    }

    /// [`SouthboundDriver::read_mft_block`](fabric_southbound::SouthboundDriver::read_mft_block)
    /// of the mock.
    pub(crate) async fn read_mft(
        &self,
        switch: Guid,
        block: u32,
        position: u8,
    ) -> Result<[u16; MFT_BLOCK_SIZE], DriverError> {
        self.sleep_op().await;
        let cfg = self.config();
        let sw = self.check_mft_address(&cfg, switch, block, position)?;
        if !self.switch_up[sw.idx()].load(Ordering::SeqCst) {
            return Err(DriverError::Unreachable { guid: switch });
        }
        let nports = self.topo.switch(sw).nports;
        let cell = read(&self.cells[sw.idx()]);
        let mut out = [0u16; MFT_BLOCK_SIZE];
        for (i, o) in out.iter_mut().enumerate() {
            let mlid = MLID_BASE + (block as usize * MFT_BLOCK_SIZE + i) as Lid;
            *o = mft_mask(&cell, nports, mlid, position as usize);
        }
        bump(&self.counters.blocks_read, 1);
        Ok(out)
    }

    /// The ports set in the installed MFT of `switch` for `mlid`, ascending (port 0 = the switch
    /// itself); empty when never written or when `mlid` is not a multicast LID.
    pub fn mft_ports(&self, switch: Guid, mlid: Lid) -> Result<Vec<PortNum>, DriverError> {
        let sw = self.switch_id(switch)?;
        let nports = self.topo.switch(sw).nports;
        let cell = read(&self.cells[sw.idx()]);
        Ok((0..=nports)
            .filter(|&p| {
                let (pos, bit) = (p as usize / MFT_PORTS_PER_POSITION, p as usize % MFT_PORTS_PER_POSITION);
                mft_mask(&cell, nports, mlid, pos) & (1 << bit) != 0
            })
            .collect())
    }

    /// Resolves a P_Key port and checks the block number against the PartitionCap.
    fn pkey_target(&self, cfg: &MockConfig, port: PkeyPort, block: u16) -> Result<PkeyTarget, DriverError> {
        let max = cfg.max_pkey_blocks();
        match port {
            PkeyPort::EndPort(guid) => {
                let ep = self
                    .topo
                    .end_port_by_guid(guid)
                    .ok_or(DriverError::UnknownEndPort(guid))?;
                if block >= max {
                    return Err(DriverError::Protocol {
                        guid: Some(guid),
                        message: format!(
                            "end port {} has no P_Key block {block} (PartitionCap {} entries = {max} blocks)",
                            fmt_guid(guid),
                            cfg.partition_cap
                        ),
                    });
                }
                Ok(PkeyTarget::EndPort(ep))
            }
            PkeyPort::SwitchPort(guid, p) => {
                let sw = self.switch_id(guid)?;
                // Port 0 is the switch's management port (its own P_Key table, IBA 14.2.5.7).
                if p > self.topo.switch(sw).nports {
                    return Err(DriverError::InvalidPort {
                        guid,
                        port: p,
                        reason: "no such port (P_Key table)",
                    });
                }
                if block >= max {
                    return Err(DriverError::InvalidPort {
                        guid,
                        port: p,
                        reason: "P_Key block beyond the port's PartitionCap",
                    });
                }
                Ok(PkeyTarget::SwitchPort(sw, p))
            }
        }
    }

    fn write_pkey_once(&self, t: PkeyTarget, w: &PkeyBlockWrite, cfg: &MockConfig) -> Result<bool, DriverError> {
        match t {
            PkeyTarget::EndPort(ep) => {
                let guid = self.topo.end_port(ep).port_guid;
                // The end port's own management agent answers; its draws come from the switch
                // it hangs on (one seeded stream per switch).
                let Some((sw, _)) = self.topo.end_port(ep).attach else {
                    return Err(DriverError::Unreachable { guid });
                };
                if !self.end_port_up[ep.idx()].load(Ordering::SeqCst) {
                    return Err(DriverError::Unreachable { guid });
                }
                let mut cell = write(&self.cells[sw.idx()]);
                if self.draw_failure(&mut cell, cfg) {
                    return Ok(false);
                }
                store_pkey_block(
                    &mut write(&self.ep_pkeys[ep.idx()]),
                    cfg.partition_cap,
                    w.block,
                    &w.entries,
                );
            }
            PkeyTarget::SwitchPort(sw, p) => {
                let guid = self.topo.switch(sw).guid;
                self.check_reachable(cfg, sw, guid)?;
                let mut cell = write(&self.cells[sw.idx()]);
                if self.draw_failure(&mut cell, cfg) {
                    return Ok(false);
                }
                store_pkey_block(&mut cell.pkeys[p as usize], cfg.partition_cap, w.block, &w.entries);
            }
        }
        bump(&self.counters.pkey_blocks_written, 1);
        Ok(true)
    }

    /// [`SouthboundDriver::write_pkey_blocks`](fabric_southbound::SouthboundDriver::write_pkey_blocks)
    /// of the mock: every address is checked before anything is written.
    pub(crate) async fn write_pkey_batch(&self, blocks: &[PkeyBlockWrite]) -> Result<WriteReport, DriverError> {
        let cfg = self.config();
        bump(&self.counters.write_batches, 1);
        let targets = blocks
            .iter()
            .map(|w| self.pkey_target(&cfg, w.port, w.block))
            .collect::<Result<Vec<_>, _>>()?;
        let guid_of = |i: usize| match blocks[i].port {
            PkeyPort::EndPort(g) | PkeyPort::SwitchPort(g, _) => g,
        };
        self.run_batch(&cfg, blocks.len(), "P_Key block write", guid_of, |i| {
            self.write_pkey_once(targets[i], &blocks[i], &cfg)
        })
        .await
    }

    /// [`SouthboundDriver::read_pkey_block`](fabric_southbound::SouthboundDriver::read_pkey_block)
    /// of the mock (a table never written reads as the default one).
    pub(crate) async fn read_pkey(&self, port: PkeyPort, block: u16) -> Result<[u16; PKEY_BLOCK_SIZE], DriverError> {
        self.sleep_op().await;
        let cfg = self.config();
        let table = self.stored_pkeys(self.pkey_target(&cfg, port, block)?, Some(&cfg))?;
        let mut out = [0u16; PKEY_BLOCK_SIZE];
        let start = block as usize * PKEY_BLOCK_SIZE;
        for (i, o) in out.iter_mut().enumerate() {
            *o = pkey_entry(&table, start + i);
        }
        bump(&self.counters.blocks_read, 1);
        Ok(out)
    }

    /// The stored table of a P_Key port (empty = never written); with `reach`, fails like a
    /// management read when the port cannot be reached.
    fn stored_pkeys(&self, t: PkeyTarget, reach: Option<&MockConfig>) -> Result<Vec<u16>, DriverError> {
        match t {
            PkeyTarget::EndPort(ep) => {
                let e = self.topo.end_port(ep);
                if reach.is_some() && (e.attach.is_none() || !self.end_port_up[ep.idx()].load(Ordering::SeqCst)) {
                    return Err(DriverError::Unreachable { guid: e.port_guid });
                }
                Ok(read(&self.ep_pkeys[ep.idx()]).clone())
            }
            PkeyTarget::SwitchPort(sw, p) => {
                if reach.is_some() && !self.switch_up[sw.idx()].load(Ordering::SeqCst) {
                    return Err(DriverError::Unreachable {
                        guid: self.topo.switch(sw).guid,
                    });
                }
                Ok(read(&self.cells[sw.idx()]).pkeys[p as usize].clone())
            }
        }
    }

    /// The P_Key table in force on a port, without empty entries (`[0xFFFF]` when never
    /// written), whatever the port's state.
    pub fn pkey_table(&self, port: PkeyPort) -> Result<Vec<u16>, DriverError> {
        let cfg = self.config();
        let t = self.pkey_target(&cfg, port, 0)?;
        Ok(effective_pkeys(&self.stored_pkeys(t, None)?))
    }

    /// The stored P_Key table of an end port by dense id (empty = never written).
    pub(crate) fn end_port_pkeys(&self, ep: EndPortId) -> Vec<u16> {
        read(&self.ep_pkeys[ep.idx()]).clone()
    }
}

/// A resolved P_Key port.
#[derive(Clone, Copy, Debug)]
enum PkeyTarget {
    EndPort(EndPortId),
    SwitchPort(SwitchId, PortNum),
}
