//! LFT upload: one directed-route LinearForwardingTable Set per block, skipping the blocks the
//! switch is known to hold (a cache per switch, filled by writes and reads), bounded by the
//! switch's LinearFDBCap; and LFT block reads (the daemon reads the switches back when it takes
//! a subnet over).

use fabric_routing::BLOCK_SIZE;
use fabric_southbound::{DriverError, LftBlockWrite, WriteReport};
use fabric_topology::Guid;

use super::inner::{check_status, lock, submit, tp_err, Inner, ZERO};
use super::sa_snapshot;
use super::state::{dr, State};
use crate::mad::*;
use crate::transport;

/// The fewest LFT blocks any switch holds (`None` before a switch answered SwitchInfo).
pub(super) fn max_lft_blocks(st: &State) -> Option<u32> {
    // Switches that never answered SwitchInfo have no known capacity.
    st.switches
        .iter()
        .filter(|s| s.info.linear_fdb_cap() > 0)
        .map(super::state::SwitchRec::max_blocks)
        .min()
}

/// [`SouthboundDriver::write_lft_blocks`](fabric_southbound::SouthboundDriver::write_lft_blocks).
pub(super) async fn write_lft_blocks(inner: &Inner, blocks: &[LftBlockWrite]) -> Result<WriteReport, DriverError> {
    let tp = &inner.tp;
    let mut pend = Vec::with_capacity(blocks.len());
    let mut skipped = 0usize;
    {
        let st = lock(&inner.state);
        for b in blocks {
            let Some(&i) = st.sw_by_guid.get(&b.switch) else {
                return Err(DriverError::UnknownSwitch(b.switch));
            };
            let s = &st.switches[i];
            if !s.up {
                return Err(DriverError::Unreachable { guid: s.guid });
            }
            let max = s.max_blocks();
            if b.block >= max {
                return Err(DriverError::BlockOutOfRange {
                    guid: s.guid,
                    block: b.block,
                    max_blocks: max,
                });
            }
            if s.lft.get(&b.block) == Some(&b.entries) {
                skipped += 1;
                continue;
            }
            let mut data = [0u8; 64];
            data.copy_from_slice(&b.entries);
            pend.push((b, submit(tp, &dr(&s.path), METHOD_SET, ATTR_LFT, b.block, &data)?));
        }
    }
    let mut report = WriteReport {
        blocks_written: skipped,
        retries: 0,
    };
    let mut first_err = None;
    let mut done = Vec::with_capacity(pend.len());
    for (b, rx) in pend {
        match transport::wait(rx).await {
            Ok(r) => {
                report.retries += r.attempts as usize - 1;
                if let Err(e) = check_status(b.switch, "LinearForwardingTable Set", &r) {
                    first_err.get_or_insert(e);
                    continue;
                }
                report.blocks_written += 1;
                done.push(b);
            }
            Err(e) => {
                first_err.get_or_insert(tp_err(b.switch, "LFT block write", e));
            }
        }
    }
    let done: Vec<(Guid, u32, [u8; BLOCK_SIZE])> = done.into_iter().map(|b| (b.switch, b.block, b.entries)).collect();
    sa_snapshot::record_lft_blocks(inner, &done, true);
    match first_err {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// [`SouthboundDriver::read_lft_block`](fabric_southbound::SouthboundDriver::read_lft_block).
pub(super) async fn read_lft_block(inner: &Inner, switch: Guid, block: u32) -> Result<[u8; BLOCK_SIZE], DriverError> {
    let (path, max) = {
        let st = lock(&inner.state);
        let Some(&i) = st.sw_by_guid.get(&switch) else {
            return Err(DriverError::UnknownSwitch(switch));
        };
        (st.switches[i].path.clone(), st.switches[i].max_blocks())
    };
    if block >= max {
        return Err(DriverError::BlockOutOfRange {
            guid: switch,
            block,
            max_blocks: max,
        });
    }
    let r = inner
        .tp
        .call(dr(&path), METHOD_GET, ATTR_LFT, block, &ZERO)
        .await
        .map_err(|e| tp_err(switch, "LFT block read", e))?;
    check_status(switch, "LinearForwardingTable Get", &r)?;
    let mut out = [0u8; BLOCK_SIZE];
    out.copy_from_slice(&r.smp.data()[..BLOCK_SIZE]);
    sa_snapshot::record_lft_blocks(inner, &[(switch, block, out)], false);
    Ok(out)
}
